// A key-value store over TCP that speaks PyTorch's c10d TCPStore protocol
// (torch/csrc/distributed/c10d/TCPStore.cpp: VALIDATE, SET, GET, ADD, CHECK, WAIT), so that:
//   - under torchrun, tally's ranks are clients of the store torchrun's agent already hosts at
//     MASTER_ADDR:MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True): the port is taken, and a
//     second server there would fail;
//   - launched any other way (srun, a script setting MASTER_ADDR/MASTER_PORT by hand), rank 0
//     hosts the store itself, and a Python program's torch.distributed.TCPStore can be a client.
// Used by the gloo backend (its rendezvous) and the nccl backend (the unique-id exchange).
// Like torch's own client (TCPStore's keyPrefix_), the client puts "/" before every key on the
// wire, so a key set by tally as "a/b" is "a/b" to torch.distributed.TCPStore too.
// Plain C++ and POSIX sockets: no Gloo, NCCL, MPI or CUDA here, so it is unit tested anywhere.
//
// Every key tally writes is under a prefix of its own ("tally/<n>/..."): a store shared with
// torchrun's agent and other libraries never sees tally's keys collide with theirs, and a
// second backend created in the same job (n counts them) never reads the first one's keys.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tally_store {

/// getenv, replaceable in tests. Returns nullptr for an unset variable.
using GetEnv = std::function<const char*(const char*)>;

/// Where the store is and who hosts it.
struct StoreAddress {
  std::string host;  // a name or an address (IPv4 or IPv6)
  std::uint16_t port = 0;
  /// This process (rank 0 of the job) must host the store: false under torchrun's agent store.
  bool host_here = false;
  /// The variables read, for messages: "MASTER_ADDR=10.0.0.1, MASTER_PORT=29500 (torchrun)".
  std::string source;
};

/// The store of this job from the environment, for rank `rank`:
///   - MASTER_ADDR and MASTER_PORT (torchrun, or set by hand for any launcher): rank 0 hosts the
///     store unless TORCHELASTIC_USE_AGENT_STORE=True (torchrun's agent hosts it);
///   - else under srun (SLURM_STEP_NODELIST, SLURM_JOB_ID): the first host of the step's node
///     list, port 20000 + SLURM_JOB_ID % 10000 unless MASTER_PORT says, rank 0 hosts it.
/// nullopt when none of these is set. tally::ConfigError naming the variable (prefixed by `who`,
/// "gloo backend: ") when one is malformed (a port outside 1..65535, half of a pair).
std::optional<StoreAddress> store_address_from_env(const GetEnv& env, int rank,
                                                   std::string_view who);

/// The first host name of a Slurm host list: "node[03-05,7],gpu1" -> "node03". ConfigError
/// (prefixed by `who`) for a list that is not one.
std::string first_slurm_host(std::string_view nodelist, std::string_view who);

/// A running store server (a thread that serves every connection until destroyed). Binds every
/// interface at `port` (0: a free port, see port()). tally::ConfigError naming the port when it
/// cannot listen (taken: says which launcher may hold it).
class TcpStoreServer {
 public:
  TcpStoreServer(std::uint16_t port, std::string_view who);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  std::uint16_t port() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A client connection to a store. Every call waits at most the client's timeout, then throws
/// tally::RuntimeError naming `who`, the rank, the store's address and what it waited for
/// ("the key 'tally/1/gloo/3' that rank 3 publishes"). A store that closes the connection is a
/// RuntimeError too, never a hang.
class TcpStoreClient {
 public:
  /// Connects to host:port, retrying until `timeout` (the server may start after the client).
  TcpStoreClient(const StoreAddress& address, int rank, std::chrono::milliseconds timeout,
                 std::string_view who);
  ~TcpStoreClient();
  TcpStoreClient(TcpStoreClient&&) noexcept;
  TcpStoreClient& operator=(TcpStoreClient&&) noexcept;

  void set(std::string_view key, std::span<const std::byte> value);
  /// Waits until `key` is set (at most the timeout; `waiting_for` says for what, for messages),
  /// then returns its value.
  std::vector<std::byte> get(std::string_view key, std::string_view waiting_for = {});
  /// Waits until every key is set.
  void wait(std::span<const std::string> keys, std::string_view waiting_for = {});
  /// Adds `delta` to the integer at `key` (0 when unset) and returns the new value.
  std::int64_t add(std::string_view key, std::int64_t delta);
  /// Whether every key is set, without waiting.
  bool check(std::span<const std::string> keys);

  std::chrono::milliseconds timeout() const noexcept;
  void set_timeout(std::chrono::milliseconds timeout) noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The store of this job, ready: on rank 0 with address.host_here, a server (one per port in the
/// process, serving until the process exits: ranks still reading never lose it when a backend
/// is done with it) and a client of it; elsewhere a client. `prefix()` is this backend's own
/// key prefix: every rank adds 1 to "tally/<rank>/backends" and takes the count, so the n-th
/// backend a job creates uses "tally/<n>/" on every rank (ranks create backends in the same
/// order), and keys of an earlier backend in the same store are never read.
class JobStore {
 public:
  JobStore(const StoreAddress& address, int rank, std::chrono::milliseconds timeout,
           std::string_view who);
  ~JobStore();
  TcpStoreClient& client() noexcept;
  const std::string& prefix() const noexcept;
  const StoreAddress& address() const noexcept;

 private:
  /// Shared by the JobStores of this process on the same port: a second backend on rank 0
  /// reuses the server the first one started (a second server there would find the port taken).
  std::shared_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> client_;
  StoreAddress address_;
  std::string prefix_;
};

}  // namespace tally_store
