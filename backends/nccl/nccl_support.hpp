// The parts of the nccl backend that need no GPU, no NCCL and no MPI, kept apart so they are unit
// tested on any machine (tests/gpu/test_nccl_bootstrap.cpp):
//   - the launcher's environment: rank, world size and local rank as mpirun, torchrun or Slurm
//     set them;
//   - how the communicator is bootstrapped (MPI, the job's TCP store, a rendezvous file, or
//     alone; see choose_bootstrap for the precedence) and which device a rank uses;
//   - the store's address (torchrun's MASTER_ADDR/MASTER_PORT, srun, or backend.master_addr /
//     backend.master_port) and the record rank 0 sets there: its status, the world size and the
//     NCCL id;
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

#include "../common/launch_env.hpp"
#include "../common/tcp_store.hpp"

namespace tally_nccl {

// The launcher's environment (backends/common/launch_env.hpp), shared with the gloo backend.
using tally_launch::GetEnv;
using tally_launch::LaunchEnv;
using tally_launch::process_env;
/// tally_launch::read_launch_env with the nccl backend's prefix on its messages.
inline LaunchEnv read_launch_env(const GetEnv& env) {
  return tally_launch::read_launch_env(env, "nccl backend: ");
}

enum class BootstrapKind {
  Alone,  // a world of one: the id never leaves the process
  Mpi,    // rank 0 creates the id and MPI broadcasts it
  File,   // rank 0 publishes the id in backend.rendezvous, the others poll for it
  Store,  // rank 0 sets the id in the job's TCP store (tcp_store.hpp), the others get it
};
const char* bootstrap_name(BootstrapKind k) noexcept;

/// Where a TCP store address comes from, if anywhere.
enum class StoreSource {
  None,         // no store: neither the environment nor the config names one
  Environment,  // MASTER_ADDR/MASTER_PORT (torchrun, or set by hand), or srun's variables
  Config,       // backend.master_addr / backend.master_port: asked for explicitly
};

/// How the communicator is bootstrapped, first match wins:
///   1. backend.rendezvous is set: the rendezvous file (even for a world of one);
///   2. backend.master_addr or backend.master_port is set: the TCP store (even under mpirun, and
///      for a world of one);
///   3. an MPI launcher started the process (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK) and the
///      backend was built with MPI: MPI -- under mpirun, a MASTER_ADDR/MASTER_PORT left in the
///      environment does not take over;
///   4. a world of one: alone;
///   5. the environment names a store (MASTER_ADDR/MASTER_PORT as torchrun sets them, or srun's
///      SLURM_STEP_NODELIST/SLURM_JOB_ID): the TCP store.
/// tally::ConfigError when several processes have no way to share the id (naming the options).
BootstrapKind choose_bootstrap(const LaunchEnv& env, bool have_rendezvous, bool built_with_mpi,
                               StoreSource store = StoreSource::None);

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

// ---- the TCP store ---------------------------------------------------------------------------

/// Whether the environment names a store (MASTER_ADDR or MASTER_PORT, or srun's
/// SLURM_STEP_NODELIST): only looks, never parses, so that a malformed value left in the
/// environment of an mpirun job (which bootstraps through MPI) is no error.
bool store_in_env(const GetEnv& env);

/// The store the nccl backend bootstraps through, for rank `rank`:
///   - `master_addr` / `master_port` (backend.master_addr / backend.master_port) when either is
///     given, the other taken from MASTER_ADDR / MASTER_PORT when not; rank 0 hosts the store,
///     unless TORCHELASTIC_USE_AGENT_STORE=True and the address is torchrun's own;
///   - else the environment's (tally_store::store_address_from_env: torchrun, a hand-set pair,
///     srun).
/// tally::ConfigError naming the parameter or variable when the address is incomplete or a port
/// is outside 1..65535; also when nothing names a store.
tally_store::StoreAddress store_address(const GetEnv& env, int rank,
                                        const std::optional<std::string>& master_addr,
                                        std::optional<std::int64_t> master_port);

/// The key rank 0 sets in the store under the backend's prefix ("tally/<n>/"): "tally/<n>/nccl/id".
std::string store_id_key(const std::string& prefix);

/// What rank 0 sets under store_id_key(): the status of its ncclGetUniqueId (0: success; else the
/// ncclResult_t, and the others fail at once instead of timing out), the world size it was started
/// with, and the id.
struct StoreIdRecord {
  std::int32_t status = 0;
  std::int32_t world_size = 0;
  std::vector<std::byte> id;
};
std::vector<std::byte> encode_store_id(const StoreIdRecord& record);
/// nullopt for bytes that are not a record (another program's value under tally's key).
std::optional<StoreIdRecord> decode_store_id(std::span<const std::byte> bytes);

// ---- staging buffers ------------------------------------------------------------------------

/// The new capacity of a staging buffer of capacity `current` that must hold `need` bytes: the
/// same when it fits, else at least double (fewer reallocations as payloads grow), but never more
/// than max(need, limit), the largest a transport call can ask for.
std::size_t grown_capacity(std::size_t current, std::size_t need, std::size_t limit) noexcept;

}  // namespace tally_nccl
