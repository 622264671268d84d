#!/usr/bin/env python3
"""The face app's reference: MediaPipe's face pipeline re-implemented in numpy
around LiteRT, independently of the Rust code (`tandem-wearable face`).

On an image it runs, as MediaPipe's face_detection_short_range and
face_landmark_front graphs do:
  1. the detector's input: the image letterboxed into 128 x 128 (aspect kept,
     zero border), bilinear, pixels to [-1, 1];
  2. face_detection_short_range.tflite through LiteRT;
  3. the decoding: SSD anchors (4 layers, strides 8, 16, 16, 16, fixed anchor
     size, 896 anchors), scores through a sigmoid after clipping to
     [-100, 100], boxes and 6 keypoints at scale 128, score >= 0.5, weighted
     ("blending") NMS at IoU 0.3, the letterbox removed;
  4. per face, the ROI: the box's centre, a square of 1.5 x its long side,
     rotated so that the eyes (keypoints 0 and 1) lie level; the crop warped
     into 192 x 192 (bilinear, edge pixels replicated), pixels to [0, 1];
  5. face_landmark.tflite through LiteRT: 468 landmarks and a face-presence
     logit (sigmoid), the landmarks projected back into the image.

The warp follows MediaPipe's OpenCV converter: the ROI's corners map onto the
output's corners, output pixel (u, v) samples the image at
centre + R(rotation) ((u / W - 0.5) width, (v / H - 0.5) height) with pixel
centres at integer coordinates, and the bilinear value is rounded to a byte
before it is scaled.

Writes into OUT (default models/cache/face/):
  reference.json: the image's size, each face's score, box [x, y, w, h] and
                  keypoints in pixels, its ROI, presence and 468 landmarks
                  [x, y, z] in pixels (z on x's scale);
  raw.json:       the tensors the Rust tests feed to its decoder: the
                  detector's input bytes, its raw outputs, and per face the
                  crop's bytes and the landmark model's raw outputs;
  *.npy:          the same raw tensors, for numpy users.
LiteRT (ai-edge-litert), numpy and Pillow are test-time dependencies only.
scripts/face_mediapipe.py checks this reference against MediaPipe itself
(on the astronaut: the box within 5e-5 px, the landmarks within 0.02 px).
Usage: python3 scripts/face_reference.py [--image PNG] [--models DIR] [--out DIR]
"""

import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# MediaPipe's face_detection_short_range.pbtxt.
ANCHORS = dict(num_layers=4, min_scale=0.1484375, max_scale=0.75, input_h=128, input_w=128,
               offset_x=0.5, offset_y=0.5, strides=[8, 16, 16, 16], aspect_ratios=[1.0],
               interpolated_scale_aspect_ratio=1.0, fixed_anchor_size=True)
SCALE = 128.0
CLIP = 100.0
MIN_SCORE = 0.5
MIN_SUPPRESSION = 0.3
KEYPOINTS = 6
# face_detection_front_detection_to_roi.pbtxt and face_landmark_cpu.pbtxt.
ROI_SCALE = 1.5
LANDMARK_SIDE = 192
LANDMARKS = 468


def ssd_anchors(o=ANCHORS):
    """SsdAnchorsCalculator, for the options above: [x_center, y_center, w, h] per anchor."""
    def scale(i, n):
        return o["min_scale"] + (o["max_scale"] - o["min_scale"]) * i / (n - 1) if n > 1 else \
            (o["min_scale"] + o["max_scale"]) * 0.5
    out = []
    strides, n = o["strides"], o["num_layers"]
    layer = 0
    while layer < n:
        heights, widths = [], []
        last = layer
        while last < len(strides) and strides[last] == strides[layer]:
            s = scale(last, len(strides))
            for ratio in o["aspect_ratios"]:
                heights.append(s / math.sqrt(ratio))
                widths.append(s * math.sqrt(ratio))
            if o["interpolated_scale_aspect_ratio"] > 0:
                s_next = 1.0 if last == len(strides) - 1 else scale(last + 1, len(strides))
                r = o["interpolated_scale_aspect_ratio"]
                heights.append(math.sqrt(s * s_next) / math.sqrt(r))
                widths.append(math.sqrt(s * s_next) * math.sqrt(r))
            last += 1
        stride = strides[layer]
        fh, fw = math.ceil(o["input_h"] / stride), math.ceil(o["input_w"] / stride)
        for y in range(fh):
            for x in range(fw):
                for k in range(len(heights)):
                    xc, yc = (x + o["offset_x"]) / fw, (y + o["offset_y"]) / fh
                    if o["fixed_anchor_size"]:
                        out.append([xc, yc, 1.0, 1.0])
                    else:
                        out.append([xc, yc, widths[k], heights[k]])
        layer = last
    return np.array(out, dtype=np.float32)


def decode(raw_boxes, raw_scores, anchors):
    """TensorsToDetectionsCalculator: relative boxes [xmin, ymin, xmax, ymax],
    keypoints [6, 2] and scores of the anchors scoring at least MIN_SCORE."""
    raw = raw_boxes.reshape(-1, 16).astype(np.float32)
    a = anchors
    xc = raw[:, 0] / SCALE * a[:, 2] + a[:, 0]
    yc = raw[:, 1] / SCALE * a[:, 3] + a[:, 1]
    w = raw[:, 2] / SCALE * a[:, 2]
    h = raw[:, 3] / SCALE * a[:, 3]
    boxes = np.stack([xc - w / 2, yc - h / 2, xc + w / 2, yc + h / 2], axis=1)
    kx = raw[:, 4::2] / SCALE * a[:, 2:3] + a[:, 0:1]
    ky = raw[:, 5::2] / SCALE * a[:, 3:4] + a[:, 1:2]
    kps = np.stack([kx, ky], axis=2)
    scores = 1.0 / (1.0 + np.exp(-np.clip(raw_scores.reshape(-1).astype(np.float64), -CLIP, CLIP)))
    keep = scores >= MIN_SCORE
    return boxes[keep], kps[keep], scores[keep]


def iou(a, b):
    ix = min(a[2], b[2]) - max(a[0], b[0])
    iy = min(a[3], b[3]) - max(a[1], b[1])
    if ix <= 0 or iy <= 0:
        return 0.0
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def weighted_nms(boxes, kps, scores):
    """NonMaxSuppressionCalculator, WEIGHTED: the best remaining detection
    absorbs every one overlapping it by more than MIN_SUPPRESSION (itself
    included); its box and keypoints become their score-weighted means, its
    score stays its own."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    out = []
    while order:
        top = order[0]
        near = [i for i in order if iou(boxes[i], boxes[top]) > MIN_SUPPRESSION]
        order = [i for i in order if i not in near]
        wts = np.array([scores[i] for i in near], dtype=np.float64)
        total = wts.sum()
        box = (np.array([boxes[i] for i in near], dtype=np.float64) * wts[:, None]).sum(0) / total
        kp = (np.array([kps[i] for i in near], dtype=np.float64) * wts[:, None, None]).sum(0) / total
        out.append((box, kp, float(scores[top])))
    return out


def warp(rgb, cx, cy, width, height, rotation, out_w, out_h, replicate):
    """The ROI (centre, size in pixels, rotation in radians) warped into
    out_h x out_w: bilinear, rounded to bytes; outside the image zero or the
    nearest edge pixel."""
    ih, iw = rgb.shape[:2]
    u, v = np.meshgrid(np.arange(out_w, dtype=np.float64), np.arange(out_h, dtype=np.float64))
    s, t = (u / out_w - 0.5) * width, (v / out_h - 0.5) * height
    c, n = math.cos(rotation), math.sin(rotation)
    x, y = cx + c * s - n * t, cy + n * s + c * t
    x0, y0 = np.floor(x).astype(np.int64), np.floor(y).astype(np.int64)
    fx, fy = (x - x0)[..., None], (y - y0)[..., None]
    img = rgb.astype(np.float64)

    def px(xi, yi):
        inside = (xi >= 0) & (xi < iw) & (yi >= 0) & (yi < ih)
        v = img[np.clip(yi, 0, ih - 1), np.clip(xi, 0, iw - 1)]
        return v if replicate else v * inside[..., None]

    top = px(x0, y0) * (1 - fx) + px(x0 + 1, y0) * fx
    bottom = px(x0, y0 + 1) * (1 - fx) + px(x0 + 1, y0 + 1) * fx
    val = top * (1 - fy) + bottom * fy
    return np.clip(np.floor(val + 0.5), 0, 255).astype(np.uint8)


def roi(box, kp, iw, ih):
    """DetectionsToRects (rotation from the eyes) then RectTransformation
    (square on the long side, scaled 1.5): centre, side in pixels, rotation."""
    cx, cy = (box[0] + box[2]) / 2 * iw, (box[1] + box[3]) / 2 * ih
    x0, y0 = kp[0][0] * iw, kp[0][1] * ih
    x1, y1 = kp[1][0] * iw, kp[1][1] * ih
    angle = -math.atan2(-(y1 - y0), x1 - x0)
    angle = angle - 2 * math.pi * math.floor((angle + math.pi) / (2 * math.pi))
    side = max((box[2] - box[0]) * iw, (box[3] - box[1]) * ih) * ROI_SCALE
    return cx, cy, side, angle


def litert(path, x):
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]).copy() for d in it.get_output_details()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--image", default=os.path.join(ROOT, "models/cache/real/photos/astronaut.png"))
    p.add_argument("--models", default=os.path.join(ROOT, "models/cache/tflite"))
    p.add_argument("--out", default=os.path.join(ROOT, "models/cache/face"))
    a = p.parse_args()
    from PIL import Image

    if not os.path.exists(a.image) and a.image.endswith("astronaut.png"):
        subprocess.run([sys.executable, os.path.join(ROOT, "models/fetch_real.py")], check=True,
                       stdout=subprocess.DEVNULL)
    det_path = os.path.join(a.models, "face_detection_short_range.tflite")
    lm_path = os.path.join(a.models, "face_landmark.tflite")
    if not os.path.exists(det_path) and os.path.exists(os.path.join(ROOT, "models/fetch_tflite.py")):
        subprocess.run([sys.executable, os.path.join(ROOT, "models/fetch_tflite.py"),
                        "--cache", os.path.dirname(os.path.abspath(a.models))], check=True, stdout=subprocess.DEVNULL)
    os.makedirs(a.out, exist_ok=True)
    rgb = np.asarray(Image.open(a.image).convert("RGB"))
    ih, iw = rgb.shape[:2]

    # 1-3: the detector, letterboxed into a square on the long side.
    long = max(iw, ih)
    det_in = warp(rgb, iw / 2, ih / 2, long, long, 0.0, 128, 128, replicate=False)
    x = (det_in.astype(np.float32) * np.float32(2.0 / 255.0) - np.float32(1.0))[None]
    out = litert(det_path, x)
    regressors, classificators = out["regressors"], out["classificators"]
    boxes, kps, scores = decode(regressors, classificators, ssd_anchors())
    pad_x, pad_y = (long - iw) / 2 / long, (long - ih) / 2 / long
    faces, raw_faces = [], []
    for box, kp, score in weighted_nms(boxes, kps, scores):
        # The letterbox removed: relative to the image.
        box = np.array([(box[0] - pad_x) / (1 - 2 * pad_x), (box[1] - pad_y) / (1 - 2 * pad_y),
                        (box[2] - pad_x) / (1 - 2 * pad_x), (box[3] - pad_y) / (1 - 2 * pad_y)])
        kp = np.stack([(kp[:, 0] - pad_x) / (1 - 2 * pad_x), (kp[:, 1] - pad_y) / (1 - 2 * pad_y)], 1)
        # 4-5: the ROI, the crop, the landmarks.
        cx, cy, side, angle = roi(box, kp, iw, ih)
        crop = warp(rgb, cx, cy, side, side, angle, LANDMARK_SIDE, LANDMARK_SIDE, replicate=True)
        y = (crop.astype(np.float32) * np.float32(1.0 / 255.0))[None]
        lo = litert(lm_path, y)
        marks, flag = lo["conv2d_21"].reshape(LANDMARKS, 3), float(lo["conv2d_31"].reshape(-1)[0])
        c, n = math.cos(angle), math.sin(angle)
        s, t = marks[:, 0] / LANDMARK_SIDE - 0.5, marks[:, 1] / LANDMARK_SIDE - 0.5
        px = cx + (c * s - n * t) * side
        py = cy + (n * s + c * t) * side
        pz = marks[:, 2] / LANDMARK_SIDE * side
        k = len(faces)
        faces.append({
            "score": score,
            "box": [box[0] * iw, box[1] * ih, (box[2] - box[0]) * iw, (box[3] - box[1]) * ih],
            "keypoints": [[float(u * iw), float(v * ih)] for u, v in kp],
            "roi": {"center": [cx, cy], "side": side, "rotation": angle},
            "presence": 1.0 / (1.0 + math.exp(-flag)),
            "landmarks": np.stack([px, py, pz], 1).round(4).tolist(),
        })
        raw_faces.append({"crop": crop.reshape(-1).tolist(),
                          "landmarks": marks.reshape(-1).tolist(), "presence_logit": flag})
        np.save(os.path.join(a.out, f"face{k}_crop.npy"), crop)
        np.save(os.path.join(a.out, f"face{k}_conv2d_21.npy"), lo["conv2d_21"])
        np.save(os.path.join(a.out, f"face{k}_conv2d_31.npy"), lo["conv2d_31"])
    np.save(os.path.join(a.out, "detector_input.npy"), det_in)
    np.save(os.path.join(a.out, "regressors.npy"), regressors)
    np.save(os.path.join(a.out, "classificators.npy"), classificators)
    ref = {"image": os.path.basename(a.image), "width": iw, "height": ih, "faces": faces}
    raw = {"width": iw, "height": ih, "detector_input": det_in.reshape(-1).tolist(),
           "regressors": regressors.reshape(-1).tolist(),
           "classificators": classificators.reshape(-1).tolist(), "faces": raw_faces}
    # Written whole, then renamed: tests running at once never read half a file.
    for name, value in (("raw.json", raw), ("reference.json", ref)):
        path = os.path.join(a.out, name)
        with open(f"{path}.{os.getpid()}", "w") as f:
            json.dump(value, f)
        os.replace(f"{path}.{os.getpid()}", path)
    for face in faces:
        print(json.dumps({k: v for k, v in face.items() if k != "landmarks"}))


if __name__ == "__main__":
    main()
