//! Energy weighed by battery capacity (DeepWear's accounting): on the LG
//! Watch Urbane and the Nexus 6 over the Wear OS data layer, PP-OCR's
//! classifier at PropT ∞ stays on the watch when both batteries weigh the
//! same, and offloads when a joule weighs by the share of its battery.

use std::time::Duration;

use tandem::check::random_inputs;
use tandem::client::{EnergyWeighing, ModelFile, Session, SessionConfig};
use tandem::device::DeviceProfile;
use tandem::emulate::{EmulatedTransport, LinkControl, LinkProfile, Schedule};
use tandem::server::{spawn_memory, ServerConfig};
use tandem::InputShapes;

fn first_frame(model: &ModelFile, weighing: EnergyWeighing) -> tandem::FrameReport {
    let (watch, phone) = ("lg-urbane", "nexus-6-cpu");
    let mut c = SessionConfig::new(
        DeviceProfile::shipped(watch).expect("profile"),
        // The fallback's battery is a watch's (306 mAh): were it used once
        // the phone named itself, the phone's joules would outweigh the watch's.
        DeviceProfile::shipped("watch-w5").expect("profile"),
    )
    .require_handheld(Duration::from_secs(60));
    c.dilation = c.wearable.slowdown;
    c.hint = tandem::partition::LatencyHint::EnergyFirst;
    c.pipeline = false;
    c.battery = Some(0.8);
    c.energy_weights = weighing;
    c.deadline_floor = Duration::from_secs(60);
    let link = LinkProfile::named("wear-data-layer").expect("link");
    c.link_default = tandem::partition::LinkEstimate {
        up_bytes_per_s: 1.35e6 / 8.0,
        down_bytes_per_s: 1.35e6 / 8.0,
        rtt: Duration::from_millis(26),
    };
    // The phone names its device: its shipped profile's battery (3220 mAh)
    // weighs its joules.
    let slowdown = DeviceProfile::shipped(phone).expect("profile").slowdown;
    let server =
        ServerConfig { device: phone.into(), slowdown, battery: (0.8, false), ..ServerConfig::default() };
    let control = LinkControl::new(&link, Schedule::default());
    let transport = EmulatedTransport::new(spawn_memory(server).expect("server"), link, control, 1);
    let mut s = Session::open(model.clone(), Box::new(transport), c).expect("session");
    let inputs = vec![random_inputs(&model.model, 1).expect("inputs")];
    let mut frames = s.stream(inputs).expect("stream");
    frames.remove(0).expect("frame").report
}

#[test]
fn weighed_by_battery_capacity_the_watch_offloads_where_equal_weights_keep_it() {
    let real = tandem_models::real::ensure_real_models().expect("real models");
    let m = real.get("ppocr_cls_int8").expect("PP-OCR's int8 classifier");
    let path = real.path(&m.file);
    let shapes = InputShapes::parse(&["x=1,3,48,192"]).expect("shape");
    let model = ModelFile::load(path, &shapes).expect("model");
    let levels = first_frame(&model, EnergyWeighing::Levels);
    assert!(!levels.offloaded && levels.prefix_layers == levels.layers, "equal weights: {levels:?}");
    let capacity = first_frame(&model, EnergyWeighing::Capacity);
    assert!(capacity.offloaded && capacity.prefix_layers < capacity.layers, "by capacity: {capacity:?}");
}

#[test]
fn weighing_by_capacity_needs_one_in_each_profile() {
    let mut c = SessionConfig::watch_and_phone().expect("profiles");
    c.energy_weights = EnergyWeighing::Capacity;
    c.wearable.battery = None;
    let model =
        ModelFile::from_bytes(tandem_models::tiny::tiny_mlp_onnx(), &InputShapes::none()).expect("model");
    let server = spawn_memory(ServerConfig::default()).expect("server");
    let err = Session::open(model, Box::new(server), c).err().expect("refused");
    assert!(err.to_string().contains("watch-w5") && err.to_string().contains("capacity_mah"), "{err}");
}
