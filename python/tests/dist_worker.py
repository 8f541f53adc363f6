"""One rank of a distributed test (test_distributed.py): started by mpirun or torchrun, it adds
its shard of the classification example and writes what compute() returned on this rank.

    dist_worker.py OUT_DIR BACKEND DEVICE MODE [SAMPLES]
    MODE: contiguous (each rank a contiguous block, as tally's readers shard) or sampler
    (PyTorch's DistributedSampler: interleaved, padded to a multiple of the world size)
"""

import json
import pathlib
import sys

import numpy as np

import tally

out_dir, backend, device, mode = sys.argv[1:5]
samples = int(sys.argv[5]) if len(sys.argv) > 5 else 897
root = pathlib.Path(__file__).resolve().parents[2] / "configs" / "examples" / "data"
preds = np.load(root / "preds.npy")[:samples]
labels = np.load(root / "labels.npy")[:samples]
config = {
    "backend": {"type": backend, "timeout": 60},
    "metrics": [
        {"type": "Accuracy", "topk": [1, 3]},
        {"type": "SingleLabelMetric", "average": "macro"},
        {"type": "ConfusionMatrix", "num_classes": 10},
    ],
}
ev = tally.Evaluator(config, padded_sampler=(mode == "sampler"))
rank, world = ev.rank, ev.world_size

if mode == "contiguous":
    base, extra = divmod(samples, world)
    start = rank * base + min(rank, extra)
    index = np.arange(start, start + base + (1 if rank < extra else 0))
else:
    total = -(-samples // world) * world
    padded = np.concatenate([np.arange(samples), np.arange(total - samples)])
    index = padded[rank::world]

p, lab = preds[index], labels[index]
if device == "cuda":
    import torch

    torch.cuda.set_device(ev.local_rank)
    p, lab = torch.from_numpy(p).cuda(), torch.from_numpy(lab).cuda()
for i in range(0, len(index), 50):
    ev.add(pred_scores=p[i : i + 50], gt_labels=lab[i : i + 50])
results = ev.compute(dataset_size=samples if mode == "sampler" else None)
gathered = ev.all_gather_object({"rank": rank, "n": int(len(index))})
(pathlib.Path(out_dir) / f"rank{rank}.json").write_text(
    json.dumps({"results": results, "world": world, "backend": ev.backend, "gathered": gathered})
)
