#!/usr/bin/env python3
"""Reference data and expected values for HmeanIoU (plugins/text_detection).

(a) Writes ICDAR-style text-detection data as JSON Lines, deterministically (numpy seed
    20261127), one line an image: {"pred_polygons", "pred_polygon_lengths", "pred_scores",
    "gt_polygons", "gt_polygon_lengths", "gt_ignore_flags"} (polygons flat, cut by the lengths):
      tests/data/text_detection/quads.jsonl      30 images: rotated word boxes (4 points, ICDAR 2015 style)
                                                 in lines of text, "###" don't-care regions
                                                 (ignored), predictions from a detector's
                                                 errors: jitter, merged and split words, misses,
                                                 false alarms, low scores, duplicates
      tests/data/text_detection/curved.jsonl     16 images: curved text (CTW1500 / Total-Text style: 7 to 14
                                                 points a polygon), with a few quads among them
      tests/data/text_detection/edges.jsonl      images with no ground truth, no prediction,
                                                 neither; only ignored ground truth; a
                                                 self-intersecting (bowtie) prediction and ground
                                                 truth (shapely's buffer(0) repairs them); a
                                                 polygon given closed (last point = first); a
                                                 zero-area polygon; scores at the thresholds
                                                 (float32 rounding decides)
    and configs/examples/data/text_detection/icdar_style.jsonl for
    configs/examples/text_detection.yaml.
(b) Writes tests/reference/expected_hmean_iou.json: per case the parameters, the data file, the
    expected results (tally's keys) and the exact mmeval call.

Run in the reference environment:   .venv-ref/bin/python tests/reference/hmean_iou.py
"""

import json
import math
import platform
from pathlib import Path

import mmeval
import numpy as np
import shapely
from mmeval import HmeanIoU

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "text_detection"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "text_detection"
OUT = ROOT / "tests" / "reference" / "expected_hmean_iou.json"

rng = np.random.default_rng(20261127)


def rel(path):
    return str(Path(path).relative_to(ROOT))


def rounded(poly):
    return [round(float(v), 2) for v in poly]


def quad(cx, cy, w, h, angle):
    c, s = math.cos(angle), math.sin(angle)
    pts = []
    for dx, dy in [(-w / 2, -h / 2), (w / 2, -h / 2), (w / 2, h / 2), (-w / 2, h / 2)]:
        pts += [cx + c * dx - s * dy, cy + s * dx + c * dy]
    return rounded(pts)


def curve(cx, cy, w, h, bend, k):
    """A curved text region: k points along the top arc, k along the bottom, as CTW1500 draws it."""
    top, bottom = [], []
    for i in range(k):
        t = i / (k - 1)
        x = cx - w / 2 + w * t
        y = cy + bend * (2 * t - 1) ** 2
        top += [x, y - h / 2]
        bottom = [x, y + h / 2] + bottom
    return rounded(top + bottom)


def jitter(poly, sigma):
    return rounded(np.asarray(poly) + rng.normal(0, sigma, size=len(poly)))


def detector(gts, ignore, make_false, sigma):
    """A detector's output for the ground truth: found words (jittered), misses, duplicates,
    merged neighbours, false alarms, and detections of the don't-care regions."""
    preds, scores = [], []
    for poly, ign in zip(gts, ignore):
        r = rng.random()
        if r < 0.12 and not ign:
            continue  # missed
        preds.append(jitter(poly, sigma * (3 if r > 0.9 else 1)))
        scores.append(float(np.clip(rng.normal(0.8 if r < 0.85 else 0.45, 0.15), 0.01, 1.0)))
        if rng.random() < 0.08:  # a duplicate, lower score
            preds.append(jitter(poly, sigma))
            scores.append(float(np.clip(scores[-1] - 0.3, 0.01, 1)))
    if len(gts) >= 2 and rng.random() < 0.3:  # two neighbours merged into one box
        a, b = np.asarray(gts[0]).reshape(-1, 2), np.asarray(gts[1]).reshape(-1, 2)
        both = np.vstack([a, b])
        x0, y0 = both.min(0)
        x1, y1 = both.max(0)
        preds.append(rounded([x0, y0, x1, y0, x1, y1, x0, y1]))
        scores.append(float(rng.uniform(0.3, 0.9)))
    for _ in range(rng.poisson(1.0)):
        preds.append(make_false())
        scores.append(float(rng.uniform(0.05, 0.95)))
    return preds, [round(s, 3) for s in scores]


def quads_image():
    gts, ignore = [], []
    y = rng.uniform(30, 60)
    for _line in range(rng.integers(1, 5)):
        x = rng.uniform(10, 40)
        angle = rng.normal(0, 0.15)
        h = rng.uniform(14, 30)
        for _word in range(rng.integers(1, 5)):
            w = rng.uniform(30, 120)
            gts.append(quad(x + w / 2, y, w, h, angle))
            ignore.append(bool(rng.random() < 0.12))
            x += w + rng.uniform(8, 20)
        y += h + rng.uniform(10, 40)

    def false():
        return quad(rng.uniform(0, 640), rng.uniform(0, 480), rng.uniform(20, 80),
                    rng.uniform(10, 25), rng.normal(0, 0.3))
    preds, scores = detector(gts, ignore, false, 2.0)
    return gts, ignore, preds, scores


def curved_image():
    gts, ignore = [], []
    for _ in range(rng.integers(1, 5)):
        k = int(rng.integers(4, 8))
        g = curve(rng.uniform(100, 500), rng.uniform(60, 400), rng.uniform(80, 240),
                  rng.uniform(18, 40), rng.uniform(-30, 30), k)
        gts.append(g)
        ignore.append(bool(rng.random() < 0.1))
    if rng.random() < 0.5:
        gts.append(quad(rng.uniform(50, 600), rng.uniform(50, 400), 60, 20, 0.2))
        ignore.append(False)

    def false():
        return curve(rng.uniform(0, 600), rng.uniform(0, 450), rng.uniform(40, 120), 20,
                     rng.uniform(-15, 15), int(rng.integers(4, 8)))
    preds, scores = detector(gts, ignore, false, 3.0)
    return gts, ignore, preds, scores


def edge_images():
    sq = [0, 0, 10, 0, 10, 10, 0, 10]
    bow = [0, 0, 10, 10, 10, 0, 0, 10]  # self-intersecting
    return [
        ([], [], [sq], [0.9]),                          # no ground truth
        ([sq], [False], [], []),                        # no prediction
        ([], [], [], []),                               # neither
        ([sq], [True], [sq, [20, 20, 30, 20, 30, 30, 20, 30]], [0.9, 0.8]),  # only ignored gt
        ([bow, [20, 0, 30, 0, 30, 10, 20, 10]], [False, False],
         [bow, [20, 0, 30, 0, 30, 10, 20, 10, 20, 0]], [0.7, 0.6]),  # bowties; a closed ring
        ([sq], [False], [[0, 0, 5, 5, 10, 10], sq], [0.95, 0.5]),    # zero-area prediction
        ([sq, [12, 0, 22, 0, 22, 10, 12, 10]], [False, False],
         [sq, [12, 0, 22, 0, 22, 10, 12, 10]], [0.3, 0.6000000238418579]),  # at the thresholds
        ([sq], [False], [[0, 0, 10, 0, 10, 10, 0, 10], [0, 0, 9, 0, 9, 9, 0, 9]], [0.4, 0.9]),
        # vanilla and max_matching differ: gt A matches both predictions, gt B only the first;
        # vanilla gives A the first (1 hit), the largest matching A-second, B-first (2 hits).
        ([sq, [2, 0, 12, 0, 12, 10, 2, 10]], [False, False],
         [[1, 0, 11, 0, 11, 10, 1, 10], [-2, 0, 8, 0, 8, 10, -2, 10]], [0.8, 0.7]),
    ]


def write_jsonl(path, images):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for gts, ignore, preds, scores in images:
            f.write(json.dumps({
                "pred_polygons": [v for p in preds for v in p],
                "pred_polygon_lengths": [len(p) for p in preds],
                "pred_scores": scores,
                "gt_polygons": [v for p in gts for v in p],
                "gt_polygon_lengths": [len(p) for p in gts],
                "gt_ignore_flags": ignore,
            }) + "\n")
    return rel(path)


def mmeval_results(images, params):
    m = HmeanIoU(**params)
    preds = [[np.asarray(p, dtype=np.float64) for p in im[2]] for im in images]
    scores = [np.asarray(im[3], dtype=np.float64) for im in images]
    gts = [[np.asarray(p, dtype=np.float64) for p in im[0]] for im in images]
    flags = [np.asarray(im[1], dtype=bool) for im in images]
    res = m(preds, scores, gts, flags)
    thrs = [k for k in res if k != "best"]
    best = res["best"]
    best_thr = next(t for t in thrs if res[t] is best)
    return {
        "hmean": best["hmean"], "precision": best["precision"], "recall": best["recall"],
        "best_score_thr": float(best_thr),
        "score_thrs": [float(t) for t in thrs],
        "hmean_per_thr": [res[t]["hmean"] for t in thrs],
        "precision_per_thr": [res[t]["precision"] for t in thrs],
        "recall_per_thr": [res[t]["recall"] for t in thrs],
    }


def main():
    sets = {
        "quads": [quads_image() for _ in range(30)],
        "curved": [curved_image() for _ in range(16)],
        "edges": edge_images(),
    }
    files = {k: write_jsonl(DATA / f"{k}.jsonl", v) for k, v in sets.items()}
    plan = [
        ("quads", {}),
        ("quads", {"strategy": "max_matching"}),
        ("quads", {"match_iou_thr": 0.7, "ignore_precision_thr": 0.3,
                   "pred_score_thrs": {"start": 0.1, "stop": 1.0, "step": 0.05}}),
        ("curved", {}),
        ("curved", {"strategy": "max_matching", "match_iou_thr": 0.3}),
        ("edges", {}),
        ("edges", {"strategy": "max_matching",
                   "pred_score_thrs": {"start": 0.3, "stop": 0.61, "step": 0.3}}),
    ]
    cases = []
    for data, params in plan:
        expected = mmeval_results(sets[data], params)
        args = ", ".join(f"{k}={v!r}" for k, v in params.items())
        name = data + "".join(f"_{k}" for k in params)
        cases.append({
            "name": name, "metric": "HmeanIoU", "params": params, "data": files[data],
            "expected": expected,
            "call": f"mmeval.HmeanIoU({args})(pred_polygons, pred_scores, gt_polygons, "
                    "gt_ignore_flags) (polygons as float64 arrays, scores float64, flags bool; "
                    "'best' and each threshold's dict flattened into tally's keys)",
        })
    example_images = [quads_image() for _ in range(25)] + [curved_image() for _ in range(15)]
    example_file = write_jsonl(EXAMPLE / "icdar_style.jsonl", example_images)
    example = {"config": "configs/examples/text_detection.yaml", "data": example_file,
               "results": {"HmeanIoU": mmeval_results(example_images, {}),
                           "hmean_max_matching": mmeval_results(example_images,
                                                                {"strategy": "max_matching"})}}
    doc = {
        "generator": "tests/reference/hmean_iou.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "mmeval": mmeval.__version__, "shapely": shapely.__version__,
                     "geos": ".".join(map(str, shapely.geos_version))},
        "cases": cases,
        "example": example,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {len(cases)} cases to {rel(OUT)}")
    for c in cases:
        print(c["name"], c["expected"]["hmean"], c["expected"]["best_score_thr"])


if __name__ == "__main__":
    main()
