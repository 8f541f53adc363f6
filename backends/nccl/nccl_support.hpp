// The parts of the nccl backend that need no GPU, no NCCL and no MPI, kept apart so they are unit
// tested on any machine (tests/gpu/test_nccl_bootstrap.cpp):
//   - the launcher's environment: rank, world size and local rank as mpirun, torchrun or Slurm
//     set them;
//   - how the communicator is bootstrapped (MPI, a rendezvous file, or alone) and which device a
//     rank uses;
//   - the rendezvous file: rank 0 publishes the NCCL unique id atomically (temp file + rename),
//     the other ranks poll for it until the timeout;
//   - the growth of the staging buffers.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tally_nccl {

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
  /// An MPI launcher started this process (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK is set):
  /// MPI can bootstrap the communicator.
  bool under_mpi = false;
  /// An id of this job and step when the launcher gives one (TORCHELASTIC_RUN_ID,
  /// SLURM_JOB_ID.SLURM_STEP_ID, PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid), written into the
  /// rendezvous file so that a file left by an earlier job is never taken for this job's.
  std::string job_id;
};

/// Reads the launcher variables, first match wins: Open MPI's OMPI_COMM_WORLD_RANK / _SIZE /
/// _LOCAL_RANK (mpirun), then RANK / WORLD_SIZE / LOCAL_RANK (torchrun), then SLURM_PROCID /
/// SLURM_NTASKS / SLURM_LOCALID (srun). No variable at all: a world of one. tally::ConfigError
/// naming the variables when a family is incomplete (a rank without a size), a value is not an
/// integer, or the values are inconsistent (rank outside [0, size), ...).
LaunchEnv read_launch_env(const GetEnv& env);

enum class BootstrapKind {
  Alone,  // a world of one: the id never leaves the process
  Mpi,    // rank 0 creates the id and MPI broadcasts it
  File,   // rank 0 publishes the id in backend.rendezvous, the others poll for it
};
const char* bootstrap_name(BootstrapKind k) noexcept;

/// How the communicator is bootstrapped: the rendezvous file when one is configured, else MPI under
/// an MPI launcher when the backend was built with MPI, else alone for a world of one.
/// tally::ConfigError when several processes have no way to share the id.
BootstrapKind choose_bootstrap(const LaunchEnv& env, bool have_rendezvous, bool built_with_mpi);

/// The CUDA device of this rank: `requested` (backend.device) when given, else the local rank
/// modulo the number of visible devices (a world of one without a local rank: device 0).
/// tally::ConfigError for a requested device outside [0, device_count), and for a missing local
/// rank in a world of several (naming the launcher variables).
int choose_device(std::optional<std::int64_t> requested, const LaunchEnv& env, int device_count);

// ---- the rendezvous file ------------------------------------------------------------------

/// The text of a rendezvous file: a header line, the world size, the job id and the id in hex.
std::string encode_rendezvous(std::span<const std::byte> id, int world_size,
                              const std::string& job_id);

/// What a reader makes of a rendezvous file's text.
struct RendezvousRecord {
  bool valid = false;  // a complete tally rendezvous record
  int world_size = 0;
  std::string job_id;
  std::vector<std::byte> id;
};
RendezvousRecord decode_rendezvous(const std::string& text);

/// Rank 0: writes the record to `path` atomically: a temporary file in the same folder, flushed
/// to disk, then renamed over `path` (replacing a file an earlier job left). tally::ConfigError
/// naming the path when it cannot be written.
void publish_rendezvous(const std::filesystem::path& path, std::span<const std::byte> id,
                        int world_size, const std::string& job_id);

/// The other ranks: polls `path` until it holds a record of this job (same job id when both
/// have one, and the same world size) and returns its id of `id_size` bytes.
/// tally::ConfigError when a record of this job disagrees on the world size or the id size;
/// tally::RuntimeError when `timeout` passes first, saying on which rank, what was waited for and
/// what the file held if anything.
std::vector<std::byte> wait_for_rendezvous(const std::filesystem::path& path, std::size_t id_size,
                                           int world_size, const std::string& job_id, int rank,
                                           std::chrono::duration<double> timeout);

/// Rank 0, once every rank has joined the communicator: the file has served; removing it lets
/// the next job start clean. Never throws.
void remove_rendezvous(const std::filesystem::path& path) noexcept;

// ---- staging buffers ------------------------------------------------------------------------

/// The new capacity of a staging buffer of capacity `current` that must hold `need` bytes: the
/// same when it fits, else at least double (fewer reallocations as payloads grow), but never more
/// than max(need, limit), the largest a transport call can ask for.
std::size_t grown_capacity(std::size_t current, std::size_t need, std::size_t limit) noexcept;

}  // namespace tally_nccl
