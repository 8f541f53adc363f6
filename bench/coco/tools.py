"""One COCO bbox (or segm) evaluation, from JSON loading to the 12 stats, with one tool; prints the stats
as JSON on the last line. Used by bench/coco/run.py, one cold process per run.

    python bench/coco/tools.py TOOL GT.json DETS.json [IOU_TYPE]
        TOOL: pycocotools | faster-coco-eval | hotcoco | ultrafast-pycocotools;
        IOU_TYPE: bbox (default) | segm
"""
import contextlib
import io
import json
import sys


def main():
    tool, gt_path, dt_path = sys.argv[1:4]
    iou_type = sys.argv[4] if len(sys.argv) > 4 else "bbox"
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet):
        if tool == "pycocotools":
            from pycocotools.coco import COCO
            from pycocotools.cocoeval import COCOeval
            gt = COCO(gt_path)
            dt = gt.loadRes(dt_path)
            e = COCOeval(gt, dt, iou_type)
            e.evaluate()
            e.accumulate()
            e.summarize()
        elif tool == "faster-coco-eval":
            from faster_coco_eval import COCO, COCOeval_faster
            gt = COCO(gt_path)
            dt = gt.loadRes(dt_path)
            e = COCOeval_faster(gt, dt, iou_type)
            e.evaluate()
            e.accumulate()
            e.summarize()
        elif tool == "hotcoco":
            from hotcoco import COCO, COCOeval
            gt = COCO(gt_path)
            dt = gt.loadRes(dt_path)
            e = COCOeval(gt, dt, iou_type)
            e.evaluate()
            e.accumulate()
            e.summarize()
        elif tool == "ultrafast-pycocotools":
            from ultrafast_pycocotools import COCO, COCOeval
            gt = COCO(gt_path)
            dt = gt.loadRes(dt_path)
            e = COCOeval(gt, dt, iou_type)
            e.evaluate()
            e.accumulate()
            e.summarize()
        else:
            raise SystemExit(f"unknown tool {tool}")
    print(json.dumps([float(x) for x in e.stats]))


if __name__ == "__main__":
    main()
