// This process's place in a job as its launcher tells it: one table of every launcher's
// variables and one precedence, used by everything in tally that asks (backend `auto`, the gloo,
// nccl and mpi backends, Evaluator::local_rank, the `tally` command, the Python package).
//
// The launchers (kLaunchers in launch.cpp), innermost first:
//   torchrun  RANK, WORLD_SIZE, LOCAL_RANK with TORCHELASTIC_RUN_ID or MASTER_ADDR ("signed")
//   mpirun    OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK (Open MPI's mpirun, prterun)
//   PMI       PMI_RANK, PMI_SIZE, MPI_LOCALRANKID (MPICH's and Intel MPI's hydra, srun --mpi=pmi2)
//   PMIx      PMIX_RANK, no size (srun --mpi=pmix, prterun)
//   srun      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, only in a step (SLURM_STEP_ID is set):
//             an sbatch script or salloc shell has SLURM_NTASKS (and SLURM_PROCID=0) too, but
//             tally run there once is one process, not one of SLURM_NTASKS
//   env://    RANK, WORLD_SIZE, LOCAL_RANK without TORCHELASTIC_RUN_ID or MASTER_ADDR (by hand)
//
// Why this order: a launcher started by another one inherits the outer one's variables, and only
// the inner one knows this process. torchrun starts its workers itself and is started by srun or
// mpirun, never the reverse: its variables win, and the outer launcher's describe torchrun's
// agent (mpirun starting torchrun: OMPI rank 1 of 4 and RANK=3 of 8 is worker 3 of 8). mpirun and
// hydra under Slurm start their daemons through srun: their variables win over SLURM_* (which
// then number the daemons). RANK and WORLD_SIZE without torchrun's signature are either set by a
// wrapper for this process or left over from an outer shell: tally cannot tell, so they count
// only when they agree with the other launcher or stand alone.
//
// Rules:
//   - the first complete launcher in that order is the one (`launcher`, `source`);
//   - an incomplete one (a rank without a size, or a size without a rank: a stray RANK under
//     srun) is ignored when a complete one is set, and a ConfigError when none is;
//   - two complete launchers that disagree on rank or size are a ConfigError naming both, unless
//     the order above says which one is inside the other (signed torchrun over anything; mpirun,
//     PMI or PMIx over srun). Two MPI launchers that disagree, or env:// against any launcher,
//     are conflicts;
//   - the local rank is the winner's, else that of a launcher that agrees with it (srun
//     --mpi=pmix: PMIX_RANK has no local rank, SLURM_LOCALID gives it);
//   - a set variable that is not an integer, a size below 1, a rank or local rank outside
//     [0, size): ConfigError naming the variable.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tally/sdk/export.hpp"

namespace tally::launch {

/// getenv, replaceable in tests. Returns nullptr for an unset variable.
using GetEnv = std::function<const char*(const char*)>;
/// The process environment (std::getenv).
TALLY_API GetEnv process_env();

/// This process's place in the job, as the launcher's environment tells it.
struct LaunchEnv {
  int rank = 0;
  /// 1 when no launcher is set. 0 when the launcher gives a rank but no size (PMIx alone: MPI
  /// knows it); see size_known().
  int world_size = 1;
  /// Absent when the launcher does not say (no launcher at all: a world of one).
  std::optional<int> local_rank;
  /// The variables read, for messages: "RANK=1, WORLD_SIZE=4, LOCAL_RANK=1 (torchrun)"; empty
  /// when no launcher variable is set.
  std::string source;
  /// The launcher: "torchrun", "mpirun", "PMI", "PMIx", "srun", "env" (RANK and WORLD_SIZE by
  /// hand), or "" (none: a world of one).
  std::string launcher;
  /// Other launchers whose variables agree with it (srun --mpi=pmix: {"srun"} beside "PMIx").
  std::vector<std::string> agreeing;
  /// An MPI launcher started this process: the winner is mpirun, PMI or PMIx.
  bool under_mpi = false;
  /// An srun step is among the launchers that agree (or is the launcher itself).
  bool srun_step = false;
  /// An id of this job and step when the launcher gives one (TORCHELASTIC_RUN_ID,
  /// SLURM_JOB_ID.SLURM_STEP_ID, PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid): what a rendezvous
  /// file or folder records so that one left by an earlier job is never taken for this job's.
  std::string job_id;

  bool size_known() const { return world_size > 0; }
};

/// Reads the launcher variables by the rules above. tally::ConfigError, its message starting with
/// `who` ("gloo backend: "), for an incomplete launcher alone, a value that is not an integer, a
/// value out of range, or two launchers that disagree.
TALLY_API LaunchEnv read(const GetEnv& env, std::string_view who);

/// read(process_env(), who).
TALLY_API LaunchEnv current(std::string_view who);

/// The world size the process environment gives (read()), 1 when none is set, the size is
/// unknown (PMIx alone) or a value is wrong; for launchers that disagree, the largest world one
/// of them claims (so that a rank errs towards the others: it joins them as failed, and a
/// world-of-one backend is refused, rather than running alone). For error paths that run before
/// any backend and must not throw.
TALLY_API int launcher_world_size() noexcept;
TALLY_API int launcher_world_size(const GetEnv& env) noexcept;

/// The rank the process environment gives (read()), or -1 when no launcher is set or the
/// variables are wrong. Never throws.
TALLY_API int launcher_rank() noexcept;
TALLY_API int launcher_rank(const GetEnv& env) noexcept;

}  // namespace tally::launch
