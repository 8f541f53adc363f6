"""Side-by-side DOTA rotated-box mAP: mmeval 0.2.1's DOTAMeanAP (no mmcv: rotated IoU through
OpenCV, as tally matches it) and `tally run` with DOTAMeanAP, on the same synthetic DOTA-like
data; checks that the results are equal and prints both times and their ratio.

    .venv-ref/bin/python bench/detection/dota.py --tally build/bin/tally [--images 2000]
        [--out DIR] [--threads 1]

Data (numpy seed 2028): IMAGES aerial images of 1024 x 1024, CLASSES classes (DOTA-like kinds:
small / large vehicles, planes, ships, long harbors and bridges, tanks, courts...), about GTS
ground-truth rotated boxes per image (cx, cy, w, h, angle in le90), about PREDS predictions per
image: 90% of the ground truth detected (centre, size and angle jittered), 10% of those twice,
the rest false positives; unique scores, higher for
detections than for false positives. One JSON line per image (2 decimals, angles 4), read by
tally's jsonl reader and by this script for mmeval (float64, as the reader reads them).

Times: mmeval: DOTAMeanAP(...)(predictions, groundtruths) in this process (nproc=1, the arrays
already built: the metric alone); tally: the whole `tally run` process (start, plugin loading,
JSON parsing, the metric, the output), best of --repeat runs.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HALF_PI = np.pi / 2
# (long side range, aspect ratio range) per kind; class c uses kind c % len(KINDS).
KINDS = [(10, 30, 1.5, 2.5), (30, 90, 2.5, 5.0), (40, 130, 0.8, 1.25), (20, 120, 2.5, 5.0),
         (60, 300, 3.0, 8.0), (20, 60, 1.0, 1.6), (25, 80, 1.5, 2.5)]


def wrap(a):
    return (a + HALF_PI) % np.pi - HALF_PI


def make(path, n_images, classes, gts, preds):
    rng = np.random.default_rng(2028)
    lines, raw = [], []
    total_preds = 0
    for i in range(n_images):
        g = int(rng.poisson(gts))
        gl = rng.integers(0, classes, g)
        kind = np.array([KINDS[c % len(KINDS)] for c in gl]).reshape(-1, 4)
        long_side = rng.uniform(kind[:, 0], kind[:, 1])
        short = long_side / rng.uniform(kind[:, 2], kind[:, 3])
        swap = rng.random(g) < 0.5
        w, h = np.where(swap, short, long_side), np.where(swap, long_side, short)
        gt = np.stack([rng.uniform(0, 1024, g), rng.uniform(0, 1024, g), w, h,
                       rng.uniform(-HALF_PI, HALF_PI, g)], 1)
        pb, pl = [], []
        for b, c in zip(gt, gl):
            for k in range(1 + (rng.random() < 0.1)):
                if k == 0 and rng.random() > 0.9:
                    break
                s = min(b[2], b[3])
                pb.append([b[0] + rng.normal(0, 0.08 * s), b[1] + rng.normal(0, 0.08 * s),
                           b[2] * rng.uniform(0.88, 1.12), b[3] * rng.uniform(0.88, 1.12),
                           wrap(b[4] + rng.normal(0, 0.06))])
                pl.append(c if rng.random() > 0.05 else rng.integers(0, classes))
        nf = max(0, int(rng.poisson(preds)) - len(pb))
        fl = rng.integers(0, classes, nf)
        kind = np.array([KINDS[c % len(KINDS)] for c in fl]).reshape(-1, 4)
        long_side = rng.uniform(kind[:, 0], kind[:, 1])
        short = long_side / rng.uniform(kind[:, 2], kind[:, 3])
        fp = np.stack([rng.uniform(0, 1024, nf), rng.uniform(0, 1024, nf), long_side, short,
                       rng.uniform(-HALF_PI, HALF_PI, nf)], 1)
        pb = np.concatenate([np.array(pb).reshape(-1, 5), fp])
        pl = np.concatenate([np.array(pl, dtype=np.int64), fl])
        total_preds += len(pl)
        # Detections score higher than false positives (Beta(5, 2) against Beta(2, 5)).
        raw.append(np.concatenate([rng.beta(5, 2, len(pb) - nf), rng.beta(2, 5, nf)]))
        lines.append((gt, gl, pb, pl))
    # Unique scores: the raw scores' ranks, (rank + 1) / (N + 1), 7 decimals (N < 10^6).
    raw = np.concatenate(raw)
    scores = (np.argsort(np.argsort(raw, kind="stable"), kind="stable") + 1) / (len(raw) + 1)
    at = 0
    with open(path, "w") as f:
        for i, (gt, gl, pb, pl) in enumerate(lines):
            def boxes(a):
                return [[round(float(v), 2) for v in b[:4]] + [round(float(b[4]), 4)] for b in a]
            n = len(pl)
            f.write(json.dumps({"image": i, "gt_bboxes": boxes(gt), "gt_labels": gl.tolist(),
                                "pred_bboxes": boxes(pb),
                                "pred_scores": [round(float(s), 7) for s in scores[at:at + n]],
                                "pred_labels": pl.tolist()}, separators=(",", ":")) + "\n")
            at += n


def read(path):
    preds, gts = [], []
    with open(path) as f:
        for line in f:
            x = json.loads(line)
            preds.append({"bboxes": np.array(x["pred_bboxes"], dtype=np.float64).reshape(-1, 5),
                          "scores": np.array(x["pred_scores"], dtype=np.float64),
                          "labels": np.array(x["pred_labels"], dtype=np.int64)})
            gts.append({"bboxes": np.array(x["gt_bboxes"], dtype=np.float64).reshape(-1, 5),
                        "labels": np.array(x["gt_labels"], dtype=np.int64),
                        "bboxes_ignore": np.zeros((0, 5)),
                        "labels_ignore": np.zeros(0, dtype=np.int64)})
    return preds, gts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tally", default="build/bin/tally")
    ap.add_argument("--out", default="/tmp/tally_bench_dota")
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--classes", type=int, default=15)
    ap.add_argument("--gts", type=int, default=50)
    ap.add_argument("--preds", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1, help="tally's DOTAMeanAP threads")
    ap.add_argument("--repeat", type=int, default=3, help="tally runs (the best is reported)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    data = os.path.join(args.out, f"dota_{args.images}.jsonl")
    if not os.path.exists(data):
        make(data, args.images, args.classes, args.gts, args.preds)
    params = {"num_classes": args.classes, "iou_thrs": [0.5, 0.75], "eval_mode": "area",
              "scale_ranges": [[0, 32], [32, 96], [96, None]]}
    config = os.path.join(args.out, "dota.yaml")
    with open(config, "w") as f:
        f.write("data:\n  type: jsonl\n  path: " + os.path.abspath(data) + "\n  fields:\n" +
                "".join(f"    {k}: {k}\n" for k in ("pred_bboxes", "pred_scores", "pred_labels",
                                                     "gt_bboxes", "gt_labels")) +
                "metrics:\n  - type: DOTAMeanAP\n" +
                "".join(f"    {k}: {json.dumps(v)}\n" for k, v in params.items()) +
                f"    threads: {args.threads}\n")

    preds, gts = read(data)
    n_pred = sum(len(p["labels"]) for p in preds)
    n_gt = sum(len(g["labels"]) for g in gts)
    print(f"data: {len(preds)} images, {args.classes} classes, {n_gt} ground-truth boxes, "
          f"{n_pred} predictions ({data})")

    result = os.path.join(args.out, "tally.json")
    tally_times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        subprocess.run([args.tally, "run", "-q", config, "-o", result], check=True)
        tally_times.append(time.perf_counter() - t0)
    with open(result) as f:
        got = json.load(f)["results"]["DOTAMeanAP"]

    from mmeval import DOTAMeanAP
    kw = dict(params, scale_ranges=[tuple(r) for r in params["scale_ranges"]])
    metric = DOTAMeanAP(nproc=1, dist_backend="non_dist", **kw)
    t0 = time.perf_counter()
    want = {k: float(v) for k, v in metric(preds, gts).items()}
    mm_time = time.perf_counter() - t0

    print(f"{'key':16} {'mmeval':>20} {'tally':>20}")
    worst = 0.0
    for k, v in want.items():
        g = got.get(k, float("nan"))
        worst = max(worst, abs(g - v) / abs(v) if v else abs(g))
        print(f"{k:16} {v:20.17g} {g:20.17g}")
    equal = list(got) == list(want) and all(got[k] == want[k] for k in want)
    print(f"equal: {'yes, bit for bit' if equal else 'no'} (largest relative difference {worst:.3g})")
    best = min(tally_times)
    print(f"mmeval 0.2.1 DOTAMeanAP (nproc=1, metric only): {mm_time:.2f} s")
    print(f"tally run (whole process, threads={args.threads}, best of {args.repeat}): {best:.3f} s "
          f"(runs: {', '.join(f'{t:.3f}' for t in tally_times)})")
    print(f"ratio mmeval / tally: {mm_time / best:.1f}x")
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
