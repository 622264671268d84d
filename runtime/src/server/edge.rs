//! The handheld's relay to an edge server (SPEC 9): a wearable names an Open
//! Inference Protocol server (`http://`) or a Tandem server (`tandem://`,
//! [`super::edge_tandem`]), this side checks that its operator allowed it
//! (`serve --edge-allow`), finds which of the wearable's cuts' suffixes it
//! serves, then runs relayed frames: the middle layers here, the suffix
//! there, and when the edge fails or stalls, the rest here, so the frame is
//! still answered once (on two tiers) and says why.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{debug, info};

use super::edge_tandem::{TandemEdge, SCHEME};
use super::store::Loaded;
use crate::error::EdgeError;
use crate::{Cut, CutKey, Sides, Values};
use tandem_core::tier::{edge_model_name, suffix_onnx, RelayPlan};
use tandem_oip::{ClientOptions, OipClient, OipTensor};
use tandem_proto::protocol::{EdgeReport, LatencySummary};

/// An edge one connection relays to: its client and the cuts it serves.
pub(crate) struct Edge {
    url: String,
    backend: Backend,
    /// The last relay plan built (a stream's frames share one).
    last: Mutex<Option<(CutKey, CutKey, Arc<RelayPlan>)>>,
}

impl std::fmt::Debug for Edge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Edge").field("url", &self.url).finish_non_exhaustive()
    }
}

/// How the edge is reached.
enum Backend {
    /// An Open Inference Protocol server, and the served model name of each
    /// cut's suffix.
    Oip { client: OipClient, names: HashMap<CutKey, String> },
    /// A Tandem server: it holds the whole model, so it serves every suffix.
    Tandem(TandemEdge),
}

/// What checking an edge found: the edge (when this handheld relays
/// there), the cuts it serves, one readiness call's round trip, or why not.
pub(crate) struct Checked {
    pub(crate) url: String,
    pub(crate) edge: Option<Arc<Edge>>,
    pub(crate) deployed: Vec<CutKey>,
    pub(crate) rtt_us: u64,
    /// How many times faster than this handheld the edge runs the model's
    /// layers, when measured.
    pub(crate) speed: Option<f64>,
    pub(crate) error: Option<String>,
}

/// Whether `url` is one this handheld's operator allowed (compared
/// without a trailing slash).
pub(crate) fn allowed(allow: &[String], url: &str) -> bool {
    let url = url.trim_end_matches('/');
    allow.iter().any(|a| a.trim_end_matches('/') == url)
}

fn refused(url: String, why: String) -> Checked {
    Checked { url, edge: None, deployed: vec![], rtt_us: 0, speed: None, error: Some(why) }
}

/// How this handheld reaches edges: the operator's allow-list, the Open
/// Inference Protocol client's options (also the Tandem edge's timeout and
/// emulated link), the keystore paired with Tandem edges.
pub(crate) struct EdgeSettings<'a> {
    pub(crate) allow: &'a [String],
    pub(crate) options: ClientOptions,
    pub(crate) keys: Option<&'a std::path::Path>,
}

/// Checks the edge at `url` for `loaded`'s model: allowed, ready, and
/// which of `cuts`' suffixes it serves. An Open Inference Protocol server
/// serves those whose names it knows (digests of their ONNX bytes, so a
/// served name is exactly that suffix); a Tandem server (`tandem://`),
/// once it has the model loaded (`model`, its bytes, pushed if it lacks
/// them), serves every suffix that computes a model output.
pub(crate) async fn check(
    settings: EdgeSettings<'_>,
    loaded: Arc<Loaded>,
    model: impl FnOnce() -> Result<Arc<Vec<u8>>, EdgeError> + Send + 'static,
    url: String,
    cuts: Vec<CutKey>,
) -> Checked {
    if !allowed(settings.allow, &url) {
        return refused(
            url,
            "this handheld relays only to the edge servers its operator lists (`tandem-handheld serve --edge-allow URL`)"
                .into(),
        );
    }
    let options = settings.options;
    if let Some(addr) = url.strip_prefix(SCHEME) {
        let Some(keys) = settings.keys.map(std::path::Path::to_path_buf) else {
            return refused(url, "this handheld has no keystore for Tandem edges".into());
        };
        let (addr, for_attach) = (addr.trim_end_matches('/').to_string(), loaded.clone());
        let handle = tokio::runtime::Handle::current();
        let attached = tokio::task::spawn_blocking(move || {
            let bytes = model()?;
            let file = crate::client::ModelFile { bytes, model: for_attach.model.clone() };
            let edge = TandemEdge::attach(&addr, &keys, options.emulate, file, options.timeout, &handle)?;
            let g = for_attach.model.graph();
            let served: Vec<CutKey> = cuts
                .into_iter()
                .filter(|k| {
                    Cut::from_key(g, k.as_str())
                        .is_ok_and(|c| !c.suffix_nodes().is_empty() && !c.down_tensors().is_empty())
                })
                .collect();
            Ok::<_, EdgeError>((edge, served))
        })
        .await;
        return match attached {
            Ok(Ok((a, deployed))) => {
                // Its own profile of the model against this handheld's.
                let total = |l: &LatencySummary| l.per_layer_s.iter().sum::<f64>() + l.overhead_s;
                let speed =
                    Some(total(&loaded.latency) / total(&a.latency)).filter(|s| s.is_finite() && *s > 0.0);
                info!(%url, device = %a.device, served = deployed.len(), rtt_us = a.rtt_us, ?speed, "edge attached");
                let edge = Arc::new(Edge {
                    url: url.clone(),
                    backend: Backend::Tandem(a.edge),
                    last: Mutex::new(None),
                });
                Checked { url, edge: Some(edge), deployed, rtt_us: a.rtt_us, speed, error: None }
            }
            Ok(Err(why)) => refused(url, why.to_string()),
            Err(e) => refused(url, format!("attaching the edge failed: {e}")),
        };
    }
    let client = match OipClient::new(&url, options.clone()) {
        Ok(c) => c,
        Err(e) => return refused(url, e.to_string()),
    };
    let started = Instant::now();
    match client.server_ready().await {
        Ok(true) => {}
        Ok(false) => return refused(url.clone(), format!("the edge server at {url} is not ready")),
        Err(e) => return refused(url, e.to_string()),
    }
    let rtt_us = started.elapsed().as_micros() as u64;
    // Each suffix's bytes are built and hashed off the async threads.
    let model = loaded.clone();
    let keys = cuts.clone();
    let named = tokio::task::spawn_blocking(move || {
        let g = model.model.graph();
        keys.into_iter()
            .filter_map(|key| {
                let cut = Cut::from_key(g, key.as_str()).ok()?;
                let bytes = suffix_onnx(&model.model, &cut).ok()?;
                Some((key, edge_model_name(&bytes)))
            })
            .collect::<Vec<(CutKey, String)>>()
    })
    .await
    .unwrap_or_default();
    let mut names = HashMap::new();
    let mut deployed = vec![];
    for (key, name) in named {
        match client.model_ready(&name).await {
            Ok(true) => {
                deployed.push(key.clone());
                names.insert(key, name);
            }
            Ok(false) => {}
            Err(e) if e.is_unreachable() => return refused(url, e.to_string()),
            Err(e) => debug!(%url, %name, "not served: {e}"),
        }
    }
    let speed = time_oip(&url, options, &loaded, &names).await;
    info!(%url, asked = cuts.len(), served = deployed.len(), rtt_us, ?speed, "edge attached");
    let edge =
        Arc::new(Edge { url: url.clone(), backend: Backend::Oip { client, names }, last: Mutex::new(None) });
    Checked { url, edge: Some(edge), deployed, rtt_us, speed, error: None }
}

/// The edge's speed against this handheld, measured: a served suffix that
/// takes the model's own inputs (random ones) is run three times on the
/// server without the emulated link, the fastest call less the fastest of
/// three readiness calls is its compute, and this handheld's profile of
/// the same layers over it is the speed. `None` when no served suffix
/// takes the model's inputs, or a call fails.
async fn time_oip(
    url: &str,
    options: ClientOptions,
    loaded: &Loaded,
    names: &HashMap<CutKey, String>,
) -> Option<f64> {
    let model = &loaded.model;
    let g = model.graph();
    let (cut, name) = names.iter().find_map(|(k, name)| {
        let cut = Cut::from_key(g, k.as_str()).ok()?;
        cut.up_tensors().iter().all(|t| g.inputs().contains(t)).then_some((cut, name))
    })?;
    let client = OipClient::new(url, ClientOptions { emulate: None, ..options }).ok()?;
    let inputs = tandem_core::check::random_inputs(model, 0).ok()?;
    let mut tensors = vec![];
    for &t in cut.up_tensors() {
        let name = &g.tensor(t).name;
        let wire = tandem_core::wire::to_wire(inputs.get(name)?).ok()?;
        tensors.push(OipTensor::from_wire(name.clone(), &wire));
    }
    let wanted: Vec<String> = cut.down_tensors().iter().map(|&t| g.tensor(t).name.clone()).collect();
    let (mut call, mut rtt) = (Duration::MAX, Duration::MAX);
    for _ in 0..3 {
        let started = Instant::now();
        client.server_ready().await.ok()?;
        rtt = rtt.min(started.elapsed());
        let reply = client.infer(name, &tensors, &wanted).await.ok()?;
        // Timed only if it answered what the suffix computes.
        for t in &reply.outputs {
            let id = g.tensor_id(&t.name)?;
            let v = tandem_core::wire::from_wire(t.to_wire().ok()?).ok()?;
            tandem_core::split::check_tensor(g, id, &v).ok()?;
        }
        call = call.min(reply.elapsed);
    }
    let edge_s = call.saturating_sub(rtt).as_secs_f64().max(1e-6);
    let here_s: f64 = cut
        .suffix_nodes()
        .iter()
        .map(|&v| loaded.latency.per_layer_s.get(v).copied().unwrap_or(0.0))
        .sum::<f64>()
        + loaded.latency.overhead_s;
    let speed = here_s / edge_s;
    debug!(%url, edge_ms = edge_s * 1e3, here_ms = here_s * 1e3, speed, "the edge timed");
    Some(speed).filter(|s| s.is_finite() && *s > 0.0)
}

/// A relayed frame's answer: the outputs for S1 and how the edge went.
pub(crate) struct Relayed {
    pub(crate) outputs: Values,
    pub(crate) compute: Duration,
    pub(crate) report: EdgeReport,
}

/// Runs a relayed frame: the middle from `cut` (S1) to `near` (S2) here,
/// S2's suffix on the edge, and on any edge failure (unreachable, a
/// timeout, a refusal, an answer that is not what S2's suffix outputs)
/// S1's whole suffix here instead.
pub(crate) fn run(
    edge: &Edge,
    loaded: &Loaded,
    cut: &CutKey,
    near: &CutKey,
    received: &Values,
    factor: f64,
    handle: &tokio::runtime::Handle,
) -> crate::Result<Relayed> {
    let model = &loaded.model;
    let g = model.graph();
    let started = Instant::now();
    let mut report =
        EdgeReport { near: near.as_str().to_string(), up_bytes: 0, down_bytes: 0, edge_us: 0, error: None };
    let attempt = (|| -> Result<(Values, Duration), EdgeError> {
        let served = match &edge.backend {
            Backend::Oip { names, .. } => {
                Some(names.get(near).ok_or_else(|| EdgeError::NotServed(near.clone()))?)
            }
            Backend::Tandem(_) => None,
        };
        let relay = relay_plan(edge, loaded, cut, near)?;
        let values = relay.run_middle(model, received, factor)?;
        let middle = started.elapsed();
        let request = relay.edge_request(model, &values)?;
        let mut inputs = Vec::with_capacity(request.len());
        for &t in relay.near().up_tensors() {
            let name = &g.tensor(t).name;
            let v = request.get(name).ok_or_else(|| EdgeError::MiddleMissing(name.clone()))?;
            inputs.push((name.clone(), &**v));
        }
        let answer = match &edge.backend {
            Backend::Oip { client, .. } => {
                let name = served.ok_or_else(|| EdgeError::NotServed(near.clone()))?;
                let wanted: Vec<String> =
                    relay.near().down_tensors().iter().map(|&t| g.tensor(t).name.clone()).collect();
                let mut tensors = Vec::with_capacity(inputs.len());
                for (name, v) in &inputs {
                    let wire = tandem_core::wire::to_wire(v)?;
                    tensors.push(OipTensor::from_wire(name.clone(), &wire));
                }
                let reply = handle.block_on(client.infer(name, &tensors, &wanted))?;
                report.up_bytes = reply.bytes_up;
                report.down_bytes = reply.bytes_down;
                report.edge_us = reply.elapsed.as_micros() as u64;
                let mut answer = Values::new();
                for t in &reply.outputs {
                    let v = tandem_core::wire::from_wire(t.to_wire()?)?;
                    answer.insert(t.name.clone(), v.into());
                }
                answer
            }
            Backend::Tandem(tandem) => {
                let reply = tandem.infer(near, &inputs)?;
                report.up_bytes = reply.up_bytes;
                report.down_bytes = reply.down_bytes;
                report.edge_us = reply.edge_us;
                debug!(url = %edge.url, compute_us = reply.compute_us, "the Tandem edge answered");
                reply.outputs
            }
        };
        Ok((relay.answer(model, &values, &answer)?, middle))
    })();
    match attempt {
        Ok((outputs, compute)) => Ok(Relayed { outputs, compute, report }),
        Err(why) => {
            info!(url = %edge.url, cut = %cut, near = %near, "the edge failed, running the rest here: {why}");
            report.error = Some(why.to_string());
            let local = Instant::now();
            let plan = loaded.executor.plan_sides(&Cut::from_key(g, cut.as_str())?, Sides::Suffix)?;
            let outputs = plan.run_suffix_dilated(g, received, factor)?;
            Ok(Relayed { outputs, compute: local.elapsed(), report })
        }
    }
}

/// The relay plan of (S1, S2), the last one kept.
fn relay_plan(
    edge: &Edge,
    loaded: &Loaded,
    cut: &CutKey,
    near: &CutKey,
) -> tandem_core::Result<Arc<RelayPlan>> {
    let mut last = edge.last.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((c, n, plan)) = last.as_ref() {
        if c == cut && n == near {
            return Ok(plan.clone());
        }
    }
    let g = loaded.model.graph();
    let (s1, s2) = (Cut::from_key(g, cut.as_str())?, Cut::from_key(g, near.as_str())?);
    let plan = Arc::new(RelayPlan::build(&loaded.model, &s1, &s2, loaded.executor.engines().suffix)?);
    *last = Some((cut.clone(), near.clone(), plan.clone()));
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_edges_are_allowed() {
        let allow = vec!["http://127.0.0.1:8080/".to_string()];
        assert!(allowed(&allow, "http://127.0.0.1:8080"));
        assert!(allowed(&allow, "http://127.0.0.1:8080/"));
        assert!(!allowed(&allow, "http://127.0.0.1:8081"));
        assert!(!allowed(&allow, "http://127.0.0.1:8080/v2/../x"));
        assert!(!allowed(&[], "http://127.0.0.1:8080"));
    }
}
