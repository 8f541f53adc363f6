// `backend: {type: auto}`: the backend a launcher's environment asks for (private to libtally;
// README, "Across hosts").
//
// The launcher is tally/launch.hpp's (one table and precedence for all of tally); by launcher:
//   mpirun (OMPI_COMM_WORLD_*)                                                 -> mpi
//   torchrun, or RANK and WORLD_SIZE set by hand                               -> gloo
//   PMIx (PMIX_RANK: srun --mpi=pmix, prterun), or PMI (PMI_SIZE: MPICH's
//   mpiexec) except PMI that agrees with an srun step (srun --mpi=pmi2, which
//   Debian's Open MPI cannot join)                                             -> mpi
//   an srun step without PMIx (SLURM_PROCID, SLURM_NTASKS, SLURM_STEP_ID)      -> gloo
//   none of these                                                              -> nondist
// A world of one, from any launcher: nondist. auto never picks nccl: a GPU per rank is asked for
// by name (type: nccl).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "config.hpp"
#include "tally/registry.hpp"

namespace tally {

/// getenv, replaceable in tests: nullptr for an unset variable.
using EnvLookup = std::function<const char*(const char*)>;
EnvLookup process_env_lookup();

struct BackendChoice {
  /// nondist, mpi or gloo.
  std::string type;
  /// The variables it was chosen from, for `tally run`'s notice: "RANK=0, WORLD_SIZE=4,
  /// MASTER_ADDR=10.0.0.1, MASTER_PORT=29500 (torchrun)", or "no launcher variables".
  std::string reason;
};

/// The backend `auto` stands for in this environment. ConfigError (tally::launch::read's) when
/// the launcher variables are wrong: not integers, incomplete, or two launchers that disagree.
BackendChoice choose_backend(const EnvLookup& env);

/// The backends auto may choose, in the order they are tried for parameter names.
const std::vector<std::string>& auto_candidates();

/// What auto makes of a config's `backend:` keys (other than type) in this environment.
struct AutoBackend {
  BackendChoice choice;
  const Component* component = nullptr;
  /// The keys the chosen backend takes, to be checked by make_params against its schema.
  Located params;
  /// Keys another candidate takes but the chosen one does not (timeout under nondist): left out.
  std::vector<std::string> ignored;
};

/// Chooses (choose_backend) and finds the chosen backend in `registry`. A key that no candidate
/// backend in the registry takes is a ConfigError naming it and the keys auto passes on; a chosen
/// backend the registry lacks (no gloo plugin) is a ConfigError saying why it was chosen.
AutoBackend resolve_auto_backend(const Registry& registry, const Located& params,
                                 const EnvLookup& env);

}  // namespace tally
