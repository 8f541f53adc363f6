"""Shared helpers for the Python package's tests (pytest). They test the installed package
`tally` (scripts/python-tests.sh builds it into a venv with `pip install .`) against the `tally`
command that comes with it: the same engine and plugin files."""

import json
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "configs" / "examples"


def have(module: str) -> bool:
    try:
        __import__(module)
        return True
    except Exception:  # noqa: BLE001
        return False


requires_torch = pytest.mark.skipif(
    not have("torch"),
    reason="torch is not installed in this venv (scripts/setup-torch-venv.sh makes .venv-torch; "
    "scripts/python-tests.sh runs these tests there too)",
)


def cli(*args, cwd=None, env=None, check=True):
    import tally

    exe = tally.cli_path()
    p = subprocess.run([exe, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"tally {' '.join(map(str, args))} exited {p.returncode}: {p.stderr}")
    return p


def cli_results(config, tmp_path, *sets):
    out = tmp_path / "cli.json"
    args = ["run", config, "--output", out, "-q"]
    for s in sets:
        args += ["--set", s]
    cli(*args)
    return json.loads(out.read_text())


def mpirun():
    exe = shutil.which("mpirun")
    if exe is None:
        pytest.skip("mpirun is not installed (apt-get install openmpi-bin)")
    return [exe, "--allow-run-as-root", "--oversubscribe"]


def torchrun():
    import sys

    beside = pathlib.Path(sys.executable).with_name("torchrun")  # this venv's, off PATH too
    exe = str(beside) if beside.exists() else shutil.which("torchrun")
    if exe is None or not have("torch"):
        pytest.skip("torchrun is not in this venv (scripts/setup-torch-venv.sh)")
    return [exe]


def child_env():
    env = dict(os.environ)
    env.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env
