#!/usr/bin/env python3
"""Fetch Tandem's TFLite test set, real inputs for it, and LiteRT's outputs.

The .tflite files come from two PyPI wheels, each pinned by version and
SHA-256 (the wheel's and each file's), and are cached under
models/cache/tflite/ (git-ignored: never committed, never redistributed):
  * mediapipe==0.10.21, the last wheel that bundles its models (Apache-2.0):
    face detection (short and full range), face landmarks (with and without
    attention), hand landmarks (lite, full), palm detection (lite, full),
    pose detection and landmarks, iris landmarks, hand recrop and selfie
    segmentation (two of these hold MediaPipe custom ops: Tandem must refuse
    them by name);
  * wyoming-openwakeword==1.8.2: openWakeWord's mel spectrogram, embedding
    and keyword models as TFLite (the keyword models are CC BY-NC-SA 4.0:
    used in tests, never redistributed).

Each model gets a real input and LiteRT's (ai-edge-litert) outputs on it,
as .npy files:
  * vision: the astronaut photo from the scikit-image wheel (NASA, public
    domain), resized (the face and eye models get a crop of the face and of
    an eye) and scaled to the range MediaPipe's graph feeds each model;
  * audio: the phrase of fetch_real.py spoken by espeak-ng at 16 kHz; the
    mel spectrogram model reads its samples, the embedding model a 76-frame
    window of LiteRT's mel frames; each keyword head reads the 16
    embeddings (of its own wake word spoken after a second of silence)
    that LiteRT scores highest, so that its output is far from 0 and an
    error in it shows.
Models Tandem must refuse get no outputs: `"refuse"` names the operator
(MediaPipe's custom ops, which LiteRT cannot run without MediaPipe's op
resolver either).

ai-edge-litert, numpy and Pillow are test-time dependencies only
(scripts/test.sh installs them). Writes models/cache/tflite/tflite.json,
the manifest the tests read. Usage: python3 models/fetch_tflite.py [--cache DIR]
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fetch_real import PHRASE, atomic_write, manifest_current, member, photo, sha256, speech_16k  # noqa: E402
from fetch_real import WHEELS as REAL_WHEELS  # noqa: E402

VERSION = 4

# package: (version, wheel sha256, licence of what we use)
WHEELS = {
    "mediapipe": (
        "0.10.21",
        "05dc4a9e593655a79558d05d6227d31018c2537a4bd3362b51e230cf22aecfe3",
        "Apache-2.0 (code and models)",
    ),
    "wyoming-openwakeword": (
        "1.8.2",
        "f1dd9f2d7558592db30147802b72e31651f4f85890d065f532e8fc2baf3165c2",
        "code MIT; openWakeWord's models: mel and embedding Apache-2.0, keyword heads CC BY-NC-SA 4.0 "
        "(fetched for tests, never redistributed)",
    ),
    "scikit-image": REAL_WHEELS["scikit-image"],
}

MP = "mediapipe/modules/"
OWW = "wyoming_openwakeword/models/"
# name: (package, member, sha256, input: how it is fed, refuse: a custom op Tandem must name)
MODELS = {
    "face_detection_short_range": ("mediapipe", MP + "face_detection/face_detection_short_range.tflite",
                                   "bbff11cebd1eb27a1e004cae0b0e63ec8c551cbf34a4451148b4908b8db3eca8",
                                   ("photo", "whole", (-1, 1)), None),
    "face_detection_full_range_sparse": ("mediapipe", MP + "face_detection/face_detection_full_range_sparse.tflite",
                                         "2c3728e6da56f21e21a320433396fb06d40d9088f2247c05e5635a688d45dfe1",
                                         ("photo", "whole", (-1, 1)), None),
    "face_landmark": ("mediapipe", MP + "face_landmark/face_landmark.tflite",
                      "1055cb9d4a9ca8b8c688902a3a5194311138ba256bcc94e336d8373a5f30c814",
                      ("photo", "face", (0, 1)), None),
    "face_landmark_with_attention": ("mediapipe", MP + "face_landmark/face_landmark_with_attention.tflite",
                                     "e06a804e0144f9929eda782122916b35d60c697c3c9344013ca2bbe76a6ce2b4",
                                     ("photo", "face", (0, 1)), "Landmarks2TransformMatrix"),
    "iris_landmark": ("mediapipe", MP + "iris_landmark/iris_landmark.tflite",
                      "d1744d2a09c25f501d39eba4faff47e53ecca8852c5ce19bce8eeac39357521f",
                      ("photo", "eye", (0, 1)), None),
    "hand_landmark_lite": ("mediapipe", MP + "hand_landmark/hand_landmark_lite.tflite",
                           "048edd3645c9bf7397d19a9f6e3a42957d6e414c9bea6598030a2e9b624156e6",
                           ("photo", "whole", (0, 1)), None),
    "hand_landmark_full": ("mediapipe", MP + "hand_landmark/hand_landmark_full.tflite",
                           "11c272b891e1a99ab034208e23937a8008388cf11ed2a9d776ed3d01d0ba00e3",
                           ("photo", "whole", (0, 1)), None),
    "palm_detection_lite": ("mediapipe", MP + "palm_detection/palm_detection_lite.tflite",
                            "e9a4aaddf90dda56a87235303cf00e4c2d3fb28725f68fd88772997dac905c18",
                            ("photo", "whole", (0, 1)), None),
    "palm_detection_full": ("mediapipe", MP + "palm_detection/palm_detection_full.tflite",
                            "1b14e9422c6ad006cde6581a46c8b90dd573c07ab7f3934b5589e7cea3f89a54",
                            ("photo", "whole", (0, 1)), None),
    "pose_detection": ("mediapipe", MP + "pose_detection/pose_detection.tflite",
                       "9ba9dd3d42efaaba86b4ff0122b06f29c4122e756b329d89dca1e297fd8f866c",
                       ("photo", "whole", (-1, 1)), None),
    "pose_landmark_full": ("mediapipe", MP + "pose_landmark/pose_landmark_full.tflite",
                           "e9a5c5cb17f736fafd4c2ec1da3b3d331d6edbe8a0d32395855aeb2cdfd64b9f",
                           ("photo", "whole", (0, 1)), None),
    "hand_recrop": ("mediapipe", MP + "holistic_landmark/hand_recrop.tflite",
                    "67d996ce96f9d36fe17d2693022c6da93168026ab2f028f9e2365398d8ac7d5d",
                    ("photo", "whole", (0, 1)), None),
    "selfie_segmentation": ("mediapipe", MP + "selfie_segmentation/selfie_segmentation.tflite",
                            "9ee168ec7c8f2a16c56fe8e1cfbc514974cbbb7e434051b455635f1bd1462f5c",
                            ("photo", "whole", (0, 1)), "Convolution2DTransposeBias"),
    "selfie_segmentation_landscape": ("mediapipe", MP + "selfie_segmentation/selfie_segmentation_landscape.tflite",
                                      "a77d03f4659b9f6b6c1f5106947bf40e99d7655094b6527f214ea7d451106edd",
                                      ("photo", "whole", (0, 1)), "Convolution2DTransposeBias"),
    "oww_melspectrogram": ("wyoming-openwakeword", OWW + "melspectrogram.tflite",
                           "96fa0adccb6e8cf95cb14465409a1a2898ee4a96a85bb9ed3c7eb0e68bf163e8",
                           ("speech",), None),
    "oww_embedding": ("wyoming-openwakeword", OWW + "embedding_model.tflite",
                      "c0aea21eb84a4ce90a08c870da41b7a7173b45269e6a3207c71d67c40f3a59d8",
                      ("mel",), None),
    "oww_alexa": ("wyoming-openwakeword", OWW + "alexa_v0.1.tflite",
                  "7333a317a790070a7f3432b81d9439c779481cc4ebd67c73da7174ea3cf48397",
                  ("embeddings", "alexa"), None),
    # espeak-ng's "mycroft" is not heard as the wake word; "my croft" is.
    "oww_hey_mycroft": ("wyoming-openwakeword", OWW + "hey_mycroft_v0.1.tflite",
                        "bf9e43136afd3ca323698820a6e32a47f885ef4c30a3b8b577ec71688a9d64d8",
                        ("embeddings", "hey my croft"), None),
    # Its head is an IF over three subgraphs (both branches inlined by the translator).
    "oww_hey_jarvis": ("wyoming-openwakeword", OWW + "hey_jarvis_v0.1.tflite",
                       "14bff778604985e1b5c19f0f7bbe477a69cf281d8db34b232b3b972411f710e2",
                       ("embeddings", "hey jarvis"), None),
}

# Crops of the 512 x 512 astronaut photo (left, top, right, bottom): her
# face, and her right eye, as a face detector's box would give them.
CROPS = {"whole": None, "face": (165, 40, 305, 180), "eye": (195, 85, 245, 135)}
SPEECH_SECONDS = 3


def pixels(img, crop, size, lo_hi):
    """The photo (cropped) resized to size = (width, height), NHWC float32 in [lo, hi]."""
    import numpy as np

    if crop is not None:
        img = img.crop(crop)
    a = np.asarray(img.resize(size), dtype=np.float32) * np.float32(1.0 / 255.0)
    lo, hi = lo_hi
    return (a * np.float32(hi - lo) + np.float32(lo))[None].astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache"))
    args = ap.parse_args()
    out_dir = os.path.join(args.cache, "tflite")
    wheel_dir = os.path.join(out_dir, "wheels")
    manifest_path = os.path.join(out_dir, "tflite.json")
    if manifest_current(manifest_path, VERSION):
        print(f"TFLite models already in {out_dir}")
        return

    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for name, (package, path, digest, _, _) in MODELS.items():
        paths[name] = os.path.join(out_dir, f"{name}.tflite")
        if not os.path.exists(paths[name]) or sha256(open(paths[name], "rb").read()) != digest:
            atomic_write(paths[name], member(package, path, digest, wheel_dir, WHEELS))

    def litert(name, feeds=None):
        """LiteRT on the model: (its input details, its outputs on `feeds`, in order)."""
        it = Interpreter(model_path=paths[name], num_threads=1)
        details = it.get_input_details()
        if feeds is not None:
            for d, x in zip(details, feeds):
                if list(d["shape"]) != list(x.shape):
                    it.resize_tensor_input(d["index"], list(x.shape))
        it.allocate_tensors()
        if feeds is None:
            return details, None
        details = it.get_input_details()
        for d, x in zip(details, feeds):
            it.set_tensor(d["index"], x)
        it.invoke()
        return details, [(d["name"], it.get_tensor(d["index"]).copy()) for d in it.get_output_details()]

    # The photo from the scikit-image wheel fetch_real.py keeps (one download).
    astronaut = photo("astronaut", os.path.join(args.cache, "real", "wheels"), WHEELS)
    speech = speech_16k(SPEECH_SECONDS)[None]
    mel = None

    def embeddings_of(phrase):
        """The embeddings of `phrase` after a second of silence, one per
        8 mel frames (openWakeWord's buffering), through LiteRT."""
        audio = speech_16k(3, phrase, lead=1.0)[None]
        frames = litert("oww_melspectrogram", [audio])[1][0][1].reshape(-1, 32) / 10.0 + 2.0
        windows = [frames[None, s:s + 76, :, None].astype(np.float32) for s in range(0, frames.shape[0] - 75, 8)]
        return np.concatenate([litert("oww_embedding", [w])[1][0][1].reshape(1, 96) for w in windows])
    entries = []
    for name, (package, _, digest, feed, refuse) in MODELS.items():
        entry = {"name": name, "file": f"{name}.tflite", "sha256": digest, "package": package,
                 "version": WHEELS[package][0], "licence": WHEELS[package][2], "inputs": [], "input_names": [],
                 "outputs": [], "output_names": [], "refuse": refuse}
        if refuse is not None:
            entries.append(entry)
            continue
        if feed[0] == "photo":
            _, h, w, _ = (int(v) for v in litert(name)[0][0]["shape"])
            x = pixels(astronaut, CROPS[feed[1]], (w, h), feed[2])
        elif feed[0] == "speech":
            x = speech
        elif feed[0] == "mel":
            x = mel[None, :76, :, None].astype(np.float32)
        else:
            # The 16 consecutive embeddings LiteRT scores highest for this head.
            e = embeddings_of(feed[1])
            starts = range(0, len(e) - 15)
            scores = [float(litert(name, [e[None, k:k + 16, :].astype(np.float32)])[1][0][1].max()) for k in starts]
            best = int(np.argmax(scores))
            x = e[None, best:best + 16, :].astype(np.float32)
        details, outputs = litert(name, [x])
        if name == "oww_melspectrogram":
            # openWakeWord's own scaling of the mel frames before the embedding model.
            mel = outputs[0][1].reshape(-1, 32) / 10.0 + 2.0
        entry["input_names"].append(details[0]["name"])
        entry["inputs"].append(f"{name}.in0.npy")
        np.save(os.path.join(out_dir, entry["inputs"][0]), x)
        for k, (out_name, y) in enumerate(outputs):
            entry["output_names"].append(out_name)
            entry["outputs"].append(f"{name}.out{k}.npy")
            np.save(os.path.join(out_dir, entry["outputs"][-1]), y)
        entries.append(entry)
        print(f"{name}: {[tuple(o[1].shape) for o in outputs]}, max {max(float(abs(o[1]).max()) for o in outputs):.3g}")
    manifest = {"version": VERSION, "litert": "ai-edge-litert", "phrase": PHRASE, "models": entries}
    atomic_write(manifest_path, json.dumps(manifest, indent=1).encode())
    print(f"{len(entries)} TFLite models in {out_dir}")


if __name__ == "__main__":
    main()
