"""Under mpirun (backend mpi) and torchrun (auto -> gloo; nccl for CUDA tensors): every rank
returns the single-process results, for 1-4 ranks, uneven and empty shards, and a padded
DistributedSampler."""

import json
import subprocess
import sys

import pytest

import tally
from conftest import child_env, mpirun, torchrun

WORKER = str(__import__("pathlib").Path(__file__).with_name("dist_worker.py"))


def single(samples=897, device="cpu"):
    import numpy as np

    from conftest import EXAMPLES

    ev = tally.Evaluator(
        {
            "metrics": [
                {"type": "Accuracy", "topk": [1, 3]},
                {"type": "SingleLabelMetric", "average": "macro"},
                {"type": "ConfusionMatrix", "num_classes": 10},
            ]
        }
    )
    ev.add(
        pred_scores=np.load(EXAMPLES / "data" / "preds.npy")[:samples],
        gt_labels=np.load(EXAMPLES / "data" / "labels.npy")[:samples],
    )
    return ev.compute()


def check(tmp_path, world, samples, backend):
    expected = single(samples)
    for r in range(world):
        got = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert got["world"] == world and got["backend"] == backend
        assert got["results"] == expected, f"rank {r}"
        assert [g["rank"] for g in got["gathered"]] == list(range(world))


def launch(cmd, timeout=120):
    p = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_mpirun(world, tmp_path):
    launch(mpirun() + ["-np", str(world), sys.executable, WORKER, str(tmp_path), "mpi", "cpu", "contiguous"])
    check(tmp_path, world, 897, "mpi")


def test_mpirun_empty_ranks_and_padded_sampler(tmp_path):
    launch(mpirun() + ["-np", "4", sys.executable, WORKER, str(tmp_path), "mpi", "cpu", "contiguous", "3"])
    check(tmp_path, 4, 3, "mpi")
    for f in tmp_path.glob("rank*.json"):
        f.unlink()
    launch(mpirun() + ["-np", "3", sys.executable, WORKER, str(tmp_path), "mpi", "cpu", "sampler"])
    check(tmp_path, 3, 897, "mpi")


def test_mpirun_a_bad_rank_fails_every_rank(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text(
        "import pathlib, sys, numpy as np, tally\n"
        "ev = tally.Evaluator({'backend': {'type': 'mpi', 'timeout': 30}, 'metrics': [{'type': 'Accuracy'}]})\n"
        "labels = np.array([1, 2]) if ev.rank != 1 else np.array([1, 99])\n"
        "try:\n"
        "    ev.add(pred_scores=np.eye(10)[:2], gt_labels=labels)\n"
        "except tally.InputError:\n"
        "    pass\n"
        "try:\n"
        "    ev.compute()\n"
        "except tally.InputError as e:\n"
        "    (pathlib.Path(sys.argv[1]) / f'rank{ev.rank}.err').write_text(str(e))\n"
    )
    launch(mpirun() + ["-np", "3", sys.executable, str(script), str(tmp_path)])
    errors = {f.name: f.read_text() for f in tmp_path.glob("rank*.err")}
    assert sorted(errors) == ["rank0.err", "rank1.err", "rank2.err"], errors
    assert all("rank 1" in e and "99" in e for e in errors.values()), errors
    assert len(set(errors.values())) == 1, errors  # the same message on every rank


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_torchrun(world, tmp_path):
    launch(
        torchrun()
        + ["--standalone", f"--nproc-per-node={world}", WORKER, str(tmp_path), "auto", "cpu", "contiguous"]
    )
    check(tmp_path, world, 897, "gloo" if world > 1 else "nondist")


def test_torchrun_padded_sampler(tmp_path):
    launch(torchrun() + ["--standalone", "--nproc-per-node=3", WORKER, str(tmp_path), "gloo", "cpu", "sampler"])
    check(tmp_path, 3, 897, "gloo")


TM_WORKER = str(__import__("pathlib").Path(__file__).with_name("tm_dist_worker.py"))


def _tm_single(tmp_path, *mode):
    one = tmp_path / "one"
    one.mkdir()
    launch([sys.executable, TM_WORKER, str(one), *mode])
    return json.loads((one / "rank0.json").read_text())["results"]


def _tm_check(tmp_path, world, expected):
    for r in range(world):
        got = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert got["world"] == world and got["results"] == expected, f"rank {r}"


@pytest.mark.parametrize("world", [2, 3, 4])
def test_torchmetrics_drop_ins_under_mpirun(world, tmp_path):
    """tally.torchmetrics' classes and MetricCollection (backend auto -> mpi) give the
    single-process values, bit for bit, on every rank."""
    expected = _tm_single(tmp_path)
    launch(mpirun() + ["-np", str(world), sys.executable, TM_WORKER, str(tmp_path)])
    _tm_check(tmp_path, world, expected)


@pytest.mark.parametrize("world", [2, 3])
def test_torchmetrics_drop_ins_under_torchrun_beside_torch_distributed(world, tmp_path):
    """Under torchrun with torch.distributed's own gloo group initialized too: the drop-ins
    (auto -> gloo over torchrun's store) give the single-process values on every rank."""
    from conftest import have

    if not have("torch"):
        pytest.skip("torch is not installed in this venv (scripts/setup-torch-venv.sh)")
    expected = _tm_single(tmp_path, "torch")
    launch(torchrun() + ["--standalone", f"--nproc-per-node={world}", TM_WORKER, str(tmp_path), "torch"])
    _tm_check(tmp_path, world, expected)
