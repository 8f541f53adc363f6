"""What add() reads: every dtype, NumPy and torch, read in place (zero-copy) when it can be, and
bad input raising the CLI's own message."""

import json
import pathlib

import numpy as np
import pytest

import tally
from conftest import EXAMPLES, cli, requires_torch

PREDS = np.load(EXAMPLES / "data" / "preds.npy")  # float32 [897, 10]
LABELS = np.load(EXAMPLES / "data" / "labels.npy")  # int64 [897]
CONFIG = {
    "metrics": [
        {"type": "Accuracy", "topk": [1, 3]},
        {"type": "SingleLabelMetric", "average": "macro"},
        {"type": "ConfusionMatrix", "num_classes": 10},
    ]
}


def results(preds, labels, batch=128):
    ev = tally.Evaluator(CONFIG)
    for i in range(0, len(labels), batch):
        ev.add({"pred_scores": preds[i : i + batch], "gt_labels": labels[i : i + batch]})
    return ev.compute()


BASE = results(PREDS.astype(np.float64), LABELS)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32])
def test_every_integer_label_dtype(dtype):
    assert results(PREDS.astype(np.float64), LABELS.astype(dtype)) == BASE


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_scores(dtype):
    # float32 scores are the example's own: float32 -> float64 is exact, so the results match.
    assert results(PREDS.astype(dtype), LABELS) == BASE


def test_float16_is_widened_once():
    half = PREDS.astype(np.float16)
    assert results(half, LABELS) == results(half.astype(np.float32), LABELS)
    info = tally._tally._inspect_batch({"pred_scores": half})[0]
    assert info["dtype"] == "f32" and info["copied"]


def test_numpy_arrays_are_read_in_place():
    p = np.ascontiguousarray(PREDS)
    lab = np.ascontiguousarray(LABELS.astype(np.int32))
    info = {f["name"]: f for f in tally._tally._inspect_batch({"pred_scores": p, "gt_labels": lab})}
    assert info["pred_scores"]["data"] == p.ctypes.data and not info["pred_scores"]["copied"]
    assert info["gt_labels"]["data"] == lab.ctypes.data and not info["gt_labels"]["copied"]
    assert info["pred_scores"]["shape"] == [897, 10] and info["gt_labels"]["dtype"] == "i32"
    # A read-only array (a memory-mapped file) too.
    ro = np.load(EXAMPLES / "data" / "preds.npy", mmap_mode="r")
    assert tally._tally._inspect_batch({"x": ro})[0]["data"] == ro.ctypes.data


def test_strided_and_fortran_arrays_are_made_contiguous():
    f = np.asfortranarray(PREDS.astype(np.float64))
    strided = np.repeat(LABELS, 2)[::2]
    info = tally._tally._inspect_batch({"pred_scores": f, "gt_labels": strided})
    assert all(i["copied"] for i in info)
    assert results(f, strided) == BASE


def test_lists_of_numbers_ragged_and_text_fields():
    assert results(PREDS.astype(np.float64).tolist(), LABELS.tolist()) == BASE
    info = tally._tally._inspect_batch(
        {"boxes": [np.zeros((3, 4)), np.zeros((0, 4))], "hyp": ["a b", "c"], "refs": [["a"], ["b", "c"]]}
    )
    kinds = {i["name"]: i["kind"] for i in info}
    assert kinds == {"boxes": "ragged", "hyp": "text", "refs": "text lists"}


def test_dict_subclasses_and_keywords():
    from collections import OrderedDict

    ev = tally.Evaluator(CONFIG)
    ev.add(OrderedDict(pred_scores=PREDS[:400].astype(np.float64)), gt_labels=LABELS[:400])
    ev.add(pred_scores=PREDS[400:].astype(np.float64), gt_labels=LABELS[400:])
    assert ev.compute() == BASE


# ---- errors: the CLI's messages ---------------------------------------------------------------


def cli_error(tmp_path, preds, labels, metrics):
    np.save(tmp_path / "p.npy", preds)
    np.save(tmp_path / "l.npy", labels)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        json.dumps(
            {"data": {"type": "npy", "fields": {"pred_scores": "p.npy", "gt_labels": "l.npy"}}, "metrics": metrics}
        )
    )
    p = cli("run", cfg, "-q", check=False)
    return p.returncode, p.stderr.strip()


@pytest.mark.parametrize(
    "case",
    [
        ("label out of range", PREDS, np.where(np.arange(897) == 5, 12, LABELS)),
        ("negative label", PREDS, np.where(np.arange(897) == 7, -1, LABELS)),
        ("nan score", np.where(np.arange(8970).reshape(897, 10) == 33, np.nan, PREDS).astype(np.float32), LABELS),
        ("float labels", PREDS, LABELS.astype(np.float32)),
        ("2-d labels", PREDS, LABELS.reshape(-1, 1).repeat(2, axis=1)),
    ],
    ids=lambda c: c[0],
)
def test_bad_input_raises_the_cli_message(case, tmp_path):
    _, preds, labels = case
    metrics = [{"type": "Accuracy"}, {"type": "ConfusionMatrix", "num_classes": 10}]
    code, stderr = cli_error(tmp_path, preds, labels, metrics)
    assert code == 2, stderr
    ev = tally.Evaluator({"metrics": metrics})
    with pytest.raises(tally.InputError) as e:
        ev.add(pred_scores=preds, gt_labels=labels)
    assert e.value.exit_code == 2
    message = str(e.value)
    assert message and "\n" not in message
    assert message in stderr, f"python: {message!r}\ncli: {stderr!r}"
    # Remembered: compute() fails too (on every rank, under a backend of several).
    with pytest.raises(tally.InputError):
        ev.compute()


def test_mismatched_sample_counts_and_missing_fields():
    ev = tally.Evaluator(CONFIG)
    with pytest.raises(tally.InputError, match="gt_labels"):
        ev.add(pred_scores=PREDS[:5], gt_labels=LABELS[:4])
    ev = tally.Evaluator(CONFIG)
    with pytest.raises(tally.InputError, match="gt_labels"):
        ev.add(pred_scores=PREDS[:5])


@pytest.mark.parametrize(
    "value, message",
    [
        (np.zeros(4, dtype=np.complex64), "dtype complex64 is not supported"),
        (np.zeros(4, dtype=np.uint64), "dtype uint64 is not supported"),
        ("a string", "a single string"),
        (np.float64(3.0), "a scalar"),
        (object(), "found <class 'object'>"),
    ],
)
def test_unsupported_values_name_the_field(value, message):
    ev = tally.Evaluator(CONFIG)
    with pytest.raises(tally.InputError, match=message) as e:
        ev.add({"pred_scores": value})
    assert "field 'pred_scores'" in str(e.value)


def test_errors_carry_where_they_happened(tmp_path):
    # The engine's ErrorContext as attributes: the metric's label and the field a metric read.
    ev = tally.Evaluator({"metrics": [{"type": "ConfusionMatrix", "name": "cm", "num_classes": 3}]})
    with pytest.raises(tally.InputError) as e:
        ev.add(pred_scores=np.zeros((2, 4), dtype=np.float32), gt_labels=np.zeros(2, np.int64))
    assert e.value.metric == "cm", str(e.value)
    assert e.value.field == "pred_scores", str(e.value)
    assert e.value.rank is None and e.value.backend is None
    # A config error: the place in the file.
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("metrics:\n  - type: NoSuchMetric\n")
    with pytest.raises(tally.ConfigError) as c:
        tally.Evaluator(str(cfg))
    assert c.value.file is not None and c.value.file.endswith("bad.yaml:2:5"), str(c.value)


def test_config_errors_are_the_cli_errors(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("metrics:\n  - type: Accuracy\n    topk: [1, x]\n")
    p = cli("validate", cfg, check=False)
    assert p.returncode == 2
    with pytest.raises(tally.ConfigError) as e:
        tally.Evaluator(str(cfg))
    assert str(e.value) in p.stderr
    with pytest.raises(tally.ConfigError, match="NoSuchMetric"):
        tally.Evaluator({"metrics": [{"type": "NoSuchMetric"}]})
    # A dict is located by key path, not by a column of the JSON it was sent as.
    bad = {"metrics": [{"type": "Accuracy", "topk": [1, "x"]}]}
    for call in (tally.Evaluator, tally.validate, tally.run):
        with pytest.raises(tally.ConfigError) as d:
            call(bad)
        assert str(d.value).startswith("config['metrics'][0]['topk'][1]: "), str(d.value)
    with pytest.raises(TypeError):
        tally.Evaluator(42)
    # ConfigError and InputError are ValueErrors too; tally.RuntimeError is a RuntimeError.
    assert issubclass(tally.ConfigError, ValueError) and issubclass(tally.InputError, ValueError)
    assert issubclass(tally.RuntimeError, RuntimeError)


# ---- torch ------------------------------------------------------------------------------------


@requires_torch
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8"])
def test_torch_label_dtypes(dtype):
    import torch

    labels = torch.from_numpy(LABELS).to(getattr(torch, dtype))
    assert results(torch.from_numpy(PREDS).double(), labels) == BASE


@requires_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_torch_score_dtypes(dtype):
    import torch

    scores = torch.from_numpy(PREDS).to(getattr(torch, dtype))
    expected = results(scores.float().numpy().astype(np.float64), LABELS)
    assert results(scores, torch.from_numpy(LABELS)) == expected


@requires_torch
def test_torch_tensors_are_read_in_place_and_grad_is_detached():
    import torch

    p = torch.from_numpy(PREDS.copy()).requires_grad_(True)
    lab = torch.from_numpy(LABELS.copy())
    info = {f["name"]: f for f in tally._tally._inspect_batch({"pred_scores": p, "gt_labels": lab})}
    assert info["pred_scores"]["data"] == p.data_ptr() and not info["pred_scores"]["copied"]
    assert info["gt_labels"]["data"] == lab.data_ptr() and not info["gt_labels"]["copied"]
    t = torch.from_numpy(PREDS.astype(np.float64)).t().contiguous().t()  # a transposed view
    assert not t.is_contiguous()
    assert tally._tally._inspect_batch({"x": t})[0]["copied"]
    assert results(t, torch.from_numpy(LABELS)) == BASE
    assert results(p, lab) == results(PREDS, LABELS)


@requires_torch
def test_the_view_keeps_the_tensor_alive():
    import gc

    import torch

    ev = tally.Evaluator({"metrics": [{"type": "Accuracy"}]})
    for i in range(0, 897, 100):
        # Temporaries: nothing but the engine holds them while add() runs.
        ev.add(pred_scores=torch.from_numpy(PREDS[i : i + 100].copy()), gt_labels=torch.from_numpy(LABELS[i : i + 100].copy()))
        gc.collect()
    assert ev.compute()["Accuracy"]["top1"] == BASE["Accuracy"]["top1"]


def test_threads_adding_to_one_evaluator_take_turns():
    import threading

    ev = tally.Evaluator(CONFIG)
    p = PREDS.astype(np.float64)

    def feed(lo, hi):
        for i in range(lo, hi, 16):
            ev.add(pred_scores=p[i : min(i + 16, hi)], gt_labels=LABELS[i : min(i + 16, hi)])

    threads = [threading.Thread(target=feed, args=(k * 300, min((k + 1) * 300, 897))) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Accuracy, macro P/R/F1 and the confusion matrix do not depend on the order of samples.
    assert ev.compute() == BASE
