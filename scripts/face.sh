#!/usr/bin/env bash
# The face app on a real photo: MediaPipe's short-range face detector and
# face landmark model (TFLite files from the mediapipe 0.10.21 wheel,
# models/fetch_tflite.py) through `tandem-wearable face`, first on the watch
# alone, then with both models on a `tandem-handheld serve` process over an
# emulated BLE 2M link. Prints each run's face (score, box, eyes, the first
# landmarks) and where the models ran.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 models/fetch_real.py >/dev/null
python3 models/fetch_tflite.py >/dev/null
cargo build --locked -q -p tandem-wearable -p tandem-handheld
T=target/debug M=models/cache/tflite
mkdir -p target/face/images
cp models/cache/real/photos/astronaut.png target/face/images/
args=(--detector $M/face_detection_short_range.tflite --landmarks $M/face_landmark.tflite
      --images target/face/images)
show() { # the frame line's faces, shortened, and the summary's placements
  python3 -c '
import json, sys
lines = [json.loads(l) for l in sys.stdin]
for f in lines[:-1]:
    for face in f["faces"]:
        lm = face["landmarks"]
        print(json.dumps({"source": f["source"], "score": round(face["score"], 4), "box": face["box"],
                          "eyes": face["keypoints"][:2], "presence": round(face["presence"], 4),
                          "landmarks": len(lm), "first": lm[:2]}))
s = lines[-1]
for m in ("detector", "landmarks"):
    r = s[m]
    print(json.dumps({"model": m, "frames": r["frames"], "offloaded": r["offloaded"], "ran_at": r["ran_at"],
                      "p50_ms": round(r["p50_ms"], 1), "up_bytes": r["up_bytes"], "status": r.get("status")}))
'
}
echo "== on the watch alone"
$T/tandem-wearable face "${args[@]}" | show
echo "== on a handheld over emulated BLE 2M"
. scripts/handheld.sh
start_handheld target/face
$T/tandem-wearable face "${args[@]}" --connect "$ADDR" --keys "$KEYS" --link ble-2m --placement handheld | show
