"""state_dict()/load_state_dict(): a checkpoint of the accumulated state mid-epoch; reset()."""

import pickle
import re
import struct
import zlib

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


@pytest.mark.parametrize("cuts", [[0, 300, 600, 897], [0, 0, 897], [0, 1, 2, 3, 500, 897, 897]])
def test_the_states_of_every_rank_resume_on_another_world_size(cuts):
    # The states of a run on N ranks (rank r added samples [cuts[r], cuts[r + 1])) loaded into a
    # world of one: merged in rank order, they give the results of one evaluator of every sample.
    # Each state here comes from a world of one, relabelled as rank r of N: the bytes do not
    # carry the rank, the dict does.
    n = len(cuts) - 1
    states = []
    for r in range(n):
        ev = tally.Evaluator(CONFIG)
        ev.add(pred_scores=PREDS[cuts[r] : cuts[r + 1]], gt_labels=LABELS[cuts[r] : cuts[r + 1]])
        states.append({**ev.state_dict(), "rank": r, "world_size": n})
    again = tally.Evaluator(CONFIG)
    again.load_state_dict(pickle.loads(pickle.dumps(states[::-1])))  # any order: by rank
    assert again.compute() == full()
    assert again.last_run["samples"] == 897


def test_an_incomplete_list_of_states_is_refused_and_leaves_the_evaluator_as_it_was():
    ev = tally.Evaluator(CONFIG)
    ev.add(pred_scores=PREDS[:10], gt_labels=LABELS[:10])
    s = ev.state_dict()
    again = tally.Evaluator(CONFIG)
    again.add(pred_scores=PREDS, gt_labels=LABELS)
    for bad in (
        [{**s, "rank": 0, "world_size": 3}, {**s, "rank": 2, "world_size": 3}],
        [{**s, "rank": 0, "world_size": 2}, {**s, "rank": 0, "world_size": 2}],
        [{**s, "rank": 0, "world_size": 2}, {**s, "rank": 1, "world_size": 3}],
    ):
        with pytest.raises(tally.InputError, match="every rank"):
            again.load_state_dict(bad)
    with pytest.raises(tally.InputError, match="non-empty list"):
        again.load_state_dict([])
    broken = {"tally_state": s["tally_state"][:-1], "rank": 1, "world_size": 2}
    with pytest.raises(tally.InputError, match="corrupt"):
        again.load_state_dict([{**s, "rank": 0, "world_size": 2}, broken])
    assert again.compute() == full()  # nothing of it was loaded


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


# ---- integrity: a state whose bytes changed is refused before anything of it is used ---------
# The container (docs/checkpoint.md, "A host program's state"): "tally-evaluator-state\n", u32
# format version, u64 payload bytes, the payload, then a CRC-32 (zlib's) of everything before it.
HEADER = struct.Struct("<22sIQ")
REFUSED = re.compile(
    r"^load_state: (the state is corrupt: |the \d+ bytes are not a saved evaluator state)"
)


def saved(cut=300):
    ev = tally.Evaluator(CONFIG)
    ev.add(pred_scores=PREDS[:cut], gt_labels=LABELS[:cut])
    return ev.state_dict(), ev.compute()


def seal(payload, version=2):
    head = HEADER.pack(b"tally-evaluator-state\n", version, len(payload))
    return head + payload + struct.pack("<I", zlib.crc32(head + payload))


def test_the_state_carries_its_size_and_checksum():
    state, _ = saved()
    blob = state["tally_state"]
    magic, version, size = HEADER.unpack_from(blob)
    assert (magic, version, size) == (b"tally-evaluator-state\n", 2, len(blob) - HEADER.size - 4)
    assert seal(blob[HEADER.size : -4]) == blob


def test_every_bit_flip_truncation_and_extension_is_refused():
    state, want = saved()
    blob = state["tally_state"]
    ev = tally.Evaluator(CONFIG)
    ev.add(pred_scores=PREDS[:10], gt_labels=LABELS[:10])  # kept while every state is refused
    loaded = []
    for bit in range(len(blob) * 8):
        b = bytearray(blob)
        b[bit // 8] ^= 1 << (bit % 8)
        try:
            ev.load_state_dict({**state, "tally_state": bytes(b)})
            loaded.append(bit)
        except tally.InputError as e:
            assert REFUSED.search(str(e)), (bit, str(e))
    assert loaded == [], f"{len(loaded)} of {len(blob) * 8} flipped states loaded"
    for n in list(range(0, len(blob), 7)) + [len(blob) - 1]:
        with pytest.raises(tally.InputError, match=REFUSED):
            ev.load_state_dict({**state, "tally_state": blob[:n]})
    for tail in (b"\0", b"\xc0", blob, bytes(4096)):
        with pytest.raises(tally.InputError, match="truncated or extended"):
            ev.load_state_dict({**state, "tally_state": blob + tail})
    assert ev.compute()["Accuracy"] == full_of(10)["Accuracy"]
    ev.load_state_dict(state)
    assert ev.compute() == want


def full_of(n):
    ev = tally.Evaluator(CONFIG)
    ev.add(pred_scores=PREDS[:n], gt_labels=LABELS[:n])
    return ev.compute()


def test_a_state_resealed_after_a_change_is_still_checked():
    # A flip in the payload sealed again with a right checksum (what a forger or another
    # program's bug could write): the decoded state is checked before use. A count that stays
    # possible (another number of hits, up to the samples) cannot be told from a real one, but no
    # flip gives an accuracy outside [0, 1], a negative count, or counts of another size.
    state, want = saved()
    blob = state["tally_state"]
    payload = blob[HEADER.size : -4]
    ev = tally.Evaluator(CONFIG)
    refused = 0
    for bit in range(39 * 8):  # the fingerprint, the sample count and the Accuracy state
        p = bytearray(payload)
        p[bit // 8] ^= 1 << (bit % 8)
        try:
            ev.load_state_dict({**state, "tally_state": seal(bytes(p))})
        except tally.InputError as e:
            assert str(e).startswith("load_state: "), str(e)
            refused += 1
            continue
        acc = ev.compute()["Accuracy"]
        assert all(0.0 <= v <= 1.0 for v in acc.values()), (bit, acc)
    assert refused > 0
    # Another format version, sealed right; the structure of the payload.
    with pytest.raises(tally.InputError, match="state format version expected 2, found 3"):
        ev.load_state_dict({**state, "tally_state": seal(payload, 3)})
    for bad in (b"", b"\x90", b"\x92\x01\x02", b"\x93\x01\x02", b"\xc1"):
        with pytest.raises(tally.InputError, match="the state's payload is not"):
            ev.load_state_dict({**state, "tally_state": seal(bad)})
    # A state of format 1 (tally before the checksum): refused, saying so.
    with pytest.raises(tally.InputError, match="saved by an older tally"):
        ev.load_state_dict({**state, "tally_state": b"\x95\xb5tally-evaluator-state\x01\x00\x00"})
    ev.load_state_dict(state)
    assert ev.compute() == want


@pytest.mark.parametrize("value", [10**9, 2**62, -1, 3.5, "x" * 10, None, [1, 2], {"a": 1}])
def test_a_state_that_is_not_bytes_is_refused_before_anything_is_allocated(value):
    ev = tally.Evaluator(CONFIG)
    with pytest.raises(tally.InputError, match=r"'tally_state' expects the bytes .* found"):
        ev.load_state_dict({"tally_state": value, "rank": 0, "world_size": 1})


def test_bytearray_and_memoryview_of_a_state_load():
    state, want = saved()
    for blob in (bytearray(state["tally_state"]), memoryview(state["tally_state"])):
        ev = tally.Evaluator(CONFIG)
        ev.load_state_dict({**state, "tally_state": blob})
        assert ev.compute() == want
