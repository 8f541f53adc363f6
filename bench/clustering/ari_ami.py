#!/usr/bin/env python3
"""AdjustedRandScore and AdjustedMutualInfoScore on 10 M labels: tally against scikit-learn and
torchmetrics (CPU), all on one core, on the same data; prints the times, the ratios and checks
that the values agree.

Data (seeded): 10,000,000 true classes uniform in 0..99; the clustering puts a sample in its
class's cluster (classes 0..19 split into two clusters each by a coin flip: 120 clusters), and
30 % of the samples in a uniformly random one of the 120 clusters instead. int64 .npy files.

    taskset -c 0 .venv-ref/bin/python bench/clustering/ari_ami.py [--tally build-clustering-rel/bin/tally]
        [--n 10000000] [--skip-sklearn-ami] [--torch-ami-n 2000]

tally: `tally run` on a generated config (npy reader, nondist backend), its whole wall time
(process start, reading the files, the metric, writing the results), the best of 3 runs.
scikit-learn: the function calls on in-memory arrays (best of 3; AMI once, it takes minutes).
torchmetrics (run in .venv-torch, torch.set_num_threads(1)): the functional calls on CPU
tensors. Its AMI is a Python loop over every term of the expected mutual information (about
10^9 at 10 M labels), so it is timed on the first --torch-ami-n labels only, next to tally's
and scikit-learn's time on the same subset.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = "1"

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TORCH_PY = ROOT / ".venv-torch" / "bin" / "python"


def make_data(n, seed=20240612):
    rng = np.random.default_rng(seed)
    target = rng.integers(0, 100, size=n)
    preds = target.copy()
    split = (target < 20) & (rng.random(n) < 0.5)
    preds[split] = 100 + target[split]
    noisy = rng.random(n) < 0.3
    preds[noisy] = rng.integers(0, 120, size=int(noisy.sum()))
    return target.astype(np.int64), preds.astype(np.int64)


def run_tally(tally, folder, metrics, repeat=3):
    config = folder / "bench.yaml"
    lines = ["data:", "  type: npy", "  batch_size: 1048576", "  fields:",
             f"    preds: {folder / 'preds.npy'}", f"    target: {folder / 'target.npy'}",
             "metrics:"] + [f"  - type: {m}" for m in metrics]
    config.write_text("\n".join(lines) + "\n")
    out = folder / "results.json"
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([tally, "run", str(config), "--output", str(out)], check=True,
                       stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t0)
    return best, json.loads(out.read_text())["results"]


def best_of(fn, repeat):
    best, value = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


TORCH_CODE = r"""
import json, sys, time
import numpy as np, torch
from torchmetrics.functional.clustering import adjusted_rand_score, adjusted_mutual_info_score
torch.set_num_threads(1)
folder, small = sys.argv[1], int(sys.argv[2])
t = torch.from_numpy(np.load(folder + "/target.npy"))
p = torch.from_numpy(np.load(folder + "/preds.npy"))
out = {}
best = float("inf")
for _ in range(3):
    t0 = time.perf_counter(); v = adjusted_rand_score(p, t); best = min(best, time.perf_counter() - t0)
out["ari"] = [best, float(v)]
t0 = time.perf_counter(); v = adjusted_mutual_info_score(p[:small], t[:small])
out["ami_small"] = [time.perf_counter() - t0, float(v)]
print(json.dumps(out))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tally", default=str(ROOT / "build-clustering-rel" / "bin" / "tally"))
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--torch-ami-n", type=int, default=2000)
    ap.add_argument("--skip-sklearn-ami", action="store_true")
    args = ap.parse_args()
    from sklearn.metrics import adjusted_mutual_info_score, adjusted_rand_score

    print(f"load average: {os.getloadavg()}; cpu affinity: {sorted(os.sched_getaffinity(0))}")
    target, preds = make_data(args.n)
    small = args.torch_ami_n
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        np.save(folder / "target.npy", target)
        np.save(folder / "preds.npy", preds)
        sub = folder / "small"
        sub.mkdir()
        np.save(sub / "target.npy", target[:small])
        np.save(sub / "preds.npy", preds[:small])

        rows = []
        t_ari, r = run_tally(args.tally, folder, ["AdjustedRandScore"])
        tally_ari = r["AdjustedRandScore"]["adjusted_rand_score"]
        t_ami, r = run_tally(args.tally, folder, ["AdjustedMutualInfoScore"])
        tally_ami = r["AdjustedMutualInfoScore"]["adjusted_mutual_info_score"]
        t_ami_small, r = run_tally(args.tally, sub, ["AdjustedMutualInfoScore"])
        tally_ami_small = r["AdjustedMutualInfoScore"]["adjusted_mutual_info_score"]

        s_ari, sk_ari = best_of(lambda: adjusted_rand_score(target, preds), 3)
        if args.skip_sklearn_ami:
            s_ami, sk_ami = float("nan"), float("nan")
        else:
            s_ami, sk_ami = best_of(lambda: adjusted_mutual_info_score(target, preds), 1)
        s_ami_small, sk_ami_small = best_of(
            lambda: adjusted_mutual_info_score(target[:small], preds[:small]), 3)

        tor = json.loads(subprocess.run(
            ["taskset", "-c", "0", str(TORCH_PY), "-c", TORCH_CODE, str(folder), str(small)],
            check=True, capture_output=True, text=True).stdout)

        rows = [
            (f"AdjustedRandScore, {args.n:,} labels", t_ari, tally_ari,
             [("scikit-learn", s_ari, sk_ari), ("torchmetrics", *tor["ari"])]),
            (f"AdjustedMutualInfoScore, {args.n:,} labels", t_ami, tally_ami,
             [("scikit-learn", s_ami, sk_ami)]),
            (f"AdjustedMutualInfoScore, first {small:,} labels", t_ami_small, tally_ami_small,
             [("scikit-learn", s_ami_small, sk_ami_small),
              ("torchmetrics", *tor["ami_small"])]),
        ]
    ok = True
    for what, t_tally, v_tally, peers in rows:
        print(f"\n{what}: tally {t_tally:.3f} s (value {v_tally!r})")
        for name, t_peer, v_peer in peers:
            if np.isnan(t_peer):
                print(f"  {name}: skipped")
                continue
            rel = abs(v_peer - v_tally) / abs(v_peer)
            # scikit-learn is the reference (float64, Python integers where they could overflow);
            # torchmetrics computes in float32 by default, and its ARI multiplies pair counts in
            # int64, which overflows from a few 10^5 samples on (tp * tn > 2^63): reported, not
            # checked.
            if name == "scikit-learn":
                ok &= rel <= 1e-9
                verdict = "ok" if rel <= 1e-9 else "DIFFERS"
            else:
                verdict = "float32 rounding" if rel <= 1e-4 else "torchmetrics is off"
            print(f"  {name}: {t_peer:.3f} s, tally is {t_peer / t_tally:.1f}x faster; value "
                  f"{v_peer!r}, relative difference {rel:.2g} ({verdict})")
    print(f"\nload average after: {os.getloadavg()}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
