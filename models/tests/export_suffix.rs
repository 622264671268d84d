//! `tandem-models export-suffix`: the suffixes it writes, served by a real
//! Open Inference Protocol server (KServe on loopback), complete the
//! prefix run in tract to the unsplit model's outputs, cut by cut; the
//! index merges two exports; `--deploy` loads through the repository API.

use std::path::Path;
use std::process::Command;

use anyhow::{ensure, Context, Result};
use tandem_core::check::{diff, random_inputs};
use tandem_core::split::full_plan;
use tandem_core::tier::{edge_cuts, EDGE_FRACTIONS};
use tandem_core::wire::{from_wire, to_wire};
use tandem_core::{enumerate_cuts, Cut, InputShapes, Model, SplitExecutor};
use tandem_models::suffix::{SuffixEntry, SuffixIndex};
use tandem_oip::testing::start_or_skip;
use tandem_oip::{ClientOptions, OipClient, OipTensor};

fn export(args: &[&str]) -> Result<Vec<serde_json::Value>> {
    let out = Command::new(env!("CARGO_BIN_EXE_tandem-models"))
        .arg("export-suffix")
        .args(args)
        .output()
        .context("running tandem-models export-suffix")?;
    ensure!(out.status.success(), "export-suffix {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)?
        .lines()
        .map(|l| serde_json::from_str(l).with_context(|| format!("a JSON line: {l}")))
        .collect()
}

/// Runs the prefix of `entry`'s cut in tract and its suffix on the
/// server, and checks the suffix's outputs against the unsplit model's.
async fn check_entry(client: &OipClient, entry: &SuffixEntry) -> Result<()> {
    let model = Model::from_path(&entry.model, &InputShapes::none())?;
    let graph = model.graph();
    let cut = Cut::from_key(graph, &entry.cut)?;
    let inputs = random_inputs(&model, 7)?;
    let unsplit = full_plan(&model)?.run(graph, &inputs)?;
    let prefix = SplitExecutor::new(model.clone()).plan(&cut)?.run_prefix(graph, &inputs)?;
    let mut request = Vec::new();
    for t in &entry.inputs {
        let v = prefix.get(&t.name).with_context(|| format!("the prefix's {}", t.name))?;
        request.push(OipTensor::from_wire(&t.name, &to_wire(v)?));
    }
    let names: Vec<String> = entry.outputs.iter().map(|t| t.name.clone()).collect();
    let reply = client.infer(&entry.name, &request, &names).await?;
    ensure!(!names.is_empty() && reply.outputs.len() == names.len());
    for (name, got) in names.iter().zip(&reply.outputs) {
        let got = from_wire(got.to_wire()?)?;
        let want = unsplit.get(name).with_context(|| format!("unsplit {name}"))?;
        ensure!(diff(want, &got)?.ok(), "{name} at cut {} ({}): {got:?} vs {want:?}", entry.cut, entry.name);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exported_suffixes_served_by_kserve_complete_tract_prefixes_to_the_unsplit_outputs() -> Result<()> {
    let root = std::env::temp_dir().join(format!("tandem-models-export-suffix-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let repo = root.join("repo");
    let (mlp, fork) = (root.join("tiny_mlp.onnx"), root.join("fork.onnx"));
    std::fs::create_dir_all(&root)?;
    std::fs::write(&mlp, tandem_models::tiny::tiny_mlp_onnx())?;
    // x → MatMul → Relu and Sigmoid → Add: cuts where two tensors cross.
    // (Not tiny_diamond: tract types its valueless ConstantOfShape as f64,
    // and its suffixes declare an FP64 input that onnxruntime refuses.)
    std::fs::write(&fork, tandem_models::tiny::random_dag_onnx(&[(0, 0, 0), (1, 0, 0), (2, 1, 2)]))?;
    let path = |p: &Path| p.to_string_lossy().into_owned();

    // The default cuts, before the server starts: it serves them from the directory.
    let lines = export(&[&path(&mlp), "--repo", &path(&repo)])?;
    let mlp_model = Model::from_path(&mlp, &InputShapes::none())?;
    let default_cuts = edge_cuts(mlp_model.graph(), EDGE_FRACTIONS);
    ensure!(
        lines.len() == default_cuts.len() && lines.len() >= 2,
        "{} lines for {} cuts",
        lines.len(),
        default_cuts.len()
    );
    for (line, cut) in lines.iter().zip(&default_cuts) {
        ensure!(line["cut"] == cut.key().to_string(), "{line}");
        let name = line["name"].as_str().context("a name")?;
        ensure!(repo.join(format!("{name}.onnx")).is_file(), "{name}.onnx written");
    }
    let Some(server) = start_or_skip(&repo, "exported_suffixes_served_by_kserve")? else {
        return Ok(());
    };

    // Cuts by key, deployed through the repository API (the server does
    // not scan its directory): the fork's cuts where two tensors cross.
    let dmodel = Model::from_path(&fork, &InputShapes::none())?;
    let keys: Vec<String> = enumerate_cuts(dmodel.graph(), 1000)
        .context("few cuts")?
        .into_iter()
        .filter(|c| !c.down_tensors().is_empty() && c.up_tensors().len() >= 2)
        .map(|c| c.key().to_string())
        .collect();
    ensure!(!keys.is_empty(), "the fork has a cut with two crossing tensors");
    let mut args =
        vec![path(&fork), "--repo".into(), path(&repo), "--deploy".into(), server.url().to_string()];
    for k in &keys {
        args.extend(["--cut".to_string(), k.clone()]);
    }
    let deployed = export(&args.iter().map(String::as_str).collect::<Vec<_>>())?;
    ensure!(deployed.len() == keys.len() && deployed.iter().all(|l| l["deployed"] == true));

    // The index holds both exports; re-exporting adds nothing.
    let index = SuffixIndex::read(&repo)?;
    ensure!(index.suffixes.len() == default_cuts.len() + keys.len(), "{} entries", index.suffixes.len());
    export(&[&path(&mlp), "--repo", &path(&repo)])?;
    ensure!(SuffixIndex::read(&repo)?.suffixes.len() == index.suffixes.len());

    let client = OipClient::new(server.url(), ClientOptions::default())?;
    for entry in &index.suffixes {
        ensure!(client.model_ready(&entry.name).await?, "{} is served", entry.name);
        check_entry(&client, entry)
            .await
            .with_context(|| format!("{} cut {}", entry.model.display(), entry.cut))?;
    }
    drop(server);
    std::fs::remove_dir_all(&root)?;
    Ok(())
}

#[test]
fn a_cut_that_leaves_the_edge_nothing_is_refused() -> Result<()> {
    let root = std::env::temp_dir().join(format!("tandem-models-export-refused-{}", std::process::id()));
    std::fs::create_dir_all(&root)?;
    let mlp = root.join("tiny_mlp.onnx");
    std::fs::write(&mlp, tandem_models::tiny::tiny_mlp_onnx())?;
    let model = Model::from_path(&mlp, &InputShapes::none())?;
    let all = Cut::wearable_only(model.graph()).key().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_tandem-models"))
        .args([
            "export-suffix",
            &mlp.to_string_lossy(),
            "--repo",
            &root.join("repo").to_string_lossy(),
            "--cut",
            &all,
        ])
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success() && stderr.contains("no model output"), "{stderr}");
    let out = Command::new(env!("CARGO_BIN_EXE_tandem-models"))
        .args([
            "export-suffix",
            &mlp.to_string_lossy(),
            "--repo",
            &root.join("repo").to_string_lossy(),
            "--deploy",
            "https://edge:1",
        ])
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success() && stderr.contains("TLS is not built in"), "{stderr}");
    std::fs::remove_dir_all(&root)?;
    Ok(())
}
