//! The handheld's relay to an edge server (SPEC 9): a wearable names an Open
//! Inference Protocol server, this side checks that its operator allowed
//! it (`serve --edge-allow`), asks the server which of the wearable's cuts'
//! suffixes it serves, then runs relayed frames: the middle layers here,
//! the suffix there, and when the edge fails or stalls, the rest here, so
//! the frame is still answered once (on two tiers) and says why.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{debug, info};

use super::store::Loaded;
use crate::{Cut, CutKey, Sides, Values};
use tandem_core::tier::{edge_model_name, suffix_onnx, RelayPlan};
use tandem_oip::{ClientOptions, OipClient, OipTensor};
use tandem_proto::protocol::EdgeReport;

/// An edge one connection relays to: its client and the names its
/// suffixes are served under.
pub(crate) struct Edge {
    url: String,
    client: OipClient,
    /// The served model name of each cut's suffix.
    names: HashMap<CutKey, String>,
    /// The last relay plan built (a stream's frames share one).
    last: Mutex<Option<(CutKey, CutKey, Arc<RelayPlan>)>>,
}

impl std::fmt::Debug for Edge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Edge").field("url", &self.url).field("served", &self.names.len()).finish()
    }
}

/// What checking an edge found: the edge (when this handheld relays
/// there), the cuts it serves, one readiness call's round trip, or why not.
pub(crate) struct Checked {
    pub(crate) url: String,
    pub(crate) edge: Option<Arc<Edge>>,
    pub(crate) deployed: Vec<CutKey>,
    pub(crate) rtt_us: u64,
    pub(crate) error: Option<String>,
}

/// Whether `url` is one this handheld's operator allowed (compared
/// without a trailing slash).
pub(crate) fn allowed(allow: &[String], url: &str) -> bool {
    let url = url.trim_end_matches('/');
    allow.iter().any(|a| a.trim_end_matches('/') == url)
}

/// Checks the edge at `url` for `loaded`'s model: allowed, ready, and
/// which of `cuts`' suffixes it serves (by their names, which are digests
/// of their ONNX bytes, so a served name is exactly that suffix).
pub(crate) async fn check(
    allow: &[String],
    options: ClientOptions,
    loaded: Arc<Loaded>,
    url: String,
    cuts: Vec<CutKey>,
) -> Checked {
    let refused =
        |url: String, why: String| Checked { url, edge: None, deployed: vec![], rtt_us: 0, error: Some(why) };
    if !allowed(allow, &url) {
        return refused(
            url,
            "this handheld relays only to the edge servers its operator lists (`tandem-handheld serve --edge-allow URL`)"
                .into(),
        );
    }
    let client = match OipClient::new(&url, options) {
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
    info!(%url, asked = cuts.len(), served = deployed.len(), rtt_us, "edge attached");
    let edge = Arc::new(Edge { url: url.clone(), client, names, last: Mutex::new(None) });
    Checked { url, edge: Some(edge), deployed, rtt_us, error: None }
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
    slowdown: f64,
    handle: &tokio::runtime::Handle,
) -> crate::Result<Relayed> {
    let model = &loaded.model;
    let g = model.graph();
    let started = Instant::now();
    let mut report =
        EdgeReport { near: near.as_str().to_string(), up_bytes: 0, down_bytes: 0, edge_us: 0, error: None };
    let attempt = (|| -> Result<(Values, Duration), String> {
        let name =
            edge.names.get(near).ok_or_else(|| format!("the edge does not serve cut {near}'s suffix"))?;
        let relay = relay_plan(edge, loaded, cut, near).map_err(|e| e.to_string())?;
        let values = relay.run_middle(model, received, slowdown).map_err(|e| e.to_string())?;
        let middle = started.elapsed();
        let request = relay.edge_request(model, &values).map_err(|e| e.to_string())?;
        let mut inputs = Vec::with_capacity(request.len());
        for &t in relay.near().up_tensors() {
            let name = &g.tensor(t).name;
            let v = request.get(name).ok_or_else(|| format!("the middle did not compute '{name}'"))?;
            let wire = tandem_core::wire::to_wire(v).map_err(|e| e.to_string())?;
            inputs.push(OipTensor::from_wire(name.clone(), &wire));
        }
        let wanted: Vec<String> =
            relay.near().down_tensors().iter().map(|&t| g.tensor(t).name.clone()).collect();
        let reply = handle.block_on(edge.client.infer(name, &inputs, &wanted));
        let reply = reply.map_err(|e| e.to_string())?;
        report.up_bytes = reply.bytes_up;
        report.down_bytes = reply.bytes_down;
        report.edge_us = reply.elapsed.as_micros() as u64;
        let mut answer = Values::new();
        for t in &reply.outputs {
            let wire = t.to_wire().map_err(|e| e.to_string())?;
            let v = tandem_core::wire::from_wire(wire).map_err(|e| e.to_string())?;
            answer.insert(t.name.clone(), v.into());
        }
        Ok((relay.answer(model, &values, &answer).map_err(|e| e.to_string())?, middle))
    })();
    match attempt {
        Ok((outputs, compute)) => Ok(Relayed { outputs, compute, report }),
        Err(why) => {
            info!(url = %edge.url, cut = %cut, near = %near, "the edge failed, running the rest here: {why}");
            report.error = Some(why);
            let local = Instant::now();
            let plan = loaded.executor.plan_sides(&Cut::from_key(g, cut.as_str())?, Sides::Suffix)?;
            let outputs = plan.run_suffix_dilated(g, received, slowdown)?;
            Ok(Relayed { outputs, compute: local.elapsed(), report })
        }
    }
}

/// The relay plan of (S1, S2), the last one kept.
fn relay_plan(edge: &Edge, loaded: &Loaded, cut: &CutKey, near: &CutKey) -> crate::Result<Arc<RelayPlan>> {
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
