#!/usr/bin/env python3
"""Side by side: RetrievalNormalizedDCG and RetrievalMAP, tally vs torchmetrics 1.9 (CPU) and
scikit-learn's ndcg_score, on one core (taskset -c 0, thread pools of 1), the same data.

Data: Q queries (default 1 000 000) of 20 candidate documents each, in query order (as a run file
lists them), graded relevance 0..3 (about 80 % 0), float32 scores correlated with relevance.
tally: `tally run` (the npy reader, load + group + compute; the CPU time, user + system, of the
process). Every time is CPU seconds (the machine is shared: wall time would count the other
tenants' load).
torchmetrics: the metric classes on CPU tensors, float64 scores; a Python loop over queries, so it
is measured on the first --peer-queries queries and extrapolated linearly (stated in the output).
scikit-learn: ndcg_score on the [Q, 20] matrix (ignore_ties=False, as torchmetrics: a Python loop
over rows, measured on --peer-queries rows and extrapolated too; ignore_ties=True, vectorised, on
all of them) and average_precision_score per query for MAP (extrapolated).
Values: tally's are compared with each peer on the subset the peer ran.

  .venv-torch/bin/python bench/retrieval/ndcg_map.py --tally build-retrieval-rel/bin/tally
  (scikit-learn runs in .venv-ref: --sklearn-python .venv-ref/bin/python)
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

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def make_data(q, docs, seed=7):
    rng = np.random.default_rng(seed)
    grade = rng.choice([0, 1, 2, 3], size=(q, docs), p=[0.8, 0.1, 0.06, 0.04]).astype(np.uint8)
    score = (0.6 * grade + rng.normal(0, 1, size=(q, docs))).astype(np.float32)
    idx = np.repeat(np.arange(q, dtype=np.int64), docs)
    return idx, score.ravel(), grade.ravel()


def run_tally(tally, folder, idx, score, grade):
    np.save(folder / "indexes.npy", idx)
    np.save(folder / "preds.npy", score)
    np.save(folder / "target.npy", grade)
    np.save(folder / "binary.npy", grade > 0)
    cfg = folder / "bench.yaml"
    cfg.write_text("""data:
  type: npy
  batch_size: 1048576
  fields: {preds: preds.npy, target: target.npy, binary: binary.npy, indexes: indexes.npy}
metrics:
  - type: RetrievalNormalizedDCG
  - type: RetrievalMAP
    inputs: {target: binary}
""")
    out = folder / "out.json"
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(["taskset", "-c", "0", str(tally), "run", "-q", str(cfg), "-o", str(out)],
                   check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds (user + system) of the tally process: the machine is shared, so wall time
    # measures the other tenants as much as tally; every peer is timed in CPU seconds too.
    wall = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    r = json.loads(out.read_text())["results"]
    return wall, r["RetrievalNormalizedDCG"]["retrieval_normalized_dcg"], \
        r["RetrievalMAP"]["retrieval_average_precision"]


def run_torchmetrics(idx, score, grade):
    import torch
    from torchmetrics.retrieval import RetrievalMAP, RetrievalNormalizedDCG
    torch.set_num_threads(1)
    i, p = torch.tensor(idx), torch.tensor(score.astype(np.float64))
    out = {}
    for name, cls, t in [("ndcg", RetrievalNormalizedDCG, torch.tensor(grade.astype(np.int64))),
                         ("map", RetrievalMAP, torch.tensor((grade > 0).astype(np.int64)))]:
        t0 = time.process_time()
        m = cls()
        m.update(p, t, indexes=i)
        v = float(m.compute())
        out[name] = (time.process_time() - t0, v)
    return out


SKLEARN = r'''
import json, sys, time, numpy as np
from sklearn.metrics import ndcg_score, average_precision_score
d = np.load(sys.argv[1]); docs = int(sys.argv[2]); sub = int(sys.argv[3])
score = d["score"].reshape(-1, docs).astype(np.float64); grade = d["grade"].reshape(-1, docs)
out = {}
t0 = time.process_time(); v = ndcg_score(grade[:sub], score[:sub]); out["ndcg_ties"] = [time.process_time() - t0, float(v)]
t0 = time.process_time(); v = ndcg_score(grade, score, ignore_ties=True); out["ndcg_noties_full"] = [time.process_time() - t0, float(v)]
t0 = time.process_time()
aps = [average_precision_score(grade[q] > 0, score[q]) for q in range(sub) if grade[q].any()]
out["map"] = [time.process_time() - t0, float(np.mean(aps)), len(aps)]
print(json.dumps(out))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tally", default=str(ROOT / "build-retrieval-rel" / "bin" / "tally"))
    ap.add_argument("--sklearn-python", default=str(ROOT / ".venv-ref" / "bin" / "python"))
    ap.add_argument("--queries", type=int, default=1_000_000)
    ap.add_argument("--docs", type=int, default=20)
    ap.add_argument("--peer-queries", type=int, default=20_000)
    a = ap.parse_args()
    os.sched_setaffinity(0, {0})
    print(f"load average: {os.getloadavg()}")
    idx, score, grade = make_data(a.queries, a.docs)
    n_sub = a.peer_queries * a.docs
    scale = a.queries / a.peer_queries
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        full = run_tally(a.tally, folder, idx, score, grade)
        sub = run_tally(a.tally, folder, idx[:n_sub], score[:n_sub], grade[:n_sub])
        np.savez(folder / "d.npz", score=score, grade=grade)
        sk = json.loads(subprocess.run(
            ["taskset", "-c", "0", a.sklearn_python, "-c", SKLEARN, str(folder / "d.npz"),
             str(a.docs), str(a.peer_queries)], check=True, capture_output=True, text=True,
            env=dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                     MKL_NUM_THREADS="1")).stdout)
    tm = run_torchmetrics(idx[:n_sub], score[:n_sub], grade[:n_sub])
    print(f"{a.queries} queries x {a.docs} documents ({len(idx)} samples), one core")
    print(f"tally run (both metrics, npy load included): {full[0]:.2f} CPU s; nDCG {full[1]:.12f} "
          f"MAP {full[2]:.12f}")
    print(f"  on the first {a.peer_queries} queries: {sub[0]:.3f} CPU s")
    rows = [
        ("torchmetrics RetrievalNormalizedDCG", tm["ndcg"][0] * scale, True, tm["ndcg"][1], sub[1]),
        ("torchmetrics RetrievalMAP", tm["map"][0] * scale, True, tm["map"][1], sub[2]),
        ("sklearn ndcg_score (ignore_ties=False)", sk["ndcg_ties"][0] * scale, True,
         sk["ndcg_ties"][1], sub[1]),
        ("sklearn ndcg_score (ignore_ties=True)", sk["ndcg_noties_full"][0], False,
         sk["ndcg_noties_full"][1], full[1]),
        ("sklearn average_precision_score per query", sk["map"][0] * scale, True, sk["map"][1],
         None),
    ]
    for name, secs, extrapolated, value, ours in rows:
        agree = "" if ours is None else f", |diff| {abs(value - ours):.2e}"
        print(f"{name}: {secs:.2f} CPU s{' (extrapolated from ' + str(a.peer_queries) + ' queries)' if extrapolated else ''}"
              f" -> tally is {secs / full[0]:.1f}x faster (value {value:.12f}{agree})")
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    sys.exit(main())
