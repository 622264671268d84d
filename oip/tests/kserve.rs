//! The client against a real KServe server (`scripts/oip_server.py`,
//! onnxruntime) on loopback: inference over the binary extension and
//! JSON equals tract's, metadata and readiness, unknown models, the
//! repository's load and unload, and a server killed mid-test.

use anyhow::{Context, Result};
use tandem_core::check::diff;
use tandem_core::split::full_plan;
use tandem_core::wire::{from_wire, to_wire};
use tandem_core::{InputShapes, Model, Values};
use tandem_oip::testing::start_or_skip;
use tandem_oip::{ClientOptions, OipClient, OipError, OipTensor};
use tandem_types::WireType;

use crate::common::temp_dir;

/// The tiny MLP's input (x: 1×4 FP32) and tract's output for it.
fn tiny_mlp_reference(bytes: &[u8]) -> Result<(OipTensor, tandem_core::Tensor)> {
    let model = Model::from_bytes(bytes, &InputShapes::none())?;
    let x = tandem_core::Tensor::from_shape(&[1, 4], &[0.5f32, -1.25, 2.0, 0.75])?;
    let inputs = Values::from([("x".to_string(), x.clone().into())]);
    let out = full_plan(&model)?.run(model.graph(), &inputs)?;
    let y = tandem_core::Tensor::clone(out.get("y").context("tract's y")?);
    Ok((OipTensor::from_wire("x", &to_wire(&x)?), y))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tiny_mlp_over_kserve_equals_tract_in_binary_and_json() -> Result<()> {
    let dir = temp_dir("tiny-mlp");
    let bytes = tandem_models::tiny::tiny_mlp_onnx();
    std::fs::write(dir.join("tiny_mlp.onnx"), &bytes)?;
    let Some(server) = start_or_skip(&dir, "the_tiny_mlp_over_kserve_equals_tract_in_binary_and_json")?
    else {
        return Ok(());
    };
    let (x, reference) = tiny_mlp_reference(&bytes)?;
    let binary = OipClient::new(server.url(), ClientOptions::default())?;
    let json = OipClient::new(server.url(), ClientOptions { binary: false, ..ClientOptions::default() })?;
    assert!(binary.server_live().await?);
    assert!(binary.server_ready().await?);
    assert!(binary.model_ready("tiny_mlp").await?);
    assert!(!binary.model_ready("nosuch").await?);

    let meta = binary.model_metadata("tiny_mlp").await?;
    assert_eq!(meta.name, "tiny_mlp");
    assert_eq!((meta.inputs[0].name.as_str(), meta.inputs[0].datatype.as_str()), ("x", "FP32"));
    assert_eq!(meta.inputs[0].shape, vec![1, 4]);
    assert_eq!((meta.outputs[0].name.as_str(), meta.outputs[0].shape.clone()), ("y", vec![1, 3]));

    let asked = vec!["y".to_string()];
    let over_binary = binary.infer("tiny_mlp", std::slice::from_ref(&x), &asked).await?;
    let over_json = json.infer("tiny_mlp", std::slice::from_ref(&x), &asked).await?;
    let all = binary.infer("tiny_mlp", std::slice::from_ref(&x), &[]).await?;
    for reply in [&over_binary, &over_json, &all] {
        let y = &reply.outputs[0];
        assert_eq!((y.name.as_str(), y.datatype, y.shape.clone()), ("y", WireType::F32, vec![1, 3]));
        let got = from_wire(y.to_wire()?)?;
        assert!(diff(&reference, &got)?.ok(), "onnxruntime over OIP {:?} vs tract {:?}", y.f32s(), reference);
    }
    // JSON carries every bit of an FP32 both ways.
    assert_eq!(over_binary.outputs, over_json.outputs);
    // Bodies and heads: more than the tensors' bytes, each way.
    assert!(over_binary.bytes_up > 16 && over_json.bytes_up > 16);
    assert!(over_binary.bytes_down > 12 && over_binary.elapsed.as_nanos() > 0);

    // An unknown model, an input the model refuses, an output it lacks.
    let e = binary.infer("nosuch", std::slice::from_ref(&x), &asked).await.expect_err("unknown model");
    assert!(e.is_not_found() && e.to_string().contains("nosuch"), "{e}");
    let e = binary.model_metadata("nosuch").await.expect_err("unknown model");
    assert!(e.is_not_found(), "{e}");
    let wrong = OipTensor::from_f32("x", vec![1, 3], &[1.0, 2.0, 3.0])?;
    let e = binary.infer("tiny_mlp", &[wrong], &asked).await.expect_err("wrong shape");
    assert!(matches!(e, OipError::Refused { status: 400, .. }), "{e}");
    let e = binary.infer("tiny_mlp", &[x], &["nope".to_string()]).await.expect_err("no such output");
    assert!(matches!(&e, OipError::Refused { message, .. } if message.contains("nope")), "{e}");
    drop(server);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_load_and_unload_through_the_repository_and_a_killed_server_is_unreachable() -> Result<()> {
    let dir = temp_dir("repository");
    let bytes = tandem_models::tiny::tiny_mlp_onnx();
    std::fs::write(dir.join("first.onnx"), &bytes)?;
    let Some(mut server) = start_or_skip(&dir, "models_load_and_unload_through_the_repository")? else {
        return Ok(());
    };
    let client = OipClient::new(server.url(), ClientOptions::default())?;
    let (x, reference) = tiny_mlp_reference(&bytes)?;
    let asked = vec!["y".to_string()];

    // A file written after the start is not served (--poll 0) until loaded.
    std::fs::write(dir.join("second.onnx"), &bytes)?;
    assert!(!client.model_ready("second").await?);
    client.load("second").await?;
    assert!(client.model_ready("second").await?);
    let y = client.infer("second", std::slice::from_ref(&x), &asked).await?;
    assert!(diff(&reference, &from_wire(y.outputs[0].to_wire()?)?)?.ok());

    client.unload("second").await?;
    assert!(!client.model_ready("second").await?);
    let e = client.infer("second", std::slice::from_ref(&x), &asked).await.expect_err("unloaded");
    assert!(e.is_not_found(), "{e}");
    let e = client.load("missing").await.expect_err("no file");
    assert!(matches!(&e, OipError::Refused { message, .. } if message.contains("missing")), "{e}");
    assert!(client.model_ready("first").await?, "the others stay");

    // The edge dies: the next call is unreachable, not an answer.
    server.stop();
    assert!(!server.is_running());
    let e = client.infer("first", &[x], &asked).await.expect_err("killed");
    assert!(e.is_unreachable(), "{e:?}");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
