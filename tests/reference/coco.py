"""Reference data and values for the detection plugin's COCODetection (tests/unit/test_detection_coco.cpp).

Writes, deterministically (numpy seed 20241122):
  tests/data/detection/coco_gt.json         synthetic COCO ground truth: 60 images, 6 categories
                                            (ids include 0), polygons, crowd RLE (uncompressed),
                                            annotation ids starting at 0, an `ignore` flag that
                                            pycocotools overrides, areas that are not the box area
  tests/data/detection/coco_bbox.json       bbox results: score ties, >100 detections on some
                                            images, wrong categories, false positives
  tests/data/detection/coco_segm.json       segm results (compressed RLE, no bbox)
the example data of configs/examples/detection.yaml (configs/examples/data/detection/: the first
40 images by id of tests/data/coco_val2014_100, real COCO val2014 annotations, CC BY 4.0,
with that fixture's detections, bbox and segmentation merged entry by entry),
and tests/reference/expected_coco.json: pycocotools 2.0.11 COCOeval stats for several settings,
mmeval-style classwise AP, and maskApi results (pycocotools.mask) for the RLE port.

Run: .venv-ref/bin/python tests/reference/coco.py
"""
import contextlib
import io
import json
import os
import sys

import numpy as np
import importlib.metadata
import pycocotools.mask as mask_util
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "detection")
CATS = [0, 1, 3, 7, 12, 40]


def polygon(rng, cx, cy, r, k):
    angles = np.sort(rng.uniform(0, 2 * np.pi, k))
    radii = r * rng.uniform(0.6, 1.0, k)
    xs = cx + radii * np.cos(angles)
    ys = cy + radii * np.sin(angles)
    return [round(float(v), 2) for xy in zip(xs, ys) for v in xy]


def poly_bbox(p):
    xs, ys = p[0::2], p[1::2]
    return [min(xs), min(ys), round(max(xs) - min(xs), 2), round(max(ys) - min(ys), 2)]


def shoelace(p):
    xs, ys = np.array(p[0::2]), np.array(p[1::2])
    return float(0.5 * abs(np.dot(xs, np.roll(ys, 1)) - np.dot(ys, np.roll(xs, 1))))


def make_data():
    rng = np.random.default_rng(20241122)
    images, anns, bbox_res, segm_res, poly_res = [], [], [], [], []
    ann_id = 0  # the first annotation has id 0: pycocotools reads a match to it as no match
    for i in range(60):
        img_id = int(1000 + 7 * i) if i != 5 else 0  # an image id of 0 too
        h, w = int(rng.integers(200, 641)), int(rng.integers(200, 641))
        images.append({"id": img_id, "height": h, "width": w, "file_name": f"{img_id}.jpg"})
        n_gt = int(rng.integers(0, 13)) if i % 10 != 3 else 0
        gts = []
        for _ in range(n_gt):
            cat = int(rng.choice(CATS))
            scale = float(rng.choice([6, 14, 30, 70, 110]))
            cx, cy = rng.uniform(0, w), rng.uniform(0, h)
            crowd = rng.random() < 0.07
            if crowd:
                x0, y0 = int(rng.integers(0, w - 20)), int(rng.integers(0, h - 20))
                x1, y1 = min(w, x0 + int(rng.integers(10, 150))), min(h, y0 + int(rng.integers(10, 150)))
                m = np.zeros((h, w), dtype=np.uint8, order="F")
                m[y0:y1, x0:x1] = 1
                rle = mask_util.encode(m)
                seg = {"size": [h, w], "counts": [int(c) for c in rle_counts(rle)]}
                bbox = [float(x0), float(y0), float(x1 - x0), float(y1 - y0)]
                area = float(mask_util.area(rle))
            else:
                k = int(rng.integers(3, 9))
                parts = [polygon(rng, cx, cy, scale, k)]
                if rng.random() < 0.15:  # a second part
                    parts.append(polygon(rng, cx + scale, cy, scale / 2, 5))
                seg = parts
                bbox = poly_bbox(parts[0])
                area = round(sum(shoelace(p) for p in parts), 3)
            ann = {"id": ann_id, "image_id": img_id, "category_id": cat, "bbox": bbox,
                   "area": area, "iscrowd": int(crowd), "segmentation": seg}
            if rng.random() < 0.05:
                ann["ignore"] = 1  # pycocotools overrides this with iscrowd
            ann_id += 1 if ann_id != 0 else 5
            anns.append(ann)
            gts.append(ann)
        # Detections: jittered ground truth, some with a wrong category, plus false positives.
        dets = []
        for g in gts:
            if rng.random() < 0.85:
                jit = [rng.normal(0, 0.04 * max(g["bbox"][2], g["bbox"][3], 1)) for _ in range(4)]
                b = [round(float(v + j), 2) for v, j in zip(g["bbox"], jit)]
                b[2], b[3] = max(b[2], 1.0), max(b[3], 1.0)
                cat = g["category_id"] if rng.random() > 0.1 else int(rng.choice(CATS))
                src = None
                if isinstance(g["segmentation"], list):  # the GT polygon, moved by the jitter
                    src = [[v + (jit[0] if n % 2 == 0 else jit[1]) for n, v in enumerate(p)]
                           for p in g["segmentation"]]
                dets.append((cat, b, src))
        n_fp = int(rng.integers(0, 6)) if i % 17 != 4 else 130  # >100 on some images
        for _ in range(n_fp):
            bw, bh = float(rng.uniform(4, 150)), float(rng.uniform(4, 150))
            b = [round(float(rng.uniform(0, w - 4)), 2), round(float(rng.uniform(0, h - 4)), 2),
                 round(bw, 2), round(bh, 2)]
            dets.append((int(rng.choice(CATS)), b, None))
        for cat, b, src in dets:
            score = round(float(rng.uniform(0.05, 1.0)), 2)  # two decimals: many ties
            bbox_res.append({"image_id": img_id, "category_id": cat, "bbox": b, "score": score})
            x1, y1 = b[0], b[1]
            x2, y2 = min(b[0] + b[2], w - 1), min(b[1] + b[3], h - 1)
            cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
            polys = src if src is not None else [[x1, cy, cx, y1, x2, cy, cx, y2]]  # or a diamond
            rle = mask_util.merge(mask_util.frPyObjects(polys, h, w))
            segm_res.append({"image_id": img_id, "category_id": cat,
                             "segmentation": {"size": [h, w], "counts": rle["counts"].decode()},
                             "score": score})
            # The same result with its polygons and its box (pycocotools' loadRes keeps the box;
            # annToRLE rasterises the polygons); every 9th also gets a vertex far outside the
            # image (no randomness drawn: the other files stay as they were).
            ppolys = [list(p) for p in polys]
            if len(poly_res) % 9 == 4:
                ppolys[0] = ppolys[0][:2] + [x1 - 1.5e5, y1 + 4e4] + ppolys[0][2:]
            poly_res.append({"image_id": img_id, "category_id": cat, "bbox": b,
                             "segmentation": ppolys, "score": score})
    cats = [{"id": c, "name": f"cat{c}", "supercategory": "x"} for c in CATS + [99]]  # 99: no GT
    gt = {"images": images, "annotations": anns, "categories": cats}
    return gt, bbox_res, segm_res, poly_res


def rle_counts(rle):
    """Uncompressed counts of a compressed RLE (pycocotools has no direct call)."""
    m = mask_util.decode(rle)
    flat = m.flatten(order="F")
    counts, prev, run = [], 0, 0
    for v in flat:
        if v != prev:
            counts.append(run)
            run, prev = 0, v
        run += 1
    counts.append(run)
    return counts


def run_eval(gt_path, res, iou_type, use_cats=True, iou_thrs=None, max_dets=None, img_ids=None):
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(gt_path)
        dt = gt.loadRes(res)
        e = COCOeval(gt, dt, iou_type)
        if not use_cats:
            e.params.useCats = 0
        if iou_thrs is not None:
            e.params.iouThrs = np.array(iou_thrs)
        if max_dets is not None:
            e.params.maxDets = list(max_dets)
        if img_ids is not None:
            e.params.imgIds = list(img_ids)
        e.evaluate()
        e.accumulate()
        e.summarize()
    return e


def img_id_subset(gt_path):
    ids = sorted(im["id"] for im in json.load(open(gt_path))["images"])
    return ids[::2] + [999999]


def keys(prefix, nums):
    n0, n1, n2 = nums
    names = ["mAP", "mAP_50", "mAP_75", "mAP_s", "mAP_m", "mAP_l", f"AR@{n0}", f"AR@{n1}",
             f"AR@{n2}", f"AR_s@{n2}", f"AR_m@{n2}", f"AR_l@{n2}"]
    return [f"{prefix}_{n}" if prefix else n for n in names]


def stats_map(e, prefix, nums=(1, 10, 100), proposal=False):
    ks = keys(prefix, nums)
    vals = [float(v) for v in e.stats]
    if proposal:
        return dict(zip(ks[6:], vals[6:]))
    return dict(zip(ks, vals))


def classwise(e, prefix):
    """mmeval's classwise AP per category, and tally's AR per category (the same mean over
    eval['recall'][:, k, 0, -1]); None (NaN) without ground truth."""
    out = {}
    precisions, recalls = e.eval["precision"], e.eval["recall"]
    for idx, cat in enumerate(e.params.catIds):
        p = precisions[:, :, idx, 0, -1]
        p = p[p > -1]
        r = recalls[:, idx, 0, -1]
        r = r[r > -1]
        out[f"{prefix}_{cat}_precision"] = float(np.mean(p)) if p.size else None  # None: NaN
        out[f"{prefix}_{cat}_recall"] = float(np.mean(r)) if r.size else None
    return out


def mask_cases():
    rng = np.random.default_rng(7)
    cases = []
    for i in range(12):
        h, w = int(rng.integers(20, 90)), int(rng.integers(20, 90))
        k = int(rng.integers(3, 10))
        polys = [polygon(rng, w / 2, h / 2, min(h, w) / 2 + 4, k)]  # may cross the border
        if i % 3 == 0:
            polys.append(polygon(rng, w / 3, h / 3, min(h, w) / 4, 4))
        if i == 5:
            polys = [[2.5, 2.5, 10.5, 2.5, 10.5, 7.25, 2.5, 7.25]]  # the fractional-box traps
        rles = mask_util.frPyObjects(polys, h, w)
        merged = mask_util.merge(rles)
        cases.append({
            "h": h, "w": w, "polygons": polys,
            "counts": [int(c) for c in rle_counts(merged)],
            "string": merged["counts"].decode(),
            "area": int(mask_util.area(merged)),
            "bbox": [float(v) for v in mask_util.toBbox(merged)],
        })
    # Polygons far outside the image (issue 16): pycocotools walks every upsampled point of
    # their edges; tally must give the same masks. Fixed values (no randomness drawn).
    for h, w, polys in (
            (31, 47, [[-1.0e5, 10.0, 20.0, -2.0e5, 40.5, 25.25]]),
            (40, 40, [[-5.0e4, -5.0e4, 5.0e4, -5.0e4, 5.0e4, 5.0e4, -5.0e4, 5.0e4]]),
            (25, 60, [[3.0, 4.0, 1.2e5, 20.0, 2.0, 21.0], [10.0, 10.0, 20.0, 3.0, 30.0, 12.5]]),
            (33, 29, [[-7.0e4, 16.6, 14.2, 15.0, 9.0e4, 17.3, 15.1, 2.0e5]]),
            (17, 23, [[-3.3e4, -1.0e4, 40.0, 9.5, 11.0, 3.0e4, -2.0, 8.0]])):
        rles = mask_util.frPyObjects(polys, h, w)
        merged = mask_util.merge(rles)
        cases.append({
            "h": h, "w": w, "polygons": polys,
            "counts": [int(c) for c in rle_counts(merged)],
            "string": merged["counts"].decode(),
            "area": int(mask_util.area(merged)),
            "bbox": [float(v) for v in mask_util.toBbox(merged)],
        })
    # IoU between the masks of equal size: pairs (d, g), crowd flags alternate.
    ious = []
    for a in range(len(cases)):
        for b in range(len(cases)):
            ca, cb = cases[a], cases[b]
            if (ca["h"], ca["w"]) != (cb["h"], cb["w"]):
                continue
            ra = {"size": [ca["h"], ca["w"]], "counts": ca["string"].encode()}
            rb = {"size": [cb["h"], cb["w"]], "counts": cb["string"].encode()}
            for crowd in (0, 1):
                ious.append({"d": a, "g": b, "crowd": crowd,
                             "iou": float(mask_util.iou([ra], [rb], [crowd])[0][0])})
    # A few more with shifted copies so that every case has partners.
    for a, c in enumerate(cases):
        shifted = [[v + 1.5 for v in p] for p in c["polygons"]]
        rs = mask_util.merge(mask_util.frPyObjects(shifted, c["h"], c["w"]))
        ra = {"size": [c["h"], c["w"]], "counts": c["string"].encode()}
        for crowd in (0, 1):
            ious.append({"d": a, "shifted": [int(v) for v in rle_counts(rs)], "crowd": crowd,
                         "iou": float(mask_util.iou([rs], [ra], [crowd])[0][0])})
    return cases, ious


FIXTURE = os.path.join(ROOT, "tests", "data", "coco_val2014_100")
EXAMPLE = os.path.join(ROOT, "configs", "examples", "data", "detection")


def make_example():
    """The example data (from the fixture tests/data/coco_val2014_100); returns the expected
    values."""
    gt = json.load(open(os.path.join(FIXTURE, "instances_val2014_100.json")))
    ids = sorted(im["id"] for im in gt["images"])[:40]
    keep = set(ids)
    sub = {"info": gt.get("info", {}), "licenses": gt.get("licenses", []),
           "images": [im for im in gt["images"] if im["id"] in keep],
           "annotations": [a for a in gt["annotations"] if a["image_id"] in keep],
           "categories": gt["categories"]}
    bbox = json.load(open(os.path.join(FIXTURE, "instances_val2014_fakebbox100_results.json")))
    segm = json.load(open(os.path.join(FIXTURE, "instances_val2014_fakesegm100_results.json")))
    res = []
    for b, m in zip(bbox, segm):
        assert (b["image_id"], b["category_id"], b["score"]) == \
            (m["image_id"], m["category_id"], m["score"])
        if b["image_id"] in keep:
            res.append({**b, "segmentation": m["segmentation"]})
    os.makedirs(EXAMPLE, exist_ok=True)
    paths = (os.path.join(EXAMPLE, "instances_val2014_40.json"),
             os.path.join(EXAMPLE, "results_val2014_40.json"))
    for path, obj in zip(paths, (sub, res)):
        with open(path, "w") as f:
            json.dump(obj, f, separators=(",", ":"))
    expected = {}
    for kind, use_cats in (("bbox", True), ("segm", True), ("proposal", False)):
        e = run_eval(paths[0], paths[1], "segm" if kind == "segm" else "bbox", use_cats=use_cats)
        expected.update(stats_map(e, "" if kind == "proposal" else kind, proposal=not use_cats))
    return {"name": "example", "call": "COCOeval(gt, gt.loadRes(results_val2014_40.json), "
            "iouType) for bbox, segm, and bbox with useCats = 0 (proposal); a result holding "
            "a bbox gets area w*h in loadRes, for segm too",
            "config": "configs/examples/detection.yaml", "expected": expected}


def example_results(case):
    """The example case as configs/examples/detection.yaml labels its results: COCODetection
    (bbox and segm) and proposals (class-agnostic recall)."""
    e = case["expected"]
    return {"config": case["config"], "call": case["call"], "results": {
        "COCODetection": {k: v for k, v in e.items() if k.startswith(("bbox_", "segm_"))},
        "proposals": {k: v for k, v in e.items() if not k.startswith(("bbox_", "segm_"))}}}


def main():
    os.makedirs(DATA, exist_ok=True)
    example = make_example()
    gt, bbox_res, segm_res, poly_res = make_data()
    paths = {n: os.path.join(DATA, f"coco_{n}.json") for n in ("gt", "bbox", "segm", "segm_poly")}
    for name, obj in (("gt", gt), ("bbox", bbox_res), ("segm", segm_res), ("segm_poly", poly_res)):
        with open(paths[name], "w") as f:
            json.dump(obj, f, separators=(",", ":"))

    versions = {"pycocotools": importlib.metadata.version("pycocotools"), "numpy": np.__version__,
                "python": sys.version.split()[0]}
    cases = []

    def add(name, call, values, **extra):
        cases.append({"name": name, "call": call, "expected": values, **extra})

    e = run_eval(paths["gt"], paths["bbox"], "bbox")
    add("bbox", "COCOeval(gt, gt.loadRes('coco_bbox.json'), 'bbox'); evaluate(); accumulate(); "
        "summarize(); stats", stats_map(e, "bbox"), params={"metric": ["bbox"]})
    add("bbox_classwise", "the same; mmeval classwise: np.mean(p[p > -1]) of "
        "eval['precision'][:, :, k, 0, -1] per category (NaN without ground truth), and the "
        "same of eval['recall'][:, k, 0, -1]",
        {**stats_map(e, "bbox"), **classwise(e, "bbox")},
        params={"metric": ["bbox"], "classwise": True, "cat_ids": CATS + [99]})
    e = run_eval(paths["gt"], paths["segm"], "segm")
    add("segm", "COCOeval(gt, gt.loadRes('coco_segm.json'), 'segm'); stats", stats_map(e, "segm"),
        params={"metric": ["segm"]}, results="segm")
    e = run_eval(paths["gt"], paths["segm_poly"], "segm")
    add("segm_polygons", "COCOeval(gt, gt.loadRes('coco_segm_poly.json'), 'segm'); stats: results "
        "with polygon segmentations and a bbox (loadRes keeps them; annToRLE rasterises them "
        "with frPyObjects(polygons, h, w) and merges), some with a vertex 1.5e5 px outside the "
        "image", stats_map(e, "segm"), params={"metric": ["segm"]}, results="segm_poly")
    e = run_eval(paths["gt"], paths["bbox"], "bbox", use_cats=False)
    add("proposal", "COCOeval(..., 'bbox') with params.useCats = 0 (mmeval's proposal); "
        "stats[6:12]", stats_map(e, "", proposal=True), params={"metric": ["proposal"]})
    e = run_eval(paths["gt"], paths["bbox"], "bbox", use_cats=False, max_dets=[10, 50, 100])
    add("proposal_nums", "the same with params.maxDets = [10, 50, 100]",
        stats_map(e, "", (10, 50, 100), proposal=True),
        params={"metric": ["proposal"], "proposal_nums": [10, 50, 100]})
    e = run_eval(paths["gt"], paths["bbox"], "bbox", use_cats=False)
    add("bbox_no_cats", "COCOeval(gt, gt.loadRes('coco_bbox.json'), 'bbox') with "
        "params.useCats = 0; the 12 stats", stats_map(e, "bbox"),
        params={"metric": ["bbox"], "use_cats": False})
    e = run_eval(paths["gt"], paths["segm"], "segm", use_cats=False)
    add("segm_no_cats", "COCOeval(gt, gt.loadRes('coco_segm.json'), 'segm') with "
        "params.useCats = 0; the 12 stats", stats_map(e, "segm"),
        params={"metric": ["segm"], "use_cats": False}, results="segm")
    subset = img_id_subset(paths["gt"])
    e = run_eval(paths["gt"], paths["bbox"], "bbox", img_ids=subset)
    add("bbox_img_ids", "COCOeval bbox with params.imgIds = every other image id of the ground "
        "truth (ascending) and 999999 (no such image)", stats_map(e, "bbox"),
        params={"metric": ["bbox"], "img_ids": subset})
    e = run_eval(paths["gt"], paths["bbox"], "bbox", use_cats=False, img_ids=subset)
    add("proposal_img_ids", "the same subset with params.useCats = 0 (proposal); stats[6:12]",
        stats_map(e, "", proposal=True), params={"metric": ["proposal"], "img_ids": subset})
    thrs = [0.5, 0.6, 0.75, 0.9]
    e = run_eval(paths["gt"], paths["bbox"], "bbox", iou_thrs=thrs)
    add("bbox_iou_thrs", "COCOeval bbox with params.iouThrs = np.array([0.5, 0.6, 0.75, 0.9])",
        stats_map(e, "bbox"), params={"metric": ["bbox"], "iou_thrs": thrs})
    e = run_eval(paths["gt"], paths["bbox"], "bbox", max_dets=[5, 20, 60])
    add("bbox_max_dets", "COCOeval bbox with params.maxDets = [5, 20, 60] (stats[0] reads maxDets "
        "== 100: -1)", stats_map(e, "bbox", (5, 20, 60)),
        params={"metric": ["bbox"], "proposal_nums": [5, 20, 60]})
    # xyxy input: the C++ test feeds [x, y, x + w, y + h]; mmeval converts back with x2 - x1.
    res_xyxy = json.load(open(paths["bbox"]))
    gt_xyxy = json.load(open(paths["gt"]))
    for r in res_xyxy + gt_xyxy["annotations"]:
        x, y, w, h = r["bbox"]
        x2, y2 = x + w, y + h
        r["bbox"] = [x, y, x2 - x, y2 - y]
    for a in gt_xyxy["annotations"]:
        pass  # areas unchanged: the test gives gt_areas
    with contextlib.redirect_stdout(io.StringIO()):
        g = COCO()
        g.dataset = gt_xyxy
        g.createIndex()
        d = g.loadRes(res_xyxy)
        ev = COCOeval(g, d, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    add("bbox_xyxy", "boxes given as [x, y, x + w, y + h]; pycocotools on [x1, y1, x2 - x1, "
        "y2 - y1] (mmeval's xyxy2xywh)", stats_map(ev, "bbox"), params={"metric": ["bbox"]})

    cases.append(example)
    m_cases, m_ious = mask_cases()
    out = {
        "generated_by": "tests/reference/coco.py",
        "versions": versions,
        "data": {k: os.path.relpath(v, ROOT) for k, v in paths.items()},
        "cases": cases,
        # What tests/integration/test_examples.cpp compares `tally run` with: the results of
        # configs/examples/detection.yaml by metric label.
        "example": example_results(example),
        "masks": {"call": "pycocotools.mask.frPyObjects(polygons, h, w) -> merge -> area, "
                  "toBbox, counts; iou([d], [g], [crowd])", "cases": m_cases, "ious": m_ious},
    }
    with open(os.path.join(ROOT, "tests", "reference", "expected_coco.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", len(cases), "cases,", len(m_cases), "mask cases,", len(m_ious), "ious")


if __name__ == "__main__":
    main()
