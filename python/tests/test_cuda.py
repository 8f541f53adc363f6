"""CUDA tensors: read in place on their GPU by the metrics' CUDA path, the same numbers as on
the CPU; the nccl backend from Python. Skipped without torch and a CUDA device."""

import json

import numpy as np
import pytest

import tally
from conftest import EXAMPLES, have

pytestmark = pytest.mark.skipif(
    not have("torch") or not __import__("torch").cuda.is_available(),
    reason="no CUDA device visible to torch (or no torch in this venv)",
)

PREDS = np.load(EXAMPLES / "data" / "preds.npy")
LABELS = np.load(EXAMPLES / "data" / "labels.npy")
CONFIG = {
    "metrics": [
        {"type": "Accuracy", "topk": [1, 3]},
        {"type": "SingleLabelMetric", "average": "macro"},
        {"type": "ConfusionMatrix", "num_classes": 10},
    ]
}


def results(preds, labels, config=CONFIG, batch=100):
    ev = tally.Evaluator(config)
    for i in range(0, len(labels), batch):
        ev.add(pred_scores=preds[i : i + batch], gt_labels=labels[i : i + batch])
    return ev.compute()


def test_cuda_tensors_give_the_cpu_results():
    import torch

    cpu = results(PREDS, LABELS)
    for dtype in (torch.float32, torch.float64):
        for ldtype in (torch.int64, torch.int32, torch.uint8):
            p = torch.from_numpy(PREDS).to("cuda", dtype)
            lab = torch.from_numpy(LABELS).to("cuda", ldtype)
            assert results(p, lab) == results(PREDS.astype(np.float64) if dtype == torch.float64 else PREDS, LABELS)
    assert results(torch.from_numpy(PREDS).cuda(), torch.from_numpy(LABELS).cuda()) == cpu


def test_cuda_tensors_are_read_in_place():
    import torch

    p = torch.from_numpy(PREDS).cuda()
    lab = torch.from_numpy(LABELS).cuda()
    info = {f["name"]: f for f in tally._tally._inspect_batch({"pred_scores": p, "gt_labels": lab})}
    assert info["pred_scores"]["data"] == p.data_ptr() and info["pred_scores"]["device"] == "cuda:0"
    assert not info["pred_scores"]["copied"] and not info["gt_labels"]["copied"]
    t = p.double().t().contiguous().t()
    assert tally._tally._inspect_batch({"x": t})[0]["copied"]
    assert results(t, lab) == results(PREDS.astype(np.float64), LABELS)


def test_half_precision_on_the_gpu():
    import torch

    p = torch.from_numpy(PREDS).cuda().bfloat16()
    assert results(p, torch.from_numpy(LABELS).cuda()) == results(p.float().cpu().numpy(), LABELS)


def test_kernels_see_work_queued_on_the_default_stream():
    import torch

    # The scores are produced by a kernel torch queues just before add(): the metrics' work
    # is ordered after it (legacy default stream), with no synchronize in between.
    base = torch.from_numpy(PREDS).cuda()
    ev = tally.Evaluator(CONFIG)
    for i in range(0, 897, 100):
        ev.add(pred_scores=(base[i : i + 100] * 2.0 + 1.0), gt_labels=torch.from_numpy(LABELS[i : i + 100]).cuda())
    assert ev.compute() == results(PREDS * 2.0 + 1.0, LABELS)


def test_nccl_backend_world_of_one():
    import torch

    config = {**CONFIG, "backend": {"type": "nccl"}}
    got = results(torch.from_numpy(PREDS).cuda(), torch.from_numpy(LABELS).cuda(), config)
    assert got == results(PREDS, LABELS)


def test_torchrun_nccl(tmp_path):
    import subprocess
    import sys

    from conftest import child_env, torchrun

    import torch

    world = torch.cuda.device_count()
    worker = str(__import__("pathlib").Path(__file__).with_name("dist_worker.py"))
    p = subprocess.run(
        torchrun() + ["--standalone", f"--nproc-per-node={world}", worker, str(tmp_path), "nccl", "cuda", "contiguous"],
        env=child_env(), capture_output=True, text=True, timeout=300,
    )
    assert p.returncode == 0, p.stderr
    expected = results(PREDS, LABELS)
    for r in range(world):
        got = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert got["results"] == expected and got["backend"] == "nccl"


def test_padded_sampler_with_cuda_tensors():
    import torch

    # The held-back last sample of a CUDA batch is kept as a view (no host copy).
    ev = tally.Evaluator(CONFIG, padded_sampler=True)
    p, lab = torch.from_numpy(PREDS).cuda(), torch.from_numpy(LABELS).cuda()
    for i in range(0, 897, 100):
        ev.add(pred_scores=p[i : i + 100], gt_labels=lab[i : i + 100])
    assert ev.compute(dataset_size=897) == results(PREDS, LABELS)


def test_cupy_arrays_through_dlpack():
    cp = pytest.importorskip("cupy", reason="CuPy is not installed here")
    p, lab = cp.asarray(PREDS), cp.asarray(LABELS)
    info = {f["name"]: f for f in tally._tally._inspect_batch({"pred_scores": p, "gt_labels": lab})}
    assert info["pred_scores"]["data"] == p.data.ptr and info["pred_scores"]["device"] == "cuda:0"
    assert not info["pred_scores"]["copied"]
    assert results(p, lab) == results(PREDS, LABELS)
    assert results(cp.asfortranarray(p.astype(cp.float64)), lab) == results(PREDS.astype(np.float64), LABELS)


def test_jax_arrays_through_dlpack():
    import os

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = pytest.importorskip("jax", reason="JAX is not installed here")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX sees no GPU")
    p = jax.device_put(PREDS)
    lab = jax.device_put(LABELS.astype(np.int32))
    info = {f["name"]: f for f in tally._tally._inspect_batch({"pred_scores": p, "gt_labels": lab})}
    assert info["pred_scores"]["device"] == "cuda:0" and not info["pred_scores"]["copied"]
    assert info["pred_scores"]["data"] == p.unsafe_buffer_pointer()
    assert results(p, lab) == results(PREDS, LABELS)
