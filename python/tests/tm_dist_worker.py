"""One rank of test_torchmetrics_dist.py: tally.torchmetrics' drop-ins under mpirun or torchrun
(backend auto), fed this rank's contiguous shard of fixed data, with torch.distributed's own
process group initialized beside them under torchrun. Writes what compute() returned here.

    tm_dist_worker.py OUT_DIR [torch]
"""

import json
import os
import pathlib
import sys

import numpy as np

from tally import torchmetrics as T

out_dir = pathlib.Path(sys.argv[1])
use_torch = len(sys.argv) > 2 and sys.argv[2] == "torch"
rng = np.random.default_rng(7)
n = 301
scores = rng.random((n, 5))
scores /= scores.sum(1, keepdims=True)
labels = rng.integers(0, 5, size=n)
reg_p, reg_t = rng.random(n), rng.random(n)

rank = int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", "1")))
if use_torch:
    import torch
    import torch.distributed as dist

    if world > 1:
        dist.init_process_group("gloo")  # torch's own group, beside tally's backend
    conv = torch.from_numpy
else:
    conv = np.asarray

metrics = {
    "acc": T.MulticlassAccuracy(num_classes=5),
    "auroc": T.AUROC(task="multiclass", num_classes=5),
    "mse": T.MeanSquaredError(),
}
coll = T.MetricCollection([T.MulticlassF1Score(5), T.MulticlassPrecision(5, average="micro")])
start, stop = rank * n // world, (rank + 1) * n // world
for i in range(start, stop, 40):
    j = min(i + 40, stop)
    metrics["acc"].update(conv(scores[i:j]), conv(labels[i:j]))
    metrics["auroc"].update(conv(scores[i:j]), conv(labels[i:j]))
    metrics["mse"].update(conv(reg_p[i:j]), conv(reg_t[i:j]))
    coll.update(conv(scores[i:j]), conv(labels[i:j]))
results = {k: float(m.compute()) for k, m in metrics.items()}
results.update({k: float(v) for k, v in coll.compute().items()})
if use_torch and world > 1:
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()
(out_dir / f"rank{rank}.json").write_text(json.dumps({"results": results, "world": world}))
