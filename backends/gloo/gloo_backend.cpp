// The `gloo` backend (Gloo, Debian's libgloo-dev): transport primitives only
// (tally/sdk/dist_backend.hpp) over Gloo's TCP transport, for jobs launched by torchrun, srun or by
// hand, with no MPI installed.
//
//   - Rank and world size come from the launcher's variables (backends/common/launch_env.hpp:
//     RANK/WORLD_SIZE/LOCAL_RANK from torchrun, SLURM_PROCID/SLURM_NTASKS from srun, Open MPI's).
//   - Rendezvous: gloo::rendezvous::Context::connectFullMesh over the job's TCP store
//     (backends/common/tcp_store.hpp: MASTER_ADDR:MASTER_PORT, hosted by rank 0, or by torchrun's
//     agent when TORCHELASTIC_USE_AGENT_STORE=True), under the backend's own key prefix; or over
//     Gloo's FileStore in backend.rendezvous (a folder every rank sees).
//   - Sizes travel with gloo::allgather, object bytes with gloo::allgatherv (no padding) or, to
//     one rank, point-to-point sends over the context's pairs (Gloo's gather is fixed-size);
//     counts with gloo::reduce on int64.
//   - Every Gloo call has a deadline (CallOptions::timeout, else backend.timeout): a rank that
//     exits or hangs makes the others fail with a tally::RuntimeError naming the rank and the call,
//     never wait forever. A world of one needs no launcher and builds no context at all.
//   - A failure names the rank behind it: after the rendezvous every rank publishes its pairs'
//     addresses in the store ("pairs_<rank>"), so a Gloo error naming a peer's address ("Connection
//     closed by peer [10.0.0.3]:19621") names that rank; and before every call each rank publishes
//     its call counter ("calls_<rank>" = "6 allgather (sync header)", a SET: no round trip), so on
//     a timeout the failing rank reads the others' counters (a few seconds at most) and names the
//     ranks that have not reached the call, or says that the store itself is gone.
#include <arpa/inet.h>
#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/context.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/address.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "../common/launch_env.hpp"
#include "../common/store_wait.hpp"
#include "../common/tcp_store.hpp"
#include "tally/sdk/dist_backend.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"

namespace {

constexpr const char* kWho = "gloo backend: ";
constexpr std::int64_t kDefaultChunkBytes = std::int64_t{1} << 30;
constexpr double kDefaultTimeout = 600.0;
// Starting is live work on a busy machine (every rank must start and reach the rendezvous): the
// whole start-up has its own deadline, start_timeout (30 s by default), so that a short
// backend.timeout bounds collectives without failing healthy starts, and a long one never makes
// a world that cannot start wait for it.
constexpr double kMinStartTimeout = 30.0;
// The slot prefix of the rooted gather's point-to-point messages (Gloo's own collectives use
// 0x01..0x08, gloo/types.h).
constexpr std::uint8_t kGatherSlotPrefix = 0x31;

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(
      static_cast<std::int64_t>(std::min(seconds, 1e9) * 1000.0 + 0.5));
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

// The rank a Gloo rendezvous key belongs to (connectFullMesh's keys are the ranks: "3"; also
// "rank_3"), or -1.
int rank_of_key(const std::string& key) {
  const auto at = key.find_last_of('_');
  const char* b = key.data() + (at == std::string::npos ? 0 : at + 1);
  const char* e = key.data() + key.size();
  int r = -1;
  const auto [end, ec] = std::from_chars(b, e, r);
  return b != e && ec == std::errc() && end == e ? r : -1;
}

/// Gloo's rendezvous store over the job's TCP store, under the backend's key prefix.
class StoreAdapter final : public gloo::rendezvous::Store {
 public:
  StoreAdapter(tally_store::TcpStoreClient& client, std::string prefix)
      : client_(client), prefix_(std::move(prefix)) {}

  using Clock = std::chrono::steady_clock;

  /// Every request from now until `deadline` (the start-up's: backend.start_timeout) waits at
  /// most what is left of it; Clock::time_point::max(): none.
  void set_deadline(Clock::time_point deadline) { deadline_ = deadline; }

  void set(const std::string& key, const std::vector<char>& data) override {
    bounded([&] {
      client_.set(prefix_ + key, std::as_bytes(std::span(data)));
      return 0;
    });
  }
  std::vector<char> get(const std::string& key) override {
    const auto v = bounded([&] { return client_.get(prefix_ + key, waiting_for(key)); });
    std::vector<char> out(v.size());
    std::memcpy(out.data(), v.data(), v.size());
    return out;
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, client_.timeout()); }
  // One key at a time, each under what is left of the deadline: a key that never comes is
  // named with the rank that should have set it.
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    const auto before = client_.timeout();
    // Gloo's own timeout when longer (its default is 30 s); never shorter than ours; never past
    // the start-up's deadline.
    const auto deadline = std::min(Clock::now() + std::max(before, timeout), deadline_);
    try {
      for (const auto& k : keys) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) throw_past_deadline(k);
        client_.set_timeout(left);
        client_.wait(std::vector<std::string>{prefix_ + k}, waiting_for(k));
      }
    } catch (...) {
      client_.set_timeout(before);
      throw;
    }
    client_.set_timeout(before);
  }

 private:
  static std::string waiting_for(const std::string& key) {
    const int r = rank_of_key(key);
    if (r < 0) return "the key '" + key + "' another rank publishes";
    return "the address rank " + std::to_string(r) + " publishes (is rank " + std::to_string(r) +
           " running tally with the gloo backend?)";
  }
  // f() with the client's timeout cut to what is left of the start-up's deadline.
  template <class F>
  auto bounded(F&& f) -> decltype(f()) {
    if (deadline_ == Clock::time_point::max()) return f();
    const auto before = client_.timeout();
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
    if (left.count() <= 0) throw_past_deadline({});
    client_.set_timeout(std::min(before, left));
    try {
      auto out = f();
      client_.set_timeout(before);
      return out;
    } catch (...) {
      client_.set_timeout(before);
      throw;
    }
  }
  [[noreturn]] static void throw_past_deadline(const std::string& key) {
    throw std::runtime_error("the start-up did not complete within backend.start_timeout" +
                             (key.empty() ? std::string() : " waiting for " + waiting_for(key)));
  }

  tally_store::TcpStoreClient& client_;
  std::string prefix_;
  Clock::time_point deadline_ = Clock::time_point::max();
};

// The local address from which this host reaches `host` (a connected UDP socket sends nothing).
std::optional<std::string> address_towards(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* list = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list) != 0)
    return std::nullopt;
  std::optional<std::string> out;
  for (addrinfo* a = list; a != nullptr && !out; a = a->ai_next) {
    const int s = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) continue;
    if (::connect(s, a->ai_addr, a->ai_addrlen) == 0) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      char text[INET6_ADDRSTRLEN] = {};
      if (::getsockname(s, reinterpret_cast<sockaddr*>(&ss), &len) == 0 &&
          ::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, text, sizeof text, nullptr, 0,
                        NI_NUMERICHOST) == 0)
        out = text;
    }
    ::close(s);
  }
  ::freeaddrinfo(list);
  return out;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

class GlooBackend final : public tally::DistBackend,
                          public tally::VaryingAllGather,
                          public tally::RootedGather,
                          public tally::Reducer,
                          public tally::WorkAndWait {
 public:
  explicit GlooBackend(const tally::Params& params) {
    // 1. Parameters: wrong values are config errors before anything is touched.
    const Settings set = read_params(params);
    // 2. The launcher's environment.
    const auto env = tally_launch::process_env();
    const tally_launch::LaunchEnv launch = tally_launch::read_launch_env(env, kWho);
    take_rank(params, set, launch);
    if (world_ == 1) return;  // alone: no context, every primitive is a copy or nothing

    // 3. Rendezvous and the full mesh of TCP pairs, all of it within start_timeout.
    const auto start_deadline = std::chrono::steady_clock::now() + to_ms(set.start_timeout_s);
    tally_store::StoreAddress address;
    if (set.rendezvous.empty()) {
      address = store_address(env, set.master_addr, set.master_port, launch);
      tally_store::secure_store_address(address, env, set.store.bind, set.store.secret_file,
                                        me_ + ": ");
    }
    // A world this machine cannot serve is a config error before any socket is opened: Gloo's
    // full mesh holds a connection per peer, rank 0's store one (and the heartbeats' one) per rank.
    tally_store::check_world_fits(world_, 1, set.rendezvous.empty() && address.host_here,
                                  launch.source, me_ + ": ");
    // The device first: a bad interface is this rank's config error before it meets anyone.
    auto device = open_device(set, address);
    if (set.rendezvous.empty())
      open_job_store(address, start_deadline);
    else
      open_file_store(params, set.rendezvous, launch);
    connect(std::move(device), launch, start_deadline);
  }

  ~GlooBackend() override {
    linger_for_the_others();
    // The counter's file in the file store (the rendezvous' files went after the barrier).
    if (file_store_)
      for (const auto& p : file_store_->getAllKeyFilePaths()) std::filesystem::remove(p, ec_);
  }
  GlooBackend(const GlooBackend&) = delete;
  GlooBackend& operator=(const GlooBackend&) = delete;

  std::string name() const override { return "gloo"; }
  bool is_initialized() const override { return world_ == 1 || context_ != nullptr; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::size_t chunk_bytes() const override { return chunk_bytes_; }

  void* find_primitive(std::string_view id) override {
    // Waiting for working ranks by their heartbeats needs the TCP store (not the file store).
    if (id == tally::WorkAndWait::kId)
      return job_store_ && world_ > 1 ? static_cast<tally::WorkAndWait*>(this) : nullptr;
    return tally::offer_primitives<tally::VaryingAllGather, tally::RootedGather, tally::Reducer>(
        this, id);
  }

  // Ranks at work (reading shards, rank 0 computing) send heartbeats through the job's store;
  // the waiting ranks give up only when one falls silent for the deadline, never because the
  // work is long (backends/common/store_wait.hpp).
  void work_and_wait(int root, const std::function<void()>& work,
                     const std::atomic<std::uint64_t>* progress,
                     const tally::CallOptions& call) override {
    tally_store::WaitCall w;
    w.address = job_store_->address();
    w.prefix = job_store_->prefix() + "gloo/";
    w.rank = rank_;
    w.world_size = world_;
    w.seq = ++waits_;
    w.timeout = deadline(call);
    w.who = me_ + ": ";
    w.what = call.name.empty() ? std::string("work_and_wait") : std::string(call.name);
    tally_store::work_and_wait(w, root, work, progress);
  }

  void barrier(const tally::CallOptions& call) override {
    if (!context_) return;
    run(call, "barrier", [&] {
      gloo::BarrierOptions o(context_);
      o.setTimeout(deadline(call));
      gloo::barrier(o);
    });
  }

  void all_gather_equal(const std::byte* send, std::size_t n, std::byte* recv,
                        const tally::CallOptions& call) override {
    if (!context_) {
      std::memcpy(recv, send, n);
      return;
    }
    run(call, "allgather", [&] {
      gloo::AllgatherOptions o(context_);
      o.setInput(const_cast<char*>(reinterpret_cast<const char*>(send)), n);
      o.setOutput(reinterpret_cast<char*>(recv), n * static_cast<std::size_t>(world_));
      o.setTimeout(deadline(call));
      gloo::allgather(o);
    });
  }

  void all_gather_varying(const std::byte* send, std::span<const std::size_t> counts,
                          std::byte* recv, const tally::CallOptions& call) override {
    const std::size_t mine = counts[static_cast<std::size_t>(rank_)];
    if (!context_) {
      if (mine > 0) std::memcpy(recv, send, mine);
      return;
    }
    run(call, "allgatherv", [&] {
      gloo::AllgathervOptions o(context_);
      char dummy = 0;
      o.setInput(mine > 0 ? const_cast<char*>(reinterpret_cast<const char*>(send)) : &dummy, mine);
      o.setOutput(reinterpret_cast<char*>(recv),
                  std::vector<std::size_t>(counts.begin(), counts.end()));
      o.setTimeout(deadline(call));
      gloo::allgatherv(o);
    });
  }

  // Gloo's gather is fixed-size: the varying one is point-to-point over the context's pairs.
  // The root posts one receive per rank with bytes, at that rank's offset in `recv`; the others
  // send theirs. Every rank knows every count, so no rank waits for a message never sent.
  void gather_varying(const std::byte* send, std::span<const std::size_t> counts, std::byte* recv,
                      int root, const tally::CallOptions& call) override {
    const std::size_t mine = counts[static_cast<std::size_t>(rank_)];
    if (rank_ == root) {
      std::size_t at = 0;
      std::size_t my_at = 0;
      for (int r = 0; r < world_; ++r) {
        if (r == rank_) my_at = at;
        at += counts[static_cast<std::size_t>(r)];
      }
      if (mine > 0) std::memcpy(recv + my_at, send, mine);
      if (!context_) return;
      run(call, "gather (point-to-point receives)", [&] {
        const std::uint64_t slot = gloo::Slot::build(kGatherSlotPrefix, 0);
        auto buf = context_->createUnboundBuffer(recv, std::max<std::size_t>(at, 1));
        std::size_t off = 0;
        int expected = 0;
        for (int r = 0; r < world_; ++r) {
          const std::size_t c = counts[static_cast<std::size_t>(r)];
          if (r != rank_ && c > 0) {
            buf->recv(r, slot, off, c);
            ++expected;
          }
          off += c;
        }
        for (int i = 0; i < expected; ++i) {
          int from = -1;
          if (!buf->waitRecv(&from, deadline(call)))
            throw gloo::IoException("the receive was aborted");
        }
      });
      return;
    }
    if (!context_) return;
    // A rank with nothing to send still counts the call (the counters must agree).
    run(call, "gather (point-to-point send)", [&] {
      if (mine == 0) return;
      const std::uint64_t slot = gloo::Slot::build(kGatherSlotPrefix, 0);
      auto buf = context_->createUnboundBuffer(const_cast<std::byte*>(send), mine);
      buf->send(root, slot, 0, mine);
      if (!buf->waitSend(deadline(call))) throw gloo::IoException("the send was aborted");
    });
  }

  void broadcast(std::byte* buf, std::size_t n, int src, const tally::CallOptions& call) override {
    if (!context_) return;
    run(call, "broadcast", [&] {
      gloo::BroadcastOptions o(context_);
      o.setOutput(reinterpret_cast<char*>(buf), n);
      o.setRoot(src);
      o.setTimeout(deadline(call));
      gloo::broadcast(o);
    });
  }

  void reduce_values(std::int64_t* values, std::size_t n, tally::ReduceOp op, int root,
                     const tally::CallOptions& call) override {
    if (!context_) return;
    run(call, "reduce", [&] {
      gloo::ReduceOptions o(context_);
      o.setOutput(values, n);
      o.setRoot(root);
      o.setReduceFunction([op](void* c, const void* a, const void* b, std::size_t count) {
        auto* out = static_cast<std::int64_t*>(c);
        const auto* x = static_cast<const std::int64_t*>(a);
        const auto* y = static_cast<const std::int64_t*>(b);
        for (std::size_t i = 0; i < count; ++i) out[i] = tally::combine(op, x[i], y[i]);
      });
      o.setTimeout(deadline(call));
      gloo::reduce(o);
    });
  }

 private:
  // ---- the constructor's steps ------------------------------------------------------------------

  /// The backend's parameters, checked (timeout_s_ is set here).
  struct Settings {
    std::int64_t chunk = 0;
    double start_timeout_s = 0;
    std::string rendezvous, iface, master_addr;
    std::optional<std::int64_t> master_port;
    tally_store::StoreAccessParams store;  // store_bind, store_secret_file
  };

  Settings read_params(const tally::Params& params) {
    Settings set;
    set.chunk = params.get_int("chunk_bytes");
    timeout_s_ = params.get_double("timeout");
    if (!(timeout_s_ > 0) || !std::isfinite(timeout_s_))
      params.fail("timeout",
                  "must be a positive number of seconds, got " + std::to_string(timeout_s_));
    if (set.chunk < 1)
      params.fail("chunk_bytes", "must be at least 1, got " + std::to_string(set.chunk));
    set.start_timeout_s = params.get_double("start_timeout");
    if (!(set.start_timeout_s > 0) || !std::isfinite(set.start_timeout_s))
      params.fail("start_timeout", "must be a positive number of seconds, got " +
                                       std::to_string(set.start_timeout_s));
    if (params.has("rendezvous")) set.rendezvous = params.get_string("rendezvous");
    if (params.has("interface")) set.iface = params.get_string("interface");
    if (params.has("master_addr")) set.master_addr = params.get_string("master_addr");
    if (params.has("master_port")) {
      set.master_port = params.get_int("master_port");
      if (*set.master_port < 1 || *set.master_port > 65535)
        params.fail("master_port",
                    "must be a port from 1 to 65535, got " + std::to_string(*set.master_port));
    }
    if (params.has("master_addr") && set.master_addr.empty())
      params.fail("master_addr", "is empty: expected the host name or address of rank 0");
    set.store = tally_store::read_store_access(params);
    return set;
  }

  /// This rank and the world's size from the launcher, and what depends on them.
  void take_rank(const tally::Params& params, const Settings& set,
                 const tally_launch::LaunchEnv& launch) {
    if (!launch.size_known())
      throw tally::ConfigError(std::string(kWho) + launch.source +
                               " gives no world size (PMIx alone: only MPI knows it): use the mpi "
                               "backend, or start the ranks with srun, mpirun or torchrun");
    rank_ = launch.rank;
    world_ = launch.world_size;
    if (set.chunk < world_)
      params.fail("chunk_bytes", "must be at least the world size (" + std::to_string(world_) +
                                     "), got " + std::to_string(set.chunk));
    chunk_bytes_ = static_cast<std::size_t>(set.chunk);
    me_ = std::string(kWho) + "rank " + std::to_string(rank_) + " of " + std::to_string(world_);
  }

  /// What is left of the start-up's deadline, at least 1 ms.
  static std::chrono::milliseconds left_until(std::chrono::steady_clock::time_point deadline) {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()));
  }

  /// Gloo's TCP device on backend.interface, else on the address towards the store, else on
  /// this host's name.
  std::shared_ptr<gloo::transport::Device> open_device(const Settings& set,
                                                       const tally_store::StoreAddress& address) {
    gloo::transport::tcp::attr attr;
    if (!set.iface.empty()) {
      attr.iface = set.iface;
    } else if (auto a = set.rendezvous.empty() ? address_towards(address.host, address.port)
                                               : std::nullopt) {
      attr.hostname = *a;
    } else {
      attr.hostname = host_name();
    }
    try {
      return gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
      throw tally::ConfigError(me_ + ": cannot open Gloo's TCP device on " +
                               (set.iface.empty()
                                    ? "'" + attr.hostname + "'"
                                    : "interface '" + set.iface + "' (backend.interface)") +
                               ": " + one_line(e.what()));
    }
  }

  /// The rendezvous store over the job's TCP store at `address` (rank 0 hosts it).
  void open_job_store(const tally_store::StoreAddress& address,
                      std::chrono::steady_clock::time_point start_deadline) {
    store_where_ = "the TCP store at " + address.host + ":" + std::to_string(address.port) + " (" +
                   address.source + ")";
    try {
      job_store_ =
          std::make_unique<tally_store::JobStore>(address, rank_, left_until(start_deadline), kWho);
    } catch (const tally::ConfigError& e) {
      // The server's port: name this rank and where the address came from.
      std::string what = e.what();
      if (what.rfind(kWho, 0) == 0) what.erase(0, std::string_view(kWho).size());
      throw tally::ConfigError(me_ + ": " + what + " [" + address.source + "]");
    }
    auto adapter =
        std::make_unique<StoreAdapter>(job_store_->client(), job_store_->prefix() + "gloo/");
    adapter->set_deadline(start_deadline);
    store_adapter_ = adapter.get();
    store_ = std::move(adapter);
  }

  /// The rendezvous store over Gloo's FileStore in backend.rendezvous: a sub-folder per launcher
  /// job id when the launcher gives one, so that files an earlier job left are not read.
  void open_file_store(const tally::Params& params, const std::string& rendezvous,
                       const tally_launch::LaunchEnv& launch) {
    std::filesystem::path dir = rendezvous;
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
      params.fail("rendezvous", "'" + rendezvous +
                                    "' is not a folder (expected a folder every rank sees, for "
                                    "Gloo's file store)");
    if (!launch.job_id.empty()) {
      std::string sub = launch.job_id;
      for (char& c : sub)
        if (c == '/' || c == ' ') c = '_';
      dir /= "tally-" + sub;
      std::filesystem::create_directories(dir, ec);
    }
    store_where_ = "the file store in " + dir.string() + " (backend.rendezvous)";
    try {
      file_store_ = std::make_unique<gloo::rendezvous::FileStore>(dir.string());
    } catch (const std::exception& e) {
      params.fail("rendezvous",
                  "Gloo's file store in '" + dir.string() + "' failed: " + one_line(e.what()));
    }
    // The n-th backend of this process meets under "tally/<n>" (ranks create backends in the
    // same order): a later backend never reads an earlier one's keys in the same folder.
    static std::atomic<int> file_backends{0};
    store_ = std::make_unique<gloo::rendezvous::PrefixStore>(
        "tally/" + std::to_string(++file_backends), *file_store_);
  }

  /// The full mesh of TCP pairs over store_, the peers' addresses learnt, and a first barrier.
  void connect(std::shared_ptr<gloo::transport::Device> device,
               const tally_launch::LaunchEnv& launch,
               std::chrono::steady_clock::time_point start_deadline) {
    gloo::rendezvous::Store& rdv = *store_;
    try {
      check_world_size(rdv, launch);
      auto ctx = std::make_shared<gloo::rendezvous::Context>(rank_, world_);
      ctx->setTimeout(left_until(start_deadline));
      ctx->connectFullMesh(rdv, device);
      ctx->setTimeout(to_ms(timeout_s_));
      context_ = ctx;
      learn_peer_addresses(rdv);
      publish_call("0 (start)");  // before the barrier: every rank past it finds every counter
      // Every rank has read every address: the file store's files have served.
      gloo::BarrierOptions b(context_);
      b.setTimeout(left_until(start_deadline));
      gloo::barrier(b);
      if (store_adapter_)
        store_adapter_->set_deadline(std::chrono::steady_clock::time_point::max());
      if (file_store_)
        for (const auto& p : file_store_->getAllKeyFilePaths()) std::filesystem::remove(p, ec_);
      // From now on the store only carries call counters: a store that stops answering must not
      // hold a rank longer than a collective may wait.
      if (job_store_) job_store_->client().set_timeout(to_ms(timeout_s_));
      barrier_passed_ = true;
      if (file_store_) publish_call("0 (start)");  // its file went with the others
    } catch (const tally::Error&) {
      throw;
    } catch (const std::exception& e) {
      throw tally::RuntimeError(me_ + ": rendezvous through " + store_where_ +
                                " failed: " + one_line(e.what()) +
                                " (every rank of the job must run tally "
                                "with the gloo backend; start-up waits "
                                "backend.start_timeout, 30 s by default)");
    }
  }

  std::chrono::milliseconds deadline(const tally::CallOptions& call) const {
    return call.timeout.count() > 0 ? call.timeout : to_ms(timeout_s_);
  }

  // Runs one Gloo call; its failures become a tally::RuntimeError naming this rank, the Gloo call
  // and the engine's collective. After a failure the context is unusable: later calls fail at
  // once instead of waiting again.
  template <class F>
  void run(const tally::CallOptions& call, const char* gloo_call, F&& f) {
    std::string what = gloo_call;
    if (!call.name.empty()) what += " (" + std::string(call.name) + ")";
    if (failed_)
      throw tally::RuntimeError(me_ + ": " + what + ": an earlier Gloo call failed: " + failure_);
    publish_call(std::to_string(++calls_) + " " + what);
    try {
      f();
      return;
    } catch (const std::exception& e) {  // gloo::IoException, gloo::Exception, EnforceNotMet
      failure_ = one_line(e.what());
    }
    failed_ = true;
    const std::string why = who_failed(failure_, call);
    if (!why.empty()) failure_ = why + ": " + failure_;
    publish_call("failed");  // rank 0 serves the store until the others have read it
    throw tally::RuntimeError(
        me_ + ": " + what + " failed: " + failure_ + " (deadline " +
        seconds_text(std::chrono::duration<double>(deadline(call)).count()) +
        "; a rank that exited, was killed or hangs stops the others: see the first rank that "
        "failed)");
  }

  // ---- naming the rank behind a failure ---------------------------------------------------------

  // Publishes this rank's pair addresses (line j: its address for the pair with rank j) and reads
  // every other rank's, keeping rank i's address for its pair with this rank: the one Gloo's
  // errors on this rank print for rank i.
  void learn_peer_addresses(gloo::rendezvous::Store& store) {
    std::string mine;
    for (int j = 0; j < world_; ++j) {
      if (j != rank_) mine += context_->getPair(j)->address().str();
      mine += '\n';
    }
    store.set("pairs_" + std::to_string(rank_), std::vector<char>(mine.begin(), mine.end()));
    for (int i = 0; i < world_; ++i) {
      if (i == rank_) continue;
      const auto v = store.get("pairs_" + std::to_string(i));
      std::string_view text(v.data(), v.size());
      for (int j = 0; j < rank_ && !text.empty(); ++j) text.remove_prefix(text.find('\n') + 1);
      const std::string addr(text.substr(0, text.find('\n')));
      if (!addr.empty()) peers_.emplace_back(addr, i);
    }
  }

  // "<n> <call>": this rank's n-th Gloo call is about to start. A SET (no answer to wait for); a
  // store that fails it is not tried again (the collective itself says what went wrong).
  // Gloo's file store does not overwrite a key: there, after the first SET, the value's file is
  // replaced directly (written aside, then renamed over it: a reader sees the old or the new).
  void publish_call(const std::string& v) {
    if (!store_ || store_silent_) return;
    try {
      if (!counter_file_.empty()) {
        const std::string aside = counter_file_ + ".tmp";
        std::FILE* f = std::fopen(aside.c_str(), "wb");
        const bool ok = f != nullptr && std::fwrite(v.data(), 1, v.size(), f) == v.size();
        if (f != nullptr && std::fclose(f) != 0) store_silent_ = true;
        if (!ok || std::rename(aside.c_str(), counter_file_.c_str()) != 0) store_silent_ = true;
        return;
      }
      store_->set("calls_" + std::to_string(rank_), std::vector<char>(v.begin(), v.end()));
      if (file_store_ && barrier_passed_) counter_file_ = file_store_->getAllKeyFilePaths().back();
    } catch (const std::exception&) {
      store_silent_ = true;
    }
  }

  // Rank 0 hosting the store, after a failure: the other ranks read the call counters from its
  // store to name the rank behind their own failure. It serves them until each has failed too
  // (published "failed"), a few seconds at most.
  void linger_for_the_others() {
    if (!failed_ || !job_store_ || !job_store_->address().host_here) return;
    using Clock = std::chrono::steady_clock;
    const auto end = Clock::now() + std::min(to_ms(timeout_s_), std::chrono::milliseconds(3000));
    try {
      for (int i = 0; i < world_ && Clock::now() < end; ++i) {
        while (i != rank_ && Clock::now() < end) {
          const auto v = read_key("calls_" + std::to_string(i), std::chrono::milliseconds(100));
          if (v && v->find("failed") == 0) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
    } catch (const std::exception&) {
      // Nothing to serve then.
    }
  }

  // The value of another rank's key, waiting at most `wait`; nullopt when it is not set by then.
  // Throws when the store does not answer.
  std::optional<std::string> read_key(const std::string& key, std::chrono::milliseconds wait) {
    if (job_store_) {
      auto& client = job_store_->client();
      const auto before = client.timeout();
      client.set_timeout(wait);
      std::vector<std::byte> v;
      try {
        v = client.get(job_store_->prefix() + "gloo/" + key);
      } catch (...) {
        client.set_timeout(before);
        throw;
      }
      client.set_timeout(before);
      return std::string(reinterpret_cast<const char*>(v.data()), v.size());
    }
    try {
      store_->wait({key}, wait);
    } catch (const std::exception&) {
      return std::nullopt;  // the file store: not there (yet)
    }
    const auto v = store_->get(key);
    return std::string(v.begin(), v.end());
  }

  // What the failure `message` of this rank's call says about the other ranks: the rank whose
  // address it names, and the ranks that have not reached this call by their counters (a rank
  // that closed the connection may only have failed first, because of one of those).
  std::string who_failed(const std::string& message, const tally::CallOptions& call) {
    const std::string peer = peer_named(message);
    const std::string late = behind(call);
    if (peer.empty())
      return late.empty() && store_ ? "every rank reached this call (the connection between them "
                                      "failed)"
                                    : late;
    return late.empty() ? peer : peer + "; " + late;
  }

  // "rank 2 (10.0.0.3:19621) closed the connection" when `message` names rank 2's address (or
  // its host, when no other rank has that host); else empty.
  std::string peer_named(const std::string& message) {
    const auto plain = [](std::string a) {  // "[10.0.0.3]:19621" -> "10.0.0.3:19621"
      if (a.size() > 1 && a[0] == '[') {
        const auto close = a.find(']');
        if (close != std::string::npos && a.find(':') == a.rfind(':')) {
          a.erase(close, 1);
          a.erase(0, 1);
        }
      }
      return a;
    };
    const auto named = [&](int r, const std::string& addr) {
      const char* how = message.find("closed") != std::string::npos  ? "closed the connection"
                        : message.find("reset") != std::string::npos ? "reset the connection"
                                                                     : "is at the other end";
      return "rank " + std::to_string(r) + " (" + plain(addr) + ") " + how;
    };
    // The whole address: "[127.0.0.1]:1458" is not a part of "[127.0.0.1]:14580".
    const auto names = [&](const std::string& addr) {
      for (auto at = message.find(addr); at != std::string::npos; at = message.find(addr, at + 1)) {
        const auto after = at + addr.size();
        if (after == message.size() || !std::isdigit(static_cast<unsigned char>(message[after])))
          return true;
      }
      return false;
    };
    for (const auto& [addr, r] : peers_)
      if (names(addr)) return named(r, addr);
    // A port Gloo printed differently: the host alone, when one rank has it.
    int only = -1;
    std::string only_addr;
    for (const auto& [addr, r] : peers_) {
      const std::string host = addr.substr(0, addr.rfind(':') + 1);
      if (host.size() > 1 && message.find(host) != std::string::npos) {
        if (only >= 0 && only != r) return {};
        only = r;
        only_addr = addr;
      }
    }
    if (only >= 0) return named(only, only_addr);
    return {};
  }

  // The ranks whose last published call is before this one, or that the store does not answer;
  // empty when every rank reached this call (a few seconds of reading at most, never more than
  // the call's deadline).
  std::string behind(const tally::CallOptions& call) {
    if (!store_) return {};
    using Clock = std::chrono::steady_clock;
    const auto budget = std::min(deadline(call), std::chrono::milliseconds(3000));
    const auto end = Clock::now() + budget;
    std::string out;
    for (int i = 0; i < world_; ++i) {
      if (i == rank_) continue;
      const auto left =
          std::max(std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()),
                   std::chrono::milliseconds(1));
      std::optional<std::string> v;
      try {
        v = read_key("calls_" + std::to_string(i), left);
      } catch (const std::exception&) {
        if (job_store_) {
          const auto& a = job_store_->address();
          return "the store on rank 0's host (" + a.host + ":" + std::to_string(a.port) +
                 ") does not answer within " +
                 seconds_text(std::chrono::duration<double>(budget).count()) +
                 ": rank 0 or its host is gone, or this host lost its network";
        }
        return {};
      }
      const std::string me = "this is #" + std::to_string(calls_);
      std::string line;
      if (!v) {
        line = "rank " + std::to_string(i) + " has not reached this call (it has made no call; " +
               me + ")";
      } else {
        std::uint64_t n = 0;
        const auto [end_n, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
        if (ec == std::errc() && n < calls_) {
          const std::string name(end_n, std::as_const(*v).data() + v->size());
          line = "rank " + std::to_string(i) + " has not reached this call (" +
                 (n == 0 ? std::string("it has made no call yet")
                         : "its last call: #" + std::to_string(n) + name) +
                 "; " + me + ")";
        }
      }
      if (!line.empty()) out += (out.empty() ? "" : "; ") + line;
    }
    return out;
  }

  // Every rank checks it was started with the same world size as rank 0 (a wrong WORLD_SIZE is
  // a config error on the rank that has it, not a timeout).
  void check_world_size(gloo::rendezvous::Store& store, const tally_launch::LaunchEnv& launch) {
    const std::string w = std::to_string(world_);
    if (rank_ == 0) {
      store.set("world_size", std::vector<char>(w.begin(), w.end()));
      return;
    }
    const auto v = store.get("world_size");
    const std::string theirs(v.begin(), v.end());
    if (theirs != w)
      throw tally::ConfigError(me_ + ": rank 0 was started with a world size of " + theirs +
                               ", this rank with " + w + " (" + launch.source +
                               "): every rank must have the same WORLD_SIZE");
  }

  // The store of the job: backend.master_addr / backend.master_port when given (the other from
  // MASTER_ADDR / MASTER_PORT), else the environment's (torchrun, srun, or set by hand).
  tally_store::StoreAddress store_address(const tally_launch::GetEnv& env,
                                          const std::string& master_addr,
                                          std::optional<std::int64_t> master_port,
                                          const tally_launch::LaunchEnv& launch) const {
    if (master_addr.empty() && !master_port) {
      auto a = tally_store::store_address_from_env(env, rank_, kWho);
      if (!a)
        throw tally::ConfigError(
            std::string(kWho) + launch.source + " says " + std::to_string(world_) +
            " processes, but no store to meet at: set MASTER_ADDR and MASTER_PORT (torchrun sets "
            "them), backend.master_addr and backend.master_port, or backend.rendezvous (a folder "
            "every rank sees)");
      return *a;
    }
    tally_store::StoreAddress a;
    const char* env_addr = env("MASTER_ADDR");
    const char* env_port = env("MASTER_PORT");
    std::string from_addr, from_port;
    if (!master_addr.empty()) {
      a.host = master_addr;
      from_addr = "backend.master_addr=" + a.host;
    } else if (env_addr != nullptr && *env_addr != '\0') {
      a.host = env_addr;
      from_addr = std::string("MASTER_ADDR=") + env_addr;
    } else {
      throw tally::ConfigError(std::string(kWho) +
                               "backend.master_port is set but neither backend.master_addr nor "
                               "MASTER_ADDR: set either to the host of rank 0");
    }
    std::int64_t port = 0;
    if (master_port) {
      port = *master_port;
      from_port = "backend.master_port=" + std::to_string(port);
    } else if (env_port != nullptr) {
      const std::string_view s(env_port);
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), port);
      if (s.empty() || ec != std::errc() || end != s.data() + s.size() || port < 1 || port > 65535)
        throw tally::ConfigError(std::string(kWho) + "MASTER_PORT='" + std::string(s) +
                                 "' is not a port number (an integer from 1 to 65535)");
      from_port = "MASTER_PORT=" + std::string(s);
    } else {
      throw tally::ConfigError(std::string(kWho) +
                               "backend.master_addr is set but neither backend.master_port nor "
                               "MASTER_PORT: set either to a free TCP port on the host of rank 0");
    }
    a.port = static_cast<std::uint16_t>(port);
    const char* agent = env("TORCHELASTIC_USE_AGENT_STORE");
    const bool agent_store = agent != nullptr && std::string_view(agent) == "True" &&
                             env_addr != nullptr && a.host == env_addr && env_port != nullptr &&
                             std::to_string(port) == env_port;
    a.host_here = rank_ == 0 && !agent_store;
    a.agent_store = agent_store;
    a.source = from_addr + ", " + from_port + (agent_store ? " (torchrun's agent store)" : "");
    return a;
  }

  int rank_ = 0;
  int world_ = 1;
  double timeout_s_ = kDefaultTimeout;
  std::size_t chunk_bytes_ = static_cast<std::size_t>(kDefaultChunkBytes);
  std::string me_;
  std::unique_ptr<tally_store::JobStore> job_store_;
  std::unique_ptr<gloo::rendezvous::FileStore> file_store_;
  std::unique_ptr<gloo::rendezvous::Store> store_;  // job_store_'s or file_store_'s, prefixed
  StoreAdapter* store_adapter_ = nullptr;           // store_ over job_store_'s client
  std::string store_where_;
  std::shared_ptr<gloo::Context> context_;
  // Peer r's address for its pair with this rank ("[10.0.0.3]:19621", as Gloo's errors print it).
  std::vector<std::pair<std::string, int>> peers_;
  std::uint64_t calls_ = 0;    // this rank's Gloo calls so far (published before each)
  std::uint64_t waits_ = 0;    // this rank's work_and_wait calls so far (their keys' number)
  bool store_silent_ = false;  // publishing failed once: not tried again
  bool barrier_passed_ = false;
  std::string counter_file_;  // the file store's file of this rank's counter
  bool failed_ = false;
  std::string failure_;
  std::error_code ec_;
};

std::vector<tally::ParamSpec> gloo_params() {
  using tally::param;
  using tally::ParamType;
  return {
      param("chunk_bytes", ParamType::Int,
            "bytes one Gloo call moves at most (all ranks together); larger objects go in rounds")
          .def(kDefaultChunkBytes),
      param("timeout", ParamType::Float,
            "seconds a collective may wait for the other ranks (every Gloo call has this "
            "deadline); past it the call fails on this rank with a message naming the rank and "
            "the call. The start-up has its own deadline, start_timeout.")
          .def(kDefaultTimeout),
      param("start_timeout", ParamType::Float,
            "seconds the whole start-up may take: every rank starts, reaches the store and "
            "connects to every other (whatever the world size); past it every rank fails naming "
            "the rank it waited for")
          .def(kMinStartTimeout),
      param("rendezvous", ParamType::Path,
            "a folder every rank sees: rendezvous through Gloo's file store there instead of the "
            "TCP store at MASTER_ADDR:MASTER_PORT")
          .optional(),
      param("interface", ParamType::String,
            "the network interface Gloo's TCP pairs listen on (eth0, ib0, ...); by default the "
            "one that routes to the store's host, else the host name's address")
          .optional(),
      param("master_addr", ParamType::String,
            "the host of the TCP store (rank 0's host); by default MASTER_ADDR")
          .optional(),
      param("store_bind", ParamType::String,
            "where rank 0's TCP store listens: by default only where MASTER_ADDR is (loopback "
            "for a loopback MASTER_ADDR); 'any' for every interface, or an address of this host")
          .optional(),
      param("store_secret_file", ParamType::Path,
            "a private file (mode 0600) holding the job's secret, the same on every rank: the "
            "store serves only clients that prove it (else TALLY_STORE_SECRET_FILE or "
            "TALLY_STORE_SECRET; on one host rank 0 makes one)")
          .optional(),
      param("master_port", ParamType::Int,
            "the port of the TCP store (1 to 65535); by default MASTER_PORT. Rank 0 serves the "
            "store there, unless torchrun's agent already does (TORCHELASTIC_USE_AGENT_STORE)")
          .optional()};
}

}  // namespace

TALLY_PLUGIN("gloo", "0.1.0", [] {
  return std::vector<tally::ComponentInfo>{tally::backend<GlooBackend>(
      "gloo",
      "Gloo over TCP, for torchrun, srun or hand-launched jobs without MPI: rank and world size "
      "from RANK/WORLD_SIZE (or Slurm's), rendezvous through the TCP store at "
      "MASTER_ADDR:MASTER_PORT (or a file store in backend.rendezvous); sizes with "
      "gloo::allgather, bytes with gloo::allgatherv (point-to-point to one rank), counts with "
      "gloo::reduce; every call has a deadline.",
      gloo_params())};
})
