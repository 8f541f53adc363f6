// The `nccl` backend: NCCL collectives on CUDA device buffers, one GPU per rank.
//
// Transport. The object algorithms live once in the engine (tally::Collectives,
// engine/src/collectives.cpp); this backend supplies the primitives. all_gather_equal: the
// caller's bytes are copied into a
// pinned host buffer, then to this rank's slot of a device buffer, gathered in place with one
// ncclAllGather, and copied back (device -> pinned -> caller). broadcast: the same with
// ncclBroadcast; reduce_values (the optional tally::Reducer): the same with ncclReduce on int64,
// in place. gather_varying (the optional tally::RootedGather, what a sync uses to bring the states
// to rank 0): grouped point-to-point calls -- the root ncclRecv's every other rank's bytes into
// their place in its device buffer, the others ncclSend theirs, within one ncclGroupStart/
// ncclGroupEnd -- so a rank other than the root stages and moves only its own bytes. Varying
// all-gathers use the engine's fallback: padded to the largest, gathered equal, unpadded on the
// host. Both staging
// buffers (device and pinned host) are allocated on first use, grow geometrically, never beyond
// chunk_bytes(), and are reused across syncs. Pinned host memory is not an optimisation only: a
// device-to-host copy into pageable memory blocks the calling thread until the copy -- queued
// behind the collective -- completes, which would defeat the timeout.
//
// Errors and timeouts. The communicator is created non-blocking (config.blocking = 0). Every
// collective is enqueued, then this thread polls cudaStreamQuery and ncclCommGetAsyncError until
// the stream is done or the call's deadline (CallOptions::timeout, else backend.timeout) passes;
// an error or the deadline aborts the communicator
// (ncclCommAbort) and throws tally::RuntimeError naming the rank and the operation. A later call
// on an aborted backend throws too, repeating the first error.
//
// Bootstrap (nccl_support.hpp, choose_bootstrap: the precedence). Rank 0 creates the
// ncclUniqueId and hands it to the others through
//   - a rendezvous file (backend.rendezvous) that the other ranks poll, when one is configured;
//   - the job's TCP store (backends/common/tcp_store.hpp) when backend.master_addr/master_port
//     ask for it, or -- when no MPI launcher started the process -- when the environment names
//     one (torchrun's MASTER_ADDR/MASTER_PORT, srun's node list): rank 0 sets the id under the
//     backend's key prefix, the others get it, each wait bounded by backend.timeout. Rank 0
//     serves the store itself unless torchrun's agent does, and serves it until the process ends;
//   - MPI under an MPI launcher: MPI broadcasts it (MPI is initialised only if the host program
//     has not, and finalised only by the backend that initialised it, as the mpi backend does);
// a world of one needs none of them.
// The device is backend.device, or the local rank modulo the visible devices.
//
// libnccl is opened with dlopen when the first backend is made, not linked: the registry loads
// every plugin for every command, and a plugin that needs a missing library fails to load, which
// would break `tally run` with the nondist or mpi backend on machines without NCCL. The CUDA
// runtime is linked statically (its symbols kept local) for the same reason.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#if TALLY_NCCL_WITH_MPI
#include <mpi.h>

#include "../common/mpi_session.hpp"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "nccl_support.hpp"
#include "tally/sdk/dist_backend.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "the nccl backend needs NCCL >= 2.14 (non-blocking communicators)"
#endif

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::int64_t kDefaultChunkBytes = std::int64_t{256} << 20;
constexpr double kDefaultTimeout = 600.0;
constexpr int kMinNcclVersion = NCCL_VERSION(2, 14, 0);
#if TALLY_NCCL_WITH_MPI
constexpr bool kWithMpi = true;
#else
constexpr bool kWithMpi = false;
#endif

std::string cuda_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// ---- libnccl, opened on first use -----------------------------------------------------------

struct NcclApi {
  decltype(&ncclGetVersion) GetVersion = nullptr;
  decltype(&ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&ncclCommInitRankConfig) CommInitRankConfig = nullptr;
  decltype(&ncclCommFinalize) CommFinalize = nullptr;
  decltype(&ncclCommDestroy) CommDestroy = nullptr;
  decltype(&ncclCommAbort) CommAbort = nullptr;
  decltype(&ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&ncclGetErrorString) GetErrorString = nullptr;
  decltype(&ncclGetLastError) GetLastError = nullptr;
  decltype(&ncclAllGather) AllGather = nullptr;
  decltype(&ncclBroadcast) Broadcast = nullptr;
  decltype(&ncclReduce) Reduce = nullptr;
  decltype(&ncclSend) Send = nullptr;
  decltype(&ncclRecv) Recv = nullptr;
  decltype(&ncclGroupStart) GroupStart = nullptr;
  decltype(&ncclGroupEnd) GroupEnd = nullptr;
  int version = 0;
  std::string file;
};

template <class F>
bool bind(void* lib, const char* name, F& fn, std::string& missing) {
  void* sym = dlsym(lib, name);
  if (sym == nullptr) {
    missing += (missing.empty() ? "" : ", ") + std::string(name);
    return false;
  }
  fn = reinterpret_cast<F>(sym);
  return true;
}

// The loaded library, or a RuntimeError saying why it cannot be. The handle is never closed:
// NCCL keeps threads and state for the life of the process.
const NcclApi& nccl_api() {
  static std::mutex mutex;
  static std::optional<NcclApi> api;
  static std::string failure;
  std::lock_guard lock(mutex);
  if (api) return *api;
  if (!failure.empty()) throw tally::RuntimeError(failure);

  std::vector<std::string> candidates = {"libnccl.so.2", "libnccl.so"};
#ifdef TALLY_NCCL_LIBRARY
  candidates.emplace_back(TALLY_NCCL_LIBRARY);  // where the build found it
#endif
  void* lib = nullptr;
  std::string tried;
  std::string file;
  for (const auto& c : candidates) {
    lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) {
      file = c;
      break;
    }
    const char* why = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(why != nullptr ? why : c.c_str());
  }
  if (lib == nullptr) {
    failure = "nccl backend: cannot load the NCCL library (" + tried +
              "): install NCCL or add its folder to LD_LIBRARY_PATH";
    throw tally::RuntimeError(failure);
  }
  NcclApi a;
  a.file = file;
  std::string missing;
  bind(lib, "ncclGetVersion", a.GetVersion, missing);
  bind(lib, "ncclGetUniqueId", a.GetUniqueId, missing);
  bind(lib, "ncclCommInitRankConfig", a.CommInitRankConfig, missing);
  bind(lib, "ncclCommFinalize", a.CommFinalize, missing);
  bind(lib, "ncclCommDestroy", a.CommDestroy, missing);
  bind(lib, "ncclCommAbort", a.CommAbort, missing);
  bind(lib, "ncclCommGetAsyncError", a.CommGetAsyncError, missing);
  bind(lib, "ncclGetErrorString", a.GetErrorString, missing);
  bind(lib, "ncclGetLastError", a.GetLastError, missing);
  bind(lib, "ncclAllGather", a.AllGather, missing);
  bind(lib, "ncclBroadcast", a.Broadcast, missing);
  bind(lib, "ncclReduce", a.Reduce, missing);
  bind(lib, "ncclSend", a.Send, missing);
  bind(lib, "ncclRecv", a.Recv, missing);
  bind(lib, "ncclGroupStart", a.GroupStart, missing);
  bind(lib, "ncclGroupEnd", a.GroupEnd, missing);
  if (!missing.empty()) {
    failure = "nccl backend: " + file + " lacks " + missing + ": NCCL >= 2.14 is needed";
    throw tally::RuntimeError(failure);
  }
  if (a.GetVersion(&a.version) != ncclSuccess || a.version < kMinNcclVersion) {
    failure = "nccl backend: " + file + " is NCCL version code " + std::to_string(a.version) +
              "; NCCL >= 2.14 is needed (non-blocking communicators)";
    throw tally::RuntimeError(failure);
  }
  api = a;
  return *api;
}

// ---- MPI, for the bootstrap only -------------------------------------------------------------

#if TALLY_NCCL_WITH_MPI
using MpiHold = tally::mpi_session::Hold;
inline std::string mpi_text(int code) { return tally::mpi_session::error_string(code); }
#endif

// ---- the TCP store, for the bootstrap only ----------------------------------------------------

// Rank 0 serves the store (when it hosts it: not under torchrun's agent store) until the process
// exits, not only while its backend lives: another rank that makes its next backend before rank 0
// has destroyed the previous one connects to the same server and finds the keys under the next
// prefix (tcp_store.hpp, JobStore); a server closed and opened again between the two would drop
// that rank's connection and the counts of the backends made.
std::string store_text(const tally_store::StoreAddress& a) {
  const bool v6 = a.host.find(':') != std::string::npos;
  return (v6 ? "[" + a.host + "]" : a.host) + ":" + std::to_string(a.port) + " (" + a.source + ")";
}

// ---- the backend -----------------------------------------------------------------------------

class NcclBackend final : public tally::DistBackend,
                          public tally::Reducer,
                          public tally::RootedGather {
 public:
  explicit NcclBackend(const tally::Params& params) {
    // 1. Parameters: wrong values are config errors before anything is touched.
    const Settings set = read_params(params);

    // 2. The launcher's environment and the bootstrap it allows (config errors too).
    const tally_nccl::GetEnv get_env = tally_nccl::process_env();
    tally_nccl::LaunchEnv env = tally_nccl::read_launch_env(get_env);
    const auto store_source = set.master_addr || set.master_port ? tally_nccl::StoreSource::Config
                              : tally_nccl::store_in_env(get_env)
                                  ? tally_nccl::StoreSource::Environment
                                  : tally_nccl::StoreSource::None;
    const auto bootstrap =
        tally_nccl::choose_bootstrap(env, !rendezvous_.empty(), kWithMpi, store_source);
    rank_ = env.rank;
    world_ = env.world_size;
    std::optional<tally_store::StoreAddress> store;
    if (bootstrap == tally_nccl::BootstrapKind::Store) store = job_store(set, get_env, env);

    try {
      // 3. A GPU, and NCCL.
      const int count = cuda_devices();
      api_ = &nccl_api();

      // 4. Rank, world and local rank from MPI when it bootstraps; the device.
#if TALLY_NCCL_WITH_MPI
      if (bootstrap == tally_nccl::BootstrapKind::Mpi) join_mpi(env);
#endif
      if (set.chunk < world_)
        params.fail("chunk_bytes", "must be at least the world size (" + std::to_string(world_) +
                                       "), got " + std::to_string(set.chunk));
      chunk_bytes_ = static_cast<std::size_t>(set.chunk);
      device_ = tally_nccl::choose_device(set.requested_device, env, count);
      cuda_check(cudaSetDevice(device_), "cudaSetDevice");

      // 5. The unique id: made by rank 0, shared by the bootstrap.
      const ncclUniqueId id = share_unique_id(bootstrap, store, env);

      // 6. The stream and the communicator.
      init_communicator(id, bootstrap, store);
    } catch (...) {
      release();
      throw;
    }
  }

  ~NcclBackend() override { release(); }
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  std::string name() const override { return "nccl"; }
  bool is_initialized() const override { return comm_ != nullptr && broken_.empty(); }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  // Every rank contributes one byte and waits for everyone's: a barrier with the same timeout
  // and error handling as the other collectives.
  void barrier(const tally::CallOptions& call) override {
    std::byte mine{0};
    barrier_recv_.resize(static_cast<std::size_t>(world_));
    all_gather_equal(&mine, 1, barrier_recv_.data(), call);
  }
  std::size_t chunk_bytes() const override { return chunk_bytes_; }
  void* find_primitive(std::string_view id) override {
    return tally::offer_primitives<tally::Reducer, tally::RootedGather>(this, id);
  }

  void all_gather_equal(const std::byte* send, std::size_t n, std::byte* recv,
                        const tally::CallOptions& call) override {
    if (n == 0) return;
    usable();
    const DeviceScope scope(*this);
    const std::size_t total = n * static_cast<std::size_t>(world_);
    reserve(total);
    const std::size_t mine = n * static_cast<std::size_t>(rank_);
    const std::string what = named(call, "ncclAllGather of " + std::to_string(n) + " bytes a rank");
    const double timeout = seconds_of(call);
    const auto start = Clock::now();
    // In place: this rank's bytes go to its own slot of the receive buffer.
    std::memcpy(host_ + mine, send, n);
    cuda_check(
        cudaMemcpyAsync(device_buf_ + mine, host_ + mine, n, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (host to device) before " + what);
    const ncclResult_t r =
        api_->AllGather(device_buf_ + mine, device_buf_, n, ncclUint8, comm_, stream_);
    if (r != ncclSuccess && r != ncclInProgress) fail_nccl(what, r);
    if (r == ncclInProgress) wait_comm(what, start, timeout, kStuckHint);
    cuda_check(cudaMemcpyAsync(host_, device_buf_, total, cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync (device to host) after " + what);
    wait_stream(what, start, timeout);
    std::memcpy(recv, host_, total);
  }

  void broadcast(std::byte* buf, std::size_t n, int src, const tally::CallOptions& call) override {
    if (n == 0) return;
    usable();
    const DeviceScope scope(*this);
    reserve(n);
    const bool is_src = rank_ == src;
    const std::string what = named(
        call, "ncclBroadcast of " + std::to_string(n) + " bytes from rank " + std::to_string(src));
    const double timeout = seconds_of(call);
    const auto start = Clock::now();
    if (is_src) {
      std::memcpy(host_, buf, n);
      cuda_check(cudaMemcpyAsync(device_buf_, host_, n, cudaMemcpyHostToDevice, stream_),
                 "cudaMemcpyAsync (host to device) before " + what);
    }
    const ncclResult_t r =
        api_->Broadcast(device_buf_, device_buf_, n, ncclUint8, src, comm_, stream_);
    if (r != ncclSuccess && r != ncclInProgress) fail_nccl(what, r);
    if (r == ncclInProgress) wait_comm(what, start, timeout, kStuckHint);
    if (!is_src)
      cuda_check(cudaMemcpyAsync(host_, device_buf_, n, cudaMemcpyDeviceToHost, stream_),
                 "cudaMemcpyAsync (device to host) after " + what);
    wait_stream(what, start, timeout);
    if (!is_src) std::memcpy(buf, host_, n);
  }

  // The rooted gather, with grouped point-to-point calls: the root receives every other rank's
  // bytes straight into their place in its device staging buffer (ncclRecv), the others send
  // theirs (ncclSend), all in one ncclGroupStart/ncclGroupEnd; a zero count is no call at all.
  // The root's own bytes never leave the host. Only the root stages (and copies back) the whole
  // gather: another rank's staging holds its own contribution.
  void gather_varying(const std::byte* send, std::span<const std::size_t> counts, std::byte* recv,
                      int root, const tally::CallOptions& call) override {
    usable();
    const std::size_t world = static_cast<std::size_t>(world_);
    if (counts.size() != world || root < 0 || root >= world_)
      throw tally::RuntimeError("nccl backend: " + where() + "gather_varying got " +
                                std::to_string(counts.size()) + " counts and root " +
                                std::to_string(root) + " for a world of " + std::to_string(world_));
    const bool is_root = rank_ == root;
    const std::size_t mine = counts[static_cast<std::size_t>(rank_)];
    std::size_t total = 0;
    for (const std::size_t n : counts) total += n;
    const std::size_t theirs = total - counts[static_cast<std::size_t>(root)];
    if (is_root && mine > 0)
      std::memcpy(recv + offset_of(counts, rank_), send, mine);  // its own: host to host
    // Nothing crosses the wire for this rank: a sender with nothing to send, or a root that
    // receives nothing. (Every rank decides from the same counts, so no call is left unmatched.)
    if (is_root ? theirs == 0 : mine == 0) return;
    const DeviceScope scope(*this);
    reserve(is_root ? total : mine);
    const std::string what =
        named(call, "grouped ncclSend/ncclRecv gathering " + std::to_string(total) +
                        " bytes to rank " + std::to_string(root));
    const double timeout = seconds_of(call);
    const auto start = Clock::now();
    if (!is_root) {
      std::memcpy(host_, send, mine);
      cuda_check(cudaMemcpyAsync(device_buf_, host_, mine, cudaMemcpyHostToDevice, stream_),
                 "cudaMemcpyAsync (host to device) before " + what);
    }
    // Every call of the group is made and the group closed even when one fails, so that this
    // thread's NCCL group state is left balanced; the first failure then aborts.
    ncclResult_t first = api_->GroupStart();
    std::string failed_call = "ncclGroupStart";
    const auto note = [&](ncclResult_t r, const char* call_name) {
      if (first == ncclSuccess && r != ncclSuccess && r != ncclInProgress) {
        first = r;
        failed_call = call_name;
      }
    };
    if (first == ncclSuccess) {
      if (is_root) {
        std::size_t at = 0;
        for (int r = 0; r < world_; ++r) {
          const std::size_t n = counts[static_cast<std::size_t>(r)];
          if (r != root && n > 0)
            note(api_->Recv(device_buf_ + at, n, ncclUint8, r, comm_, stream_), "ncclRecv");
          at += n;
        }
      } else {
        note(api_->Send(device_buf_, mine, ncclUint8, root, comm_, stream_), "ncclSend");
      }
      const ncclResult_t end = api_->GroupEnd();
      if (first == ncclSuccess && end != ncclSuccess) {
        first = end;
        failed_call = "ncclGroupEnd";
      }
    }
    if (first != ncclSuccess && first != ncclInProgress)
      fail_nccl(what + " (" + failed_call + ")", first);
    if (first == ncclInProgress) wait_comm(what, start, timeout, kStuckHint);
    if (is_root) {
      // Back to the host around the root's own slot, which holds nothing.
      const std::size_t own_at = offset_of(counts, root);
      const std::size_t after = own_at + counts[static_cast<std::size_t>(root)];
      if (own_at > 0)
        cuda_check(cudaMemcpyAsync(host_, device_buf_, own_at, cudaMemcpyDeviceToHost, stream_),
                   "cudaMemcpyAsync (device to host) after " + what);
      if (after < total)
        cuda_check(cudaMemcpyAsync(host_ + after, device_buf_ + after, total - after,
                                   cudaMemcpyDeviceToHost, stream_),
                   "cudaMemcpyAsync (device to host) after " + what);
    }
    wait_stream(what, start, timeout);
    if (is_root) {
      const std::size_t own_at = offset_of(counts, root);
      const std::size_t after = own_at + counts[static_cast<std::size_t>(root)];
      if (own_at > 0) std::memcpy(recv, host_, own_at);
      if (after < total) std::memcpy(recv + after, host_ + after, total - after);
    }
  }

  void reduce_values(std::int64_t* values, std::size_t n, tally::ReduceOp op, int root,
                     const tally::CallOptions& call) override {
    if (n == 0) return;
    usable();
    const DeviceScope scope(*this);
    const std::size_t bytes = n * sizeof(std::int64_t);
    reserve(bytes);
    const ncclRedOp_t nccl_op = op == tally::ReduceOp::sum   ? ncclSum
                                : op == tally::ReduceOp::min ? ncclMin
                                                             : ncclMax;
    const bool is_root = rank_ == root;
    const std::string what = named(call, "ncclReduce of " + std::to_string(n) +
                                             " int64 values to rank " + std::to_string(root));
    const double timeout = seconds_of(call);
    const auto start = Clock::now();
    std::memcpy(host_, values, bytes);
    cuda_check(cudaMemcpyAsync(device_buf_, host_, bytes, cudaMemcpyHostToDevice, stream_),
               "cudaMemcpyAsync (host to device) before " + what);
    const ncclResult_t r =
        api_->Reduce(device_buf_, device_buf_, n, ncclInt64, nccl_op, root, comm_, stream_);
    if (r != ncclSuccess && r != ncclInProgress) fail_nccl(what, r);
    if (r == ncclInProgress) wait_comm(what, start, timeout, kStuckHint);
    if (is_root)
      cuda_check(cudaMemcpyAsync(host_, device_buf_, bytes, cudaMemcpyDeviceToHost, stream_),
                 "cudaMemcpyAsync (device to host) after " + what);
    wait_stream(what, start, timeout);
    if (is_root) std::memcpy(values, host_, bytes);
  }

 private:
  // ---- the constructor's steps ------------------------------------------------------------------

  /// The backend's parameters, checked (timeout_s_ and rendezvous_ are set here).
  struct Settings {
    std::int64_t chunk = 0;
    std::optional<std::int64_t> requested_device;
    std::optional<std::string> master_addr;
    std::optional<std::int64_t> master_port;
    tally_store::StoreAccessParams store;  // store_bind, store_secret_file
  };

  Settings read_params(const tally::Params& params) {
    Settings set;
    set.chunk = params.get_int("chunk_bytes");
    if (set.chunk < 1)
      params.fail("chunk_bytes", "must be at least 1, got " + std::to_string(set.chunk));
    timeout_s_ = params.get_double("timeout");
    if (!(timeout_s_ > 0) || !std::isfinite(timeout_s_))
      params.fail("timeout", "must be a positive number of seconds, got " + seconds(timeout_s_));
    if (params.has("device")) set.requested_device = params.get_int("device");
    if (params.has("rendezvous")) rendezvous_ = params.get_string("rendezvous");
    if (params.has("master_addr")) set.master_addr = params.get_string("master_addr");
    if (params.has("master_port")) set.master_port = params.get_int("master_port");
    set.store = tally_store::read_store_access(params);
    return set;
  }

  /// The TCP store the bootstrap meets at (config errors before any socket is opened).
  tally_store::StoreAddress job_store(const Settings& set, const tally_nccl::GetEnv& get_env,
                                      const tally_nccl::LaunchEnv& env) const {
    auto store = tally_nccl::store_address(get_env, rank_, set.master_addr, set.master_port);
    tally_store::secure_store_address(store, get_env, set.store.bind, set.store.secret_file,
                                      "nccl backend: rank " + std::to_string(rank_) + ": ");
    // Rank 0 serves the store to every rank: a world it cannot serve is a config error before
    // any socket is opened.
    tally_store::check_world_fits(world_, 0, store.host_here, env.source,
                                  "nccl backend: rank " + std::to_string(rank_) + ": ");
    return store;
  }

  /// The number of CUDA devices; RuntimeError when there is none.
  int cuda_devices() const {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1) {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      throw tally::RuntimeError(
          "nccl backend: " + where() + "no CUDA device found: " +
          (e != cudaSuccess ? "cudaGetDeviceCount failed with " + cuda_text(e)
                            : std::string("cudaGetDeviceCount returned 0 devices")) +
          (visible != nullptr ? " (CUDA_VISIBLE_DEVICES='" + std::string(visible) + "')" : ""));
    }
    return count;
  }

#if TALLY_NCCL_WITH_MPI
  /// Rank, world and local rank from MPI_COMM_WORLD (a duplicate of it, kept until the id is
  /// shared), into `env`.
  void join_mpi(tally_nccl::LaunchEnv& env) {
    mpi_.acquire("nccl backend", "initialise MPI in the host program, or use backend.rendezvous");
    mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &mpi_comm_), "MPI_Comm_dup(MPI_COMM_WORLD)");
    mpi_check(MPI_Comm_set_errhandler(mpi_comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    mpi_check(MPI_Comm_rank(mpi_comm_, &rank_), "MPI_Comm_rank");
    mpi_check(MPI_Comm_size(mpi_comm_, &world_), "MPI_Comm_size");
    MPI_Comm node = MPI_COMM_NULL;
    mpi_check(MPI_Comm_split_type(mpi_comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
    int local = 0;
    mpi_check(MPI_Comm_rank(node, &local), "MPI_Comm_rank(node)");
    MPI_Comm_free(&node);
    env.rank = rank_;
    env.world_size = world_;
    env.local_rank = local;
    env.source = "MPI_COMM_WORLD (rank " + std::to_string(rank_) + " of " + std::to_string(world_) +
                 ", local rank " + std::to_string(local) + ")";
  }
#endif

  /// The NCCL unique id: made by rank 0, shared by the bootstrap.
  ncclUniqueId share_unique_id(tally_nccl::BootstrapKind bootstrap,
                               const std::optional<tally_store::StoreAddress>& store,
                               const tally_nccl::LaunchEnv& env) {
    ncclUniqueId id{};
    // Under MPI the other ranks wait in MPI_Bcast, which has no timeout: rank 0 sends its
    // status with the id, so that its failure fails them too instead of hanging them.
    std::int32_t id_status = 0;
    if (rank_ == 0) {
      const ncclResult_t r = api_->GetUniqueId(&id);
      // MPI and the store tell the other ranks first (below), so that they fail at once.
      if (r != ncclSuccess && bootstrap != tally_nccl::BootstrapKind::Mpi &&
          bootstrap != tally_nccl::BootstrapKind::Store)
        nccl_check(r, "ncclGetUniqueId");
      id_status = static_cast<std::int32_t>(r);
    }
    const auto id_bytes = std::as_writable_bytes(std::span(&id, 1));
    switch (bootstrap) {
      case tally_nccl::BootstrapKind::Alone:
        break;
      case tally_nccl::BootstrapKind::File:
        if (rank_ == 0) {
          tally_nccl::publish_rendezvous(rendezvous_, id_bytes, world_, env.job_id);
          published_ = true;
        } else {
          const auto got =
              tally_nccl::wait_for_rendezvous(rendezvous_, id_bytes.size(), world_, env.job_id,
                                              rank_, std::chrono::duration<double>(timeout_s_));
          std::memcpy(id_bytes.data(), got.data(), id_bytes.size());
        }
        break;
      case tally_nccl::BootstrapKind::Store:
        exchange_id_through_store(*store, id_status, id_bytes);
        break;
      case tally_nccl::BootstrapKind::Mpi:
#if TALLY_NCCL_WITH_MPI
      {
        std::byte message[sizeof(std::int32_t) + sizeof(ncclUniqueId)];
        std::memcpy(message, &id_status, sizeof id_status);
        std::memcpy(message + sizeof id_status, id_bytes.data(), id_bytes.size());
        mpi_check(MPI_Bcast(message, static_cast<int>(sizeof message), MPI_BYTE, 0, mpi_comm_),
                  "MPI_Bcast(ncclUniqueId)");
        std::memcpy(&id_status, message, sizeof id_status);
        std::memcpy(id_bytes.data(), message + sizeof id_status, id_bytes.size());
        MPI_Comm_free(&mpi_comm_);
        if (id_status != 0) {
          if (rank_ == 0) nccl_check(static_cast<ncclResult_t>(id_status), "ncclGetUniqueId");
          throw tally::RuntimeError("nccl backend: " + where() +
                                    "rank 0 could not create the NCCL id (ncclGetUniqueId "
                                    "returned " +
                                    std::to_string(id_status) + ")");
        }
      }
#endif
      break;
    }
    return id;
  }

  /// The stream and the non-blocking communicator, waited for within backend.timeout.
  void init_communicator(const ncclUniqueId& id, tally_nccl::BootstrapKind bootstrap,
                         const std::optional<tally_store::StoreAddress>& store) {
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const auto start = Clock::now();
    const ncclResult_t r = api_->CommInitRankConfig(&comm_, world_, id, rank_, &config);
    const std::string init_what =
        "ncclCommInitRankConfig (world size " + std::to_string(world_) +
        ", bootstrap: " + tally_nccl::bootstrap_name(bootstrap) +
        (bootstrap == tally_nccl::BootstrapKind::File    ? " " + rendezvous_
         : bootstrap == tally_nccl::BootstrapKind::Store ? " " + store_text(*store)
                                                         : std::string()) +
        ")";
    if (r != ncclSuccess && r != ncclInProgress) fail_nccl(init_what, r);
    wait_comm(init_what, start, timeout_s_,
              bootstrap == tally_nccl::BootstrapKind::File
                  ? "; did every rank start? A rendezvous file left by an earlier run gives the "
                    "ranks different ids: delete " +
                        rendezvous_ + " and retry"
              : bootstrap == tally_nccl::BootstrapKind::Store
                  ? "; did every rank start? Every rank must be given the same store (MASTER_ADDR, "
                    "MASTER_PORT) and world size"
                  : "; did every rank start?");
    // Every rank has joined, so every rank has read the file: it has served.
    if (published_) {
      tally_nccl::remove_rendezvous(rendezvous_);
      published_ = false;
    }
  }

  // The unique id through the job's TCP store: rank 0 sets its record (status, world size, id)
  // under this backend's key, the others get it, each wait bounded by backend.timeout. The
  // connection is closed after; rank 0's server lives on until the process exits (JobStore).
  void exchange_id_through_store(const tally_store::StoreAddress& address, std::int32_t id_status,
                                 std::span<std::byte> id) {
    const auto timeout = std::chrono::milliseconds(
        static_cast<std::int64_t>(std::ceil(std::min(timeout_s_, 1e9) * 1000.0)));
    tally_store::JobStore store(address, rank_, timeout, "nccl backend: ");
    const std::string key = tally_nccl::store_id_key(store.prefix());
    if (rank_ == 0) {
      tally_nccl::StoreIdRecord record;
      record.status = id_status;
      record.world_size = world_;
      record.id.assign(id.begin(), id.end());
      store.client().set(key, tally_nccl::encode_store_id(record));
      // A round trip after the SET (which has no answer): the store has it before this
      // connection closes.
      const std::string keys[] = {key};
      if (!store.client().check(keys))
        throw tally::RuntimeError("nccl backend: " + where() + "the TCP store at " +
                                  store_text(address) + " does not hold '" + key +
                                  "' right after rank 0 set it");
      if (id_status != 0) nccl_check(static_cast<ncclResult_t>(id_status), "ncclGetUniqueId");
      return;
    }
    const std::vector<std::byte> value =
        store.client().get(key, "the NCCL id that rank 0 sets under '" + key + "'");
    const auto record = tally_nccl::decode_store_id(value);
    const std::string at = "the TCP store at " + store_text(address);
    if (!record)
      throw tally::RuntimeError("nccl backend: " + where() + "the value of '" + key + "' in " + at +
                                " is not a tally NCCL id record (" + std::to_string(value.size()) +
                                " bytes): does another program write tally's keys?");
    if (record->status != 0)
      throw tally::RuntimeError("nccl backend: " + where() +
                                "rank 0 could not create the NCCL id (ncclGetUniqueId returned " +
                                std::to_string(record->status) + "), as it says in " + at);
    if (record->world_size != world_ || record->id.size() != id.size())
      throw tally::ConfigError(
          "nccl backend: " + where() + "rank 0 set a world size of " +
          std::to_string(record->world_size) + " and an id of " +
          std::to_string(record->id.size()) + " bytes in " + at +
          ", this rank has a world size of " + std::to_string(world_) + " and expects " +
          std::to_string(id.size()) +
          " bytes: were the ranks started with different WORLD_SIZE values, or by two jobs "
          "sharing one MASTER_PORT?");
    std::memcpy(id.data(), record->id.data(), id.size());
  }

  static std::size_t offset_of(std::span<const std::size_t> counts, int rank) {
    std::size_t at = 0;
    for (int r = 0; r < rank; ++r) at += counts[static_cast<std::size_t>(r)];
    return at;
  }

  /// "all_gather_object (sync payload): ncclAllGather of 8 bytes a rank".
  static std::string named(const tally::CallOptions& call, std::string what) {
    if (call.name.empty()) return what;
    return std::string(call.name) + ": " + what;
  }
  /// The call's deadline in seconds, or backend.timeout.
  double seconds_of(const tally::CallOptions& call) const {
    return call.timeout.count() > 0 ? std::chrono::duration<double>(call.timeout).count()
                                    : timeout_s_;
  }

  static constexpr const char* kStuckHint =
      "; every rank must reach the same collective: is another rank stuck, dead or running "
      "different code?";

  // Makes this backend's device current for one operation and restores the caller's after, so
  // a host program that works on another device is left as it was.
  class DeviceScope {
   public:
    /// `strict`: a failure to switch throws (and aborts); otherwise it is ignored (release()).
    explicit DeviceScope(NcclBackend& b, bool strict = true) : b_(b) {
      if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
      if (previous_ == b_.device_) return;
      const cudaError_t e = cudaSetDevice(b_.device_);
      if (e != cudaSuccess && strict) b_.cuda_check(e, "cudaSetDevice");
    }
    ~DeviceScope() {
      if (previous_ >= 0 && previous_ != b_.device_) cudaSetDevice(previous_);
    }
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;

   private:
    NcclBackend& b_;
    int previous_ = -1;
  };

  std::string where() const {
    return "rank " + std::to_string(rank_) + " of " + std::to_string(world_) +
           (device_ >= 0 ? " (cuda:" + std::to_string(device_) + ")" : std::string()) + ": ";
  }

  void usable() const {
    if (!broken_.empty())
      throw tally::RuntimeError("nccl backend: " + where() +
                                "the communicator was aborted after an earlier error: " + broken_);
    if (comm_ == nullptr) throw tally::RuntimeError("nccl backend: " + where() + "no communicator");
  }

  // Both staging buffers hold at least `bytes`, growing geometrically up to chunk_bytes().
  void reserve(std::size_t bytes) {
    if (bytes <= capacity_) return;
    const std::size_t cap = tally_nccl::grown_capacity(capacity_, bytes, chunk_bytes());
    free_buffers();
    void* d = nullptr;
    cuda_check(cudaMalloc(&d, cap), "cudaMalloc of " + std::to_string(cap) + " staging bytes");
    device_buf_ = static_cast<std::byte*>(d);
    void* h = nullptr;
    cuda_check(cudaHostAlloc(&h, cap, cudaHostAllocDefault),
               "cudaHostAlloc of " + std::to_string(cap) + " pinned staging bytes");
    host_ = static_cast<std::byte*>(h);
    capacity_ = cap;
  }

  void free_buffers() noexcept {
    if (device_buf_ != nullptr) cudaFree(device_buf_);
    if (host_ != nullptr) cudaFreeHost(host_);
    device_buf_ = nullptr;
    host_ = nullptr;
    capacity_ = 0;
  }

  // Polls the communicator until a non-blocking call has finished (ncclInProgress no more).
  void wait_comm(const std::string& what, Clock::time_point start, double timeout_s,
                 const std::string& hint) {
    Poll poll(start, timeout_s);
    for (;;) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t r = api_->CommGetAsyncError(comm_, &state);
      if (r != ncclSuccess) fail_nccl("ncclCommGetAsyncError during " + what, r);
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) fail_nccl(what, state);
      if (poll.expired()) fail_timeout(what, timeout_s, hint);
      poll.pause();
    }
  }

  // Polls the stream until the work queued for one collective is done, watching NCCL's
  // asynchronous errors and the deadline.
  void wait_stream(const std::string& what, Clock::time_point start, double timeout_s) {
    Poll poll(start, timeout_s);
    for (;;) {
      const cudaError_t e = cudaStreamQuery(stream_);
      if (e == cudaSuccess) break;
      if (e != cudaErrorNotReady) fail_cuda(what, e);
      ncclResult_t state = ncclSuccess;
      const ncclResult_t r = api_->CommGetAsyncError(comm_, &state);
      if (r != ncclSuccess) fail_nccl("ncclCommGetAsyncError during " + what, r);
      if (state != ncclSuccess && state != ncclInProgress) fail_nccl(what, state);
      if (poll.expired()) fail_timeout(what, timeout_s, kStuckHint);
      poll.pause();
    }
    ncclResult_t state = ncclSuccess;
    if (api_->CommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess &&
        state != ncclInProgress)
      fail_nccl(what, state);
  }

  // Spins briefly (a small collective finishes in microseconds), then sleeps in growing steps.
  class Poll {
   public:
    Poll(Clock::time_point start, double timeout_s)
        : start_(start),
          deadline_(start + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(timeout_s))) {}
    bool expired() const { return Clock::now() >= deadline_; }
    void pause() {
      if (Clock::now() - start_ < std::chrono::microseconds(200)) {
        std::this_thread::yield();
        return;
      }
      std::this_thread::sleep_for(sleep_);
      sleep_ = std::min(sleep_ * 2, std::chrono::microseconds(1000));
    }

   private:
    Clock::time_point start_;
    Clock::time_point deadline_;
    std::chrono::microseconds sleep_{10};
  };

  void cuda_check(cudaError_t e, const std::string& what) {
    if (e != cudaSuccess) fail_cuda(what, e);
  }

#if TALLY_NCCL_WITH_MPI
  void mpi_check(int code, const char* what) {
    if (code != MPI_SUCCESS)
      throw tally::RuntimeError("nccl backend: " + where() + what + " failed: " + mpi_text(code));
  }
#endif

  void nccl_check(ncclResult_t r, const std::string& what) {
    if (r != ncclSuccess) fail_nccl(what, r);
  }

  [[noreturn]] void fail_cuda(const std::string& what, cudaError_t e) {
    cudaGetLastError();  // clears a non-sticky error
    broken("CUDA error in " + what + ": " + cuda_text(e));
  }

  [[noreturn]] void fail_nccl(const std::string& what, ncclResult_t r) {
    std::string detail = api_ != nullptr ? api_->GetErrorString(r) : "";
    const char* last = api_ != nullptr ? api_->GetLastError(comm_) : nullptr;
    if (last != nullptr && *last != '\0') detail += ": " + std::string(last);
    broken(what + " failed: " + detail);
  }

  [[noreturn]] void fail_timeout(const std::string& what, double timeout_s,
                                 const std::string& hint) {
    broken(what + " timed out after " + seconds(timeout_s) + " s (" +
           (timeout_s == timeout_s_ ? "backend.timeout" : "this call's deadline") +
           "); the "
           "communicator was aborted" +
           hint);
  }

  // Aborts the communicator (it cannot be trusted after an error) and throws.
  [[noreturn]] void broken(const std::string& message) {
    const std::string full = "nccl backend: " + where() + message;
    if (broken_.empty()) broken_ = message;
    abort_comm();
    throw tally::RuntimeError(full);
  }

  void abort_comm() noexcept {
    if (comm_ == nullptr || api_ == nullptr) return;
    ncclResult_t r = api_->CommAbort(comm_);
    const auto start = Clock::now();
    while (r == ncclInProgress && Clock::now() - start < std::chrono::seconds(30)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (api_->CommGetAsyncError(comm_, &r) != ncclSuccess) break;
    }
    comm_ = nullptr;
  }

  // Frees everything; never throws (runs in the destructor and on a failed construction). A
  // healthy communicator is finalised (flushing its work, within the timeout) and destroyed;
  // one that fails to finalise is aborted.
  void release() noexcept {
    std::optional<DeviceScope> scope;
    if (device_ >= 0) scope.emplace(*this, false);
    if (comm_ != nullptr && api_ != nullptr) {
      ncclResult_t r = api_->CommFinalize(comm_);
      const auto start = Clock::now();
      const auto limit = std::chrono::duration<double>(timeout_s_);
      while (r == ncclInProgress && Clock::now() - start < limit) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        if (api_->CommGetAsyncError(comm_, &r) != ncclSuccess) r = ncclInternalError;
      }
      if (r == ncclSuccess && api_->CommDestroy(comm_) == ncclSuccess)
        comm_ = nullptr;
      else
        abort_comm();
    }
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    stream_ = nullptr;
    free_buffers();
    if (published_) tally_nccl::remove_rendezvous(rendezvous_);
    published_ = false;
#if TALLY_NCCL_WITH_MPI
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (mpi_comm_ != MPI_COMM_NULL && finalized == 0) MPI_Comm_free(&mpi_comm_);
    mpi_comm_ = MPI_COMM_NULL;
    mpi_.release();
#endif
  }

  const NcclApi* api_ = nullptr;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int rank_ = 0;
  int world_ = 1;
  int device_ = -1;
  double timeout_s_ = kDefaultTimeout;
  std::size_t chunk_bytes_ = static_cast<std::size_t>(kDefaultChunkBytes);
  std::string rendezvous_;
  bool published_ = false;
  std::string broken_;  // the first error, once the communicator was aborted
  // Staging: one device buffer (gathered in place) and one pinned host buffer, same capacity.
  std::byte* device_buf_ = nullptr;
  std::byte* host_ = nullptr;
  std::size_t capacity_ = 0;
  std::vector<std::byte> barrier_recv_;
#if TALLY_NCCL_WITH_MPI
  MpiHold mpi_;
  MPI_Comm mpi_comm_ = MPI_COMM_NULL;  // during the bootstrap only
#endif
};

std::vector<tally::ParamSpec> nccl_params() {
  using tally::param;
  using tally::ParamType;
  return {
      param("chunk_bytes", ParamType::Int,
            "Bytes one NCCL call moves at most (all ranks together); larger objects go in rounds. "
            "Also the most device and pinned host memory the staging buffers grow to.")
          .def(kDefaultChunkBytes),
      param("timeout", ParamType::Float,
            "Seconds a collective (and the bootstrap) may take before the communicator is "
            "aborted and the run fails on this rank.")
          .def(kDefaultTimeout),
      param("rendezvous", ParamType::Path,
            "A file on a file system every rank sees, through which rank 0 hands the NCCL id to "
            "the others; when set it is used rather than MPI or a TCP store. Rank and world size "
            "then come from the launcher's variables (OMPI_COMM_WORLD_*, RANK/WORLD_SIZE/"
            "LOCAL_RANK or SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID).")
          .optional(),
      param("master_addr", ParamType::String,
            "The host of the TCP store through which rank 0 hands the NCCL id to the others; by "
            "default MASTER_ADDR (torchrun). Setting this or master_port asks for the store even "
            "under mpirun.")
          .optional(),
      param("master_port", ParamType::Int,
            "The port of that TCP store (1 to 65535); by default MASTER_PORT. Rank 0 serves the "
            "store there, unless torchrun's agent already does (TORCHELASTIC_USE_AGENT_STORE).")
          .optional(),
      param("store_bind", ParamType::String,
            "Where rank 0's TCP store listens: by default only where MASTER_ADDR is (loopback for "
            "a loopback MASTER_ADDR); 'any' for every interface, or an address of this host.")
          .optional(),
      param("store_secret_file", ParamType::Path,
            "A private file (mode 0600) holding the job's secret, the same on every rank: the "
            "store serves only clients that prove it (else TALLY_STORE_SECRET_FILE or "
            "TALLY_STORE_SECRET; on one host rank 0 makes one).")
          .optional(),
      param("device", ParamType::Int,
            "The CUDA device of this rank; by default the local rank modulo the visible devices.")
          .optional()};
}

}  // namespace

TALLY_PLUGIN("nccl", "0.1.0", [] {
  return std::vector<tally::ComponentInfo>{tally::backend<NcclBackend>(
      "nccl",
      "NCCL on CUDA device buffers, one GPU per rank: object sizes with an all-gather, payloads "
      "padded to the largest and gathered with one ncclAllGather, states to the root with grouped "
      "ncclSend/ncclRecv, results with ncclBroadcast; every collective has a timeout. Bootstraps "
      "through backend.rendezvous when set, else a TCP store named by backend.master_addr/"
      "master_port, else MPI under mpirun, else the TCP store of torchrun's MASTER_ADDR/"
      "MASTER_PORT (or srun's first node).",
      nccl_params())};
})
