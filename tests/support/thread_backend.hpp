// An in-process world of W ranks, one thread each, for tests of the engine's collectives and of
// the sync protocol: ThreadBackend implements the transport primitives of DistBackend over shared
// memory and checks every call against the contracts in tally/sdk/dist_backend.hpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tally/collectives.hpp"
#include "tally/sdk/dist_backend.hpp"

namespace tally::testing {

using tally::CallOptions;
using tally::Collectives;
using tally::DistBackend;

// Shared by the W backends of one world: each primitive is "publish my buffer, wait, copy what I
// need, wait". It records contract violations instead of throwing: a throw would leave the other
// threads waiting at the barrier.
struct ThreadWorld {
  explicit ThreadWorld(int n) : size(n), sync(n), slots(static_cast<std::size_t>(n)) {}

  struct Slot {
    const std::byte* data = nullptr;
    std::size_t n = 0;
  };

  void violation(const std::string& what) {
    std::lock_guard lock(mutex);
    violations.push_back(what);
  }
  void record_call(std::size_t bytes, const CallOptions& call) {
    std::lock_guard lock(mutex);
    ++calls;
    max_call_bytes = std::max(max_call_bytes, bytes);
    names.emplace_back(call.name);
    timeouts.push_back(call.timeout);
  }

  int size;
  std::barrier<> sync;
  std::vector<Slot> slots;
  std::mutex mutex;
  std::vector<std::string> violations;
  std::size_t calls = 0;  // counted once per rank
  std::size_t max_call_bytes = 0;
  std::vector<std::string> names;  // each primitive call's CallOptions (rank 0's)
  std::vector<std::chrono::milliseconds> timeouts;
};

// `native` offers the optional primitives a backend may have (the varying and rooted gathers,
// the reduction, the wait for working ranks); without it the engine's fallbacks run over
// all_gather_equal and broadcast alone, as for NCCL.
class ThreadBackend final : public DistBackend,
                            public tally::VaryingAllGather,
                            public tally::RootedGather,
                            public tally::Reducer,
                            public tally::WorkAndWait {
 public:
  ThreadBackend(ThreadWorld& world, int rank, bool native, std::size_t chunk = 1 << 30)
      : world_(world), rank_(rank), native_(native), chunk_(chunk) {}

  std::string name() const override { return "threads"; }
  bool is_initialized() const override { return true; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_.size; }
  void barrier(const CallOptions&) override { world_.sync.arrive_and_wait(); }
  std::size_t chunk_bytes() const override { return chunk_; }
  void* find_primitive(std::string_view id) override {
    if (!native_) return nullptr;
    return tally::offer_primitives<tally::VaryingAllGather, tally::RootedGather, tally::Reducer,
                                   tally::WorkAndWait>(this, id);
  }

  void all_gather_equal(const std::byte* send, std::size_t n, std::byte* recv,
                        const CallOptions& call) override {
    const auto w = static_cast<std::size_t>(world_.size);
    check_within_chunk("all_gather_equal", n * w, call);
    if (n == 0) world_.violation("all_gather_equal: a call that moves nothing");
    publish(send, n);
    for (std::size_t r = 0; r < w; ++r) {
      if (world_.slots[r].n != n)
        world_.violation("all_gather_equal: ranks passed different n");
      else if (n != 0)
        std::memcpy(recv + r * n, world_.slots[r].data, n);
    }
    world_.sync.arrive_and_wait();
  }

  void all_gather_varying(const std::byte* send, std::span<const std::size_t> counts,
                          std::byte* recv, const CallOptions& call) override {
    std::size_t total = 0;
    for (auto c : counts) total += c;
    check_within_chunk("all_gather_varying", total, call);
    publish(send, counts[static_cast<std::size_t>(rank_)]);
    std::size_t at = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      if (world_.slots[r].n != counts[r])
        world_.violation("all_gather_varying: counts disagree");
      else if (counts[r] != 0)
        std::memcpy(recv + at, world_.slots[r].data, counts[r]);
      at += counts[r];
    }
    world_.sync.arrive_and_wait();
  }

  void gather_varying(const std::byte* send, std::span<const std::size_t> counts, std::byte* recv,
                      int root, const CallOptions& call) override {
    std::size_t total = 0;
    for (auto c : counts) total += c;
    check_within_chunk("gather_varying", total, call);
    if ((recv != nullptr) != (rank_ == root))
      world_.violation(
          "gather_varying: a receive buffer on a rank other than the root, or none "
          "on the root");
    publish(send, counts[static_cast<std::size_t>(rank_)]);
    std::size_t at = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      if (world_.slots[r].n != counts[r])
        world_.violation("gather_varying: counts disagree");
      else if (counts[r] != 0 && rank_ == root)
        std::memcpy(recv + at, world_.slots[r].data, counts[r]);
      at += counts[r];
    }
    world_.sync.arrive_and_wait();
  }

  // Element-wise at the root, in rank order, as MPI_Reduce (combine wraps like MPI_SUM).
  void reduce_values(std::int64_t* values, std::size_t n, tally::ReduceOp op, int root,
                     const CallOptions& call) override {
    const std::size_t bytes = n * sizeof(std::int64_t);
    check_within_chunk("reduce_values", bytes * static_cast<std::size_t>(world_.size), call);
    publish(reinterpret_cast<const std::byte*>(values), bytes);
    std::vector<std::int64_t> sum;
    if (rank_ == root) {
      sum.assign(n, 0);
      for (std::size_t r = 0; r < static_cast<std::size_t>(world_.size); ++r) {
        if (world_.slots[r].n != bytes) {
          world_.violation("reduce_values: ranks passed different n");
          break;
        }
        for (std::size_t i = 0; i < n; ++i) {
          std::int64_t v = 0;
          std::memcpy(&v, world_.slots[r].data + i * sizeof v, sizeof v);
          sum[i] = r == 0 ? v : tally::combine(op, sum[i], v);
        }
      }
    }
    world_.sync.arrive_and_wait();  // every rank has read the others' values
    if (rank_ == root && !sum.empty()) std::memcpy(values, sum.data(), bytes);
  }

  void work_and_wait(int root, const std::function<void()>& work, const std::atomic<std::uint64_t>*,
                     const CallOptions& call) override {
    check_within_chunk("work_and_wait", 0, call);
    std::exception_ptr failure;
    if (root < 0 || rank_ == root) {
      try {
        work();
      } catch (...) {
        failure = std::current_exception();
      }
    }
    world_.sync.arrive_and_wait();
    if (failure) std::rethrow_exception(failure);
  }

  void broadcast(std::byte* buf, std::size_t n, int src, const CallOptions& call) override {
    check_within_chunk("broadcast", n, call);
    if (n == 0) world_.violation("broadcast: a call that moves nothing");
    publish(buf, n);
    const auto& from = world_.slots[static_cast<std::size_t>(src)];
    if (from.n != n)
      world_.violation("broadcast: ranks passed different n");
    else if (rank_ != src && n != 0)
      std::memcpy(buf, from.data, n);
    world_.sync.arrive_and_wait();
  }

 private:
  void check_within_chunk(const char* call, std::size_t bytes, const CallOptions& options) {
    if (rank_ == 0) world_.record_call(bytes, options);
    if (bytes > chunk_)
      world_.violation(std::string(call) + " moved " + std::to_string(bytes) +
                       " bytes > chunk_bytes");
  }
  void publish(const std::byte* data, std::size_t n) {
    world_.slots[static_cast<std::size_t>(rank_)] = {data, n};
    world_.sync.arrive_and_wait();
  }

  ThreadWorld& world_;
  int rank_;
  bool native_;
  std::size_t chunk_;
};

// Runs `body(collectives)` on every rank of a W-thread world: the backend's chunk is `chunk`
// (the Collectives take it over from the backend).
inline ThreadWorld& run_world(ThreadWorld& world, bool native_varying, std::size_t chunk,
                              const std::function<void(Collectives&)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world.size; ++r) {
    threads.emplace_back([&, r] {
      ThreadBackend b(world, r, native_varying, chunk);
      Collectives c(b);
      body(c);
    });
  }
  for (auto& t : threads) t.join();
  return world;
}

}  // namespace tally::testing
