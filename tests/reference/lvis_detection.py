"""Reference values for LVISDetection (tests/unit/test_detection_coco.cpp, LvisCase), from lvis 0.5.3.

Writes, deterministically (numpy seed 20261128), the data of configs/examples/detection_lvis.yaml:
  configs/examples/data/detection/lvis_synthetic.json          synthetic LVIS ground truth: 60 images, 12 categories
                                       (4 rare, 4 common, 4 frequent, one of each without any
                                       instance), polygons, areas that are not the box area, a
                                       few of area 0 (LVIS leaves them out), each image's
                                       neg_category_ids and not_exhaustive_category_ids
  configs/examples/data/detection/lvis_synthetic_results.json  results with a bbox and a polygon segmentation each:
                                       jittered ground truth, wrong categories, false positives
                                       of verified-absent categories (counted) and of unverified
                                       ones (left out), score ties, more than 300 results on
                                       some images, boxes of zero width
and tests/reference/expected_lvis.json: LVISEval(gt, LVISResults(gt, results, max_dets),
iou_type).run() results per case, keyed as mmdet's LVISMetric keys them ("{iou_type}_AP", ...).
lvis 0.5.3 calls np.float, gone from NumPy 2; it is set to float (what it was an alias of) here.

Run: .venv-ref/bin/python tests/reference/lvis_detection.py
"""
import contextlib
import importlib.metadata
import io
import json
import logging
import os
import sys

import numpy as np

np.float = float  # lvis 0.5.3's accumulate() uses np.float (an alias of float until NumPy 1.24)

from lvis import LVIS, LVISEval, LVISResults  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "configs", "examples", "data", "detection")
CATS = {1: "r", 2: "r", 4: "r", 5: "r", 10: "c", 11: "c", 13: "c", 17: "c", 20: "f", 21: "f",
        25: "f", 30: "f"}
EMPTY = {5, 17, 30}  # one category per frequency without any instance
logging.getLogger().setLevel(logging.ERROR)


def polygon(rng, cx, cy, r, k):
    angles = np.sort(rng.uniform(0, 2 * np.pi, k))
    radii = r * rng.uniform(0.6, 1.0, k)
    xs, ys = cx + radii * np.cos(angles), cy + radii * np.sin(angles)
    return [round(float(v), 2) for xy in zip(xs, ys) for v in xy]


def make_data():
    rng = np.random.default_rng(20261128)
    cat_ids = sorted(CATS)
    live = [c for c in cat_ids if c not in EMPTY]
    images, anns, res = [], [], []
    ann_id = 1
    for i in range(60):
        img_id = 2000 + 5 * i
        h, w = int(rng.integers(200, 481)), int(rng.integers(200, 481))
        n_gt = int(rng.integers(0, 11)) if i % 9 != 2 else 0
        gts = []
        for _ in range(n_gt):
            cat = int(rng.choice(live))
            scale = float(rng.choice([6, 14, 30, 60, 100]))
            cx, cy = rng.uniform(scale, w - scale), rng.uniform(scale, h - scale)
            poly = polygon(rng, cx, cy, scale, int(rng.integers(3, 8)))
            xs, ys = poly[0::2], poly[1::2]
            bbox = [min(xs), min(ys), round(max(xs) - min(xs), 2), round(max(ys) - min(ys), 2)]
            area = 0.0 if rng.random() < 0.03 else round(bbox[2] * bbox[3] * 0.55, 3)
            ann = {"id": ann_id, "image_id": img_id, "category_id": cat, "bbox": bbox,
                   "area": area, "segmentation": [poly]}
            ann_id += 1
            anns.append(ann)
            gts.append(ann)
        pos = sorted({g["category_id"] for g in gts})
        others = [c for c in cat_ids if c not in pos]
        neg = sorted(int(c) for c in rng.choice(others, size=int(rng.integers(0, 4)),
                                                replace=False)) if others else []
        nel = sorted(int(c) for c in pos if rng.random() < 0.25)
        images.append({"id": img_id, "height": h, "width": w, "file_name": f"{img_id}.jpg",
                       "neg_category_ids": neg, "not_exhaustive_category_ids": nel})
        dets = []
        for g in gts:
            if rng.random() < 0.85:
                jit = [rng.normal(0, 0.05 * max(g["bbox"][2], g["bbox"][3], 1)) for _ in range(4)]
                b = [round(float(v + j), 2) for v, j in zip(g["bbox"], jit)]
                b[2], b[3] = max(b[2], 1.0), max(b[3], 1.0)
                seg = [[round(v + (jit[0] if n % 2 == 0 else jit[1]), 2)
                        for n, v in enumerate(g["segmentation"][0])]]
                cat = g["category_id"] if rng.random() > 0.1 else int(rng.choice(cat_ids))
                dets.append((cat, b, seg))
        n_fp = int(rng.integers(0, 8)) if i % 19 != 7 else 320  # > 300 on some images
        for _ in range(n_fp):
            bw, bh = float(rng.uniform(4, 120)), float(rng.uniform(4, 120))
            x, y = float(rng.uniform(0, w - bw)), float(rng.uniform(0, h - bh))
            if rng.random() < 0.02:
                bw = 0.0  # area 0: LVIS leaves it out
            b = [round(x, 2), round(y, 2), round(bw, 2), round(bh, 2)]
            seg = [[b[0], b[1], b[0] + max(b[2], 1), b[1], b[0] + max(b[2], 1), b[1] + b[3],
                    b[0], b[1] + b[3]]]
            dets.append((int(rng.choice(cat_ids)), b, seg))
        for cat, b, seg in dets:
            score = round(float(rng.uniform(0.05, 1.0)), 2)  # two decimals: ties
            res.append({"image_id": img_id, "category_id": cat, "bbox": b, "segmentation": seg,
                        "score": score})
    cats = [{"id": c, "name": f"cat{c}", "synset": f"cat{c}.n.01", "frequency": CATS[c],
             "image_count": 0, "instance_count": 0} for c in cat_ids]
    return {"images": images, "annotations": anns, "categories": cats}, res


def run(gt_path, res_path, iou_type, max_dets=300, img_ids=None, iou_thrs=None):
    with contextlib.redirect_stdout(io.StringIO()):
        gt = LVIS(gt_path)
        dt = LVISResults(gt, res_path, max_dets=max_dets)
        e = LVISEval(gt, dt, iou_type)
        if img_ids is not None:
            e.params.img_ids = list(img_ids)
        if iou_thrs is not None:
            e.params.iou_thrs = np.array(iou_thrs)
        e.params.max_dets = max_dets
        e.run()
    return e


def results(e, prefix):
    return {f"{prefix}_{k}": float(v) for k, v in e.get_results().items()}


def classwise(e, prefix):
    """Per category: the mean of precision[:, :, k, 0] > -1 (AP) and recall[:, k, 0] > -1 (AR)
    of LVISEval's accumulate(); None (NaN) without ground truth."""
    out = {}
    for k, cat in enumerate(e.params.cat_ids):
        p = e.eval["precision"][:, :, k, 0]
        r = e.eval["recall"][:, k, 0]
        out[f"{prefix}_{cat}_precision"] = float(np.mean(p[p > -1])) if (p > -1).any() else None
        out[f"{prefix}_{cat}_recall"] = float(np.mean(r[r > -1])) if (r > -1).any() else None
    return out


def main():
    gt, res = make_data()
    paths = {"gt": os.path.join(DATA, "lvis_synthetic.json"),
             "res": os.path.join(DATA, "lvis_synthetic_results.json")}
    for name, obj in (("gt", gt), ("res", res)):
        with open(paths[name], "w") as f:
            json.dump(obj, f, separators=(",", ":"))
    cases = []

    def add(name, call, values, params):
        cases.append({"name": name, "call": call, "params": params, "expected": values})

    e = run(paths["gt"], paths["res"], "bbox")
    add("bbox", "LVISEval(LVIS(gt), LVISResults(gt, 'lvis_synthetic_results.json', max_dets=300), 'bbox')"
        ".run(); get_results(); classwise from eval['precision'][:, :, k, 0] and "
        "eval['recall'][:, k, 0]", {**results(e, "bbox"), **classwise(e, "bbox")},
        {"metric": ["bbox"], "classwise": True, "cat_ids": sorted(CATS)})
    e = run(paths["gt"], paths["res"], "segm")
    add("segm", "LVISEval(..., 'segm').run(); get_results() (a result with a bbox gets area w*h "
        "in LVISResults, for segm too)", results(e, "segm"), {"metric": ["segm"]})
    e = run(paths["gt"], paths["res"], "bbox", max_dets=50)
    add("bbox_max_dets", "LVISResults(gt, results, max_dets=50); params.max_dets = 50; bbox",
        results(e, "bbox"), {"metric": ["bbox"], "max_dets": 50})
    ids = sorted(im["id"] for im in gt["images"])[1::3]
    e = run(paths["gt"], paths["res"], "bbox", img_ids=ids, iou_thrs=[0.5, 0.7, 0.75, 0.9])
    add("bbox_subset", "bbox with params.img_ids = every third image id from the second and "
        "params.iou_thrs = np.array([0.5, 0.7, 0.75, 0.9])", results(e, "bbox"),
        {"metric": ["bbox"], "img_ids": ids, "iou_thrs": [0.5, 0.7, 0.75, 0.9]})
    out = {"generated_by": "tests/reference/lvis_detection.py",
           "versions": {"lvis": importlib.metadata.version("lvis"),
                        "pycocotools": importlib.metadata.version("pycocotools"),
                        "numpy": np.__version__, "python": sys.version.split()[0]},
           "data": {k: os.path.relpath(v, ROOT) for k, v in paths.items()},
           "cases": cases,
           # What tests/integration/test_examples.cpp compares `tally run` with.
           "example": {"config": "configs/examples/detection_lvis.yaml",
                       "call": "the cases bbox (without its classwise keys) and segm",
                       "results": {"LVISDetection": {
                           **{k: v for k, v in cases[0]["expected"].items()
                              if not k.endswith(("_precision", "_recall"))},
                           **cases[1]["expected"]}}}}
    with open(os.path.join(ROOT, "tests", "reference", "expected_lvis.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", len(cases), "cases")


if __name__ == "__main__":
    main()
