#!/usr/bin/env python3
"""SpearmanCorrCoef and KendallRankCorrCoef side by side: tally against SciPy and torchmetrics.

Writes N pairs (float64: correlated normals, x ~ N(0, 1), y = 0.6 x + 0.8 N(0, 1), both rounded
to 4 decimals, so values repeat: ties) as .npy files once, then on one core (taskset -c 0; OMP,
BLAS and torch threads 1), each the median of --repeat runs:
  tally      `tally run` of a one-metric config over the files (build-regression-rel, the
             RelWithDebInfo `default` preset): the whole command, reading 2 x N x 8 bytes of .npy
             included, and its own "wall_seconds" (load, update, compute)
  SciPy      scipy.stats.spearmanr(x, y) and scipy.stats.kendalltau(x, y) (tau-b, its default) on
             the arrays in memory (.venv-ref)
  torchmetrics  SpearmanCorrCoef() and KendallRankCorrCoef() (CPU, float64 tensors from the same
             arrays, set_dtype(float64), one update() and compute(); .venv-torch). Its Kendall counts
             pairs in O(N^2) time and memory: it runs at --torch-kendall-n samples (the first of
             the pairs) and that time is scaled by (N / n)^2 to estimate N (and said so).
and checks that the values agree (tally against SciPy to 1e-9 relative; torchmetrics computes them
in float32: to 1e-5).

    .venv-ref/bin/python bench/regression/rank_correlation.py [--n 10000000] [--repeat 3]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TALLY = ROOT / "build-regression-rel" / "bin" / "tally"
TORCH_PYTHON = ROOT / ".venv-torch" / "bin" / "python"

TORCH_CODE = r"""
import json, sys, time
import numpy as np, torch, torchmetrics
torch.set_num_threads(1)
x = torch.from_numpy(np.load(sys.argv[1])); y = torch.from_numpy(np.load(sys.argv[2]))
kn, repeat = int(sys.argv[3]), int(sys.argv[4])
def timed(make, a, b):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter(); m = make(); m.set_dtype(torch.float64); m.update(a, b)
        v = m.compute(); ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2], float(v)
out = {}
out["spearman"] = timed(torchmetrics.regression.SpearmanCorrCoef, x, y)
out["kendall"] = timed(torchmetrics.regression.KendallRankCorrCoef, x[:kn], y[:kn])
print(json.dumps(out))
"""


def median_time(fn, repeat):
    ts, v = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        v = fn()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2], v


def tally_run(folder, metric, repeat):
    config = folder / f"{metric}.yaml"
    config.write_text(f"data:\n  type: npy\n  batch_size: 1048576\n  fields:\n"
                      f"    preds: {folder / 'x.npy'}\n    target: {folder / 'y.npy'}\n"
                      f"metrics:\n  - type: {metric}\n")
    out = folder / f"{metric}.json"
    cmd = ["taskset", "-c", "0", str(TALLY), "run", "-q", str(config), "-o", str(out)]

    def once():
        subprocess.run(cmd, check=True, capture_output=True)
        return json.loads(out.read_text())

    t, res = median_time(once, repeat)
    return t, res["run"]["wall_seconds"], next(iter(res["results"][metric].values()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--torch-kendall-n", type=int, default=20_000)
    args = ap.parse_args()
    os.sched_setaffinity(0, {0})
    from scipy import stats

    rng = np.random.default_rng(20261127)
    x = np.round(rng.normal(size=args.n), 4)
    y = np.round(0.6 * x + 0.8 * rng.normal(size=args.n), 4)
    print(f"N = {args.n:,} pairs, {len(np.unique(x)):,} distinct x, {len(np.unique(y)):,} "
          f"distinct y; load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        np.save(folder / "x.npy", x)
        np.save(folder / "y.npy", y)
        rows = []
        t_sp, v_sp = median_time(lambda: stats.spearmanr(x, y).statistic, args.repeat)
        t_kt, v_kt = median_time(lambda: stats.kendalltau(x, y).statistic, args.repeat)
        tt_sp, tw_sp, tv_sp = tally_run(folder, "SpearmanCorrCoef", args.repeat)
        tt_kt, tw_kt, tv_kt = tally_run(folder, "KendallRankCorrCoef", args.repeat)
        kn = min(args.torch_kendall_n, args.n)
        proc = subprocess.run(["taskset", "-c", "0", str(TORCH_PYTHON), "-c", TORCH_CODE,
                               str(folder / "x.npy"), str(folder / "y.npy"), str(kn),
                               str(args.repeat)], check=True, capture_output=True, text=True)
        tm = json.loads(proc.stdout)
    (tm_sp, tmv_sp), (tm_kt_n, _) = tm["spearman"], tm["kendall"]
    tm_kt = tm_kt_n * (args.n / kn) ** 2
    for name, a, b in [("Spearman tally vs SciPy", tv_sp, v_sp), ("Kendall tally vs SciPy", tv_kt, v_kt),
                       ("Spearman torchmetrics vs SciPy", tmv_sp, v_sp)]:
        d = abs(a - b) / abs(b)
        ok = d <= (1e-5 if "torchmetrics" in name else 1e-9)
        print(f"{name}: {a!r} vs {b!r} (relative difference {d:.2g}) {'ok' if ok else 'DIFFER'}")
    print()
    print("| metric | tally run (s) | tally wall_seconds | SciPy (s) | torchmetrics (s) | "
          "SciPy / tally | torchmetrics / tally |")
    print("|---|---|---|---|---|---|---|")
    rows = [("SpearmanCorrCoef", tt_sp, tw_sp, t_sp, tm_sp, ""),
            ("KendallRankCorrCoef", tt_kt, tw_kt, t_kt, tm_kt,
             f" (estimated: {tm_kt_n:.2f} s at {kn:,} pairs x (N / {kn:,})^2)")]
    for name, tt, tw, ts, tmt, note in rows:
        print(f"| {name} | {tt:.3f} | {tw:.3f} | {ts:.3f} | {tmt:.3f}{note} | {ts / tt:.1f}x | "
              f"{tmt / tt:.1f}x |")
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    sys.exit(main())
