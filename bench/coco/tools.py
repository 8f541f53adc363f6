"""One COCO bbox (or segm) evaluation, from JSON loading to the 12 stats, with one tool; prints the stats
as JSON on the last line. Used by bench/coco/run.py, one cold process per run.

    python bench/coco/tools.py TOOL GT.json DETS.json [IOU_TYPE]
        TOOL: pycocotools | faster-coco-eval | hotcoco | ultrafast-pycocotools | tally.coco;
        IOU_TYPE: bbox (default) | segm
"""
import contextlib
import io
import json
import sys


# Each tool's pycocotools-style classes: (module of COCO, COCO, module of COCOeval, COCOeval).
TOOLS = {
    "pycocotools": ("pycocotools.coco", "COCO", "pycocotools.cocoeval", "COCOeval"),
    "faster-coco-eval": ("faster_coco_eval", "COCO", "faster_coco_eval", "COCOeval_faster"),
    "hotcoco": ("hotcoco", "COCO", "hotcoco", "COCOeval"),
    "ultrafast-pycocotools": ("ultrafast_pycocotools", "COCO", "ultrafast_pycocotools", "COCOeval"),
    # tally's pycocotools API (python/tally/coco.py); run.py puts the build's package on PYTHONPATH.
    "tally.coco": ("tally.coco", "COCO", "tally.coco", "COCOeval"),
}


def main():
    import importlib

    tool, gt_path, dt_path = sys.argv[1:4]
    iou_type = sys.argv[4] if len(sys.argv) > 4 else "bbox"
    if tool not in TOOLS:
        raise SystemExit(f"unknown tool {tool}")
    coco_mod, coco_name, eval_mod, eval_name = TOOLS[tool]
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet):
        COCO = getattr(importlib.import_module(coco_mod), coco_name)
        COCOeval = getattr(importlib.import_module(eval_mod), eval_name)
        gt = COCO(gt_path)
        dt = gt.loadRes(dt_path)
        e = COCOeval(gt, dt, iou_type)
        e.evaluate()
        e.accumulate()
        e.summarize()
    print(json.dumps([float(x) for x in e.stats]))


if __name__ == "__main__":
    main()
