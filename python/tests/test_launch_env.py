"""The Python package reads the launcher's environment through the engine (tally/launch.hpp), so
it gives the answers tests/unit/test_launch_env.cpp checks for the CLI and the backends: the same
table, the same precedence, the srun-step guard Python once skipped."""

import pytest

import tally
from tally import _tally

LAUNCHER_VARS = (
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_MCA_ess_base_jobid", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RUN_ID", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMIX_RANK",
    "PMIX_NAMESPACE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_STEP_ID",
    "SLURM_JOB_ID",
)


@pytest.fixture
def launcher(monkeypatch):
    """Sets exactly the given launcher variables (every other one unset)."""
    for var in LAUNCHER_VARS:
        monkeypatch.delenv(var, raising=False)

    def set_vars(**vars):
        for k, v in vars.items():
            monkeypatch.setenv(k, v)
        return _tally._launch_env()

    return set_vars


def test_no_launcher_is_a_world_of_one(launcher):
    e = launcher()
    assert (e["rank"], e["world_size"], e["local_rank"], e["launcher"]) == (0, 1, None, "")


def test_slurm_counts_only_in_an_srun_step(launcher):
    # An sbatch script that runs tally once: SLURM_NTASKS is not this process's world.
    assert launcher(SLURM_NTASKS="4", SLURM_PROCID="0", SLURM_JOB_ID="7")["world_size"] == 1
    e = launcher(SLURM_STEP_ID="0", SLURM_PROCID="2", SLURM_LOCALID="0")
    assert (e["launcher"], e["rank"], e["world_size"], e["local_rank"]) == ("srun", 2, 4, 0)
    assert e["job_id"] == "slurm:7.0"


def test_mpirun_starting_torchrun_is_torchruns_worker(launcher):
    e = launcher(OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_SIZE="4", RANK="3", WORLD_SIZE="8",
                 MASTER_ADDR="node0", TORCHELASTIC_RUN_ID="j")
    assert (e["launcher"], e["rank"], e["world_size"], e["under_mpi"]) == ("torchrun", 3, 8, False)


def test_a_stray_rank_under_srun_is_ignored(launcher):
    e = launcher(SLURM_STEP_ID="0", SLURM_PROCID="3", SLURM_NTASKS="4", RANK="0")
    assert (e["launcher"], e["rank"]) == ("srun", 3)


def test_launchers_that_disagree_are_a_config_error(launcher):
    with pytest.raises(tally.ConfigError, match="two launchers disagree") as info:
        launcher(OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_SIZE="4", RANK="3", WORLD_SIZE="8")
    assert "(mpirun)" in str(info.value) and "RANK=3, WORLD_SIZE=8" in str(info.value)
