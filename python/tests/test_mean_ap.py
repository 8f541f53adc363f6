"""tally.torchmetrics.MeanAveragePrecision: torchmetrics' detection class over COCODetection.

Expected values: without torch, pycocotools 2.0.11's COCOeval stats on the real val2014 fixture
(tests/reference/expected_coco_api.json, written by tests/reference/coco_api.py), fed as
torchmetrics' lists of dicts; in .venv-torch, torchmetrics 1.9.0's own MeanAveragePrecision
(pycocotools backend) on the same generated inputs, every key compared exactly.
"""

import json
from collections import defaultdict

import numpy as np
import pytest

from conftest import ROOT, have
from tally.torchmetrics import MeanAveragePrecision

EXPECTED = {c["name"]: c for c in json.loads((ROOT / "tests/reference/expected_coco_api.json").read_text())["cases"]}
TM_KEYS = ["map", "map_50", "map_75", "map_small", "map_medium", "map_large",
           "mar_1", "mar_10", "mar_100", "mar_small", "mar_medium", "mar_large"]


def fixture_lists():
    """The val2014 fixture's ground truth and fake detections as torchmetrics' inputs (xywh)."""
    case = EXPECTED["val2014_bbox"]
    gt = json.loads((ROOT / case["gt"]).read_text())
    dt = json.loads((ROOT / case["dt"]).read_text())
    gts, dts = defaultdict(list), defaultdict(list)
    for a in gt["annotations"]:
        gts[a["image_id"]].append(a)
    for d in dt:
        dts[d["image_id"]].append(d)
    preds, target = [], []
    for img in sorted(i["id"] for i in gt["images"]):
        d, g = dts[img], gts[img]
        preds.append(dict(boxes=np.array([x["bbox"] for x in d], np.float64).reshape(-1, 4),
                          scores=np.array([x["score"] for x in d], np.float64),
                          labels=np.array([x["category_id"] for x in d], np.int64)))
        target.append(dict(boxes=np.array([x["bbox"] for x in g], np.float64).reshape(-1, 4),
                           labels=np.array([x["category_id"] for x in g], np.int64),
                           iscrowd=np.array([x["iscrowd"] for x in g], np.int64),
                           area=np.array([x["area"] for x in g], np.float64)))
    return preds, target, case["stats"]


@pytest.mark.parametrize("batch", [1, 7, 100])
def test_the_coco_fixture_gives_pycocotools_stats_in_any_batching(batch):
    preds, target, stats = fixture_lists()
    m = MeanAveragePrecision(box_format="xywh", class_metrics=True)
    for i in range(0, len(preds), batch):
        m.update(preds[i : i + batch], target[i : i + batch])
    got = m.compute()
    np.testing.assert_allclose([float(got[k]) for k in TM_KEYS], stats, rtol=1e-12, atol=1e-15)
    assert got["map_per_class"].shape == got["classes"].shape
    # A class seen only in detections has no AP (-1), as torchmetrics' per-class COCOeval gives.
    assert set(np.unique(np.concatenate([t["labels"] for t in target]))) <= set(got["classes"].tolist())


def test_forward_is_the_batch_and_errors_are_torchmetrics():
    preds, target, _ = fixture_lists()
    m = MeanAveragePrecision(box_format="xywh")
    one = m(preds[:3], target[:3])
    alone = MeanAveragePrecision(box_format="xywh")
    alone.update(preds[:3], target[:3])
    assert float(one["map"]) == float(alone.compute()["map"])
    m.update(preds[3:], target[3:])
    assert m.update_count == 2
    with pytest.raises(ValueError, match="box_format"):
        MeanAveragePrecision(box_format="xy")
    with pytest.raises(ValueError, match="iou_type"):
        MeanAveragePrecision(iou_type="boxes")
    with pytest.raises(ValueError, match="length 3"):
        MeanAveragePrecision(max_detection_thresholds=[1, 10])
    with pytest.raises(ValueError, match="same length"):
        m.update(preds[:2], target[:1])
    with pytest.raises(ValueError, match="`scores` key"):
        m.update([{"boxes": preds[0]["boxes"], "labels": preds[0]["labels"]}], target[:1])


@pytest.mark.skipif(not (have("torchmetrics") and have("torchvision") and have("pycocotools")),
                    reason="torchmetrics, torchvision or pycocotools is not installed in this venv "
                    "(scripts/setup-torch-venv.sh installs them in .venv-torch)")
@pytest.mark.parametrize("kw", [
    {}, {"class_metrics": True}, {"extended_summary": True, "class_metrics": True},
    {"average": "micro", "class_metrics": True}, {"box_format": "xywh"}, {"box_format": "cxcywh"},
    {"iou_thresholds": [0.5, 0.7], "rec_thresholds": [0.0, 0.5, 1.0], "max_detection_thresholds": [1, 5, 100]},
    {"max_detection_thresholds": [1, 5, 50], "class_metrics": True},
    {"iou_type": "segm"}, {"iou_type": ("bbox", "segm"), "class_metrics": True},
], ids=str)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equals_torchmetrics_mean_average_precision(kw, seed):
    import warnings

    import torch
    from torchmetrics.detection import MeanAveragePrecision as TM

    preds, target = generated(seed, kw.get("box_format", "xyxy"), "segm" in str(kw.get("iou_type", "")))
    theirs, ours = TM(**kw), MeanAveragePrecision(**kw)
    for lo, hi in ((0, 5), (5, 12), (12, len(preds))):  # uneven batches
        theirs.update(preds[lo:hi], target[lo:hi])
        ours.update(preds[lo:hi], target[lo:hi])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = theirs.compute()
    got = ours.compute()
    assert set(want) - {"ious"} == set(got)
    for k, v in got.items():
        assert v.dtype == want[k].dtype and v.shape == want[k].shape, k
        assert torch.equal(v, want[k]), (k, v, want[k])


def generated(seed, fmt, masks, n_img=16, H=32, W=40):
    """Random images: 0-5 ground truths of 3 classes, 0-7 detections of 4 (one never in the
    ground truth), scores rounded to 2 digits (ties), crowd flags on every third image."""
    import torch

    g = np.random.default_rng(seed)

    def boxes(n):
        xy, wh = g.uniform(0, 30, (n, 2)), g.uniform(1, 25, (n, 2))
        b = {"xyxy": np.concatenate([xy, xy + wh], 1), "xywh": np.concatenate([xy, wh], 1),
             "cxcywh": np.concatenate([xy + wh / 2, wh], 1)}[fmt]
        return torch.tensor(b, dtype=torch.float32)

    def mk(n):
        m = torch.zeros((n, H, W), dtype=torch.bool)
        for k in range(n):
            x0, y0 = g.integers(0, W - 5), g.integers(0, H - 5)
            m[k, y0 : y0 + g.integers(2, 15), x0 : x0 + g.integers(2, 20)] = True
        return m

    preds, target = [], []
    for i in range(n_img):
        ng, nd = int(g.integers(0, 6)), int(g.integers(0, 8))
        p = dict(boxes=boxes(nd), scores=torch.tensor(np.round(g.uniform(0, 1, nd), 2), dtype=torch.float32),
                 labels=torch.tensor(g.integers(0, 4, nd)))
        t = dict(boxes=boxes(ng), labels=torch.tensor(g.integers(0, 3, ng)))
        if i % 3 == 0:
            t["iscrowd"] = torch.tensor(g.integers(0, 2, ng))
        if masks:
            p["masks"], t["masks"] = mk(nd), mk(ng)
        preds.append(p)
        target.append(t)
    return preds, target
