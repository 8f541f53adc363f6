#!/usr/bin/env python3
"""The mmeval 0.2.1 script equivalent to `tally run` on bench/e2e's data: what a user writes
without tally. Loads the .npy files (memory-mapped), feeds the metrics batch by batch (this rank's
contiguous shard under mpirun, synced through mmeval's MPI4PyDist), computes, and prints the
results as JSON on rank 0.

    .venv-bench/bin/python bench/e2e/mmeval_eval.py --task cls --data DIR
    mpirun -np 2 .venv-bench/bin/python bench/e2e/mmeval_eval.py --task seg --data DIR
"""

import argparse
import json
import os
import sys

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", choices=["cls", "seg"], required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--batch", type=int, default=0, help="default: 4096 (cls), 4 (seg)")
    ap.add_argument("--classes", type=int, required=True)
    args = ap.parse_args()

    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    if world > 1:
        from mmeval.core.dist import set_default_dist_backend
        set_default_dist_backend("mpi4py")
    from mmeval import Accuracy, MeanIoU, SingleLabelPrecisionRecallF1score

    if args.task == "cls":
        pred = np.load(os.path.join(args.data, "cls_scores.npy"), mmap_mode="r")
        gt = np.load(os.path.join(args.data, "cls_labels.npy"), mmap_mode="r")
        # 'cat': the ranks hold contiguous shards, so rank order is dataset order.
        metrics = {"accuracy": Accuracy(topk=(1, 5), dist_collect_mode="cat"),
                   "prf_macro": SingleLabelPrecisionRecallF1score(
                       num_classes=args.classes, average="macro", dist_collect_mode="cat")}
        batch = args.batch or 4096
    else:
        pred = np.load(os.path.join(args.data, "seg_pred.npy"), mmap_mode="r")
        gt = np.load(os.path.join(args.data, "seg_gt.npy"), mmap_mode="r")
        metrics = {"miou": MeanIoU(num_classes=args.classes, dist_collect_mode="cat")}
        batch = args.batch or 4

    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    n = pred.shape[0]
    begin, end = n * rank // world, n * (rank + 1) // world
    for i in range(begin, end, batch):
        j = min(i + batch, end)
        p, g = np.asarray(pred[i:j]), np.asarray(gt[i:j])
        for m in metrics.values():
            if args.task == "seg":
                # A sequence of maps, as int64: mmeval's num_classes * label + pred wraps on
                # uint8 maps (19 * 18 > 255) and gives a wrong matrix.
                m.add(list(p.astype(np.int64)), list(g.astype(np.int64)))
            else:
                m.add(p, g)
    results = {name: m.compute() for name, m in metrics.items()}
    if rank == 0:
        out = {name: {k: (float(v) if np.ndim(v) == 0 else np.asarray(v).tolist())
                      for k, v in r.items()} for name, r in results.items()}
        json.dump(out, sys.stdout)
        print()


if __name__ == "__main__":
    main()
