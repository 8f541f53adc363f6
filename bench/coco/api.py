"""tally.coco against pycocotools, faster-coco-eval and hotcoco, each through its own Python
pycocotools-style API, on the same files, in the same run:

    COCO(gt); gt.loadRes(dt); COCOeval(gt, dt, iouType); evaluate(); accumulate(); summarize()

    python bench/coco/api.py --data DIR [--dets 100] [--iou bbox|segm] [--repeat 3]

DIR is bench/coco/gen.py's output (gt.json, dets_{n}.json, segm_{n}.json). Prints per tool the
median wall time of the whole sequence over `repeat` runs, pycocotools' time divided by it, and
the largest difference of its 12 stats from pycocotools'. Run in .venv-ref (the peers) with
PYTHONPATH at a release build's python folder.
"""

import argparse
import contextlib
import io
import statistics
import time


def tools():
    out = {}
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    out["pycocotools 2.0.11"] = (COCO, COCOeval)
    from tally.coco import COCO as TC, COCOeval as TE

    out["tally.coco"] = (TC, TE)
    try:
        from faster_coco_eval import COCO as FC, COCOeval_faster as FE

        out["faster-coco-eval 1.8.0"] = (FC, FE)
    except ImportError:
        pass
    try:
        import hotcoco

        out["hotcoco 1.3.0"] = (hotcoco.COCO, hotcoco.COCOeval)
    except ImportError:
        pass
    return out


def once(coco, cocoeval, gt, dt, iou):
    with contextlib.redirect_stdout(io.StringIO()):
        t0 = time.perf_counter()
        g = coco(gt)
        d = g.loadRes(dt)
        ev = cocoeval(g, d, iou)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
        return time.perf_counter() - t0, [float(x) for x in ev.stats]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--dets", type=int, default=100)
    ap.add_argument("--iou", default="bbox")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    gt = f"{args.data}/gt.json"
    dt = f"{args.data}/{'segm' if args.iou == 'segm' else 'dets'}_{args.dets}.json"
    rows, ref = [], None
    for name, (coco, cocoeval) in tools().items():
        times, stats = [], None
        for _ in range(args.repeat):
            t, stats = once(coco, cocoeval, gt, dt, args.iou)
            times.append(t)
        med = statistics.median(times)
        if ref is None:
            ref = (med, stats)
        diff = max(abs(a - b) for a, b in zip(stats, ref[1]))
        rows.append((name, med, ref[0] / med, diff))
    print(f"| tool ({args.iou}, {args.dets} dets/image) | wall | pycocotools / tool | max |stat - pycocotools| |")
    print("|---|---:|---:|---:|")
    for name, med, ratio, diff in rows:
        print(f"| {name} | {med:.2f} s | {ratio:.1f}x | {diff:.1e} |")


if __name__ == "__main__":
    main()
