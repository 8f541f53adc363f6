"""state_dict()/load_state_dict(): a checkpoint of the accumulated state mid-epoch; reset()."""

import pickle

import numpy as np
import pytest

import tally
from conftest import EXAMPLES

PREDS = np.load(EXAMPLES / "data" / "preds.npy")
LABELS = np.load(EXAMPLES / "data" / "labels.npy")
CONFIG = str(EXAMPLES / "classification.yaml")


def full():
    ev = tally.Evaluator(CONFIG)
    ev.add(pred_scores=PREDS, gt_labels=LABELS)
    return ev.compute()


@pytest.mark.parametrize("cut", [0, 1, 300, 896, 897])
def test_resume_from_a_pickled_state_gives_the_same_results(cut):
    ev = tally.Evaluator(CONFIG)
    ev.add(pred_scores=PREDS[:cut], gt_labels=LABELS[:cut])
    saved = pickle.loads(pickle.dumps(ev.state_dict()))
    again = tally.Evaluator(CONFIG)
    again.load_state_dict(saved)
    again.add(pred_scores=PREDS[cut:], gt_labels=LABELS[cut:])
    assert again.compute() == full()
    assert again.last_run["samples"] == 897


def test_a_state_of_other_metrics_is_refused():
    ev = tally.Evaluator(CONFIG)
    ev.add(pred_scores=PREDS[:10], gt_labels=LABELS[:10])
    other = tally.Evaluator(CONFIG, {"metrics.0.topk": [1, 5]})
    with pytest.raises(tally.InputError, match="other metrics"):
        other.load_state_dict(ev.state_dict())
    with pytest.raises(tally.InputError, match="not a saved evaluator state"):
        other.load_state_dict({"tally_state": b"\x93garbage", "rank": 0, "world_size": 1})
    with pytest.raises(tally.InputError, match="Evaluator.state_dict"):
        other.load_state_dict({"weights": 1})
    with pytest.raises(tally.InputError, match="rank 3 of 4"):
        other.load_state_dict({**ev.state_dict(), "rank": 3, "world_size": 4})


def test_reset_starts_a_new_epoch():
    ev = tally.Evaluator(CONFIG)
    ev.add(pred_scores=PREDS[::-1].copy(), gt_labels=LABELS[:100].repeat(9)[:897])
    ev.compute()
    ev.reset()
    ev.add(pred_scores=PREDS, gt_labels=LABELS)
    assert ev.compute() == full()


def test_a_padded_sampler_holds_the_last_sample_back():
    # With padded_sampler the last sample added is held until compute(dataset_size) says whether
    # it is padding (test_distributed.py pads for real, on several ranks); a world of one has none.
    ev = tally.Evaluator(CONFIG, padded_sampler=True)
    ev.add(pred_scores=PREDS, gt_labels=LABELS)
    with pytest.raises(tally.ConfigError, match="held back"):
        ev.state_dict()
    assert ev.compute(dataset_size=897) == full()
