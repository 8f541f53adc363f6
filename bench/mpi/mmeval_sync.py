#!/usr/bin/env python3
"""mmeval's sync path under mpirun, on the same object sizes as build/bin/tally_bench_sync.

    mpirun -np 2 .venv-ref/bin/python bench/mpi/mmeval_sync.py --max 16777216 --json out.json

For each size S (bytes per rank, x4 steps), the minimum over --reps calls of the slowest rank's
time for mmeval 0.2.1's MPI4PyDist().all_gather_object (mpi4py's pickle-based comm.allgather) on
  bytes       one `bytes` object of S bytes (the best case: one pickle of one buffer);
  per-sample  the state an mmeval metric keeps for S bytes of data: one small NumPy array per
              sample (S / 16 samples of 2 int64, as mmeval's classification metrics append a
              (pred, gt) pair per sample), gathered as a Python list;
every rank timing the call between two barriers, the max over ranks taken with an allreduce.
Per-sample states stop at --max-per-sample (they take seconds per call).
"""

import argparse
import json
import os
import resource
import time

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402
from mmeval.core.dist_backends import MPI4PyDist  # noqa: E402


def slowest(comm, fn):
    comm.Barrier()
    t0 = time.perf_counter()
    fn()
    t = time.perf_counter() - t0
    return comm.allreduce(t, op=MPI.MAX)


def best_of(comm, reps, fn):
    fn()  # warm-up
    return min(slowest(comm, fn) for _ in range(reps))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min", type=int, default=1024)
    ap.add_argument("--max", type=int, default=64 << 20)
    ap.add_argument("--max-per-sample", type=int, default=4 << 20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    dist = MPI4PyDist()
    rows = []
    s = args.min
    while s <= args.max:
        obj = np.random.default_rng(rank).integers(0, 256, s, dtype=np.uint8).tobytes()
        reps = max(args.reps, min(100, (16 << 20) // s))  # as tally_bench_sync
        t_bytes = best_of(comm, reps, lambda: dist.all_gather_object(obj))
        t_samples = None
        if s <= args.max_per_sample:
            pairs = np.random.default_rng(rank).integers(0, 1000, (s // 16, 2), dtype=np.int64)
            state = list(pairs)  # one array per sample
            t_samples = best_of(comm, args.reps if s <= (1 << 20) else 1, lambda: dist.all_gather_object(state))
        rows.append({"bytes": s, "world": world, "mmeval_bytes_s": t_bytes,
                     "mmeval_per_sample_s": t_samples})
        if rank == 0:
            print(f"{s:>12} bytes/rank  mmeval bytes {t_bytes:.6f} s"
                  + (f"  per-sample {t_samples:.6f} s" if t_samples is not None else ""),
                  flush=True)
        s *= 4
    rss = comm.allreduce(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, op=MPI.MAX)
    if rank == 0:
        print(f"peak RSS per rank (max over ranks): {rss:.0f} MiB")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"rows": rows, "peak_rss_mib": rss}, f)


if __name__ == "__main__":
    main()
