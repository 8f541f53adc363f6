"""The mmengine-style metric and the torchmetrics-style object over the same Evaluator."""

import numpy as np
import pytest

import tally
from conftest import EXAMPLES, requires_torch
from tally.mmengine import TallyMetric
from tally.torchmetrics import Metric

PREDS = np.load(EXAMPLES / "data" / "preds.npy")
LABELS = np.load(EXAMPLES / "data" / "labels.npy")
CONFIG = {"metrics": [{"type": "Accuracy", "topk": [1, 3]}, {"type": "SingleLabelMetric", "average": "macro"}]}


def expected():
    ev = tally.Evaluator(CONFIG)
    ev.add(pred_scores=PREDS, gt_labels=LABELS)
    return ev.compute()


def test_mmengine_style_metric_with_data_samples():
    metric = TallyMetric(CONFIG, field_map={"pred_score": "pred_scores", "gt_label": "gt_labels"}, prefix="val")
    for i in range(0, 897, 32):
        samples = [{"pred_score": PREDS[j], "gt_label": LABELS[j], "img_path": f"{j}.png"} for j in range(i, min(i + 32, 897))]
        metric.process({"inputs": None}, samples)
    got = metric.evaluate(897)
    flat = {f"val/{label}/{k}": v for label, keys in expected().items() for k, v in keys.items()}
    assert got == flat
    # evaluate() starts the next epoch afresh.
    metric.process(None, [{"pred_score": PREDS[0], "gt_label": LABELS[0], "img_path": "0.png"}])
    assert metric.evaluate(1)["val/Accuracy/top1"] == 1.0


def test_mmengine_style_metric_with_a_fields_function():
    metric = TallyMetric(CONFIG, fields=lambda batch, samples: {"pred_scores": batch["x"], "gt_labels": batch["y"]})
    metric.process({"x": PREDS, "y": LABELS}, [])
    assert metric.evaluate(897)["Accuracy/top1"] == expected()["Accuracy"]["top1"]


def test_torchmetrics_style_object():
    m = Metric(CONFIG, inputs=("pred_scores", "gt_labels"))
    for i in range(0, 897, 100):
        m.update(PREDS[i : i + 100], LABELS[i : i + 100])
    assert m.update_count == 9
    assert m.compute() == expected()
    state = m.state_dict()
    m.reset()
    m.load_state_dict(state)
    assert m.compute() == expected()
    flat = Metric(CONFIG, flatten=True)
    flat.update(pred_scores=PREDS, gt_labels=LABELS)
    assert flat.compute()["Accuracy/top3"] == expected()["Accuracy"]["top3"]
    with pytest.raises(TypeError, match="positional"):
        m.update(PREDS, LABELS, LABELS)
    # forward(): the batch's own value (a local compute, no collective), and it accumulates.
    m.reset()
    first = m(PREDS[:100], LABELS[:100])
    one = tally.Evaluator(CONFIG)
    one.add(pred_scores=PREDS[:100], gt_labels=LABELS[:100])
    assert first == one.compute() and m.update_count == 1
    m.update(PREDS[100:], LABELS[100:])
    assert m.compute() == expected()


@requires_torch
def test_mmengine_style_with_torch_data_samples():
    import torch

    metric = TallyMetric(CONFIG, field_map={"pred_score": "pred_scores", "gt_label": "gt_labels"})
    samples = [{"pred_score": torch.from_numpy(PREDS[j]), "gt_label": torch.tensor(int(LABELS[j]))} for j in range(897)]
    for i in range(0, 897, 64):
        metric.process(None, samples[i : i + 64])
    got = metric.evaluate(897)
    assert got["Accuracy/top1"] == expected()["Accuracy"]["top1"]


@pytest.mark.skipif(
    not __import__("conftest").have("mmengine"),
    reason="mmengine is not installed in this venv (scripts/setup-torch-venv.sh installs it in .venv-torch)",
)
def test_inside_mmengines_own_evaluator():
    import torch
    from mmengine.evaluator import BaseMetric, Evaluator

    metric = TallyMetric(CONFIG, field_map={"pred_score": "pred_scores", "gt_label": "gt_labels"}, prefix="val")
    assert isinstance(metric, BaseMetric)
    evaluator = Evaluator([metric])
    for i in range(0, 897, 64):
        samples = [
            {"pred_score": torch.from_numpy(PREDS[j]), "gt_label": torch.tensor(int(LABELS[j]))}
            for j in range(i, min(i + 64, 897))
        ]
        evaluator.process(data_samples=samples, data_batch={"inputs": None})
    flat = {f"val/{label}/{k}": v for label, keys in expected().items() for k, v in keys.items()}
    assert evaluator.evaluate(897) == flat


@pytest.mark.skipif(
    not __import__("conftest").have("mmengine"),
    reason="mmengine is not installed in this venv (scripts/setup-torch-venv.sh installs it in .venv-torch)",
)
def test_registered_in_mmengine_and_run_by_its_runner_validation_loop(tmp_path):
    """dict(type="TallyMetric", ...) in an mmengine config: mmengine's own Runner builds it from
    its METRICS registry and runs it in its ValLoop over a tiny model's predictions."""
    import torch
    from mmengine.model import BaseModel
    from mmengine.registry import METRICS
    from mmengine.runner import Runner

    assert METRICS.get("TallyMetric") is TallyMetric

    class Scores(BaseModel):
        """The 'model' returns the example's scores for its sample ids, as data samples."""

        def __init__(self):
            super().__init__()
            self.unused = torch.nn.Linear(1, 1)  # a parameter for mmengine's wrappers

        def forward(self, index, mode="tensor"):
            if mode != "predict":
                raise NotImplementedError(mode)
            return [{"pred_score": torch.from_numpy(PREDS[int(i)]),
                     "gt_label": torch.tensor(int(LABELS[int(i)]))} for i in index]

    class Ids(torch.utils.data.Dataset):
        def __len__(self):
            return 897

        def __getitem__(self, i):
            return {"index": i}

    runner = Runner(
        model=Scores(),
        work_dir=str(tmp_path),
        val_dataloader=torch.utils.data.DataLoader(Ids(), batch_size=64),
        val_cfg=dict(),
        val_evaluator=dict(type="TallyMetric", config=CONFIG, prefix="val",
                           field_map={"pred_score": "pred_scores", "gt_label": "gt_labels"}),
        default_hooks=dict(logger=None, checkpoint=None),
    )
    got = runner.val()
    flat = {f"val/{label}/{k}": v for label, keys in expected().items() for k, v in keys.items()}
    assert got == flat
