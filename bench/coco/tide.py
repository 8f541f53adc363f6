"""TIDE's error breakdown side by side: tidecv 1.0.1, hotcoco 1.3.0's tide_errors and
`tally run` with COCODetection's `tide: true`, on the same COCO-format files, in one script.

    .venv-ref/bin/python bench/coco/gen.py /tmp/tb-coco --dets 100
    .venv-ref/bin/python bench/coco/tide.py --data /tmp/tb-coco --dets 100 --tally build/bin/tally

Each tool's time is the whole job from the files: loading, matching, the breakdown (tidecv:
TIDE().evaluate + fix_main_errors + fix_special_errors + count_errors; hotcoco: COCO + load_res +
evaluate + tide_errors; tally: the whole `tally run` process, which also computes the 12 COCO
stats). tally's values are checked against tidecv's (/ 100) to 1e-9 relative; hotcoco's dAP
integrate its own COCOeval precision, so only its error counts are compared. One core each
(tally threads 1, OMP/RAYON threads 1).
"""
import argparse
import contextlib
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "reference"))
from tide import ERRORS, tide_values  # noqa: E402  (tests/reference/tide.py)


def child_peak_mb():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def run_tally(tally, gt, res, tide, threads, out_dir):
    cfg = os.path.join(out_dir, f"tide_{int(tide)}_{threads}.yaml")
    with open(cfg, "w") as f:
        f.write(f"data:\n  type: coco_json\n  annotations: {gt}\n  results: {res}\n"
                f"  threads: {threads}\nmetrics:\n  - type: COCODetection\n    metric: bbox\n"
                f"    tide: {'true' if tide else 'false'}\n    threads: {threads}\n")
    out = os.path.join(out_dir, "out.json")
    t = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M", tally, "run", "-q", cfg, "-o", out],
                       capture_output=True, text=True)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"tally failed: {r.stderr}")
    peak = int(r.stderr.strip().splitlines()[-1]) / 1024
    with open(out) as f:
        return dt, peak, json.load(f)["results"]["COCODetection"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--dets", default="100")
    ap.add_argument("--tally", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    os.environ.update(OMP_NUM_THREADS="1", RAYON_NUM_THREADS="1")
    gt = os.path.join(args.data, "gt.json")
    res = os.path.join(args.data, f"dets_{args.dets}.json")
    tmp = tempfile.mkdtemp()

    t = time.perf_counter()
    want = tide_values(gt, res, "bbox", "bbox")
    t_tidecv = time.perf_counter() - t

    import hotcoco
    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        g = hotcoco.COCO(gt)
        ev = hotcoco.COCOeval(g, g.load_res(res), "bbox")
        ev.evaluate()
        hc = ev.tide_errors()
    t_hotcoco = time.perf_counter() - t

    rows = []
    for tide, threads in ((True, 1), (False, 1), (True, 2)):
        best, peak, got = None, 0, None
        for _ in range(args.repeat):
            dt, pk, got = run_tally(args.tally, gt, res, tide, threads, tmp)
            best = dt if best is None else min(best, dt)
            peak = max(peak, pk)
        rows.append((tide, threads, best, peak, got))

    got = rows[0][4]
    worst = 0.0
    for k, w in want.items():
        g = got[k]
        if isinstance(w, int):
            assert g == w, (k, g, w)
        else:
            rel = abs(g - w) / max(abs(w), 1e-300) if w != 0 else abs(g)
            worst = max(worst, rel)
            assert rel <= 1e-9, (k, g, w)
    counts_agree = all(got[f"bbox_tide_{n}_count"] == hc["counts"][n] for _, n in ERRORS)

    print(f"data: {gt} and {res}")
    print(f"tally == tidecv / 100: largest relative difference {worst:.1e}; hotcoco's counts "
          f"{'agree' if counts_agree else 'differ'}")
    print("| tool | seconds | vs tally (TIDE, 1 thread) |")
    print("|---|---:|---:|")
    base = rows[0][2]
    print(f"| tidecv 1.0.1 (TIDE only) | {t_tidecv:.2f} | {t_tidecv / base:.1f}x slower |")
    print(f"| hotcoco 1.3.0 (evaluate + tide_errors) | {t_hotcoco:.2f} | "
          f"{t_hotcoco / base:.1f}x slower |")
    for tide, threads, best, peak, _ in rows:
        what = "COCO stats + TIDE" if tide else "COCO stats alone"
        print(f"| tally run ({what}, {threads} thread{'s' if threads > 1 else ''}) | {best:.2f} "
              f"(peak {peak:.0f} MB) | {best / base:.2f} |")


if __name__ == "__main__":
    main()
