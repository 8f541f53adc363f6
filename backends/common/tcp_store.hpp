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
// Trust (docs/gloo.md, "The TCP store"): rank 0's server listens only where the job names it
// (loopback for a loopback MASTER_ADDR, that address otherwise, every interface only with
// store_bind: any) and serves only clients that prove the job's secret: after VALIDATE, a client
// GETs the reserved key "tally/auth/nonce" (a fresh nonce per connection) and SETs
// "tally/auth/proof" to the hex HMAC-SHA256 of it under the secret, all of it expressible with
// torch.distributed.TCPStore. Every buffer of the server is bounded (StoreLimits); a connection
// that breaks a bound, or asks anything before it is authenticated, is closed and named on
// stderr once per peer. Under torchrun's agent store tally is a client only: torch's store has
// no authentication and listens where torch puts it.
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

namespace tally {
class Params;
}  // namespace tally

namespace tally_store {

/// The largest world a job over the TCP store may have (gloo's full mesh, NCCL's bootstrap).
inline constexpr int kMaxWorldSize = 16384;

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
  /// torchrun's agent hosts the store (TORCHELASTIC_USE_AGENT_STORE): no secret, tally is a
  /// client of an unauthenticated store.
  bool agent_store = false;
  /// Where rank 0's server listens: "" (where `host` is: loopback for a loopback host), "any"
  /// (every interface), or a name or address of this host (backend.store_bind).
  std::string bind;
  /// The job's secret (never printed); empty: read from `secret_file` when that is set, else no
  /// authentication (torchrun's agent store, a test's server).
  std::string secret;
  /// A private file holding the secret; with `write_secret_file` rank 0 writes `secret` there
  /// (0600) once it listens, and the other ranks of the host read it after they connect.
  std::string secret_file;
  bool write_secret_file = false;
};

/// backend.store_bind and backend.store_secret_file as a backend's params give them (empty when
/// not given), for secure_store_address; an empty store_bind is the param's error.
struct StoreAccessParams {
  std::string bind, secret_file;
};
StoreAccessParams read_store_access(const tally::Params& params);

/// Fills address.secret / secret_file / bind for a job: `bind_param` and `secret_file_param`
/// are backend.store_bind and backend.store_secret_file (empty when not given); else
/// TALLY_STORE_SECRET_FILE, else TALLY_STORE_SECRET; else, for a loopback store only, a random
/// secret rank 0 writes to a private per-user file keyed by the port (default_secret_file()).
/// Nothing under torchrun's agent store. tally::ConfigError (prefixed by `who`) naming the
/// variable or file: a non-loopback store without a secret, a secret file that others may read
/// or that is not one, an empty or oversized secret.
void secure_store_address(StoreAddress& address, const GetEnv& env, std::string_view bind_param,
                          std::string_view secret_file_param, std::string_view who);

/// The per-user file of a loopback store's generated secret: $XDG_RUNTIME_DIR/tally/ when that
/// is a private folder of this user, else /tmp/tally-<uid>/ (made 0700; refused when it is not
/// this user's private folder), "store-<port>.secret".
std::string default_secret_file(const GetEnv& env, std::uint16_t port, std::string_view who);

/// Whether every address `host` resolves to is a loopback one (127.0.0.0/8, ::1).
bool is_loopback_host(const std::string& host);

/// The secret in `path` (trailing newlines dropped): tally::ConfigError naming `what` (the
/// variable or parameter) when the file is not a regular file of this user, is readable or
/// writable by group or others, is empty or holds more than 4 KiB.
std::string read_secret_file(const std::string& path, std::string_view what, std::string_view who);

/// The bounds of a store server. Defaults in docs/gloo.md; every one is checked before memory is
/// taken for it.
struct StoreLimits {
  std::uint64_t max_value_bytes = std::uint64_t{16} << 20;  // a value, a MULTI_GET's answer
  std::uint64_t max_key_bytes = 4096;
  std::uint64_t max_stored_bytes = std::uint64_t{512} << 20;  // keys and values together
  std::uint64_t max_keys = std::uint64_t{1} << 18;
  /// Unsent answers of one connection: past it, its requests wait (and are not read).
  std::size_t max_unsent_bytes = std::size_t{4} << 20;
  /// Keys of one request (WAIT, CHECK, MULTI_GET, MULTI_SET), and of a connection's pending WAIT.
  std::uint64_t max_request_keys = std::uint64_t{1} << 16;
  std::size_t max_connections = 2 * kMaxWorldSize + 256;
  /// Connections not yet authenticated, in all and from one peer address: past either, the
  /// oldest of them is closed for the new one.
  std::size_t max_unauthenticated = 256;
  std::size_t max_unauthenticated_per_peer = 64;
  /// An unauthenticated connection is closed this long after it was accepted.
  std::chrono::milliseconds auth_timeout{10000};
  /// Fair service: requests handled per connection per turn of the server's loop.
  int requests_per_turn = 64;
};

/// Where and how a server serves.
struct ServerOptions {
  /// "loopback" (127.0.0.1 and ::1), "any" (every interface), or a name or address of this host
  /// (a name whose every address is a loopback one is "loopback").
  std::string bind = "loopback";
  /// Empty: no authentication (only for a store nothing else reaches: tests).
  std::string secret;
  /// Written with `secret` (0600, replacing an older file) once the server listens, removed when
  /// it stops; empty: none.
  std::string secret_file;
  StoreLimits limits;
};

/// What a server has done, for tests and diagnostics.
struct ServerStats {
  std::uint64_t turns = 0;       // wake-ups of its loop
  std::uint64_t accepted = 0;    // connections accepted
  std::uint64_t closed_bad = 0;  // connections closed for a broken bound or no authentication
  std::uint64_t stored_bytes = 0;
  std::uint64_t keys = 0;
  std::uint64_t connections = 0;
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

/// tally::ConfigError (prefixed by `who`) before any socket is opened when a world of `world`
/// ranks cannot start in this process: more than kMaxWorldSize, or more file descriptors than
/// RLIMIT_NOFILE allows (the soft limit is raised towards the hard one first): 64, `per_peer`
/// for each other rank (gloo's full mesh: 1), and on rank 0 hosting the store (`hosts_store`) 2
/// per rank (its client's connection and a heartbeat's). `source` names the launcher's variables.
void check_world_fits(int world, int per_peer, bool hosts_store, const std::string& source,
                      std::string_view who);

/// The first host name of a Slurm host list: "node[03-05,7],gpu1" -> "node03". ConfigError
/// (prefixed by `who`) for a list that is not one.
std::string first_slurm_host(std::string_view nodelist, std::string_view who);

/// A running store server (a thread that serves every connection until destroyed), listening at
/// `port` (0: a free port, see port()) where options.bind says. tally::ConfigError naming the
/// port when it cannot listen (taken: says which launcher may hold it; an address not of this
/// host: says so and names backend.store_bind).
class TcpStoreServer {
 public:
  TcpStoreServer(std::uint16_t port, std::string_view who, ServerOptions options = {});
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  std::uint16_t port() const noexcept;
  ServerStats stats() const;
  /// The secret its clients prove (options.secret).
  const std::string& secret() const noexcept;

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
  /// Connects to host:port, retrying until `timeout` (the server may start after the client),
  /// and proves address.secret (or the secret in address.secret_file) when there is one.
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
  /// The secret this client proved (read from address.secret_file when it came from there).
  const std::string& secret() const noexcept;

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
