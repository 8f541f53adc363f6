#!/usr/bin/env python3
"""Reference values for tally.coco (pycocotools' API over tally's engine): writes
tests/reference/expected_coco_api.json.

For each scenario (a ground truth and results file of the repository, an iouType and
pycocotools' params to set), pycocotools 2.0.11's own COCOeval is run (evaluate, accumulate,
summarize) and the file records:

    stats        COCOeval.stats (12, or 10 for keypoints)
    counts       eval['counts'] ([T, R, K, A, M])
    digest       per array (precision, recall, scores): the number of entries that are -1, the
                 exact sum (math.fsum) of the others, and the values at 64 fixed indices of the
                 flattened array (numpy.random.default_rng(0) over its size)
    peers        faster-coco-eval 1.8.0 and hotcoco 1.3.0 COCOeval's stats on the same scenario
                 (their pycocotools-compatible classes), with their largest difference

python/tests/test_coco.py compares tally.coco's stats (1e-12) and arrays (the digest: -1 counts
and sampled values exactly, the sum to 1e-12) with these, without pycocotools installed. Run in
the reference environment:

    .venv-ref/bin/python tests/reference/coco_api.py
"""

import contextlib
import io
import json
import math
import platform
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "reference" / "expected_coco_api.json"
VAL = "tests/data/coco_val2014_100"
DET = "tests/data/detection"

SCENARIOS = [
    {"name": "val2014_bbox", "gt": f"{VAL}/instances_val2014_100.json",
     "dt": f"{VAL}/instances_val2014_fakebbox100_results.json", "iouType": "bbox", "params": {}},
    {"name": "val2014_segm", "gt": f"{VAL}/instances_val2014_100.json",
     "dt": f"{VAL}/instances_val2014_fakesegm100_results.json", "iouType": "segm", "params": {}},
    {"name": "val2014_bbox_subsets", "gt": f"{VAL}/instances_val2014_100.json",
     "dt": f"{VAL}/instances_val2014_fakebbox100_results.json", "iouType": "bbox",
     "params": {"catIds": [1, 3, 18, 62], "imgIds": "first_half", "maxDets": [1, 5, 20],
                "iouThrs": [0.5, 0.6, 0.75]}},
    {"name": "val2014_bbox_no_cats", "gt": f"{VAL}/instances_val2014_100.json",
     "dt": f"{VAL}/instances_val2014_fakebbox100_results.json", "iouType": "bbox",
     "params": {"useCats": 0}},
    {"name": "synthetic_bbox", "gt": f"{DET}/coco_gt.json", "dt": f"{DET}/coco_bbox.json",
     "iouType": "bbox", "params": {}},
    {"name": "synthetic_segm", "gt": f"{DET}/coco_gt.json", "dt": f"{DET}/coco_segm.json",
     "iouType": "segm", "params": {}},
    {"name": "synthetic_bbox_areas", "gt": f"{DET}/coco_gt.json", "dt": f"{DET}/coco_bbox.json",
     "iouType": "bbox", "params": {"areaRng": [[0, 1e10], [0, 2000], [2000, 1e10], [1000, 5000]],
                                   "areaRngLbl": ["all", "small", "medium", "large"]}},
    {"name": "val2014_bbox_rec_thrs", "gt": f"{VAL}/instances_val2014_100.json",
     "dt": f"{VAL}/instances_val2014_fakebbox100_results.json", "iouType": "bbox",
     "params": {"recThrs": [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 1.0]}},
]


def set_params(p, params, gt):
    for k, v in params.items():
        if k == "imgIds" and v == "first_half":
            ids = sorted(gt.getImgIds())
            v = ids[: len(ids) // 2]
        setattr(p, k, np.array(v) if k in ("iouThrs", "recThrs") else v)


def digest(a):
    flat = np.asarray(a, dtype=float).ravel()
    idx = np.random.default_rng(0).integers(0, flat.size, size=64) if flat.size else []
    return {"minus_one": int(np.sum(flat == -1)), "fsum": math.fsum(flat[flat != -1].tolist()),
            "indices": [int(i) for i in idx], "values": [float(flat[i]) for i in idx]}


def run(cls_coco, cls_eval, sc):
    with contextlib.redirect_stdout(io.StringIO()):
        gt = cls_coco(str(ROOT / sc["gt"]))
        dt = gt.loadRes(str(ROOT / sc["dt"]))
        ev = cls_eval(gt, dt, sc["iouType"])
        set_params(ev.params, sc["params"], gt)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev


def peers(sc, stats):
    out = {}
    try:
        import faster_coco_eval
        from faster_coco_eval import COCO as FC, COCOeval_faster as FE

        ev = run(FC, FE, sc)
        out["faster_coco_eval"] = {"version": faster_coco_eval.__version__,
                                   "stats": [float(x) for x in ev.stats]}
    except Exception as e:  # noqa: BLE001 - a peer that cannot run this scenario says why
        out["faster_coco_eval"] = {"error": f"{type(e).__name__}: {e}"}
    try:
        import hotcoco

        ev = run(hotcoco.COCO, hotcoco.COCOeval, sc)
        out["hotcoco"] = {"version": getattr(hotcoco, "__version__", "1.3.0"),
                          "stats": [float(x) for x in ev.stats]}
    except Exception as e:  # noqa: BLE001
        out["hotcoco"] = {"error": f"{type(e).__name__}: {e}"}
    for v in out.values():
        if "stats" in v:
            v["max_abs_diff"] = max(abs(a - b) for a, b in zip(v["stats"], stats))
    return out


def main():
    import pycocotools
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    cases = []
    for sc in SCENARIOS:
        ev = run(COCO, COCOeval, sc)
        stats = [float(x) for x in ev.stats]
        cases.append({
            **sc, "stats": stats, "counts": [int(c) for c in ev.eval["counts"]],
            "digest": {k: digest(ev.eval[k]) for k in ("precision", "recall", "scores")},
            "peers": peers(sc, stats),
            "call": "pycocotools COCO(gt); gt.loadRes(dt); COCOeval(gt, dt, iouType); params set; "
                    "evaluate(); accumulate(); summarize()",
        })
        print(f"{sc['name']}: AP {stats[0]:.6f}", file=sys.stderr)
    OUT.write_text(json.dumps({
        "generator": "tests/reference/coco_api.py",
        "versions": {"pycocotools": getattr(pycocotools, "__version__", "2.0.11"),
                     "numpy": np.__version__, "python": platform.python_version()},
        "cases": cases}, indent=1) + "\n")
    print(f"{len(cases)} cases -> {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
