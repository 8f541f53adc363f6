#!/usr/bin/env python3
"""A/B of two tally builds: the same `tally run` configs through both, whole processes, on 1 and
on N ranks, runs interleaved (A, B, A, B, ...) so that both see the same machine; prints the
median wall time of each, the ratio B/A, and checks that both builds give the same results, bit
for bit (the "results" object of the results JSON).

    .venv-bench/bin/python bench/e2e/ab.py --a OLD_BUILD_DIR --b NEW_BUILD_DIR [--out DIR]
        [--ranks 1 4] [--repeat 5] [--samples 2000000]

Each build dir holds bin/tally and lib/tally/plugins (a `release` preset build). Data (numpy seed
2026, generated once into --out): classification scores float32 [samples, 10] and int64 labels
(Accuracy top-1/5, SingleLabelMetric, ConfusionMatrix: states of counts, summed to rank 0);
the same scores ranked (AveragePrecision, ROCAUC: per-sample scores, gathered and concatenated in
rank order); regression float32 pred/target [samples] (RegressionMAE, RegressionMSE,
R2); the same regression metrics with bootstrap intervals (`intervals`: 200 resamples over
samples, each replaying every sample's state through the metric); 20 uint8 label maps 1024 x
2048, 19 classes (MeanIoU).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
ENV = dict(os.environ, OMPI_MCA_btl_vader_single_copy_mechanism="none", OMP_NUM_THREADS="1")

CONFIGS = {
    "counts": """data:
  type: npy
  batch_size: 8192
  fields: {pred_scores: scores.npy, gt_labels: labels.npy}
metrics:
  - type: Accuracy
    topk: [1, 5]
  - type: SingleLabelMetric
    num_classes: 10
  - type: ConfusionMatrix
    num_classes: 10
""",
    "ranking": """data:
  type: npy
  batch_size: 8192
  fields: {pred_scores: scores.npy, gt_labels: labels.npy}
metrics:
  - type: AveragePrecision
    label_format: index
  - type: ROCAUC
    label_format: index
""",
    "regression": """data:
  type: npy
  batch_size: 8192
  fields: {pred: reg_pred.npy, target: reg_target.npy}
metrics:
  - type: RegressionMAE
  - type: RegressionMSE
  - type: R2
""",
    "intervals": """data:
  type: npy
  batch_size: 8192
  fields: {pred: reg_pred.npy, target: reg_target.npy}
metrics:
  - type: RegressionMAE
  - type: R2
intervals: {resamples: 200, seed: 0}
""",
    "segmentation": """data:
  type: npy
  batch_size: 2
  fields: {pred_sem_seg: seg_pred.npy, gt_sem_seg: seg_gt.npy}
metrics:
  - type: MeanIoU
    num_classes: 19
""",
}


def make_data(out, samples):
    rng = np.random.default_rng(2026)
    if not (out / "labels.npy").exists():
        labels = rng.integers(0, 10, size=samples, dtype=np.int64)
        scores = rng.random((samples, 10), dtype=np.float32)
        right = rng.random(samples) < 0.7
        scores[np.arange(samples)[right], labels[right]] += 1.0
        np.save(out / "scores.npy", scores)
        np.save(out / "labels.npy", labels)
        target = rng.standard_normal(samples).astype(np.float32)
        np.save(out / "reg_target.npy", target)
        np.save(out / "reg_pred.npy", (target + 0.1 * rng.standard_normal(samples)).astype(np.float32))
    if not (out / "seg_gt.npy").exists():
        coarse = rng.integers(0, 19, size=(20, 32, 64), dtype=np.uint8)
        gt = np.repeat(np.repeat(coarse, 32, axis=1), 32, axis=2)
        pred = gt.copy()
        flip = rng.random(gt.shape) < 0.05
        pred[flip] = rng.integers(0, 19, size=int(flip.sum()), dtype=np.uint8)
        np.save(out / "seg_gt.npy", gt)
        np.save(out / "seg_pred.npy", pred)
    for name, text in CONFIGS.items():
        (out / f"{name}.yaml").write_text(text)


def run(build, out, config, ranks, tag):
    result = out / f"result-{tag}.json"
    cmd = [str(Path(build) / "bin/tally"), "run", str(out / f"{config}.yaml"), "-q", "-o",
           str(result)]
    if ranks > 1:
        cmd = MPIRUN + ["-np", str(ranks)] + cmd + ["--set", "backend.type=mpi"]
    start = time.perf_counter()
    p = subprocess.run(cmd, cwd=out, env=ENV, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr}")
    return wall, json.loads(result.read_text())["results"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="build dir A (before)")
    ap.add_argument("--b", required=True, help="build dir B (after)")
    ap.add_argument("--out", default="/tmp/tally-bench-ab")
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--samples", type=int, default=2_000_000)
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    make_data(out, args.samples)
    for f in out.glob("*.npy"):  # the page cache
        f.read_bytes()
    print(f"| config | ranks | A median s | B median s | B / A | results |")
    print(f"| --- | --- | --- | --- | --- | --- |")
    for config in args.configs:
        for ranks in args.ranks:
            times = {"a": [], "b": []}
            results = {}
            for _ in range(args.repeat):
                for tag, build in (("a", args.a), ("b", args.b)):
                    wall, res = run(build, out, config, ranks, tag)
                    times[tag].append(wall)
                    results[tag] = res
            same = json.dumps(results["a"], sort_keys=True) == json.dumps(results["b"], sort_keys=True)
            a = statistics.median(times["a"])
            b = statistics.median(times["b"])
            print(f"| {config} | {ranks} | {a:.3f} | {b:.3f} | {b / a:.3f} | "
                  f"{'identical' if same else 'DIFFERENT'} |", flush=True)
            if not same:
                print(json.dumps(results, indent=1)[:4000], file=sys.stderr)


if __name__ == "__main__":
    main()
