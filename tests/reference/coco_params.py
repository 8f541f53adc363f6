"""Reference values for COCODetection's keypoints (OKS) and its pycocotools parameters
(tests/unit/test_detection_coco.cpp, cases of tests/reference/expected_coco_params.json).

Writes, deterministically (numpy seed 20261127), the data of configs/examples/detection_keypoints.yaml:
  configs/examples/data/detection/person_keypoints_synthetic.json           synthetic COCO keypoint ground truth: 50 images, two
                                          categories with 17 keypoints each, visible (v=2),
                                          labelled-but-occluded (v=1) and unlabelled (v=0)
                                          keypoints, instances with no labelled keypoint
                                          (num_keypoints 0: ignored), crowds, small / medium /
                                          large areas that are not the box area
  configs/examples/data/detection/person_keypoints_synthetic_results.json  keypoint results as mmpose writes them ({image_id,
                                          category_id, keypoints, score}: loadRes takes the box
                                          and area from the keypoints' extent): jittered ground
                                          truth, wrong categories, false positives, score ties,
                                          more than 20 results on some images
and tests/reference/expected_coco_params.json: pycocotools 2.0.11 COCOeval for iouType
'keypoints' with its default and changed parameters, and for bbox (on coco.py's data,
tests/data/detection/coco_gt.json and coco_bbox.json, read as they are) with area ranges and
maxDets of the user's choosing. Every value is read from COCOeval itself: e.stats where
pycocotools' summarize() applies, else `summarize_one` below, which is summarize()'s
_summarize (the mean of eval['precision'] / eval['recall'] entries > -1 at the chosen IoU
threshold, area label and maxDets) run on COCOeval's own accumulate() arrays.

Run: .venv-ref/bin/python tests/reference/coco_params.py
"""
import contextlib
import importlib.metadata
import io
import json
import os
import sys

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from coco import stats_map  # tests/reference/coco.py: the 12 stats with mmeval's keys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "detection")
EXAMPLE = os.path.join(ROOT, "configs", "examples", "data", "detection")
KPT_CATS = [1, 3]
K = 17


def make_keypoints():
    rng = np.random.default_rng(20261127)
    images, anns, res = [], [], []
    ann_id = 1
    for i in range(50):
        img_id = 500 + 3 * i
        h, w = int(rng.integers(240, 641)), int(rng.integers(240, 641))
        images.append({"id": img_id, "height": h, "width": w, "file_name": f"{img_id}.jpg"})
        n_gt = int(rng.integers(0, 9)) if i % 11 != 6 else 0
        gts = []
        for _ in range(n_gt):
            cat = int(rng.choice(KPT_CATS))
            side = float(rng.choice([20, 45, 80, 120, 150]))  # small to large
            bw, bh = side * rng.uniform(0.6, 1.0), side * rng.uniform(1.0, 1.5)
            x, y = rng.uniform(0, w - bw), rng.uniform(0, h - bh)
            bbox = [round(float(v), 2) for v in (x, y, bw, bh)]
            crowd = rng.random() < 0.05
            kps = []
            none_labelled = rng.random() < 0.08
            for _ in range(K):
                v = int(rng.choice([0, 1, 2], p=[0.2, 0.2, 0.6]))
                if none_labelled or crowd:
                    v = 0
                if v == 0:
                    kps += [0, 0, 0]
                else:
                    kps += [round(float(x + rng.uniform(0, bw)), 2),
                            round(float(y + rng.uniform(0, bh)), 2), v]
            area = round(float(bw * bh * rng.uniform(0.45, 0.8)), 3)
            ann = {"id": ann_id, "image_id": img_id, "category_id": cat, "bbox": bbox,
                   "area": area, "iscrowd": int(crowd), "keypoints": kps,
                   "num_keypoints": sum(1 for j in range(K) if kps[3 * j + 2] > 0)}
            ann_id += 1
            anns.append(ann)
            gts.append(ann)
        dets = []
        for g in gts:
            if rng.random() < 0.85:
                bx, by, bw, bh = g["bbox"]
                spread = 0.03 * np.sqrt(max(g["area"], 1.0)) * rng.choice([0.5, 1.0, 3.0])
                kps = []
                for j in range(K):
                    gx, gy, v = g["keypoints"][3 * j:3 * j + 3]
                    if v == 0:  # unlabelled: the model still puts it somewhere in the box
                        gx, gy = bx + rng.uniform(0, bw), by + rng.uniform(0, bh)
                    kps += [round(float(gx + rng.normal(0, spread)), 2),
                            round(float(gy + rng.normal(0, spread)), 2),
                            round(float(rng.uniform(0.1, 1.0)), 3)]
                cat = g["category_id"] if rng.random() > 0.1 else int(rng.choice(KPT_CATS))
                dets.append((cat, kps))
        n_fp = int(rng.integers(0, 4)) if i % 13 != 5 else 26  # > maxDets 20 on some images
        for _ in range(n_fp):
            side = float(rng.uniform(15, 200))
            x, y = rng.uniform(0, w - side), rng.uniform(0, h - side)
            kps = []
            for j in range(K):
                kps += [round(float(x + rng.uniform(0, side)), 2),
                        round(float(y + rng.uniform(0, side)), 2), 0.5]
            dets.append((int(rng.choice(KPT_CATS)), kps))
        for cat, kps in dets:
            score = round(float(rng.uniform(0.05, 1.0)), 2)  # two decimals: ties
            res.append({"image_id": img_id, "category_id": cat, "keypoints": kps, "score": score})
    cats = [{"id": c, "name": f"person{c}", "supercategory": "person",
             "keypoints": [f"k{j}" for j in range(K)], "skeleton": []} for c in KPT_CATS]
    return {"images": images, "annotations": anns, "categories": cats}, res


def evaluate(gt_path, res_path, iou_type, **params):
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(gt_path)
        dt = gt.loadRes(res_path)
        e = COCOeval(gt, dt, iou_type)
        for k, v in params.items():
            setattr(e.params, k, np.array(v) if k in ("iouThrs", "kpt_oks_sigmas") else v)
        e.evaluate()
        e.accumulate()
    return e


def summarize_one(e, ap=1, iou_thr=None, area="all", max_dets=100, k=None):
    """pycocotools 2.0.11 COCOeval.summarize's _summarize, on e.eval; k: one category index."""
    p = e.params
    aind = [i for i, a in enumerate(p.areaRngLbl) if a == area]
    mind = [i for i, m in enumerate(p.maxDets) if m == max_dets]
    if ap == 1:
        s = e.eval["precision"]
        if iou_thr is not None:
            s = s[np.where(iou_thr == p.iouThrs)[0]]
        s = s[:, :, :, aind, mind] if k is None else s[:, :, [k], :, :][:, :, :, aind, mind]
    else:
        s = e.eval["recall"]
        if iou_thr is not None:
            s = s[np.where(iou_thr == p.iouThrs)[0]]
        s = s[:, :, aind, mind] if k is None else s[:, [k], :, :][:, :, aind, mind]
    return -1.0 if len(s[s > -1]) == 0 else float(np.mean(s[s > -1]))


def keypoint_stats(e, prefix="keypoints", labels=("m", "l"), names=("medium", "large")):
    """summarize()'s _summarizeKps: the 10 stats at maxDets 20 (e.stats when it applies)."""
    md = e.params.maxDets[-1]
    out = {f"{prefix}_mAP": summarize_one(e, 1, max_dets=md),
           f"{prefix}_mAP_50": summarize_one(e, 1, .5, max_dets=md),
           f"{prefix}_mAP_75": summarize_one(e, 1, .75, max_dets=md)}
    for lab, name in zip(labels, names):
        out[f"{prefix}_mAP_{lab}"] = summarize_one(e, 1, area=name, max_dets=md)
    out[f"{prefix}_AR@{md}"] = summarize_one(e, 0, max_dets=md)
    out[f"{prefix}_AR_50@{md}"] = summarize_one(e, 0, .5, max_dets=md)
    out[f"{prefix}_AR_75@{md}"] = summarize_one(e, 0, .75, max_dets=md)
    for lab, name in zip(labels, names):
        out[f"{prefix}_AR_{lab}@{md}"] = summarize_one(e, 0, area=name, max_dets=md)
    return out


def classwise(e, prefix, area="all"):
    """mmeval's classwise AP (precision[:, :, k, 0, -1] > -1, np.mean) and the same mean of
    recall[:, k, 0, -1] (AR per category); None (NaN) without ground truth."""
    out = {}
    for k, cat in enumerate(e.params.catIds):
        ap = summarize_one(e, 1, area=area, max_dets=e.params.maxDets[-1], k=k)
        ar = summarize_one(e, 0, area=area, max_dets=e.params.maxDets[-1], k=k)
        out[f"{prefix}_{cat}_precision"] = ap if ap > -1 else None
        out[f"{prefix}_{cat}_recall"] = ar if ar > -1 else None
    return out


def pooled_f1(e, t, prefix):
    """F1 against a score threshold s in params.recThrs (np.linspace(0, 1, 101)) of every
    category's detections pooled, from COCOeval's own per-image matching (e.evalImgs at area
    'all' and maxDets[-1], as accumulate() reads them): of the detections not ignored at IoU
    threshold t, n score >= s and tp of them are matched; F1 = 2 tp / (n + npig), npig the
    ground truth not ignored. Its best (the first of equals) and that threshold."""
    p = e.params
    scores, tps, npig = [], [], 0
    for ev in e.evalImgs:
        if ev is None or ev["aRng"] != p.areaRng[0] or ev["maxDet"] != p.maxDets[-1]:
            continue
        npig += int(np.count_nonzero(ev["gtIgnore"] == 0))
        ig = np.asarray(ev["dtIgnore"])[t]
        m = np.asarray(ev["dtMatches"])[t] > 0
        for s, i, mm in zip(ev["dtScores"][:p.maxDets[-1]], ig, m):
            if not i:
                scores.append(s)
                tps.append(bool(mm))
    scores, tps = np.array(scores), np.array(tps, dtype=bool)
    f1 = []
    for s in p.recThrs:
        n = int(np.count_nonzero(scores >= s))
        tp = int(np.count_nonzero(tps & (scores >= s)))
        f1.append(2 * tp / (n + npig) if n + npig > 0 else 0.0)
    best = int(np.argmax(f1))
    return {f"{prefix}_F1_curve": {"x": [float(v) for v in p.recThrs], "y": f1,
                                   "x_label": "score threshold", "y_label": "F1"},
            f"{prefix}_best_F1": f1[best], f"{prefix}_best_F1_score": float(p.recThrs[best])}


def main():
    gt, res = make_keypoints()
    paths = {"kpt_gt": os.path.join(EXAMPLE, "person_keypoints_synthetic.json"),
             "kpt_res": os.path.join(EXAMPLE, "person_keypoints_synthetic_results.json"),
             "gt": os.path.join(DATA, "coco_gt.json"), "bbox": os.path.join(DATA, "coco_bbox.json")}
    for name, obj in (("kpt_gt", gt), ("kpt_res", res)):
        with open(paths[name], "w") as f:
            json.dump(obj, f, separators=(",", ":"))
    cases = []
    versions_extra = {}

    def add(name, call, values, params, data):
        cases.append({"name": name, "call": call, "params": params, "data": data,
                      "expected": values})

    kp = ["kpt_gt", "kpt_res"]
    e = evaluate(paths["kpt_gt"], paths["kpt_res"], "keypoints")
    with contextlib.redirect_stdout(io.StringIO()):
        e.summarize()
    stats = keypoint_stats(e)
    assert list(stats.values()) == [float(v) for v in e.stats], "summarize_one != e.stats"
    add("keypoints", "COCOeval(gt, gt.loadRes('person_keypoints_synthetic_results.json'), 'keypoints'); evaluate(); "
        "accumulate(); summarize(); the 10 e.stats; classwise as mmeval (precision[:, :, k, 0, "
        "-1]) and recall[:, k, 0, -1]", {**stats, **classwise(e, "keypoints")},
        {"metric": ["keypoints"], "classwise": True}, kp)

    sigmas = [round(float(v), 3) for v in np.random.default_rng(5).uniform(0.02, 0.12, K)]
    e = evaluate(paths["kpt_gt"], paths["kpt_res"], "keypoints", kpt_oks_sigmas=sigmas)
    with contextlib.redirect_stdout(io.StringIO()):
        e.summarize()
    stats = keypoint_stats(e)
    assert list(stats.values()) == [float(v) for v in e.stats]
    add("keypoints_sigmas", "the same with params.kpt_oks_sigmas = np.array(sigmas)", stats,
        {"metric": ["keypoints"], "kpt_oks_sigmas": sigmas}, kp)

    # useCats = 0: pycocotools 2.0.11's computeOks reads self._gts[imgId, -1], which is empty,
    # so nothing matches and every stat is 0 (computeIoU gathers every category; computeOks does
    # not). tally matches keypoints across categories as computeIoU does for boxes; the reference
    # is pycocotools on the same data with every category merged into one, annotations and
    # results ordered as useCats = 0 gathers them (by category id, then file order).
    e = evaluate(paths["kpt_gt"], paths["kpt_res"], "keypoints", useCats=0)
    assert all(v == 0 for v in keypoint_stats(e).values()), "pycocotools' useCats=0 changed"
    merged_gt = dict(gt, annotations=sorted(gt["annotations"], key=lambda a: a["category_id"]),
                     categories=gt["categories"][:1])
    merged_gt["annotations"] = [dict(a, category_id=KPT_CATS[0]) for a in merged_gt["annotations"]]
    merged_res = [dict(r, category_id=KPT_CATS[0])
                  for r in sorted(res, key=lambda r: r["category_id"])]
    with contextlib.redirect_stdout(io.StringIO()):
        g = COCO()
        g.dataset = merged_gt
        g.createIndex()
        e = COCOeval(g, g.loadRes(merged_res), "keypoints")
        e.evaluate()
        e.accumulate()
        e.summarize()
    add("keypoints_no_cats", "use_cats: false. pycocotools' own useCats = 0 gives 0 for every "
        "keypoint stat (computeOks reads _gts[imgId, -1]); the reference is COCOeval 'keypoints' "
        "on the data with every category merged into one, annotations and results stably "
        "sorted by category id first (the order useCats = 0 gathers them); e.stats",
        keypoint_stats(e), {"metric": ["keypoints"], "use_cats": False}, kp)

    areas = {"all": [0, 1e10], "small": [0, 2500], "big": [2500, 1e10]}
    e = evaluate(paths["kpt_gt"], paths["kpt_res"], "keypoints", maxDets=[5, 20],
                 areaRng=list(areas.values()), areaRngLbl=list(areas.keys()),
                 iouThrs=[0.5, 0.65, 0.75, 0.85])
    add("keypoints_params", "keypoints with params.maxDets = [5, 20], areaRng / areaRngLbl = "
        f"{areas}, iouThrs = [0.5, 0.65, 0.75, 0.85]; _summarize at maxDets 20",
        keypoint_stats(e, labels=("small", "big"), names=("small", "big")),
        {"metric": ["keypoints"], "max_dets": [5, 20], "area_ranges": areas,
         "iou_thrs": [0.5, 0.65, 0.75, 0.85]}, kp)

    # bbox on coco.py's data with the user's area ranges and maxDets.
    areas = {"all": [0, 1e10], "tiny": [0, 256], "small": [256, 1024], "rest": [1024, 1e10]}
    md = [3, 30, 300, 1000]
    e = evaluate(paths["gt"], paths["bbox"], "bbox", maxDets=md, areaRng=list(areas.values()),
                 areaRngLbl=list(areas.keys()))
    vals = {"bbox_mAP": summarize_one(e, 1, max_dets=md[-1]),
            "bbox_mAP_50": summarize_one(e, 1, .5, max_dets=md[-1]),
            "bbox_mAP_75": summarize_one(e, 1, .75, max_dets=md[-1])}
    for lab in list(areas)[1:]:
        vals[f"bbox_mAP_{lab}"] = summarize_one(e, 1, area=lab, max_dets=md[-1])
    for n in md:
        vals[f"bbox_AR@{n}"] = summarize_one(e, 0, max_dets=n)
    for lab in list(areas)[1:]:
        vals[f"bbox_AR_{lab}@{md[-1]}"] = summarize_one(e, 0, area=lab, max_dets=md[-1])
    add("bbox_area_ranges", f"COCOeval bbox with params.maxDets = {md}, areaRng / areaRngLbl = "
        f"{areas}; _summarize at the last maxDets; classwise AP and AR",
        {**vals, **classwise(e, "bbox")},
        {"metric": ["bbox"], "max_dets": md, "area_ranges": areas, "classwise": True,
         "cat_ids": [0, 1, 3, 7, 12, 40, 99]},
        ["gt", "bbox"])

    # Curves: eval['precision'] and eval['scores'] of pycocotools' default bbox evaluation, at
    # IoU 0.75, area all, maxDets 100.
    e = evaluate(paths["gt"], paths["bbox"], "bbox")
    with contextlib.redirect_stdout(io.StringIO()):
        e.summarize()
    t = int(np.where(e.params.iouThrs == 0.75)[0][0])
    prec, sc, rec_thrs = e.eval["precision"], e.eval["scores"], e.params.recThrs

    def curve(x, y, xl, yl):
        return {"x": [float(v) for v in x], "y": [float(v) for v in y], "x_label": xl,
                "y_label": yl}

    overall = []
    for r in range(len(rec_thrs)):
        v = prec[t, r, :, 0, -1]
        overall.append(float(np.mean(v[v > -1])) if (v > -1).any() else -1.0)
    vals = {**stats_map(e, "bbox"),
            "bbox_PR_curve": curve(rec_thrs, overall, "recall", "precision"),
            **pooled_f1(e, t, "bbox")}
    for k, cat in enumerate(e.params.catIds):
        p = prec[:, :, k, 0, -1]
        r = e.eval["recall"][:, k, 0, -1]
        ap = float(np.mean(p[p > -1])) if (p > -1).any() else None
        vals[f"bbox_{cat}_precision"] = ap
        vals[f"bbox_{cat}_recall"] = float(np.mean(r[r > -1])) if (r > -1).any() else None
        if ap is None:
            continue
        vals[f"bbox_{cat}_PR_curve"] = curve(rec_thrs, prec[t, :, k, 0, -1], "recall",
                                             "precision")
        xs, ys = [], []
        for ri in reversed(range(len(rec_thrs))):
            pv, rc = prec[t, ri, k, 0, -1], rec_thrs[ri]
            xs.append(sc[t, ri, k, 0, -1])
            ys.append(2 * pv * rc / (pv + rc) if pv + rc > 0 else 0.0)
        vals[f"bbox_{cat}_F1_curve"] = curve(xs, ys, "score", "F1")
    add("bbox_curves", "COCOeval bbox with the default parameters; curves at IoU 0.75 (area all, "
        "maxDets 100): eval['precision'][t, :, k, 0, -1] against params.recThrs, their mean over "
        "the categories (entries > -1), and per category F1 = 2 p r / (p + r) against "
        "eval['scores'][t, :, k, 0, -1], recall thresholds from the last; F1 against score "
        "from e.evalImgs (pooled_f1)", vals,
        {"metric": ["bbox"], "classwise": True, "curves": True, "curve_iou": 0.75,
         "cat_ids": [0, 1, 3, 7, 12, 40, 99]}, ["gt", "bbox"])

    # Calibration: hotcoco 1.3.0's COCOeval.calibration(n_bins=10, iou_threshold=0.5), on real
    # COCO data (configs/examples/data/detection: annotation ids from 1; hotcoco counts a match to
    # an annotation of id 0 as correct where pycocotools, and tally, read it as no match, so
    # coco_gt.json, which has one, would not do). hotcoco's params.cat_ids are every category of
    # the file, as pycocotools': cat_ids gives tally the same.
    import hotcoco
    ex_gt = os.path.join(EXAMPLE, "instances_val2014_40.json")
    ex_res = os.path.join(EXAMPLE, "results_val2014_40.json")
    paths["example_gt"], paths["example_res"] = ex_gt, ex_res
    e = evaluate(ex_gt, ex_res, "bbox")
    with contextlib.redirect_stdout(io.StringIO()):
        e.summarize()
        hgt = hotcoco.COCO(ex_gt)
        hev = hotcoco.COCOeval(hgt, hgt.loadRes(ex_res), "bbox")
        hev.evaluate()
        cal = hev.calibration(n_bins=10, iou_threshold=0.5)
    vals = {**stats_map(e, "bbox"), "bbox_ECE": float(cal["ece"]), "bbox_MCE": float(cal["mce"]),
            "bbox_reliability_curve": curve(
                [b["avg_confidence"] for b in cal["bins"] if b["count"] > 0],
                [b["avg_accuracy"] for b in cal["bins"] if b["count"] > 0],
                "mean score", "fraction correct")}
    names = {c["id"]: c["name"] for c in json.load(open(ex_gt))["categories"]}
    for k, cat in enumerate(e.params.catIds):
        p = e.eval["precision"][:, :, k, 0, -1]
        r = e.eval["recall"][:, k, 0, -1]
        vals[f"bbox_{cat}_precision"] = float(np.mean(p[p > -1])) if (p > -1).any() else None
        vals[f"bbox_{cat}_recall"] = float(np.mean(r[r > -1])) if (r > -1).any() else None
        if names[cat] in cal["per_category"]:
            vals[f"bbox_{cat}_ECE"] = float(cal["per_category"][names[cat]])
    versions_extra["hotcoco"] = importlib.metadata.version("hotcoco")
    add("bbox_calibration", "hotcoco 1.3.0: COCOeval(gt, gt.loadRes(results_val2014_40.json), "
        "'bbox'); evaluate(); calibration(n_bins=10, iou_threshold=0.5): ece, mce, the bins with "
        "a detection (avg_confidence, avg_accuracy), per_category (by name); the 12 stats and "
        "classwise AP and AR from pycocotools 2.0.11 on the same files", vals,
        {"metric": ["bbox"], "classwise": True, "calibration_bins": 10, "calibration_iou": 0.5,
         "cat_ids": sorted(names)}, ["example_gt", "example_res"])

    # Confusion matrix: hotcoco 1.3.0's COCOeval.confusion_matrix(iou_thr=0.5, max_det=100) on
    # the same real data (its categories: every category of the file).
    with contextlib.redirect_stdout(io.StringIO()):
        cm = hev.confusion_matrix(iou_thr=0.5, max_det=100)
    assert list(cm["cat_ids"]) == sorted(names)
    with contextlib.redirect_stdout(io.StringIO()):
        hev.accumulate()
        hev.summarize()
    f1, f05 = hev.f_scores(beta=1.0), hev.f_scores(beta=0.5)
    add("bbox_f_scores", "hotcoco 1.3.0: the same COCOeval after accumulate(): f_scores(beta=1.0) "
        "and, second run, f_scores(beta=0.5); the 12 stats from pycocotools 2.0.11",
        {**stats_map(e, "bbox"), **{f"bbox_{k}": float(v) for k, v in f1.items()}},
        {"metric": ["bbox"], "f_beta": 1.0}, ["example_gt", "example_res"])
    add("bbox_f_scores_05", "hotcoco 1.3.0 f_scores(beta=0.5) as above",
        {**stats_map(e, "bbox"), **{f"bbox_{k}": float(v) for k, v in f05.items()}},
        {"metric": ["bbox"], "f_beta": 0.5}, ["example_gt", "example_res"])
    add("bbox_confusion", "hotcoco 1.3.0: COCOeval(gt, gt.loadRes(results_val2014_40.json), "
        "'bbox').confusion_matrix(iou_thr=0.5, max_det=100)['matrix'] (rows ground truth, "
        "columns detections, the last 'background'); the 12 stats from pycocotools 2.0.11",
        {**stats_map(e, "bbox"),
         "bbox_confusion_matrix": [[int(v) for v in row] for row in cm["matrix"]],
         "bbox_confusion_classes": [str(c) for c in cm["cat_ids"]] + ["background"]},
        {"metric": ["bbox"], "confusion": True, "confusion_iou": 0.5,
         "cat_ids": sorted(names)}, ["example_gt", "example_res"])

    out = {"generated_by": "tests/reference/coco_params.py",
           "versions": {"pycocotools": importlib.metadata.version("pycocotools"),
                        "numpy": np.__version__, "python": sys.version.split()[0],
                        **versions_extra},
           "data": {k: os.path.relpath(v, ROOT) for k, v in paths.items()},
           "cases": cases,
           # What tests/integration/test_examples.cpp compares `tally run` with.
           "example": {"config": "configs/examples/detection_keypoints.yaml",
                       "call": cases[0]["call"],
                       "results": {"COCODetection": cases[0]["expected"]}}}
    with open(os.path.join(ROOT, "tests", "reference", "expected_coco_params.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", len(cases), "cases")


if __name__ == "__main__":
    main()
