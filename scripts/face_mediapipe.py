#!/usr/bin/env python3
"""MediaPipe itself on an image, to check scripts/face_reference.py (and so
`tandem-wearable face`) against the real thing: the mediapipe 0.10.21
wheel's FaceDetection (short range, min confidence 0.5) and FaceMesh
(static images, no refinement: face_landmark.tflite), in pixels.

That wheel needs numpy < 2, so it runs in a virtual environment of its own,
never in the tests':
  python3 -m venv /tmp/mpvenv
  /tmp/mpvenv/bin/pip install --no-deps mediapipe==0.10.21
  /tmp/mpvenv/bin/pip install "numpy<2" "protobuf>=4.25.3,<5" absl-py attrs flatbuffers \\
      opencv-contrib-python-headless matplotlib sentencepiece pillow
  /tmp/mpvenv/bin/python scripts/face_mediapipe.py IMAGE [--compare FACE.jsonl|reference.json]
With --compare (a `tandem-wearable face` output, or the reference's
reference.json) it prints the largest differences from MediaPipe's face.
"""

import argparse
import json

import numpy as np
from PIL import Image


def mediapipe_faces(path):
    from mediapipe.python.solutions import face_detection, face_mesh

    img = np.asarray(Image.open(path).convert("RGB"))
    h, w = img.shape[:2]
    with face_detection.FaceDetection(model_selection=0, min_detection_confidence=0.5) as fd:
        dets = []
        for d in fd.process(img).detections or []:
            b = d.location_data.relative_bounding_box
            dets.append({"score": d.score[0], "box": [b.xmin * w, b.ymin * h, b.width * w, b.height * h],
                         "keypoints": [[k.x * w, k.y * h] for k in d.location_data.relative_keypoints]})
    with face_mesh.FaceMesh(static_image_mode=True, max_num_faces=4, refine_landmarks=False,
                            min_detection_confidence=0.5) as fm:
        meshes = fm.process(img).multi_face_landmarks or []
        marks = [[[p.x * w, p.y * h, p.z * w] for p in f.landmark] for f in meshes]
    return dets, marks


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("image")
    p.add_argument("--compare")
    a = p.parse_args()
    dets, marks = mediapipe_faces(a.image)
    print(json.dumps({"detections": dets, "landmarks_faces": len(marks)}))
    if a.compare:
        with open(a.compare) as f:
            text = f.read()
        faces = json.loads(text)["faces"] if a.compare.endswith(".json") else \
            json.loads(text.splitlines()[0])["faces"]
        for got, d, m in zip(faces, dets, marks):
            diff = lambda x, y: float(np.abs(np.array(x, dtype=float) - np.array(y, dtype=float)).max())
            lm = np.array(got["landmarks"], dtype=float) - np.array(m)
            print(json.dumps({"score": diff(got["score"], d["score"]), "box_px": diff(got["box"], d["box"]),
                              "keypoints_px": diff(got["keypoints"], d["keypoints"]),
                              "landmarks_xy_px": float(np.abs(lm[:, :2]).max()),
                              "landmarks_z_px": float(np.abs(lm[:, 2]).max())}))


if __name__ == "__main__":
    main()
