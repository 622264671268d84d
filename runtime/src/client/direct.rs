//! The watch straight to the edge: cloud-only, DeepWear's cloud baseline
//! ([`super::Placement::EdgeOnly`]), and the frames the planner sends there:
//! the wearable sends each frame's input straight to the edge server over
//! its own link (Wi-Fi or LTE, emulated when [`super::EdgeConfig::direct`]
//! says so), the phone takes no part, and the edge runs the whole model:
//! the suffix of [`Cut::handheld_only`], one of the cuts
//! `tandem-models export-suffix` writes. The answer is checked against the
//! model like any peer's. When the edge fails (unreachable, a timeout, a
//! refusal, a bad answer) the frame runs here instead, saying why, and
//! frames stay off the edge for [`super::edge::EDGE_BACKOFF`].
//!
//! Frames go one at a time (no pipelining): the call blocks on a
//! current-thread tokio runtime of this module's own. The watch's energy
//! is model-based, as for the phone link: its compute, and its radio's
//! powers over the bytes' time at the direct link's rates.

use std::time::{Duration, Instant};

use tracing::{info, warn};

use super::accounting::{Account, Ran, Stages};
use super::config::EdgeConfig;
use super::report::{EdgeLeg, Tiers};
use crate::error::EdgeError;
use crate::{Cut, Error, Model, ModelError, Result, Values};
use tandem_oip::{ClientOptions, OipClient, OipTensor};
use tandem_plan::energy::EnergyModel;
use tandem_plan::partition::LinkEstimate;

/// The wearable's own client of the edge.
pub(super) struct Direct {
    url: String,
    client: OipClient,
    /// Runs the client's calls (the app thread blocks on them).
    runtime: tokio::runtime::Runtime,
    /// The served name of the whole model's suffix, or why the edge cannot take frames.
    served: std::result::Result<String, EdgeError>,
    /// The direct link's rates, for the radio's model-based energy.
    link: LinkEstimate,
    /// Frames stay off the edge until then, after a failure.
    avoid_until: Option<Instant>,
}

impl Direct {
    /// The edge of `config` for `model`: asks whether it is ready and
    /// serves the whole model's suffix (by its name, a digest of its bytes).
    /// An edge that cannot take frames is kept with the reason: every
    /// frame then runs here, saying it.
    pub fn open(config: &EdgeConfig, model: &Model) -> Result<Direct> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| Error::Start { what: "the edge client's runtime", source })?;
        let options = ClientOptions { emulate: config.direct, ..ClientOptions::default() };
        let client = OipClient::new(&config.url, options)?;
        let whole = Cut::handheld_only(model.graph());
        let name = tandem_core::tier::edge_model_name(&tandem_core::tier::suffix_onnx(model, &whole)?);
        let served = match runtime.block_on(client.model_ready(&name)) {
            Ok(true) => Ok(name),
            Ok(false) => Err(EdgeError::WholeNotServed { url: config.url.clone(), name }),
            Err(e) => Err(e.into()),
        };
        match &served {
            Ok(name) => info!(url = %config.url, %name, "cloud-only: frames go straight to the edge"),
            Err(why) => warn!(url = %config.url, "cloud-only, but frames run here: {why}"),
        }
        // Without emulation the real link's rates are not known: priced as 50 Mbit/s Wi-Fi.
        let bytes_per_s = |bits: Option<f64>| bits.unwrap_or(50e6) / 8.0;
        let link = LinkEstimate {
            up_bytes_per_s: bytes_per_s(config.direct.map(|l| l.up_bits_per_s)),
            down_bytes_per_s: bytes_per_s(config.direct.map(|l| l.down_bits_per_s)),
            rtt: config.direct.map_or(Duration::from_millis(5), |l| l.rtt),
        };
        Ok(Direct { url: config.url.clone(), client, runtime, served, link, avoid_until: None })
    }

    /// Why frames run here now instead of on the edge, if they do.
    pub(super) fn unavailable(&self) -> Option<String> {
        if let Err(why) = &self.served {
            return Some(why.to_string());
        }
        let backoff = self.avoid_until.filter(|t| Instant::now() < *t)?;
        Some(format!(
            "the edge at {} failed; retrying in {:.1} s",
            self.url,
            backoff.saturating_duration_since(Instant::now()).as_secs_f64()
        ))
    }

    /// Runs `inputs` on the edge: the model's outputs, checked against
    /// `model`, and the leg's bytes and time; or why it failed.
    fn infer(&self, model: &Model, inputs: &Values) -> std::result::Result<(Values, EdgeLeg), EdgeError> {
        let name = match &self.served {
            Ok(name) => name,
            Err(why) => return Err(EdgeError::Unavailable(why.to_string())),
        };
        let g = model.graph();
        let mut request = Vec::with_capacity(g.inputs().len());
        for &t in g.inputs() {
            let name = &g.tensor(t).name;
            let v = inputs.get(name).ok_or_else(|| ModelError::MissingTensor(name.clone()))?;
            let wire = tandem_core::wire::to_wire(v)?;
            request.push(OipTensor::from_wire(name.clone(), &wire));
        }
        let wanted: Vec<String> = g.outputs().iter().map(|&t| g.tensor(t).name.clone()).collect();
        let reply = self.runtime.block_on(self.client.infer(name, &request, &wanted))?;
        let mut outputs = Values::new();
        for t in &reply.outputs {
            let id = g.tensor_id(&t.name).ok_or_else(|| EdgeError::UnknownOutput(t.name.clone()))?;
            let v = tandem_core::wire::from_wire(t.to_wire()?)?;
            tandem_core::split::check_tensor(g, id, &v).map_err(EdgeError::BadAnswer)?;
            outputs.insert(t.name.clone(), v.into());
        }
        let leg = EdgeLeg {
            cut: Cut::handheld_only(g).key(),
            up_bytes: reply.bytes_up,
            down_bytes: reply.bytes_down,
            edge_ms: reply.elapsed.as_secs_f64() * 1e3,
            error: None,
        };
        Ok((outputs, leg))
    }
}

/// The phone's energy in a cloud-only frame: none, it takes no part.
struct Absent;

impl EnergyModel for Absent {
    fn name(&self) -> String {
        "absent".into()
    }
    fn compute_power_w(&self) -> f64 {
        0.0
    }
    fn transmit_power_w(&self) -> f64 {
        0.0
    }
    fn receive_power_w(&self) -> f64 {
        0.0
    }
}

/// What became of a frame tried on the edge.
pub(super) enum Tried {
    /// The edge ran it: the model's outputs, checked, and the leg.
    Ran {
        /// The frame's account, its report but for energy.
        account: Box<Account>,
        /// The model's outputs.
        outputs: Values,
    },
    /// It runs here: why (the edge kept out, or a failure: the edge is then
    /// avoided for [`super::edge::EDGE_BACKOFF`]), and the failed leg.
    Here {
        /// Why.
        why: Ran,
        /// The leg that failed, when one was tried.
        leg: Option<EdgeLeg>,
    },
}

impl Direct {
    /// Tries frame `frame` (started at `started`) on the edge.
    pub(super) fn try_frame(
        &mut self,
        frame: u64,
        model: &Model,
        inputs: &Values,
        started: Instant,
        engines: crate::engine::Engines,
    ) -> Tried {
        if let Some(why) = self.unavailable() {
            return Tried::Here { why: Ran::Local(why), leg: None };
        }
        let g = model.graph();
        let (n, whole) = (g.nodes().len(), Cut::handheld_only(g));
        let t0 = Instant::now();
        match self.infer(model, inputs) {
            Ok((outputs, leg)) => {
                let mut account = Account::new(frame, whole.key(), 0, Ran::Offloaded, engines);
                account.stages =
                    Stages { link: t0.elapsed(), latency: started.elapsed(), ..Stages::default() };
                let up_raw = inputs.values().map(|v| v.as_bytes().len() as u64).sum();
                (account.up_bytes, account.up_raw_bytes, account.down_bytes) =
                    (leg.up_bytes, up_raw, leg.down_bytes);
                (account.up_message_bytes, account.down_message_bytes) = (leg.up_bytes, leg.down_bytes);
                account.tiers = Some(Tiers { wearable: 0, handheld: 0, edge: n });
                account.edge = Some(leg);
                Tried::Ran { account: Box::new(account), outputs }
            }
            Err(why) => {
                warn!(frame, url = %self.url, "the edge failed; running the frame here: {why}");
                self.avoid_until = Some(Instant::now() + super::edge::EDGE_BACKOFF);
                let leg = EdgeLeg { cut: whole.key(), error: Some(why.to_string()), ..EdgeLeg::default() };
                Tried::Here { why: Ran::FellBack(format!("the edge failed: {why}")), leg: Some(leg) }
            }
        }
    }

    /// The direct link's rates (the radio's model-based energy).
    pub(super) fn link(&self) -> &LinkEstimate {
        &self.link
    }
}

/// The phone's energy in a frame it takes no part in.
pub(super) fn absent() -> &'static dyn EnergyModel {
    &Absent
}

#[cfg(test)]
mod tests {
    use super::super::{EdgeConfig, ModelFile, Session, SessionConfig, Strategy};
    use crate::InputShapes;

    fn model() -> ModelFile {
        ModelFile::from_bytes(tandem_models::tiny::tiny_mlp_onnx(), &InputShapes::none()).expect("tiny model")
    }

    /// Cloud-only, on this machine alone: no fuel gauge, no cpufreq.
    fn cloud_only(edge: Option<EdgeConfig>) -> SessionConfig {
        let mut c = SessionConfig::watch_and_phone().expect("shipped profiles");
        (c.fuel_gauge, c.cpufreq, c.battery) = (None, None, Some(1.0));
        Strategy::CloudOnly.apply(&mut c);
        c.edge = edge;
        c
    }

    fn transport() -> Box<dyn crate::link::Transport> {
        Box::new(crate::link::memory_transport().0)
    }

    #[test]
    fn cloud_only_is_named_apart_from_the_two_tier_strategies_and_needs_an_edge() {
        assert_eq!(Strategy::parse("cloud-only"), Ok(Strategy::CloudOnly));
        assert_eq!(Strategy::CloudOnly.name(), "cloud-only");
        assert!(!Strategy::ALL.contains(&Strategy::CloudOnly));
        let e = Session::open(model(), transport(), cloud_only(None)).err().expect("refused");
        assert!(e.to_string().contains("needs an edge"), "{e}");
    }

    #[test]
    fn an_unreachable_edge_runs_every_frame_here_saying_why() {
        let edge = EdgeConfig::new("http://127.0.0.1:1");
        let mut s = Session::open(model(), transport(), cloud_only(Some(edge))).expect("opens");
        let n = s.model().graph().nodes().len();
        let frames: Vec<_> =
            (0..3).map(|i| tandem_core::check::random_inputs(s.model(), i).expect("inputs")).collect();
        let out = s.stream(frames).expect("the session runs");
        assert_eq!(out.len(), 3);
        for f in out {
            let r = f.expect("a frame").report;
            assert!(!r.offloaded, "{r:?}");
            assert!(r.local_reason.as_deref().is_some_and(|w| w.contains("127.0.0.1:1")), "{r:?}");
            assert_eq!(r.tiers.map(|t| (t.wearable, t.handheld, t.edge)), Some((n, 0, 0)), "{r:?}");
            assert_eq!(r.handheld_j, 0.0, "{r:?}");
        }
    }
}
