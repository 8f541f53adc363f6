"""Reference values for the detection plugin's DOTAMeanAP (tests/unit/test_detection_dota.cpp),
from mmeval 0.2.1 without mmcv (rotated IoU through OpenCV: opencv-python 5.0.0.93).

Writes tests/data/detection/dota_data.json (40 images: float32 rotated boxes cx, cy, w, h, angle
(radians, le90: [-pi/2, pi/2)) of DOTA-like sizes and aspect ratios, float32 scores without ties,
labels in [0, 6) with class 5 never in the ground truth, ignored boxes, predictions jittered from
the ground truth (centre, size and angle) plus duplicates and false positives; each box also as
a quadrilateral, its corners moved by N(0, 1.5) pixels: pred_qboxes, gt_qboxes, gt_qboxes_ignore)
and
tests/reference/expected_dota.json:
  cases        each case: the mmeval call and its result;
  min_area_rect  int64 quadrilaterals and cv2.minAreaRect's result on them (how mmeval's
               qbox_to_rbox turns quadrilateral boxes into rotated ones);
  rotated_iou  pairs of boxes (hard ones: identical, near-identical, nested, touching, parallel,
               tiny, huge, thin, zero-sized, angles at 0 and +-pi/2) with cv2's intersection area
               (rotatedRectangleIntersection -> convexHull -> contourArea, as mmeval's
               calculate_overlaps_rotated computes it) and mmeval's float32 IoU;
  example      configs/examples/detection_dota.yaml's data (configs/examples/data/detection/
               dota_rboxes_30.jsonl, written here) and mmeval's results on it.

Run: .venv-ref/bin/python tests/reference/dota.py
"""
import importlib.metadata
import json
import os
import sys

import cv2
import numpy as np
from mmeval import DOTAMeanAP
from mmeval.metrics.utils.bbox_overlaps_rotated import calculate_overlaps_rotated, le90_to_oc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "detection")
EXAMPLE = os.path.join(ROOT, "configs", "examples", "data", "detection")
EXAMPLE_JSONL = os.path.join(EXAMPLE, "dota_rboxes_30.jsonl")
HALF_PI = np.pi / 2

# DOTA-like object kinds: (long side range, aspect ratio range); the label picks one.
KINDS = [(10, 30, 1.5, 2.5),     # small vehicle
         (30, 90, 2.5, 5.0),     # large vehicle
         (40, 130, 0.8, 1.25),   # plane
         (60, 300, 3.0, 8.0),    # harbor / bridge: long, thin
         (20, 60, 1.0, 1.6),     # storage tank / roundabout
         (15, 40, 1.5, 3.0)]     # (class 5: predicted, never in the ground truth)


def wrap(a):
    """An angle into le90's [-pi/2, pi/2) (the same box: a turn by pi)."""
    return (a + HALF_PI) % np.pi - HALF_PI


def rboxes(rng, labels, size=1024.0):
    out = []
    for label in labels:
        lo, hi, alo, ahi = KINDS[int(label)]
        long_side = rng.uniform(lo, hi)
        short = long_side / rng.uniform(alo, ahi)
        w, h = (long_side, short) if rng.random() < 0.5 else (short, long_side)
        a = rng.uniform(-HALF_PI, HALF_PI)
        if rng.random() < 0.15:
            a = rng.choice([0.0, -HALF_PI])  # axis-aligned, as many DOTA boxes are
        out.append([rng.uniform(0, size), rng.uniform(0, size), w, h, a])
    return np.array(out, dtype=np.float32).reshape(-1, 5)


def jitter(rng, b, strength=1.0):
    cx, cy, w, h, a = (float(v) for v in b)
    s = min(w, h)
    return [cx + rng.normal(0, 0.08 * s * strength), cy + rng.normal(0, 0.08 * s * strength),
            w * rng.uniform(1 - 0.12 * strength, 1 + 0.12 * strength),
            h * rng.uniform(1 - 0.12 * strength, 1 + 0.12 * strength),
            wrap(a + rng.normal(0, 0.06 * strength))]


def make_data(rng, n_images, num_classes, gt_max, fp_max, dense_every=0):
    images = []
    for i in range(n_images):
        g = int(rng.integers(0, gt_max + 1)) if i % 13 != 6 else 0
        gl = rng.integers(0, num_classes - 1, g)
        gt = rboxes(rng, gl)
        k = int(rng.integers(0, 3))
        il = rng.integers(0, num_classes - 1, k)
        ign = rboxes(rng, il)
        preds, labels = [], []
        for b, label in list(zip(gt, gl)) + list(zip(ign, il)):
            if rng.random() < 0.85:
                preds.append(jitter(rng, b))
                labels.append(label if rng.random() > 0.08 else rng.integers(0, num_classes))
                if rng.random() < 0.15:  # a second, looser detection of the same object
                    preds.append(jitter(rng, b, 2.5))
                    labels.append(label)
        nf = int(rng.integers(0, fp_max + 1))
        if dense_every and i % dense_every == dense_every - 1:
            nf = 4 * fp_max
        if nf:
            fl = rng.integers(0, num_classes, nf)
            preds.extend(rboxes(rng, fl).tolist())
            labels.extend(fl)
        pb = np.array(preds, dtype=np.float32).reshape(-1, 5)
        pl = np.array(labels, dtype=np.int64)
        ps = rng.random(len(pl)).astype(np.float32)
        images.append({"pred_bboxes": pb, "pred_scores": ps, "pred_labels": pl,
                       "gt_bboxes": gt, "gt_labels": gl.astype(np.int64),
                       "gt_bboxes_ignore": ign, "gt_labels_ignore": il.astype(np.int64)})
    return images


def corners(rng, boxes, noise):
    """Quadrilaterals x1, y1, ..., x4, y4 (float32): the corners of rotated boxes, each moved by
    N(0, noise) pixels (DOTA's annotations are such quadrilaterals)."""
    out = []
    for cx, cy, w, h, a in boxes.astype(np.float64):
        c, s = np.cos(a), np.sin(a)
        pts = np.array([[-w / 2, -h / 2], [w / 2, -h / 2], [w / 2, h / 2], [-w / 2, h / 2]])
        pts = pts @ np.array([[c, s], [-s, c]]) + [cx, cy]
        out.append((pts + rng.normal(0, noise, pts.shape)).reshape(-1))
    return np.array(out, dtype=np.float32).reshape(-1, 8)


def add_quads(rng, images):
    for im in images:
        for name in ("pred_bboxes", "gt_bboxes", "gt_bboxes_ignore"):
            im[name.replace("bboxes", "qboxes")] = corners(rng, im[name], 1.5)


def mm_inputs(images, dtype=None, boxes="bboxes"):
    def cast(a):
        return a if dtype is None else a.astype(dtype)
    preds = [{"bboxes": cast(im["pred_" + boxes]), "scores": cast(im["pred_scores"]),
              "labels": im["pred_labels"]} for im in images]
    gts = [{"bboxes": cast(im["gt_" + boxes]), "labels": im["gt_labels"],
            "bboxes_ignore": cast(im["gt_" + boxes + "_ignore"]),
            "labels_ignore": im["gt_labels_ignore"]} for im in images]
    return preds, gts


def cv2_intersection_area(b1, b2):
    """The intersection area of two boxes exactly as calculate_overlaps_rotated computes it."""
    b1 = le90_to_oc(np.asarray(b1, np.float32)[None].copy())
    b2 = le90_to_oc(np.asarray(b2, np.float32)[None].copy())
    b1[:, 4] = b1[:, 4] * 180.0 / np.pi
    b2[:, 4] = b2[:, 4] * 180.0 / np.pi
    r1 = ((b1[0, 0], b1[0, 1]), (b1[0, 2], b1[0, 3]), b1[0, 4])
    r2 = ((b2[0, 0], b2[0, 1]), (b2[0, 2], b2[0, 3]), b2[0, 4])
    pts = cv2.rotatedRectangleIntersection(r1, r2)[1]
    if pts is None:
        return 0.0
    return float(cv2.contourArea(cv2.convexHull(pts, returnPoints=True)))


def hard_pairs(rng, n):
    """Pairs of boxes [n, 10] (float32) on which rotated IoU is hard to get bit for bit."""
    def rand(k, lo=1.0, hi=300.0):
        return np.stack([rng.uniform(0, 1000, k), rng.uniform(0, 1000, k), rng.uniform(lo, hi, k),
                         rng.uniform(lo, hi, k), rng.uniform(-HALF_PI, HALF_PI, k)], 1)
    out = []
    a = rand(n)
    b = a.copy()
    b[:, :2] += rng.normal(0, 20, (n, 2))
    b[:, 2:4] *= rng.uniform(0.7, 1.3, (n, 2))
    b[:, 4] += rng.normal(0, 0.2, n)
    out.append(np.concatenate([a, b], 1))                          # overlapping
    a = rand(n)
    out.append(np.concatenate([a, a], 1))                          # identical
    for eps in (1e-6, 1e-4, 1e-2):                                 # near-identical
        a = rand(n)
        out.append(np.concatenate([a, a + rng.normal(0, eps, a.shape)], 1))
    a = rand(n)
    b = a.copy()
    b[:, 2:4] *= rng.uniform(0.1, 0.9, (n, 1))
    out.append(np.concatenate([a, b], 1))                          # nested
    a = rand(n)
    a[:, 4] = 0
    b = a.copy()
    b[:, 0] += a[:, 2]
    out.append(np.concatenate([a, b], 1))                          # touching edges
    a = rand(n)
    a[:, :4] = np.round(a[:, :4])
    b = a.copy()
    b[:, :4] += rng.integers(-5, 6, (n, 4))
    a[:, 4] = rng.choice([0, -HALF_PI, HALF_PI, np.pi / 4, -np.pi / 4, 1e-7, -1e-7], n)
    b[:, 4] = rng.choice([0, -HALF_PI, HALF_PI, np.pi / 4], n)
    out.append(np.concatenate([a, b], 1))                          # integer, special angles
    a = rand(n, 1e-3, 1e-1)
    b = a.copy()
    b[:, :2] += rng.normal(0, 0.02, (n, 2))
    out.append(np.concatenate([a, b], 1))                          # tiny
    a = rand(n, 1e4, 1e5)
    b = a.copy()
    b[:, :2] += rng.normal(0, 1e4, (n, 2))
    b[:, 4] += rng.normal(0, 0.1, n)
    out.append(np.concatenate([a, b], 1))                          # huge
    a = rand(n)
    a[:, 2] = rng.choice([0, 1e-6, 1, 2], n)
    b = a.copy()
    b[:, 4] += rng.normal(0, 0.3, n)
    out.append(np.concatenate([a, b], 1))                          # zero-sized and thin
    a = rand(n)
    b = a.copy()
    b[:, 0] += rng.uniform(-1, 1, n) * a[:, 2]
    out.append(np.concatenate([a, b], 1))                          # parallel edges
    a = rand(n, 5, 50)
    a[:, 2] *= 8
    b = a.copy()
    b[:, 4] += rng.choice([HALF_PI, -HALF_PI, 1e-5, np.pi / 180], n)
    out.append(np.concatenate([a, b], 1))                          # long, turned
    a = rand(n)
    out.append(np.concatenate([a, rand(n)], 1))                    # mostly disjoint
    return np.concatenate(out).astype(np.float32)


def rotated_iou_section(rng, per_kind):
    pairs = hard_pairs(rng, per_kind)
    out = []
    for p in pairs:
        iou = calculate_overlaps_rotated(p[None, :5], p[None, 5:])[0, 0]
        out.append({"box1": [float(v) for v in p[:5]], "box2": [float(v) for v in p[5:]],
                    "inter": cv2_intersection_area(p[:5], p[5:]), "iou": float(iou)})
    return out


def min_area_rect_section(rng, n):
    """Quadrilaterals as qbox_to_rbox hands them to cv2.minAreaRect (int64 corners: DOTA-like
    rotated rectangles with jittered corners, random quadrilaterals, and small ones with repeated
    or collinear corners) with cv2's result (cx, cy, w, h, angle in degrees)."""
    quads = []
    for k in range(n):
        t = k % 10
        if t < 6:
            cx, cy = rng.uniform(0, 1024, 2)
            w, h = rng.uniform(2, 300, 2)
            q = corners(rng, np.array([[cx, cy, w, h, rng.uniform(-np.pi, np.pi)]]), 1.0)[0]
        elif t < 9:
            q = rng.uniform(0, 1024, 8)
        else:
            q = rng.integers(0, 6, 8).astype(np.float64)
        quads.append(np.asarray(q, np.float32).reshape(4, 2).astype(np.int64))
    out = []
    for q in quads:
        (x, y), (w, h), a = cv2.minAreaRect(q)
        out.append({"corners": q.reshape(-1).tolist(), "rect": [x, y, w, h, a]})
    return out


def classwise_expected(metric, res, iou_thrs):
    """mmeval's result with classwise=True, as tally's keys: the scalars, then AP{t}_classwise
    (the per-class AP of each threshold for the full range, from mmeval's classwise_result)."""
    full = metric.scale_ranges.index((None, None))
    out = {k: float(v) for k, v in res.items() if k != "classwise_result"}
    for i, t in enumerate(iou_thrs):
        out[f"AP{round(t * 100)}_classwise"] = [float(r["ap"][i][full])
                                                for r in res["classwise_result"]]
    return out


def example_section():
    """configs/examples/detection_dota.yaml's data: 30 images, 5 classes, as JSON lines of
    float64 numbers (rounded to 2 decimals, angles to 4), and mmeval fed those numbers."""
    rng = np.random.default_rng(2026)
    images = make_data(rng, 40, 5, 12, 6)
    images = [im for im in images if len(im["gt_labels"]) and len(im["pred_labels"])][:30]
    with open(EXAMPLE_JSONL, "w") as f:
        for i, im in enumerate(images):
            def boxes(a):
                return [[round(float(v), 2) for v in b[:4]] + [round(float(b[4]), 4)] for b in a]
            line = {"image": i, "gt_bboxes": boxes(im["gt_bboxes"]),
                    "gt_labels": [int(v) for v in im["gt_labels"]],
                    "pred_bboxes": boxes(im["pred_bboxes"]),
                    "pred_scores": [round(float(v), 6) for v in im["pred_scores"]],
                    "pred_labels": [int(v) for v in im["pred_labels"]]}
            f.write(json.dumps(line, separators=(",", ":")) + "\n")
    with open(EXAMPLE_JSONL) as f:
        lines = [json.loads(line) for line in f]
    scores = np.concatenate([x["pred_scores"] for x in lines])
    assert len(np.unique(scores)) == len(scores), "example scores must not tie"
    preds = [{"bboxes": np.array(x["pred_bboxes"], dtype=np.float64).reshape(-1, 5),
              "scores": np.array(x["pred_scores"], dtype=np.float64),
              "labels": np.array(x["pred_labels"], dtype=np.int64)} for x in lines]
    gts = [{"bboxes": np.array(x["gt_bboxes"], dtype=np.float64).reshape(-1, 5),
            "labels": np.array(x["gt_labels"], dtype=np.int64),
            "bboxes_ignore": np.zeros((0, 5)), "labels_ignore": np.zeros(0, dtype=np.int64)}
           for x in lines]
    kw = {"num_classes": 5, "iou_thrs": [0.5, 0.75], "eval_mode": "area",
          "scale_ranges": [(0, 32), (32, 96), (96, None)]}
    m = DOTAMeanAP(nproc=1, dist_backend="non_dist", **dict(kw, scale_ranges=list(kw["scale_ranges"])))
    expected = {k: float(v) for k, v in m(preds, gts).items()}
    metrics = [{"label": "DOTAMeanAP", "metric": "DOTAMeanAP",
                "params": {"num_classes": 5, "iou_thrs": [0.5, 0.75], "eval_mode": "area",
                           "scale_ranges": [[0, 32], [32, 96], [96, None]]},
                "call": f"mmeval.DOTAMeanAP(nproc=1, **{kw!r})(predictions, groundtruths)",
                "expected": expected}]
    return {"config": "configs/examples/detection_dota.yaml",
            "data": os.path.relpath(EXAMPLE_JSONL, ROOT),
            "inputs": "predictions[i] = {bboxes: pred_bboxes, scores: pred_scores, labels: "
                      "pred_labels}, groundtruths[i] = {bboxes: gt_bboxes, labels: gt_labels, "
                      "bboxes_ignore: zeros((0, 5)), labels_ignore: zeros(0)} of line i "
                      "(float64 boxes and scores, int64 labels, as the jsonl reader reads them)",
            "samples": len(lines), "metrics": metrics,
            "results": {"DOTAMeanAP": expected}}


def main():
    os.makedirs(DATA, exist_ok=True)
    rng = np.random.default_rng(17)
    images = make_data(rng, 40, 6, 14, 6, dense_every=11)
    add_quads(np.random.default_rng(18), images)
    all_scores = np.concatenate([im["pred_scores"] for im in images])
    assert len(np.unique(all_scores)) == len(all_scores), "scores must not tie"
    with open(os.path.join(DATA, "dota_data.json"), "w") as f:
        json.dump([{k: v.tolist() for k, v in im.items()} for im in images], f,
                  separators=(",", ":"))
    cases = []

    def dota(name, params, dtype=None, note=None, boxes="bboxes", **kw):
        preds, gts = mm_inputs(images, dtype, boxes)
        if "scale_ranges" in kw:  # mmeval appends (None, None) to the list it is given
            kw_call = dict(kw, scale_ranges=list(kw["scale_ranges"]))
        else:
            kw_call = kw
        m = DOTAMeanAP(nproc=1, dist_backend="non_dist", **kw_call)
        res = m(preds, gts)
        if kw.get("classwise"):
            expected = classwise_expected(m, res, kw.get("iou_thrs", [0.5]))
        else:
            expected = {k: float(v) for k, v in res.items()}
        case = {"name": name, "metric": "DOTAMeanAP", "params": params,
                "call": f"mmeval.DOTAMeanAP(nproc=1, **{kw!r})(predictions, groundtruths)",
                "expected": expected}
        if dtype is not None:
            case["inputs"] = f"boxes and scores as {np.dtype(dtype).name}"
        if boxes == "qboxes":
            case["inputs"] = ("bboxes: pred_qboxes / gt_qboxes / gt_qboxes_ignore "
                              "(quadrilaterals [n, 8], float32)")
            case["boxes"] = "qboxes"
        if note:
            case["note"] = note
        cases.append(case)

    dota("dota_default", {"num_classes": 6}, num_classes=6)
    dota("dota_area_scales", {"num_classes": 6, "eval_mode": "area", "iou_thrs": [0.5, 0.75],
                              "scale_ranges": [[0, 32], [32, 96], [96, None]]},
         num_classes=6, eval_mode="area", iou_thrs=[0.5, 0.75],
         scale_ranges=[(0, 32), (32, 96), (96, None)])
    dota("dota_11points_scales_first_full",
         {"num_classes": 6, "iou_thrs": [0.25, 0.5, 0.7],
          "scale_ranges": [[None, None], [16.5, 64], [None, 40]]},
         num_classes=6, iou_thrs=[0.25, 0.5, 0.7],
         scale_ranges=[(None, None), (16.5, 64), (None, 40)])
    dota("dota_keep_classwise", {"num_classes": 6, "drop_class_ap": False, "classwise": True,
                                 "iou_thrs": [0.3, 0.55, 0.7]},
         note="AP{t}_classwise: mmeval's classwise_result[c]['ap'][i][full range]",
         num_classes=6, drop_class_ap=False, classwise=True, iou_thrs=[0.3, 0.55, 0.7])
    dota("dota_float64_scales", {"num_classes": 6, "eval_mode": "area", "iou_thrs": [0.5, 0.6],
                                 "scale_ranges": [[0, 32], [32, 96], [96, None]]},
         dtype=np.float64, num_classes=6, eval_mode="area", iou_thrs=[0.5, 0.6],
         scale_ranges=[(0, 32), (32, 96), (96, None)])

    dota("dota_qbox", {"num_classes": 6}, boxes="qboxes", num_classes=6)
    dota("dota_qbox_area_scales", {"num_classes": 6, "eval_mode": "area",
                                   "iou_thrs": [0.5, 0.75],
                                   "scale_ranges": [[0, 32], [32, 96], [96, None]]},
         boxes="qboxes", note="mmeval counts the ground truth of a scale range by columns 2 and 3 "
         "of the quadrilaterals (x2 * y2), the matching by the areas of the converted boxes",
         num_classes=6, eval_mode="area", iou_thrs=[0.5, 0.75],
         scale_ranges=[(0, 32), (32, 96), (96, None)])

    out = {"generated_by": "tests/reference/dota.py",
           "versions": {"mmeval": importlib.metadata.version("mmeval"),
                        "opencv-python": importlib.metadata.version("opencv-python"),
                        "numpy": np.__version__, "python": sys.version.split()[0]},
           "data": "tests/data/detection/dota_data.json",
           "inputs": "predictions[i] = {bboxes, scores, labels}, groundtruths[i] = {bboxes, "
                     "labels, bboxes_ignore, labels_ignore} of image i (float32 rotated boxes "
                     "cx, cy, w, h, angle, float32 scores, int64 labels)",
           "cases": cases,
           "rotated_iou": rotated_iou_section(np.random.default_rng(3), 25),
           "min_area_rect": min_area_rect_section(np.random.default_rng(4), 400),
           "example": example_section()}
    with open(os.path.join(ROOT, "tests", "reference", "expected_dota.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    for c in cases:
        print(c["name"], c["expected"])
    print("rotated_iou pairs", len(out["rotated_iou"]))
    print("example", out["example"]["results"])


if __name__ == "__main__":
    main()
