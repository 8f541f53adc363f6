// This process's place in a job as its launcher tells it (mpirun, torchrun, srun, MPICH's
// mpiexec): rank, world size, local rank, and an id of the job. Plain C++: used by the gloo and
// nccl backends and unit tested anywhere (tests/gpu/test_nccl_bootstrap.cpp).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace tally_launch {

/// getenv, replaceable in tests. Returns nullptr for an unset variable.
using GetEnv = std::function<const char*(const char*)>;
GetEnv process_env();

/// This process's place in the job, as the launcher's environment tells it.
struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  /// Absent when the launcher does not say (no launcher at all: a world of one).
  std::optional<int> local_rank;
  /// The variables read, for messages: "RANK=1, WORLD_SIZE=4, LOCAL_RANK=1 (torchrun)"; empty
  /// when no launcher variable is set.
  std::string source;
  /// An MPI launcher started this process (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK is set).
  bool under_mpi = false;
  /// An id of this job and step when the launcher gives one (TORCHELASTIC_RUN_ID,
  /// SLURM_JOB_ID.SLURM_STEP_ID, PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid): what a rendezvous
  /// file or folder records so that one left by an earlier job is never taken for this job's.
  std::string job_id;
};

/// Reads the launcher variables, first match wins: Open MPI's OMPI_COMM_WORLD_RANK / _SIZE /
/// _LOCAL_RANK (mpirun), then RANK / WORLD_SIZE / LOCAL_RANK (torchrun), then SLURM_PROCID /
/// SLURM_NTASKS / SLURM_LOCALID (srun), then PMI_RANK / PMI_SIZE / MPI_LOCALRANKID. No variable
/// at all: a world of one. tally::ConfigError (its message starts with `who`, "gloo backend: ")
/// naming the variables when a family is incomplete (a rank without a size), a value is not an
/// integer, or the values are inconsistent (rank outside [0, size), ...).
LaunchEnv read_launch_env(const GetEnv& env, std::string_view who);

}  // namespace tally_launch
