"""The Python loop the wheel test runs in the bare root and over the source build: the example
config's metrics (configs/examples/classification.yaml) over its data in batches of 100, plus the
README's loop. Prints one JSON object {"example": ..., "readme": ...}."""

import json
import os
import sys

import numpy as np
import tally

data = sys.argv[1]  # the folder with preds.npy and labels.npy (configs/examples/data)
scores = np.load(os.path.join(data, "preds.npy"))
labels = np.load(os.path.join(data, "labels.npy"))
ev = tally.Evaluator({"metrics": [
    {"type": "Accuracy", "topk": [1, 3]},
    {"type": "SingleLabelMetric", "average": "macro"},
    {"type": "SingleLabelMetric", "name": "prf_classwise", "average": "none"},
    {"type": "ConfusionMatrix", "num_classes": 10},
]})
for at in range(0, len(labels), 100):
    ev.add(pred_scores=scores[at:at + 100], gt_labels=labels[at:at + 100])
example = ev.compute()

# README.md's loop, as written there.
rng = np.random.default_rng(0)
ev = tally.Evaluator({"metrics": [{"type": "Accuracy", "topk": [1, 3]}]})
for _ in range(10):
    batch_labels = rng.integers(0, 5, size=64)
    batch_scores = rng.random((64, 5)) + 0.5 * np.eye(5)[batch_labels]
    ev.add(pred_scores=batch_scores, gt_labels=batch_labels)


def plain(v):
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if hasattr(v, "tolist"):
        return v.tolist()
    return v


print(json.dumps({"example": plain(example), "readme": plain(ev.compute())}, sort_keys=True))
