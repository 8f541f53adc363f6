// The `mpi` backend (Open MPI): transport primitives only (tally/sdk/dist_backend.hpp). Sizes
// travel with MPI_Allgather, object bytes with MPI_Allgatherv (no padding) or, to one rank,
// MPI_Gatherv; counts with MPI_Reduce; the engine (tally::Collectives) keeps every call under
// chunk_bytes(), which is at most INT_MAX so every count fits MPI's int. tally's traffic runs on
// its own duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, so it never mixes with the host
// program's and every failure becomes a tally::RuntimeError naming the rank and the call. A host
// program may give its own communicator instead (param `communicator`: its Fortran handle,
// MPI_Comm_c2f(comm), as tally::mpi_backend(comm) of tally/mpi.hpp passes it): the backend then
// runs on a duplicate of that one, and never frees the host's. The local rank (LocalRank) comes
// from the communicator split by shared memory, so it is right on any communicator.
//
// MPI is initialised only if the host program has not done it, and finalised only by the backend
// that initialised it, when the last live mpi backend of the process goes away.
//
// MPI collectives have no deadline: a rank that hangs or dies would leave the others waiting
// forever. Every collective runs under a watchdog (backends/common/watchdog.hpp) that ends this
// rank with a message naming it and the call when backend.timeout passes; mpirun then stops the
// rest. The deadline is the call's own (CallOptions::timeout) when the engine gives one, else
// backend.timeout; the message names the engine's collective and the MPI call. The timeout bounds
// waiting for a dead or stuck peer, not for a live one at work: while
// ranks work between collectives (reading their shards: run_on_every_rank; rank 0 computing the
// results: run_on_root), a thread of each working rank sends the others a heartbeat every
// timeout / 4 on a communicator of its own (while reading, only when a batch was read since the
// last one), and the others wait for the next heartbeat, each wait under the watchdog, until every
// working rank says it is done. This needs MPI_THREAD_SERIALIZED (the backend asks for it; a host
// program that initialised MPI with less gets the plain deadline).
#include <mpi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "../common/mpi_session.hpp"
#include "../common/watchdog.hpp"
#include "tally/launch.hpp"
#include "tally/sdk/dist_backend.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"

namespace {

constexpr std::int64_t kDefaultChunkBytes = std::int64_t{1} << 30;
constexpr double kDefaultTimeout = 600.0;
constexpr double kMinStartTimeout = 30.0;
constexpr std::int64_t kWorldCommunicator = -1;  // `communicator`'s default: MPI_COMM_WORLD

// This process's rank as its launcher numbered it (tally/launch.hpp), before MPI is up ("?" when
// none says).
std::string launcher_rank_text() {
  const int rank = tally::launch::launcher_rank();
  return rank < 0 ? "?" : std::to_string(rank);
}

class MpiBackend final : public tally::DistBackend,
                         public tally::VaryingAllGather,
                         public tally::RootedGather,
                         public tally::Reducer,
                         public tally::WorkAndWait,
                         public tally::LocalRank {
 public:
  explicit MpiBackend(const tally::Params& params) {
    const std::int64_t chunk = params.get_int("chunk_bytes");
    const double timeout = params.get_double("timeout");
    const std::int64_t handle = params.get_int("communicator");
    const double start_timeout = params.get_double("start_timeout");
    if (!(start_timeout > 0) || !std::isfinite(start_timeout))
      params.fail("start_timeout",
                  "must be a positive number of seconds, got " + std::to_string(start_timeout));
    if (!(timeout > 0) || !std::isfinite(timeout))
      params.fail("timeout",
                  "must be a positive number of seconds, got " + std::to_string(timeout));
    if (chunk < 1 || chunk > INT_MAX) {
      params.fail("chunk_bytes", "must be between 1 and " + std::to_string(INT_MAX) +
                                     " (MPI counts are int), got " + std::to_string(chunk));
    }
    // MPI_Init waits for every rank of the job to start MPI, and MPI_Comm_dup for every rank to
    // make a backend: a rank that never does (it ran another command, or another backend) must
    // not leave this one waiting past the timeout either.
    // Starting is live work on a busy machine (seconds, on many ranks): at least start_timeout
    // (30 s by default), so that a short backend.timeout bounds collectives without failing
    // healthy start-ups.
    const std::string me = launcher_rank_text();
    tally::Watchdog start_watch("mpi backend: rank " + me, std::max(timeout, start_timeout),
                                me == "?" ? 0.0 : std::min(3.0 * std::atof(me.c_str()), 30.0));
    char start_text[32];
    std::snprintf(start_text, sizeof start_text, "%g s", start_timeout);
    const std::string starting_what =
        std::string(
            "starting MPI (MPI_Init_thread, MPI_Comm_dup, MPI_Comm_split_type: every rank "
            "of the job must run tally with the mpi backend; start-up waits at least "
            "backend.start_timeout, ") +
        start_text + ")";
    tally::Watchdog::Scope starting(start_watch, starting_what.c_str());
    mpi_.acquire(
        "mpi backend",
        "initialise MPI in the host program to use several mpi backends one after another");
    try {
      const MPI_Comm base = host_communicator(params, handle);
      const char* dup = handle == kWorldCommunicator ? "MPI_Comm_dup(MPI_COMM_WORLD)"
                                                     : "MPI_Comm_dup(the host's communicator)";
      check(MPI_Comm_dup(base, &comm_), dup);
      check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
      check(MPI_Comm_dup(base, &beat_comm_), dup);
      check(MPI_Comm_set_errhandler(beat_comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
      int level = MPI_THREAD_SINGLE;
      check(MPI_Query_thread(&level), "MPI_Query_thread");
      heartbeats_ = level >= MPI_THREAD_SERIALIZED;
      check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
      check(MPI_Comm_size(comm_, &world_), "MPI_Comm_size");
      // The ranks that share this host: those that can share memory with this one.
      MPI_Comm here = MPI_COMM_NULL;
      check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &here),
            "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
      const int got = MPI_Comm_rank(here, &local_rank_);
      MPI_Comm_free(&here);
      check(got, "MPI_Comm_rank (local)");
      if (chunk < world_) {
        params.fail("chunk_bytes", "must be at least the world size (" + std::to_string(world_) +
                                       "), got " + std::to_string(chunk));
      }
      chunk_bytes_ = static_cast<std::size_t>(chunk);
      timeout_ = timeout;
      // Rank r gives up 3 s per rank later (at most 30 s): a hang is reported once, by the
      // lowest rank that waits (mpirun stops the others within about 2 s of its exit).
      watchdog_ = std::make_unique<tally::Watchdog>(
          "mpi backend: rank " + std::to_string(rank_) + " of " + std::to_string(world_), timeout,
          std::min(3.0 * rank_, 30.0));
    } catch (...) {
      release();
      throw;
    }
  }

  ~MpiBackend() override { release(); }
  MpiBackend(const MpiBackend&) = delete;
  MpiBackend& operator=(const MpiBackend&) = delete;

  std::string name() const override { return "mpi"; }
  bool is_initialized() const override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    return comm_ != MPI_COMM_NULL && finalized == 0;
  }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  int local_rank() const override { return local_rank_; }
  void barrier(const tally::CallOptions& call) override {
    const Armed w(*this, call, "MPI_Barrier");
    check(MPI_Barrier(comm_), "MPI_Barrier");
  }
  std::size_t chunk_bytes() const override { return chunk_bytes_; }

  void* find_primitive(std::string_view id) override {
    return tally::offer_primitives<tally::VaryingAllGather, tally::RootedGather, tally::Reducer,
                                   tally::WorkAndWait, tally::LocalRank>(this, id);
  }

  void all_gather_equal(const std::byte* send, std::size_t n, std::byte* recv,
                        const tally::CallOptions& call) override {
    const int count = to_int(n, "MPI_Allgather");
    const Armed w(*this, call, "MPI_Allgather");
    check(MPI_Allgather(send, count, MPI_BYTE, recv, count, MPI_BYTE, comm_), "MPI_Allgather");
  }

  void all_gather_varying(const std::byte* send, std::span<const std::size_t> counts,
                          std::byte* recv, const tally::CallOptions& call) override {
    const int mine = set_counts(counts, "MPI_Allgatherv");
    const Armed w(*this, call, "MPI_Allgatherv");
    check(
        MPI_Allgatherv(send, mine, MPI_BYTE, recv, counts_.data(), displs_.data(), MPI_BYTE, comm_),
        "MPI_Allgatherv");
  }

  void gather_varying(const std::byte* send, std::span<const std::size_t> counts, std::byte* recv,
                      int root, const tally::CallOptions& call) override {
    const int mine = set_counts(counts, "MPI_Gatherv");
    const Armed w(*this, call, "MPI_Gatherv");
    check(MPI_Gatherv(send, mine, MPI_BYTE, recv, counts_.data(), displs_.data(), MPI_BYTE, root,
                      comm_),
          "MPI_Gatherv");
  }

  void broadcast(std::byte* buf, std::size_t n, int src, const tally::CallOptions& call) override {
    const int count = to_int(n, "MPI_Bcast");
    const Armed w(*this, call, "MPI_Bcast");
    check(MPI_Bcast(buf, count, MPI_BYTE, src, comm_), "MPI_Bcast");
  }

  // In place at the root (MPI_IN_PLACE): no second buffer of the values anywhere.
  void reduce_values(std::int64_t* values, std::size_t n, tally::ReduceOp op, int root,
                     const tally::CallOptions& call) override {
    const int count = to_int(n, "MPI_Reduce");
    const MPI_Op mpi_op = op == tally::ReduceOp::sum   ? MPI_SUM
                          : op == tally::ReduceOp::min ? MPI_MIN
                                                       : MPI_MAX;
    const Armed w(*this, call, "MPI_Reduce");
    const void* send = rank_ == root ? MPI_IN_PLACE : values;
    check(MPI_Reduce(send, values, count, MPI_INT64_T, mpi_op, root, comm_), "MPI_Reduce");
  }

  // The ranks at work (`root`, or every rank when root < 0) run a heartbeat thread while they
  // work, then tell every other rank they are done (from the main thread, after the heartbeat
  // thread has stopped: MPI_THREAD_SERIALIZED, and point-to-point order makes "done" a rank's
  // last message). Every rank then takes heartbeats, each wait under the watchdog, until every
  // other rank at work has said it is done.
  void work_and_wait(int root, const std::function<void()>& work,
                     const std::atomic<std::uint64_t>* progress,
                     const tally::CallOptions& call) override {
    if (world_ == 1 || !heartbeats_) {  // the plain deadline: the next collective waits
      if (root < 0 || rank_ == root) work();
      return;
    }
    const double timeout = seconds(call);
    const bool working = root < 0 || rank_ == root;
    std::exception_ptr failure;
    if (working) {
      {
        Heartbeat beat(*this, progress, timeout);
        try {
          work();
        } catch (...) {
          failure = std::current_exception();
        }
      }
      for (int r = 0; r < world_; ++r) {
        if (r == rank_) continue;
        const Armed w(*this, call, "MPI_Send (done working)");
        check(MPI_Send(nullptr, 0, MPI_BYTE, r, kDoneTag, beat_comm_), "MPI_Send (done)");
      }
    }
    // The ranks still at work, named in the watchdog's message if one falls silent.
    std::vector<char> busy(static_cast<std::size_t>(world_), 0);
    for (int r = 0; r < world_; ++r)
      busy[static_cast<std::size_t>(r)] = r != rank_ && (root < 0 || r == root);
    int pending = static_cast<int>(std::count(busy.begin(), busy.end(), 1));
    while (pending > 0) {
      describe_wait(call, busy, root < 0 ? "still reading" : "computing the results");
      MPI_Status status;
      {
        tally::Watchdog::Scope w(*watchdog_, wait_what_.data(), own_deadline(call));
        check(MPI_Recv(nullptr, 0, MPI_BYTE, root < 0 ? MPI_ANY_SOURCE : root, MPI_ANY_TAG,
                       beat_comm_, &status),
              "MPI_Recv (heartbeat)");
      }
      if (status.MPI_TAG == kDoneTag) {
        busy[static_cast<std::size_t>(status.MPI_SOURCE)] = 0;
        --pending;
      }
    }
    if (failure) std::rethrow_exception(failure);
  }

 private:
  /// The communicator `communicator` names: MPI_COMM_WORLD by default, else the host program's
  /// (a Fortran handle, MPI_Comm_c2f). ConfigError for a handle that names no communicator, the
  /// null one, or an intercommunicator.
  static MPI_Comm host_communicator(const tally::Params& params, std::int64_t handle) {
    if (handle == kWorldCommunicator) return MPI_COMM_WORLD;
    const std::string given = std::to_string(handle);
    if (handle < INT_MIN || handle > INT_MAX)
      params.fail("communicator",
                  "must be a Fortran communicator handle (MPI_Comm_c2f) or -1 "
                  "for MPI_COMM_WORLD, got " +
                      given);
    const MPI_Comm comm = MPI_Comm_f2c(static_cast<MPI_Fint>(handle));
    if (comm == MPI_Comm{} || comm == MPI_COMM_NULL)
      params.fail("communicator",
                  "must be the Fortran handle (MPI_Comm_c2f) of a live communicator of this "
                  "process, or -1 for MPI_COMM_WORLD; " +
                      given + " names " +
                      (comm == MPI_COMM_NULL ? "MPI_COMM_NULL" : "no communicator"));
    int inter = 0;
    if (MPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter != 0)
      params.fail("communicator",
                  "must be an intracommunicator; handle " + given + " names an intercommunicator");
    return comm;
  }

  /// The watchdog armed for one MPI call, under the engine's name for it ("all_gather_object
  /// (sync payload): MPI_Allgatherv") and the call's deadline.
  class Armed {
   public:
    Armed(MpiBackend& b, const tally::CallOptions& call, const char* mpi_call) : b_(b) {
      if (call.name.empty())
        std::snprintf(b.call_what_.data(), b.call_what_.size(), "%s", mpi_call);
      else
        std::snprintf(b.call_what_.data(), b.call_what_.size(), "%.*s: %s",
                      static_cast<int>(std::min<std::size_t>(call.name.size(), 120)),
                      call.name.data(), mpi_call);
      b.watchdog_->arm(b.call_what_.data(), own_deadline(call));
    }
    ~Armed() { b_.watchdog_->disarm(); }
    Armed(const Armed&) = delete;
    Armed& operator=(const Armed&) = delete;

   private:
    MpiBackend& b_;
  };

  /// The call's own deadline in seconds, or 0 for the watchdog's default (backend.timeout).
  static double own_deadline(const tally::CallOptions& call) {
    return call.timeout.count() > 0 ? std::chrono::duration<double>(call.timeout).count() : 0.0;
  }
  /// The call's deadline in seconds, or backend.timeout.
  double seconds(const tally::CallOptions& call) const {
    return call.timeout.count() > 0 ? std::chrono::duration<double>(call.timeout).count()
                                    : timeout_;
  }

  void check(int code, const char* call) const {
    if (code == MPI_SUCCESS) return;
    throw tally::RuntimeError("mpi backend: rank " + std::to_string(rank_) + " of " +
                              std::to_string(world_) + ": " + call +
                              " failed: " + tally::mpi_session::error_string(code));
  }

  /// MPI's int counts and displacements of a varying collective into counts_ and displs_;
  /// returns this rank's count.
  int set_counts(std::span<const std::size_t> counts, const char* call) {
    counts_.resize(counts.size());
    displs_.resize(counts.size());
    std::size_t at = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      counts_[r] = to_int(counts[r], call);
      displs_[r] = to_int(at, call);
      at += counts[r];
    }
    to_int(at, call);
    return counts_[static_cast<std::size_t>(rank_)];
  }

  // The base class keeps every call within chunk_bytes() <= INT_MAX; this guards that contract.
  int to_int(std::size_t n, const char* call) const {
    if (n > static_cast<std::size_t>(INT_MAX)) {
      throw tally::RuntimeError("mpi backend: rank " + std::to_string(rank_) + ": " + call +
                                " of " + std::to_string(n) +
                                " bytes exceeds MPI's int count limit");
    }
    return static_cast<int>(n);
  }

  // Frees the communicator, then lets go of MPI (finalised if this plugin initialised it and this
  // was the last backend). Never throws: it runs in the destructor.
  void release() noexcept {
    watchdog_.reset();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm_ != MPI_COMM_NULL && finalized == 0) MPI_Comm_free(&comm_);
    if (beat_comm_ != MPI_COMM_NULL && finalized == 0) MPI_Comm_free(&beat_comm_);
    comm_ = MPI_COMM_NULL;
    beat_comm_ = MPI_COMM_NULL;
    mpi_.release();
  }

  // "MPI_Recv of a heartbeat from rank 2 (still reading)" into wait_what_, which the watchdog
  // prints if the wait outlasts the timeout (written only while the watchdog is disarmed).
  void describe_wait(const tally::CallOptions& call, const std::vector<char>& busy,
                     const char* doing) {
    std::string ranks;
    int listed = 0;
    int count = 0;
    for (int r = 0; r < world_; ++r) {
      if (!busy[static_cast<std::size_t>(r)]) continue;
      if (++count > 8) continue;
      ranks += (listed++ == 0 ? "" : ", ") + std::to_string(r);
    }
    if (count > 8) ranks += ", ...";
    const std::string_view name = call.name.empty() ? std::string_view("waiting") : call.name;
    std::snprintf(wait_what_.data(), wait_what_.size(),
                  "%.*s: MPI_Recv of a heartbeat from %s %s (%s)",
                  static_cast<int>(std::min<std::size_t>(name.size(), 80)), name.data(),
                  count == 1 ? "rank" : "ranks", ranks.c_str(), doing);
  }

  static constexpr int kBeatTag = 1;
  static constexpr int kDoneTag = 2;

  // A thread that sends every other rank an empty kBeatTag message every timeout / 4 while it
  // lives; with `progress`, only when it has moved since the last heartbeat (a rank stuck in one
  // batch falls silent). A failed send stops it: a peer that is gone is mpirun's to handle.
  class Heartbeat {
   public:
    Heartbeat(MpiBackend& b, const std::atomic<std::uint64_t>* progress, double timeout_s)
        : b_(b), progress_(progress), timeout_s_(timeout_s) {
      thread_ = std::thread([this] { beat(); });
    }
    ~Heartbeat() {
      {
        std::lock_guard lock(mu_);
        stop_ = true;
      }
      cv_.notify_all();
      thread_.join();
    }
    Heartbeat(const Heartbeat&) = delete;
    Heartbeat& operator=(const Heartbeat&) = delete;

   private:
    void beat() {
      // At most an hour apart: a huge timeout must not overflow the clock's duration.
      const auto period = std::chrono::duration<double>(std::min(timeout_s_ / 4, 3600.0));
      std::uint64_t seen = 0;
      std::unique_lock lock(mu_);
      while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
        if (progress_ != nullptr) {
          const auto now = progress_->load(std::memory_order_relaxed);
          if (now == seen) continue;
          seen = now;
        }
        for (int r = 0; r < b_.world_; ++r) {
          if (r == b_.rank_) continue;
          if (MPI_Send(nullptr, 0, MPI_BYTE, r, kBeatTag, b_.beat_comm_) != MPI_SUCCESS) return;
        }
      }
    }
    MpiBackend& b_;
    const std::atomic<std::uint64_t>* progress_;
    double timeout_s_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::thread thread_;
  };

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm beat_comm_ = MPI_COMM_NULL;
  bool heartbeats_ = false;
  std::array<char, 256> wait_what_{};
  std::array<char, 192> call_what_{};  // the armed call's name, for the watchdog (see Armed)
  double timeout_ = kDefaultTimeout;
  std::size_t chunk_bytes_ = static_cast<std::size_t>(kDefaultChunkBytes);
  int rank_ = 0;
  int world_ = 1;
  int local_rank_ = 0;
  tally::mpi_session::Hold mpi_;
  std::unique_ptr<tally::Watchdog> watchdog_;
  std::vector<int> counts_;
  std::vector<int> displs_;
};

std::vector<tally::ParamSpec> mpi_params() {
  return {tally::param("chunk_bytes", tally::ParamType::Int,
                       "bytes one MPI call moves at most; larger objects go in rounds")
              .def(kDefaultChunkBytes),
          tally::param("timeout", tally::ParamType::Float,
                       "seconds a collective may wait for the other ranks; past it this rank "
                       "prints which call timed out and exits with code 1, and mpirun stops the "
                       "others (a rank that hangs or dies never leaves the rest waiting). The "
                       "first collective after reading waits for the slowest rank to finish "
                       "reading. Rank 0 computing the results is alive, not hung: the others wait "
                       "for it as long as its heartbeats (every timeout / 4) arrive.")
              .def(kDefaultTimeout),
          tally::param("start_timeout", tally::ParamType::Float,
                       "seconds the start-up (MPI_Init_thread, MPI_Comm_dup) waits at least for "
                       "every rank of the job (starting is live work on a busy machine: the wait "
                       "is the larger of this and timeout)")
              .def(kMinStartTimeout),
          tally::param("communicator", tally::ParamType::Int,
                       "the communicator to run on, as its Fortran handle (MPI_Comm_c2f), for a "
                       "host program that initialised MPI and evaluates on its own communicator "
                       "(tally::mpi_backend(comm) in tally/mpi.hpp passes it); the backend "
                       "duplicates it and never frees it. -1: MPI_COMM_WORLD")
              .def(kWorldCommunicator)};
}

}  // namespace

TALLY_PLUGIN("mpi", "0.1.0", [] {
  return std::vector<tally::ComponentInfo>{tally::backend<MpiBackend>(
      "mpi",
      "Open MPI: sizes with MPI_Allgather, bytes with MPI_Allgatherv (MPI_Gatherv to one rank), "
      "counts with MPI_Reduce, on a duplicate of MPI_COMM_WORLD (or of the host program's "
      "communicator). Initialises MPI only if the host "
      "program has not, and finalises only what "
      "it initialised.",
      mpi_params())};
})
