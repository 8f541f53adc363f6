#!/usr/bin/env python3
"""End to end: `tally run` against the equivalent mmeval script (bench/e2e/mmeval_eval.py), whole
processes from start to results, on 1 and 2 ranks, on a classification set and a segmentation set.

    .venv-bench/bin/python bench/e2e/run.py [--out DIR] [--samples 10000000] [--images 100]

Data (generated once into --out, numpy seed 2026): classification: --samples rows of --classes
float32 scores and int64 labels (metrics: Accuracy top-1/top-5 and macro SingleLabelMetric);
segmentation: --images uint8 label maps of 1024 x 2048 with 19 classes, runs of equal pixels as
real maps have, 5% of the prediction's pixels changed (metric: MeanIoU). Each process is timed
with /usr/bin/time (wall, peak RSS of the largest rank), after a read of the data files that puts
them in the page cache, the fastest of --repeat runs; the values of both tools are compared
(Accuracy and MeanIoU keys; mmeval rounds its precision/recall/F1 percentages to 4 decimals).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
ENV = dict(os.environ, OMPI_MCA_btl_vader_single_copy_mechanism="none",
           OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")


def make_data(out, samples, classes, images):
    rng = np.random.default_rng(2026)
    if not (out / "cls_labels.npy").exists():
        labels = rng.integers(0, classes, size=samples, dtype=np.int64)
        scores = np.lib.format.open_memmap(out / "cls_scores.npy", mode="w+", dtype=np.float32,
                                           shape=(samples, classes))
        for i in range(0, samples, 1 << 20):
            j = min(i + (1 << 20), samples)
            s = rng.random((j - i, classes), dtype=np.float32)
            # A model that is right about 70% of the time.
            right = rng.random(j - i) < 0.7
            s[np.arange(j - i)[right], labels[i:j][right]] += 1.0
            scores[i:j] = s
        scores.flush()
        del scores
        np.save(out / "cls_labels.npy", labels)
    if not (out / "seg_gt.npy").exists():
        block = 32
        coarse = rng.integers(0, 19, size=(images, 1024 // block, 2048 // block), dtype=np.uint8)
        gt = np.repeat(np.repeat(coarse, block, axis=1), block, axis=2)
        pred = gt.copy()
        flip = rng.random(gt.shape) < 0.05
        pred[flip] = rng.integers(0, 19, size=int(flip.sum()), dtype=np.uint8)
        np.save(out / "seg_gt.npy", gt)
        np.save(out / "seg_pred.npy", pred)
    (out / "cls.yaml").write_text(f"""data:
  type: npy
  batch_size: 4096
  fields: {{pred_scores: cls_scores.npy, gt_labels: cls_labels.npy}}
metrics:
  - type: Accuracy
    name: accuracy
    topk: [1, 5]
  - type: SingleLabelMetric
    name: prf_macro
    average: macro
    num_classes: {classes}
""")
    (out / "seg.yaml").write_text("""data:
  type: npy
  batch_size: 4
  fields: {pred_sem_seg: seg_pred.npy, gt_sem_seg: seg_gt.npy}
metrics:
  - type: MeanIoU
    name: miou
    num_classes: 19
""")


def timed(cmd, log):
    """Runs cmd under /usr/bin/time; returns (wall s, peak RSS MB of the largest process, stdout)."""
    with tempfile.NamedTemporaryFile(suffix=".time") as tfile:
        full = ["/usr/bin/time", "-f", "%e %M", "-o", tfile.name] + cmd
        r = subprocess.run(full, capture_output=True, text=True, env=ENV)
        if r.returncode != 0:
            sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
        log.write(f"$ {' '.join(cmd)}\n{r.stderr[-2000:]}\n")
        wall, rss = Path(tfile.name).read_text().split()[-2:]
    return float(wall), int(rss) / 1024, r.stdout


def warm(paths):
    """Reads the files once, so that every timed run finds them in the page cache (the first tool
    timed would otherwise pay for the disk alone)."""
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while f.read(64 << 20):
                pass


def best_of(n, cmd, log):
    """timed(cmd) n times: the fastest run's wall time and peak RSS, and its output."""
    runs = [timed(cmd, log) for _ in range(n)]
    return min(runs, key=lambda r: r[0])


def flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        elif isinstance(v, (int, float)):
            out[f"{prefix}{k}"] = float(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="/tmp/tally-bench-e2e")
    ap.add_argument("--samples", type=int, default=10_000_000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--images", type=int, default=100)
    ap.add_argument("--tally", default=str(ROOT / "build/bin/tally"))
    ap.add_argument("--nps", default="1,2")
    ap.add_argument("--tasks", default="cls,seg", help="cls (classification), seg or both")
    ap.add_argument("--repeat", type=int, default=1, help="runs per command; the fastest counts")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    make_data(out, args.samples, args.classes, args.images)
    py = sys.executable
    log = open(out / "run.log", "w")
    rows = []
    for task, units, what in (("cls", args.samples, "samples"),
                              ("seg", args.images * 1024 * 2048, "pixels")):
        if task not in args.tasks.split(","):
            continue
        classes = args.classes if task == "cls" else 19
        warm(sorted(out.glob(f"{task}_*.npy")))
        for np_ in [int(x) for x in args.nps.split(",")]:
            res = out / f"tally_{task}_np{np_}.json"
            t_cmd = [args.tally, "run", "-q", str(out / f"{task}.yaml"), "-o", str(res)]
            m_cmd = [py, str(ROOT / "bench/e2e/mmeval_eval.py"), "--task", task, "--data",
                     str(out), "--classes", str(classes)]
            if np_ > 1:
                t_cmd = MPIRUN + ["-np", str(np_)] + t_cmd + ["--set", "backend.type=mpi"]
                m_cmd = MPIRUN + ["-np", str(np_)] + m_cmd
            t_wall, t_rss, _ = best_of(args.repeat, t_cmd, log)
            m_wall, m_rss, m_out = best_of(args.repeat, m_cmd, log)
            tally_vals = flat(json.loads(res.read_text())["results"])
            mm_vals = flat(json.loads(m_out.strip().splitlines()[-1]))
            diffs = []
            for k, v in mm_vals.items():
                # mmeval reports precision/recall/F1 in percent rounded to 4 decimals: not
                # comparable to 1e-9; the accuracy and MeanIoU values are.
                if k in tally_vals and not k.startswith("prf_macro."):
                    diffs.append(abs(tally_vals[k] - v) / max(abs(v), 1e-300))
            rows.append((task, np_, units, what, t_wall, t_rss, m_wall, m_rss,
                         max(diffs) if diffs else None, len(diffs)))
            print(f"{task} np{np_}: tally {t_wall:.2f} s, mmeval {m_wall:.2f} s, "
                  f"{m_wall / t_wall:.1f}x", file=sys.stderr)
    print(f"\n# data in {out}; {os.cpu_count()} CPUs\n")
    print("| set | ranks | tally wall s | tally peak RSS MB | mmeval wall s | mmeval peak RSS MB |"
          " mmeval / tally | values compared, largest rel. diff |")
    print("|---|---|---|---|---|---|---|---|")
    for task, np_, units, what, tw, tr, mw, mr, diff, nd in rows:
        name = f"classification, {units / 1e6:g} M {what}" if task == "cls" else \
            f"segmentation, {units / 1e6:g} M {what}"
        d = "-" if diff is None else ("equal" if diff == 0 else f"{diff:.1e}")
        print(f"| {name} | {np_} | {tw:.2f} | {tr:.0f} | {mw:.2f} | {mr:.0f} | {mw / tw:.1f}x |"
              f" {nd} keys, {d} |")


if __name__ == "__main__":
    main()
