#!/usr/bin/env python3
"""SpearmanCorrCoef and KendallRankCorrCoef side by side: tally against SciPy and torchmetrics.

Writes N pairs (float64: correlated normals, x ~ N(0, 1), y = 0.6 x + 0.8 N(0, 1), both rounded
to 4 decimals, so values repeat: ties) as .npy files once, then on one core (taskset -c 0; OMP,
BLAS and torch threads 1), each the minimum of --repeat runs, in CPU seconds (user, and user +
system; the machine is shared, so wall time would count the other tenants' load):
  tally      `tally run` of a one-metric config over the files (--tally: the `release` preset's
             build): the whole command, reading 2 x N x 8 bytes of .npy included. tally has no
             phase timing of its own (its "wall_seconds" is wall time), so the metric's share is
             estimated as the run minus a `tally run` of RegressionMAE (a streaming sum: the
             process start, reading the files, writing the results) over the same files.
  SciPy      scipy.stats.spearmanr(x, y) and scipy.stats.kendalltau(x, y) (tau-b, its default) on
             the arrays in memory (.venv-ref, this interpreter)
  torchmetrics  SpearmanCorrCoef() and KendallRankCorrCoef() (CPU, float64 tensors from the same
             arrays, set_dtype(float64), one update() and compute(); .venv-torch,
             torch.set_num_threads(1)). Its Kendall counts pairs in O(N^2) time and memory: it runs
             at --torch-kendall-n samples (the first of the pairs) and that time is scaled by
             (N / n)^2 to estimate N (and said so).
and checks that the values agree (tally against SciPy to 1e-9 relative; torchmetrics computes them
in float32: to 1e-5, and is reported, not required, to agree).

    cmake --preset release -B build-release && cmake --build build-release --target tally_cli \
        tally_plugin_regression tally_plugin_npy tally_plugin_nondist
    .venv-ref/bin/python bench/regression/rank_correlation.py --tally build-release/bin/tally \
        [--n 10000000] [--repeat 3]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
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
        t0 = time.process_time(); m = make(); m.set_dtype(torch.float64); m.update(a, b)
        v = m.compute(); ts.append(time.process_time() - t0)
    return min(ts), float(v)
out = {}
out["spearman"] = timed(torchmetrics.regression.SpearmanCorrCoef, x, y)
out["kendall"] = timed(torchmetrics.regression.KendallRankCorrCoef, x[:kn], y[:kn])
print(json.dumps(out))
"""


def min_cpu_time(fn, repeat):
    """The least CPU time (user + system of this process) of `repeat` calls, and the value."""
    ts, v = [], None
    for _ in range(repeat):
        t0 = time.process_time()
        v = fn()
        ts.append(time.process_time() - t0)
    return min(ts), v


def tally_run(tally, folder, metric, repeat, extra=""):
    """The least user and user + system CPU seconds of `repeat` `tally run`s, and the value."""
    config = folder / f"{metric}.yaml"
    config.write_text(f"data:\n  type: npy\n  batch_size: 1048576\n  fields:\n"
                      f"    preds: {folder / 'x.npy'}\n    target: {folder / 'y.npy'}\n"
                      f"metrics:\n  - type: {metric}\n{extra}")
    out = folder / f"{metric}.json"
    cmd = ["taskset", "-c", "0", str(tally), "run", "-q", str(config), "-o", str(out)]
    user, total = [], []
    for _ in range(repeat):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        user.append(r1.ru_utime - r0.ru_utime)
        total.append(user[-1] + r1.ru_stime - r0.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    res = json.loads(out.read_text())
    return min(user), min(total), next(iter(res["results"][metric].values()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tally", default=str(ROOT / "build-release" / "bin" / "tally"))
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
          f"distinct y; load average {os.getloadavg()}; each time the least of {args.repeat}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        np.save(folder / "x.npy", x)
        np.save(folder / "y.npy", y)
        t_sp, v_sp = min_cpu_time(lambda: stats.spearmanr(x, y).statistic, args.repeat)
        t_kt, v_kt = min_cpu_time(lambda: stats.kendalltau(x, y).statistic, args.repeat)
        base_u, base_t, _ = tally_run(args.tally, folder, "RegressionMAE", args.repeat,
                                      "    inputs: {pred: preds}\n")
        sp_u, sp_t, tv_sp = tally_run(args.tally, folder, "SpearmanCorrCoef", args.repeat)
        kt_u, kt_t, tv_kt = tally_run(args.tally, folder, "KendallRankCorrCoef", args.repeat)
        kn = min(args.torch_kendall_n, args.n)
        proc = subprocess.run(["taskset", "-c", "0", str(TORCH_PYTHON), "-c", TORCH_CODE,
                               str(folder / "x.npy"), str(folder / "y.npy"), str(kn),
                               str(args.repeat)], check=True, capture_output=True, text=True)
        tm = json.loads(proc.stdout)
    (tm_sp, tmv_sp), (tm_kt_n, _) = tm["spearman"], tm["kendall"]
    tm_kt = tm_kt_n * (args.n / kn) ** 2
    failed = False
    for name, a, b in [("Spearman tally vs SciPy", tv_sp, v_sp),
                       ("Kendall tally vs SciPy", tv_kt, v_kt),
                       ("Spearman torchmetrics vs SciPy", tmv_sp, v_sp)]:
        d = abs(a - b) / abs(b)
        ok = d <= (1e-5 if "torchmetrics" in name else 1e-9)
        failed |= not ok and "tally" in name
        print(f"{name}: {a!r} vs {b!r} (relative difference {d:.2g}) {'ok' if ok else 'DIFFER'}")
    print(f"\ntally run of RegressionMAE (start, read, write): {base_u:.3f} s user, "
          f"{base_t:.3f} s user + sys")
    print("\nCPU seconds; tally: user (user + sys) of the whole run, and the metric's share "
          "(the run minus the RegressionMAE run)")
    print("| metric | tally run | tally metric only | SciPy 1.16.3 | torchmetrics 1.9.0 | "
          "SciPy / tally run | torchmetrics / tally run |")
    print("|---|---|---|---|---|---|---|")
    rows = [("SpearmanCorrCoef", sp_u, sp_t, t_sp, tm_sp, ""),
            ("KendallRankCorrCoef", kt_u, kt_t, t_kt, tm_kt,
             f" (estimated: {tm_kt_n:.2f} s at {kn:,} pairs x (N / {kn:,})^2)")]
    for name, u, t, ts, tmt, note in rows:
        print(f"| {name} | {u:.2f} ({t:.2f}) | {u - base_u:.2f} ({t - base_t:.2f}) | {ts:.2f} | "
              f"{tmt:.2f}{note} | {ts / t:.1f}x | {tmt / t:.1f}x |")
    print(f"\nload average after: {os.getloadavg()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
