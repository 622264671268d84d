//! The app developer's API as an app meets it: outputs in the model's
//! order and typed, errors that say what went wrong (fetch before run, a
//! bad frame in a stream, which keeps the others), every local frame saying
//! why, the link estimate primed before the first decision, input-shape
//! overrides reaching the handheld, and link encodings both ways (a
//! sensor's pixels, JPEG within a budget, encoded answers).

use std::time::Duration;

use tandem::check::{diff, random_inputs};
use tandem::client::{ModelFile, Placement, Session, SessionConfig, Status};
use tandem::emulate::{EmulatedTransport, LinkControl, LinkProfile, Schedule};
use tandem::server::{spawn_memory, ServerConfig};
use tandem::{frame, tensor_f32, InputShapes};

fn tiny_mlp() -> ModelFile {
    ModelFile::from_bytes(tandem_models::tiny::tiny_mlp_onnx(), &InputShapes::none()).expect("tiny mlp")
}

fn local_config() -> SessionConfig {
    let mut c = SessionConfig::watch_and_phone().expect("profiles");
    c.placement = Placement::WearableOnly;
    c
}

#[test]
fn fetch_before_run_is_named_and_outputs_come_typed_in_model_order() {
    let model = tiny_mlp();
    let server = spawn_memory(ServerConfig::default()).expect("server");
    let mut s = Session::open(model.clone(), Box::new(server), local_config()).expect("session");
    assert_eq!(s.status(), Status::LocalOnly);
    let e = s.fetch("y").expect_err("nothing ran").to_string();
    assert!(e.contains("nothing has run yet"), "{e}");

    let e = s.feed_f32("x", &[1, 4], &[0.5; 3]).expect_err("3 values for 4").to_string();
    assert!(e.contains("[1, 4]") && e.contains("3 were given"), "{e}");
    s.feed_f32("x", &[1, 4], &[0.1, 0.2, 0.3, 0.4]).expect("feed");
    let report = s.run().expect("run");
    // The report is owned: the session can be used while it is held.
    let (shape, y) = s.fetch_f32("y").expect("y is f32");
    assert_eq!(shape, vec![1, 3]);
    assert_eq!(y.len(), 3);
    assert_eq!(report.local_reason.as_deref(), Some("placement: wearable only"));
    assert!(!report.offloaded);
    let names = s.outputs().expect("ran").names();
    let declared: Vec<&str> =
        model.model.graph().outputs().iter().map(|&t| model.model.graph().tensor(t).name.as_str()).collect();
    assert_eq!(names, declared);
    let e = s.fetch("z").expect_err("no such output").to_string();
    assert!(e.contains("no output 'z'") && e.contains("y"), "{e}");
}

#[test]
fn a_bad_frame_in_a_stream_gets_its_own_error_and_the_others_run() {
    let model = tiny_mlp();
    let server = spawn_memory(ServerConfig::default()).expect("server");
    let mut s = Session::open(model.clone(), Box::new(server), local_config()).expect("session");
    let good = |v: f32| frame([("x", tensor_f32(&[1, 4], &[v; 4]).expect("tensor"))]);
    let frames = vec![
        good(0.1),
        frame([("z", tensor_f32(&[1, 4], &[0.0; 4]).expect("tensor"))]),
        good(0.2),
        frame([("x", tensor_f32(&[2, 4], &[0.0; 8]).expect("tensor"))]),
        good(0.3),
    ];
    let results = s.stream(frames.clone()).expect("the session works");
    assert_eq!(results.len(), 5, "one result per frame");
    let reference = tandem::split::full_plan(&model.model).expect("plan");
    for (i, r) in results.iter().enumerate() {
        match (i, r) {
            (1, Err(e)) => {
                let e = e.to_string();
                assert!(e.contains("'z'") && e.contains("x"), "frame {i}: {e}");
            }
            (3, Err(e)) => {
                let e = e.to_string();
                assert!(e.contains("'x'") && e.contains("[2, 4]"), "frame {i}: {e}");
            }
            (0 | 2 | 4, Ok(f)) => {
                let want = reference.run(model.model.graph(), &frames[i]).expect("runs");
                let got = f.outputs.get("y").expect("y");
                assert!(diff(&want["y"], got).expect("comparable").ok(), "frame {i}");
            }
            _ => panic!("frame {i}: unexpected {r:?}"),
        }
    }
    let numbers: Vec<u64> = results.iter().filter_map(|r| r.as_ref().ok()).map(|f| f.report.frame).collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
}

#[test]
fn the_link_estimate_is_measured_before_the_first_decision_and_local_frames_say_the_planners_numbers() {
    let path = tandem_models::ensure_models().expect("zoo").zoo_path("mnist").expect("mnist").to_path_buf();
    let model = ModelFile::load(&path, &InputShapes::none()).expect("model");
    let server = spawn_memory(ServerConfig {
        models_dir: path.parent().map(|p| p.to_path_buf()),
        ..Default::default()
    })
    .expect("server");
    // 100 kbit/s each way: 12.5 kB/s, a tenth of the 125 kB/s default.
    let profile = LinkProfile::custom("slow", 100e3, Duration::from_millis(5), Duration::ZERO, 244);
    let control = LinkControl::new(&profile, Schedule::default());
    let transport = EmulatedTransport::new(server, profile, control, 5);
    let config = SessionConfig::emulated_watch_and_phone().expect("profiles");
    assert!(config.dilation >= 2.0, "the emulated watch is slower than the host: {}", config.dilation);
    let default_up = config.link_default.up_bytes_per_s;
    let mut s = Session::open(model.clone(), Box::new(transport), config).expect("session");
    assert!(matches!(s.status(), Status::Ready { .. }), "{}", s.status());
    let up = s.link_estimate().up_bytes_per_s;
    assert!(
        (6e3..25e3).contains(&up),
        "the primed upload estimate is {up:.0} B/s; the link carries 12500 B/s (default {default_up:.0})"
    );
    // MNIST's input alone takes ~0.25 s up at this rate: the planner keeps
    // it here, and says so with its numbers.
    let inputs = random_inputs(&model.model, 1).expect("inputs");
    for (name, v) in &inputs {
        s.feed(name, (**v).clone()).expect("feed");
    }
    let report = s.run().expect("run");
    assert!(!report.offloaded, "{report:?}");
    let why = report.local_reason.expect("a local frame says why");
    assert!(why.starts_with("the planner:") && why.contains("ms"), "{why}");
}

/// The handheld holds the original file (symbolic batch) in its model
/// directory; the wearable loads it with `x=2,4`. The handshake carries the
/// override, so the handheld loads the same file, by digest, at the same
/// shape: nothing is pushed, and the answer matches the unsplit run.
#[test]
fn input_shape_overrides_reach_the_handheld_in_the_handshake() {
    let bytes = tandem_models::tiny::symbolic_mlp_onnx();
    let dir = std::env::temp_dir().join(format!("tandem-overrides-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("mlp.onnx"), &bytes).expect("model file");
    let shapes = InputShapes::parse(&["x=2,4"]).expect("spec");
    let model = ModelFile::from_bytes(bytes.clone(), &shapes).expect("model with overrides");
    assert_eq!(*model.bytes, bytes, "the file's own bytes, so its digest is the handheld's");
    let server = spawn_memory(ServerConfig { models_dir: Some(dir.clone()), ..ServerConfig::default() })
        .expect("server");
    let mut config =
        SessionConfig::watch_and_phone().expect("profiles").require_handheld(Duration::from_secs(30));
    config.placement = Placement::HandheldOnly;
    // What is tested is the answer, not the deadline: a loaded machine may be slow.
    config.deadline_floor = Duration::from_secs(60);
    let mut s = Session::open(model.clone(), Box::new(server), config).expect("the handheld takes the model");
    let x: Vec<f32> = (0..8).map(|i| i as f32 / 8.0).collect();
    s.feed_f32("x", &[2, 4], &x).expect("feed");
    let report = s.run().expect("run");
    assert!(report.offloaded, "{report:?}");
    let inputs = frame([("x", tensor_f32(&[2, 4], &x).expect("tensor"))]);
    let want = tandem::split::full_plan(&model.model)
        .expect("plan")
        .run(model.model.graph(), &inputs)
        .expect("runs");
    assert!(diff(&want["y"], &s.fetch("y").expect("y")).expect("comparable").ok());
    drop(s);
    let files: Vec<_> = std::fs::read_dir(&dir).expect("dir").flatten().map(|e| e.file_name()).collect();
    assert_eq!(files, ["mlp.onnx"], "nothing was pushed");
    let _ = std::fs::remove_dir_all(&dir);
}

/// MNIST run on the handheld, its `image` input crossing an emulated
/// 200 kbit/s link (where bytes cost more than the watch's coding time) in
/// the link encodings `encodings` allows: the frame's report and output.
fn mnist_over_a_slow_link(
    image: &[f32],
    encodings: tandem::encoding::Allowed,
    accuracy: Option<tandem::client::Accuracy>,
) -> (tandem::FrameReport, Vec<f32>) {
    mnist_from_a_sensor(image, encodings, accuracy, None)
}

/// [`mnist_over_a_slow_link`], the input being `pixels`' sensor values when given.
fn mnist_from_a_sensor(
    image: &[f32],
    encodings: tandem::encoding::Allowed,
    accuracy: Option<tandem::client::Accuracy>,
    pixels: Option<tandem::encoding::Widening>,
) -> (tandem::FrameReport, Vec<f32>) {
    zoo_over_a_slow_link("mnist", &[1, 1, 28, 28], image, encodings, accuracy, pixels)
}

/// Zoo model `name` run on the handheld, its `input` (of `shape`) crossing
/// the slow link as `mnist_from_a_sensor` says: the report and `output`.
fn zoo_over_a_slow_link(
    name: &str,
    shape: &[usize],
    image: &[f32],
    encodings: tandem::encoding::Allowed,
    accuracy: Option<tandem::client::Accuracy>,
    pixels: Option<tandem::encoding::Widening>,
) -> (tandem::FrameReport, Vec<f32>) {
    let path =
        tandem_models::ensure_models().expect("models").zoo_path(name).expect("zoo model").to_path_buf();
    let model = ModelFile::load(&path, &InputShapes::none()).expect("zoo model");
    // The handheld holds the model (no push over the slow link).
    let models_dir = path.parent().map(|p| p.to_path_buf());
    let server = spawn_memory(ServerConfig { models_dir, ..Default::default() }).expect("server");
    let profile = LinkProfile::custom("slow", 200e3, Duration::from_millis(2), Duration::ZERO, 244);
    let control = LinkControl::new(&profile, Schedule::default());
    let transport = EmulatedTransport::new(server, profile, control, 3);
    let mut config =
        SessionConfig::watch_and_phone().expect("profiles").require_handheld(Duration::from_secs(30));
    config.placement = Placement::HandheldOnly;
    // What is tested is the answer, not the deadline: a loaded machine may be slow.
    config.deadline_floor = Duration::from_secs(60);
    config.encodings = encodings;
    config.accuracy = accuracy;
    if let Some(w) = pixels {
        config.widenings.insert("input".into(), w);
    }
    let mut s = Session::open(model, Box::new(transport), config).expect("session");
    s.feed_f32("input", shape, image).expect("feed");
    let report = s.run().expect("run");
    assert!(report.offloaded, "{report:?}");
    (report, s.fetch_f32("output").expect("output").1)
}

/// Lossless link encodings, on by default: a mostly-black image crosses in
/// a fraction of its raw bytes, and the outputs are bit for bit those of a
/// session sending raw tensors.
#[test]
fn a_sparse_input_crosses_encoded_and_the_outputs_do_not_change() {
    use tandem::encoding::Allowed;
    let image: Vec<f32> = (0..28 * 28).map(|i| if i % 28 > 10 && i % 28 < 14 { 0.8 } else { 0.0 }).collect();
    let (raw, raw_out) = mnist_over_a_slow_link(&image, Allowed::Raw, None);
    let (coded, coded_out) = mnist_over_a_slow_link(&image, Allowed::Lossless, None);
    assert_eq!((raw.up_bytes, raw.up_raw_bytes), (28 * 28 * 4, 28 * 28 * 4));
    assert_eq!(coded.up_raw_bytes, 28 * 28 * 4);
    assert!(coded.up_bytes * 5 < coded.up_raw_bytes, "{coded:?}");
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&raw_out), bits(&coded_out), "bit for bit");
}

/// Lossy link encodings only within the accuracy budget, measured on the
/// first frame: a budget the int8 and f16 round trips break leaves the
/// input lossless (outputs bit for bit the raw run's); an argmax budget
/// lets the input cross at a quarter of its bytes with the same argmax.
#[test]
fn lossy_encodings_are_used_only_within_the_accuracy_budget() {
    use tandem::client::Accuracy;
    use tandem::encoding::Allowed;
    let path =
        tandem_models::ensure_models().expect("models").zoo_path("mnist").expect("mnist").to_path_buf();
    let model = ModelFile::load(&path, &InputShapes::none()).expect("mnist");
    let x = random_inputs(&model.model, 9).expect("inputs").remove("input").expect("input");
    let image = tandem::check::as_f32(&x).expect("f32");
    let run = |encodings, accuracy| mnist_over_a_slow_link(&image, encodings, accuracy);
    let argmax =
        |v: &[f32]| v.iter().enumerate().fold((0, f32::MIN), |b, (i, &x)| if x > b.1 { (i, x) } else { b }).0;
    let (raw, raw_out) = run(Allowed::Raw, None);
    let (tight, tight_out) = run(Allowed::Lossy, Some(Accuracy::MaxRelError(1e-9)));
    assert!(tight.up_bytes * 2 > raw.up_bytes, "no lossy encoding within 1e-9: {tight:?}");
    assert_eq!(tight_out, raw_out, "lossless only: the same outputs");
    let (loose, loose_out) = run(Allowed::Lossy, Some(Accuracy::Argmax));
    assert!(loose.up_bytes * 3 < raw.up_bytes, "int8 within the argmax budget: {loose:?}");
    assert_ne!(loose_out, raw_out, "a lossy encoding changes the values");
    assert_eq!(argmax(&loose_out), argmax(&raw_out), "but not the argmax");
}

/// A grey 8-bit camera's pixels, as the model card normalizes them.
fn grey_pixels() -> tandem::encoding::Widening {
    tandem::encoding::Widening {
        ty: tandem::card::SensorType::U8,
        layout: "NCHW".into(),
        scale: 1.0 / 255.0,
        mean: vec![0.1307],
        std: vec![0.3081],
    }
}

/// An input that is a sensor's u8 pixels under its card's normalization
/// crosses as those pixels (a quarter of its bytes, bit-exact: the outputs
/// are those of the raw run); an input that is not (one value off by an
/// ulp) still runs, bit-exact, in a generic lossless encoding.
#[test]
fn a_sensor_input_crosses_as_its_pixels_and_the_outputs_do_not_change() {
    use tandem::encoding::Allowed;
    let w = grey_pixels();
    // Noisy pixels (an LCG's top bytes): generic lossless coding gains little on their floats.
    let mut state = 12345u32;
    let mut image: Vec<f32> = (0..28 * 28)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            w.widen(f32::from((state >> 24) as u8), 0)
        })
        .collect();
    let (raw, raw_out) = mnist_from_a_sensor(&image, Allowed::Raw, None, None);
    let (narrow, narrow_out) = mnist_from_a_sensor(&image, Allowed::Lossless, None, Some(w.clone()));
    assert!(narrow.up_bytes <= 28 * 28 + 28 * 28 / 100 + 16, "u8 pixels plus LZ4's framing: {narrow:?}");
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&raw_out), bits(&narrow_out), "bit for bit");
    assert_eq!(raw.up_bytes, 28 * 28 * 4);
    image[100] = f32::from_bits(image[100].to_bits() + 1);
    let (_, raw_out) = mnist_from_a_sensor(&image, Allowed::Raw, None, None);
    let (other, other_out) = mnist_from_a_sensor(&image, Allowed::Lossless, None, Some(w));
    assert!(other.up_bytes > 28 * 28 * 2, "not the sensor's values: not narrowed ({other:?})");
    assert_eq!(bits(&raw_out), bits(&other_out), "still bit for bit");
}

/// Under a budget, a camera's image may cross as JPEG (a fraction of its
/// pixels' bytes); a budget JPEG breaks keeps it exact (its pixels, LZ4).
#[test]
fn a_jpeg_input_is_used_only_within_the_budget() {
    use tandem::client::Accuracy;
    use tandem::encoding::Allowed;
    let w = tandem::encoding::Widening {
        ty: tandem::card::SensorType::U8,
        layout: "NCHW".into(),
        scale: 1.0 / 255.0,
        mean: vec![0.5],
        std: vec![0.5],
    };
    // A smooth, textured picture, as a camera would see one.
    let shape = [1, 3, 128, 128];
    let image: Vec<f32> = (0..3 * 128 * 128)
        .map(|i| {
            let (c, y, x) = (i / (128 * 128), (i / 128 % 128) as f32, (i % 128) as f32);
            let p = 128.0
                + 60.0 * (x / 9.0).sin() * (y / 13.0).cos()
                + 30.0 * ((x + y) / 5.0).sin()
                + c as f32 * 10.0;
            w.widen(p.round().clamp(0.0, 255.0), c)
        })
        .collect();
    let run = |encodings, accuracy, widening| {
        zoo_over_a_slow_link("mobilenet_v1_1.0_128", &shape, &image, encodings, accuracy, widening)
    };
    // The unsplit run, on the watch alone.
    let path = tandem_models::ensure_models()
        .expect("models")
        .zoo_path("mobilenet_v1_1.0_128")
        .expect("zoo model")
        .to_path_buf();
    let model = ModelFile::load(&path, &InputShapes::none()).expect("zoo model");
    let mut local = Session::open_local(model, local_config()).expect("session");
    local.feed_f32("input", &shape, &image).expect("feed");
    local.run().expect("run");
    let raw_out = local.fetch_f32("output").expect("output").1;
    let (tight, tight_out) = run(Allowed::Lossy, Some(Accuracy::MaxRelError(1e-9)), Some(w.clone()));
    assert_eq!(tight_out, raw_out, "no lossy encoding within 1e-9: {tight:?}");
    assert!(tight.up_bytes <= 3 * 128 * 128, "the pixels, exactly: {tight:?}");
    let (loose, loose_out) = run(Allowed::Lossy, Some(Accuracy::MaxRelError(0.5)), Some(w));
    assert!(loose.up_bytes * 4 < tight.up_bytes, "JPEG within a loose budget: {loose:?} vs {tight:?}");
    assert_ne!(loose_out, raw_out, "a lossy encoding changes the values");
}

/// Answers come back in a lossless encoding where it pays: a ReLU output of
/// 2048 × 8 floats, about half zeros, crosses in fewer bytes than raw, and
/// the outputs are bit for bit those of raw answers.
#[test]
fn answers_come_back_encoded_and_bit_exact() {
    use tandem::encoding::Allowed;
    let shapes = InputShapes::parse(&["x=2048,4".to_string()]).expect("shapes");
    let model = ModelFile::from_bytes(tandem_models::tiny::symbolic_mlp_onnx(), &shapes).expect("mlp");
    let inputs = random_inputs(&model.model, 4).expect("inputs");
    let run = |encodings| {
        let server = spawn_memory(ServerConfig::default()).expect("server");
        let profile = LinkProfile::custom("2mbit", 2e6, Duration::from_millis(2), Duration::ZERO, 244);
        let control = LinkControl::new(&profile, Schedule::default());
        let transport = EmulatedTransport::new(server, profile, control, 7);
        let mut config =
            SessionConfig::watch_and_phone().expect("profiles").require_handheld(Duration::from_secs(30));
        config.placement = Placement::HandheldOnly;
        // What is tested is the answer, not the deadline: a loaded machine may be slow.
        config.deadline_floor = Duration::from_secs(60);
        config.encodings = encodings;
        let mut s = Session::open(model.clone(), Box::new(transport), config).expect("session");
        for (name, t) in &inputs {
            s.feed(name, (**t).clone()).expect("feed");
        }
        let report = s.run().expect("run");
        assert!(report.offloaded, "{report:?}");
        (report, s.fetch_f32("y").expect("y").1)
    };
    let (raw, raw_out) = run(Allowed::Raw);
    let (coded, coded_out) = run(Allowed::Lossless);
    assert_eq!(raw.down_bytes, 2048 * 8 * 4);
    assert!(coded.down_bytes * 10 < raw.down_bytes * 8, "at least 20% fewer bytes down: {coded:?}");
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&raw_out), bits(&coded_out), "bit for bit");
}

#[test]
fn a_session_dropped_inside_an_async_runtime_neither_panics_nor_blocks() {
    let model = tiny_mlp();
    let server = tandem::server::spawn_memory(tandem::server::ServerConfig::default()).expect("server");
    let mut config = local_config();
    config.placement = Placement::Auto;
    let s = Session::open(model, Box::new(server), config).expect("session");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let started = std::time::Instant::now();
    // An app's async task drops its session: Drop must not block the task
    // (nor drop the session's runtime inside this one, which panics).
    rt.block_on(async move { drop(s) });
    assert!(
        started.elapsed() < std::time::Duration::from_millis(250),
        "dropping blocked {:?}",
        started.elapsed()
    );
}

/// Energy measured by a fuel gauge: a fake `power_supply` tree whose
/// battery draws 0.5 A at 4 V (2 W) gives 2 W × the stream's measured
/// windows; a tree without a gauge says so and measures nothing.
#[test]
fn a_fuel_gauge_measures_energy_over_windows_of_frames_and_its_absence_is_said() {
    let root = std::env::temp_dir().join(format!("tandem-fuel-{}", std::process::id()));
    let battery = root.join("battery");
    std::fs::create_dir_all(&battery).expect("dir");
    std::fs::write(battery.join("type"), "Battery\n").expect("write");
    std::fs::write(battery.join("current_now"), "-500000\n").expect("write");
    std::fs::write(battery.join("voltage_now"), "4000000\n").expect("write");
    let model = tiny_mlp();
    // A session on this tree streaming `n` frames: what it measured, or why not.
    let stream = |n: usize| -> Result<tandem::fuel::Measured, String> {
        let mut config = local_config();
        config.fuel_gauge = Some(root.clone());
        config.energy_window = 5;
        let mut s = Session::open_local(model.clone(), config).expect("session");
        let frames: Vec<_> = (0..n)
            .map(|i| frame([("x", tensor_f32(&[1, 4], &[i as f32 * 0.1; 4]).expect("tensor"))]))
            .collect();
        assert_eq!(s.stream(frames).expect("stream").len(), n);
        s.measured_energy().cloned().map_err(|why| why.to_string())
    };
    let m = stream(20).expect("a gauge");
    assert_eq!((m.windows, m.frames), (4, 20), "{m:?}");
    let watts = m.watts().expect("time passed");
    assert!((watts - 2.0).abs() < 1e-6, "a constant 2 W measured as {watts} W");
    assert_eq!(m.source, "current_now x voltage_now, integrated");

    // While charging, the gauge measures the charger: nothing is measured.
    std::fs::write(battery.join("status"), "Charging\n").expect("write");
    let m = stream(10).expect("a gauge");
    assert_eq!(m.windows, 0, "{m:?}");
    std::fs::remove_file(battery.join("status")).expect("remove");

    std::fs::remove_file(battery.join("current_now")).expect("remove");
    let why = stream(1).expect_err("no gauge now");
    assert!(why.contains("none of energy_now") && why.contains("model-based only"), "{why}");
    let _ = std::fs::remove_dir_all(&root);
}
