"""Reference values for COCODetection's TIDE error breakdown (`tide: true`), from tidecv 1.0.1
(tests/unit/test_detection_coco.cpp, TideCase; cases of tests/reference/expected_tide.json).

Writes, deterministically (numpy seed 20261127):
  tests/data/detection/tide_gt.json        synthetic COCO ground truth, 60 images (listed by id),
                                           5 categories, crowds, images without ground truth
  tests/data/detection/tide_results.json   bbox results built to fall into every TIDE error:
                                           jittered boxes (correct or mislocalised), wrong
                                           categories, duplicates, background boxes, boxes in
                                           crowds, missed objects, more than 100 results on an
                                           image, scores rounded to 2 digits (ties)
and tests/reference/expected_tide.json (its "example": configs/examples/detection_analysis.yaml's
TIDE keys): per case tidecv's TIDE().evaluate(gt, results,
pos_threshold, background_threshold, mode) run, then run.ap, run.fix_main_errors() (dAP of Cls,
Loc, Both, Dupe, Bkg, Miss), run.fix_special_errors() (FalsePos, FalseNeg) and
run.count_errors(). tidecv reports AP points (0-100); the expected values are those divided by
100, the scale of COCODetection's other keys. hotcoco 1.3.0's COCOeval.tide_errors gives the same
error counts (checked here, recorded as "hotcoco_counts"); its dAP values are not tidecv's (it
integrates its own COCOeval precision), so tidecv is the reference.

tidecv walks images in the annotation file's order and tally in image-id order (the coco_json
reader's order); they differ only where scores tie across images of one category. The data here
lists images by id; for the real example data (configs/examples/data/detection) tidecv is given
the same file with its images sorted by id.

Run: .venv-ref/bin/python tests/reference/tide.py
"""
import contextlib
import importlib.metadata
import io
import json
import os
import sys
import tempfile

import numpy as np
import hotcoco
from tidecv import TIDE, datasets
from tidecv.errors.main_errors import (BackgroundError, BoxError, ClassError, DuplicateError,
                                       MissedError, OtherError)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "detection")
EXAMPLE = os.path.join(ROOT, "configs", "examples", "data", "detection")
FIXTURE = os.path.join(ROOT, "tests", "data", "coco_val2014_100")
CATS = [1, 2, 4, 7, 9]
ERRORS = [(ClassError, "Cls"), (BoxError, "Loc"), (OtherError, "Both"), (DuplicateError, "Dupe"),
          (BackgroundError, "Bkg"), (MissedError, "Miss")]


def make_data():
    rng = np.random.default_rng(20261127)
    images, anns, res = [], [], []
    ann_id = 1

    def box(w, h, side=None):
        s = side if side is not None else float(rng.choice([12, 30, 60, 110, 180]))
        bw, bh = s * rng.uniform(0.6, 1.4), s * rng.uniform(0.6, 1.4)
        return [round(float(rng.uniform(0, w - bw)), 2), round(float(rng.uniform(0, h - bh)), 2),
                round(float(bw), 2), round(float(bh), 2)]

    def shifted(b, frac):
        # A box moved by `frac` of its size: frac 0.05 keeps IoU high, 0.45 drops it to 0.1-0.5.
        dx, dy = b[2] * frac * rng.choice([-1, 1]), b[3] * frac * rng.choice([-1, 1])
        return [round(b[0] + dx, 2), round(b[1] + dy, 2), b[2], b[3]]

    def poly(b):  # the box as a polygon (tidecv rasterises every annotation's segmentation)
        x0, y0, x1, y1 = b[0], b[1], round(b[0] + b[2], 2), round(b[1] + b[3], 2)
        return [[x0, y0, x1, y0, x1, y1, x0, y1]]

    def score():
        return round(float(rng.uniform(0.05, 1.0)), 2)  # two digits: ties within and across images

    for i in range(60):
        img_id = 100 + 7 * i
        w, h = int(rng.integers(320, 641)), int(rng.integers(240, 481))
        images.append({"id": img_id, "width": w, "height": h, "file_name": f"{img_id}.jpg"})
        n_gt = 0 if i % 13 == 5 else int(rng.integers(1, 9))
        gts = []
        for _ in range(n_gt):
            b = box(w, h)
            cat = int(rng.choice(CATS))
            anns.append({"id": ann_id, "image_id": img_id, "category_id": cat, "bbox": b,
                         "area": round(b[2] * b[3], 2), "iscrowd": 0, "segmentation": poly(b)})
            gts.append((b, cat))
            ann_id += 1
        if i % 4 == 1:  # a crowd region, with results inside it
            b = box(w, h, 150.0)
            cat = int(rng.choice(CATS))
            anns.append({"id": ann_id, "image_id": img_id, "category_id": cat, "bbox": b,
                         "area": round(b[2] * b[3], 2), "iscrowd": 1, "segmentation": poly(b)})
            ann_id += 1
            for _ in range(int(rng.integers(1, 4))):
                inner = [round(b[0] + b[2] * 0.2, 2), round(b[1] + b[3] * 0.2, 2),
                         round(b[2] * 0.5, 2), round(b[3] * 0.5, 2)]
                res.append({"image_id": img_id, "category_id": cat if rng.random() < 0.8 else
                            int(rng.choice(CATS)), "bbox": inner, "score": score()})
        if i % 17 == 3:
            continue  # no results for this image: every object missed
        for b, cat in gts:
            r = rng.random()
            if r < 0.12:
                continue  # missed
            if r < 0.45:
                res.append({"image_id": img_id, "category_id": cat, "bbox": shifted(b, 0.05),
                            "score": score()})
            elif r < 0.6:  # localisation error
                res.append({"image_id": img_id, "category_id": cat, "bbox": shifted(b, 0.45),
                            "score": score()})
            elif r < 0.72:  # classification error
                other = int(rng.choice([c for c in CATS if c != cat]))
                res.append({"image_id": img_id, "category_id": other, "bbox": shifted(b, 0.04),
                            "score": score()})
            elif r < 0.8:  # both
                other = int(rng.choice([c for c in CATS if c != cat]))
                res.append({"image_id": img_id, "category_id": other, "bbox": shifted(b, 0.45),
                            "score": score()})
            else:  # correct plus a duplicate
                res.append({"image_id": img_id, "category_id": cat, "bbox": shifted(b, 0.03),
                            "score": score()})
                res.append({"image_id": img_id, "category_id": cat, "bbox": shifted(b, 0.08),
                            "score": score()})
        for _ in range(int(rng.integers(0, 4))):  # background
            res.append({"image_id": img_id, "category_id": int(rng.choice(CATS)),
                        "bbox": box(w, h, 20.0), "score": score()})
        if i == 20:  # more than tidecv's 100 results on one image
            for _ in range(130):
                res.append({"image_id": img_id, "category_id": int(rng.choice(CATS)),
                            "bbox": box(w, h), "score": score()})
    gt = {"images": images, "annotations": anns,
          "categories": [{"id": c, "name": f"cat{c}"} for c in CATS]}
    return gt, res


def tide_values(gt_path, res_path, mode, prefix, pos=0.5, bg=0.1, max_dets=100):
    """tidecv's run for one (mode, thresholds), as COCODetection's keys (AP values / 100)."""
    with contextlib.redirect_stdout(io.StringIO()):
        gt = datasets.COCO(gt_path)
        gt.max_dets = max_dets
        dt = datasets.COCOResult(res_path)
        tide = TIDE(pos_threshold=pos, background_threshold=bg, mode=mode)
        run = tide.evaluate(gt, dt, mode=mode)
    main = run.fix_main_errors()
    special = run.fix_special_errors()
    counts = run.count_errors()
    pre = f"{prefix}_tide_"
    out = {f"{pre}AP{round(pos * 100)}": run.ap / 100}
    for err, name in ERRORS:
        out[pre + name] = main[err] / 100
    for err, v in special.items():
        out[pre + err.short_name] = v / 100
    for err, name in ERRORS:
        out[f"{pre}{name}_count"] = counts[err]
    return out


def hotcoco_counts(gt_path, res_path, iou_type, pos=0.5, bg=0.1):
    g = hotcoco.COCO(gt_path)
    ev = hotcoco.COCOeval(g, g.load_res(res_path), iou_type)
    ev.evaluate()
    return ev.tide_errors(pos_thr=pos, bg_thr=bg)["counts"]


def sorted_by_id(path, out_dir):
    """The annotation file with its images listed by id (tally's order), written beside."""
    with open(path) as f:
        d = json.load(f)
    d["images"] = sorted(d["images"], key=lambda im: im["id"])
    out = os.path.join(out_dir, os.path.basename(path))
    with open(out, "w") as f:
        json.dump(d, f)
    return out


def subset(gt_path, res_path, cats, out_dir):
    """The pair restricted to the categories `cats` (what cat_ids does to TIDE)."""
    with open(gt_path) as f:
        g = json.load(f)
    with open(res_path) as f:
        r = json.load(f)
    g["annotations"] = [a for a in g["annotations"] if a["category_id"] in cats]
    g["categories"] = [c for c in g["categories"] if c["id"] in cats]
    r = [x for x in r if x["category_id"] in cats]
    paths = os.path.join(out_dir, "subset_gt.json"), os.path.join(out_dir, "subset_res.json")
    for p, obj in zip(paths, (g, r)):
        with open(p, "w") as f:
            json.dump(obj, f)
    return paths


def main():
    gt, res = make_data()
    paths = {"gt": os.path.join(DATA, "tide_gt.json"),
             "res": os.path.join(DATA, "tide_results.json"),
             "example_gt": os.path.join(EXAMPLE, "instances_val2014_40.json"),
             "example_res": os.path.join(EXAMPLE, "results_val2014_40.json")}
    for name, obj in (("gt", gt), ("res", res)):
        with open(paths[name], "w") as f:
            json.dump(obj, f, separators=(",", ":"))
    cases = []
    tmp = tempfile.mkdtemp()

    def add(name, call, values, params, data, hc=None):
        c = {"name": name, "call": call, "params": params, "data": data, "expected": values}
        if hc is not None:
            c["hotcoco_counts"] = hc
            diff = {short: (values[k], hc[short]) for _, short in ERRORS
                    for k in values if k.endswith(f"_{short}_count") and values[k] != hc[short]}
            print(f"{name}: hotcoco's counts", "agree" if not diff else f"differ {diff}")
        cases.append(c)

    syn = ["gt", "res"]
    add("bbox", "TIDE().evaluate(COCO(tide_gt.json), COCOResult(tide_results.json), mode='bbox')",
        tide_values(paths["gt"], paths["res"], "bbox", "bbox"),
        {"metric": ["bbox"], "tide": True}, syn, hotcoco_counts(paths["gt"], paths["res"], "bbox"))
    add("bbox_thresholds", "the same with pos_threshold 0.6, background_threshold 0.2",
        tide_values(paths["gt"], paths["res"], "bbox", "bbox", pos=0.6, bg=0.2),
        {"metric": ["bbox"], "tide": True, "tide_pos_thresh": 0.6, "tide_bg_thresh": 0.2}, syn,
        hotcoco_counts(paths["gt"], paths["res"], "bbox", pos=0.6, bg=0.2))
    add("bbox_max_dets", "the same with the ground truth's Data.max_dets = 10",
        tide_values(paths["gt"], paths["res"], "bbox", "bbox", max_dets=10),
        {"metric": ["bbox"], "tide": True, "tide_max_dets": 10}, syn)
    sub_gt, sub_res = subset(paths["gt"], paths["res"], [2, 4, 9], tmp)
    add("bbox_cat_ids", "tidecv on the pair keeping only categories 2, 4, 9 (cat_ids)",
        tide_values(sub_gt, sub_res, "bbox", "bbox"),
        {"metric": ["bbox"], "tide": True, "cat_ids": [2, 4, 9]}, syn)
    ex = ["example_gt", "example_res"]
    ex_gt = sorted_by_id(paths["example_gt"], tmp)
    add("example", "tidecv on instances_val2014_40.json (images sorted by id) and "
        "results_val2014_40.json, mode 'bbox' and 'mask'",
        {**tide_values(ex_gt, paths["example_res"], "bbox", "bbox"),
         **tide_values(ex_gt, paths["example_res"], "mask", "segm")},
        {"metric": ["bbox", "segm"], "tide": True}, ex)
    data = {k: os.path.relpath(v, ROOT) for k, v in paths.items()}
    # The fixture tests/data/coco_val2014_100 (faster_coco_eval's 100 COCO val2014 images).
    fx_gt = os.path.join(FIXTURE, "instances_val2014_100.json")
    fx = sorted_by_id(fx_gt, tmp)
    for kind, mode, res_file in (("bbox", "bbox", "instances_val2014_fakebbox100_results.json"),
                                 ("segm", "mask", "instances_val2014_fakesegm100_results.json")):
        rp = os.path.join(FIXTURE, res_file)
        add(f"fixture_{kind}", f"tidecv on the fixture (images sorted by id), {res_file}, "
            f"mode '{mode}'", tide_values(fx, rp, mode, kind),
            {"metric": [kind], "tide": True}, ["fixture_gt", f"fixture_{kind}"],
            hotcoco_counts(fx_gt, rp, kind))
    data["fixture_gt"] = "tests/data/coco_val2014_100/instances_val2014_100.json"
    data["fixture_bbox"] = "tests/data/coco_val2014_100/instances_val2014_fakebbox100_results.json"
    data["fixture_segm"] = "tests/data/coco_val2014_100/instances_val2014_fakesegm100_results.json"
    out = {"generator": "tests/reference/tide.py",
           "versions": {"tidecv": importlib.metadata.version("tidecv"),
                        "hotcoco": importlib.metadata.version("hotcoco"),
                        "pycocotools": importlib.metadata.version("pycocotools"),
                        "numpy": np.__version__, "python": sys.version.split()[0]},
           "data": data, "cases": cases,
           "example": {"config": "configs/examples/detection_analysis.yaml",
                       "call": "the case 'example': tidecv on the example data, bbox and mask",
                       "results": {"COCODetection": next(c["expected"] for c in cases
                                                         if c["name"] == "example")}}}
    with open(os.path.join(ROOT, "tests", "reference", "expected_tide.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    for c in cases:
        counts = {k: v for k, v in c["expected"].items() if k.endswith("_count")}
        print(c["name"], {k: round(v, 5) for k, v in c["expected"].items()
                          if not k.endswith("_count")}, counts)


if __name__ == "__main__":
    main()
