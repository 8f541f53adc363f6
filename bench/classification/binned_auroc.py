#!/usr/bin/env python3
"""Binned AUROC (100 thresholds) on N binary scores (default 100 M): tally against torchmetrics
1.9.0 BinaryAUROC(thresholds=100) (CPU, one thread) and scikit-learn 1.7.2 roc_auc_score
(exact), all on one core, same data, values compared.

    taskset -c 0 .venv-ref/bin/python bench/classification/binned_auroc.py \
        [--n 100000000] [--tally build-classification-rel/bin/tally]

tally: `tally run` on a generated config (npy reader, nondist backend, batches of 2^20), its
whole wall time (start, reading the .npy files, the metric, the output). Its state: int64
counts [100, 1, 2, 2] (3.2 KB) whatever N. Data: float64 probabilities of a noisy binary
classifier (numpy seed 20261127), int64 0/1 targets. torchmetrics: update + compute of
BinaryAUROC(thresholds=100) on the float64 tensors (its loop over thresholds above 5e7
elements). scikit-learn: roc_auc_score(target, preds) (exact, a sort: the value differs from the
binned one by the binning).
"""

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = "1"

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TORCH_PY = ROOT / ".venv-torch" / "bin" / "python"

TORCH_CODE = r"""
import json, sys, time
import numpy as np, torch
from torchmetrics.classification import BinaryAUROC
torch.set_num_threads(1)
folder = sys.argv[1]
p = torch.from_numpy(np.load(folder + "/preds.npy"))
t = torch.from_numpy(np.load(folder + "/target.npy"))
best, v = float("inf"), None
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    m = BinaryAUROC(thresholds=100)
    m.update(p, t)
    v = float(m.compute())
    best = min(best, time.perf_counter() - t0)
print(json.dumps([best, v]))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--tally", default=str(ROOT / "build-classification-rel" / "bin" / "tally"))
    args = ap.parse_args()
    rng = np.random.default_rng(20261127)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        target = (rng.random(args.n) < 0.3).astype(np.int64)
        logits = rng.normal(size=args.n) + 1.5 * target
        preds = 1.0 / (1.0 + np.exp(-logits))
        np.save(folder / "preds.npy", preds)
        np.save(folder / "target.npy", target)
        config = folder / "bench.yaml"
        config.write_text("\n".join([
            "data:", "  type: npy", "  batch_size: 1048576", "  fields:",
            f"    preds: {folder / 'preds.npy'}", f"    target: {folder / 'target.npy'}",
            "metrics:", "  - type: AUROC", "    task: binary", "    thresholds: 100"]) + "\n")
        out = folder / "results.json"
        t_tally = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            subprocess.run(["taskset", "-c", "0", args.tally, "run", str(config), "--output",
                            str(out)], check=True, stdout=subprocess.DEVNULL)
            t_tally = min(t_tally, time.perf_counter() - t0)
        v_tally = json.loads(out.read_text())["results"]["AUROC"]["auroc"]
        r = subprocess.run(["taskset", "-c", "0", str(TORCH_PY), "-c", TORCH_CODE, str(folder),
                            str(args.repeat)], check=True, capture_output=True, text=True)
        t_torch, v_torch = json.loads(r.stdout.strip().splitlines()[-1])
        del preds, logits
        p = np.load(folder / "preds.npy")
        from sklearn.metrics import roc_auc_score
        t0 = time.perf_counter()
        v_sk = float(roc_auc_score(target, p))
        t_sk = time.perf_counter() - t0
    print(f"binned AUROC (thresholds 100), {args.n:,} binary scores, one core; load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"  tally (tally run, whole process): {t_tally:.2f} s, auroc {v_tally!r}")
    for name, t, v, note in (
            ("torchmetrics BinaryAUROC(thresholds=100)", t_torch, v_torch, "binned, same bins"),
            ("scikit-learn roc_auc_score (exact)", t_sk, v_sk, "exact: differs by the binning")):
        print(f"  {name}: {t:.2f} s, tally is {t / t_tally:.1f}x faster; value {v!r} "
              f"(rel diff {abs(v - v_tally) / abs(v):.2e}, {note})")


if __name__ == "__main__":
    main()
