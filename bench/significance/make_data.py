#!/usr/bin/env python3
"""Data for bench/significance/run.sh (the records, intervals and paired-test timings of
docs/significance.md and bench/RESULTS.md), written to the folder given (default
/tmp/tally-significance):

  acc1m/   1,000,000 samples x 10 classes: labels.npy (int64), base.npy (float32 scores, about
           55 % top-1 accuracy), cand.npy (base.npy with 0.11 % of the rows re-drawn at random:
           about -0.05 point of accuracy), eval.yaml (Accuracy top1 + top5)
  coco5k/  COCO val-size: the 100 images of tests/data/coco_val2014_100 repeated 50 times
           under new image ids (5000 images, 41,950 annotations, 36,700 bbox detections): gt.json,
           dt.json, dt2.json (10 % of the detections' scores multiplied by a uniform draw), eval.yaml

Needs numpy (tests/reference/requirements.txt).
"""

import json
import random
import sys
from pathlib import Path

import numpy as np

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tally-significance")
FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "data" / "coco_val2014_100"


def acc1m():
    d = OUT / "acc1m"
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    n, c = 1_000_000, 10
    y = rng.integers(0, c, n)
    s = rng.random((n, c), dtype=np.float32)
    s[np.arange(n), y] += 0.9 * rng.random(n, dtype=np.float32)
    np.save(d / "labels.npy", y.astype(np.int64))
    np.save(d / "base.npy", s)
    rng2 = np.random.default_rng(1)
    s2 = s.copy()
    flip = rng2.random(n) < 0.0011
    s2[flip] = rng2.random((int(flip.sum()), c), dtype=np.float32)
    np.save(d / "cand.npy", s2)
    (d / "eval.yaml").write_text(
        "data:\n  type: npy\n  batch_size: 4096\n  fields:\n    pred_scores: base.npy\n"
        "    gt_labels: labels.npy\nmetrics:\n  - type: Accuracy\n    topk: [1, 5]\n")
    a, b = s.argmax(1) == y, s2.argmax(1) == y
    print(f"acc1m: top-1 {a.mean():.6f} -> {b.mean():.6f}, {int((a & ~b).sum())} worse, "
          f"{int((~a & b).sum())} better")


def coco5k():
    if not FIXTURES.exists():
        print(f"coco5k: skipped, {FIXTURES} is absent")
        return
    d = OUT / "coco5k"
    d.mkdir(parents=True, exist_ok=True)
    gt = json.loads((FIXTURES / "instances_val2014_100.json").read_text())
    dt = json.loads((FIXTURES / "instances_val2014_fakebbox100_results.json").read_text())
    imgs, anns, dets, aid = [], [], [], 1
    for r in range(50):
        off = r * 10_000_000
        imgs += [dict(im, id=im["id"] + off) for im in gt["images"]]
        for a in gt["annotations"]:
            anns.append(dict(a, id=aid, image_id=a["image_id"] + off))
            aid += 1
        dets += [dict(x, image_id=x["image_id"] + off) for x in dt]
    (d / "gt.json").write_text(json.dumps(dict(gt, images=imgs, annotations=anns)))
    (d / "dt.json").write_text(json.dumps(dets))
    random.seed(0)
    for x in dets:
        if random.random() < 0.1:
            x["score"] *= random.random()
    (d / "dt2.json").write_text(json.dumps(dets))
    (d / "eval.yaml").write_text(
        "data:\n  type: coco_json\n  annotations: gt.json\n  results: dt.json\nmetrics:\n"
        "  - type: COCODetection\n    metric: [bbox]\n")
    print(f"coco5k: {len(imgs)} images, {len(anns)} annotations, {len(dets)} detections")


acc1m()
coco5k()
