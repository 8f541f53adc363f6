// DistBackend: what a dist-backend plugin implements -- transport primitives only, after mmeval's
// BaseDistBackend (is_initialized, rank, world_size, barrier) and TensorBaseDistBackend's split:
// the object collectives written over the primitives (size exchange, padding, chunking,
// unpadding, reused buffers) belong to the engine (tally/collectives.hpp), not to the plugin.
//
// ABI (docs/abi.md): this class holds no data members, so the engine can change its algorithms
// and buffers without touching the plugin ABI. Every primitive takes a CallOptions (the
// collective it serves, this call's deadline). Primitives beyond the two required ones are
// optional interfaces a backend offers through find_primitive(): a new one is a new interface with
// a new id, which backends built before it do not offer and the engine then does without -- never
// a virtual appended to DistBackend, which would shift the vtable of every built backend.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "tally/sdk/export.hpp"

namespace tally {

/// Element-wise combination of a reduction: exact on int64 (no rounding, so no order dependence).
enum class ReduceOp : std::uint8_t { sum, min, max };

/// `a op b`, as every reduction combines two ranks' values: the sum wraps (two's complement)
/// as MPI_SUM does, instead of overflowing.
constexpr std::int64_t combine(ReduceOp op, std::int64_t a, std::int64_t b) noexcept {
  switch (op) {
    case ReduceOp::min:
      return b < a ? b : a;
    case ReduceOp::max:
      return b > a ? b : a;
    case ReduceOp::sum:
      break;
  }
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}

/// What the engine says about one primitive call. Every rank passes the same options to the
/// same call.
struct CallOptions {
  /// The engine's collective and its purpose, for messages: "all_gather_object (sync payload)".
  /// Valid for the duration of the call only.
  std::string_view name;
  /// This call's deadline: the longest it may wait for the other ranks. 0: the backend's own
  /// default (its `timeout` parameter). A backend whose transport has no deadlines ignores it.
  std::chrono::milliseconds timeout{0};
};

class TALLY_API DistBackend {
 public:
  virtual ~DistBackend();

  /// "nondist", "mpi", "nccl".
  virtual std::string name() const = 0;
  virtual bool is_initialized() const = 0;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// Returns when every rank has called it (or fails after `call.timeout`).
  virtual void barrier(const CallOptions& call) = 0;

  /// The most bytes one primitive call may move in all (summed over the ranks); the engine moves
  /// larger objects in rounds. At least world_size(). MPI: at most INT_MAX (int counts).
  virtual std::size_t chunk_bytes() const = 0;

  // ---- the required primitives ----------------------------------------------------------------
  /// Every rank contributes `n` bytes (the same n on every rank); `recv` receives
  /// world_size * n bytes in rank order. n * world_size <= chunk_bytes(); n > 0.
  virtual void all_gather_equal(const std::byte* send, std::size_t n, std::byte* recv,
                                const CallOptions& call) = 0;
  /// `n` bytes from rank `src` into `buf` on every rank. 0 < n <= chunk_bytes().
  virtual void broadcast(std::byte* buf, std::size_t n, int src, const CallOptions& call) = 0;

  // ---- optional primitives --------------------------------------------------------------------
  /// The optional primitive interface named `id` (one of the interfaces below, `I::kId`) if this
  /// backend implements it, else nullptr (the default): the engine then uses its own fallback,
  /// written over the required primitives. Implement it with tally::offer_primitives.
  virtual void* find_primitive(std::string_view id);
};

// ---- optional primitive interfaces --------------------------------------------------------------
// Each is frozen once released: a change is a new interface with a new id ("/2"), never an edit.
// A backend derives from the ones it implements and returns them from find_primitive().

/// A varying all-gather (MPI_Allgatherv). Without it the engine pads every contribution to the
/// largest, calls all_gather_equal and unpads (what NCCL needs).
class TALLY_API VaryingAllGather {
 public:
  static constexpr std::string_view kId = "tally.all_gather_varying/1";
  /// Rank r contributes counts[r] bytes (`send` may be null when counts[rank] is 0); `recv`
  /// receives them packed in rank order. sum(counts) <= chunk_bytes(); sum(counts) > 0.
  virtual void all_gather_varying(const std::byte* send, std::span<const std::size_t> counts,
                                  std::byte* recv, const CallOptions& call) = 0;

 protected:
  ~VaryingAllGather() = default;
};

/// A rooted varying gather (MPI_Gatherv): memory and traffic on the other ranks stay their own.
/// Without it the engine all-gathers (into scratch on the ranks other than the root).
class TALLY_API RootedGather {
 public:
  static constexpr std::string_view kId = "tally.gather_varying/1";
  /// Rank r contributes counts[r] bytes; on rank `root`, `recv` receives them packed in rank
  /// order (elsewhere `recv` is null). sum(counts) <= chunk_bytes(); sum(counts) > 0.
  virtual void gather_varying(const std::byte* send, std::span<const std::size_t> counts,
                              std::byte* recv, int root, const CallOptions& call) = 0;

 protected:
  ~RootedGather() = default;
};

/// An element-wise reduction of int64 values to one rank (MPI_Reduce, ncclReduce). Without it the
/// engine gathers every rank's values to the root and combines them there (with combine()).
class TALLY_API Reducer {
 public:
  static constexpr std::string_view kId = "tally.reduce_values/1";
  /// Element-wise `op` of every rank's `n` values into `values` on rank `root` (in place; the
  /// other ranks' `values` may be overwritten). 0 < n * 8 * world_size() <= chunk_bytes().
  virtual void reduce_values(std::int64_t* values, std::size_t n, ReduceOp op, int root,
                             const CallOptions& call) = 0;

 protected:
  ~Reducer() = default;
};

/// Waiting for live, working ranks without a deadline on the work itself (the mpi backend:
/// heartbeats every call.timeout / 4 from the working ranks). Without it the engine runs `work`
/// where it is due and returns: the ranks then wait for each other in the next collective, under
/// the transport's own deadline.
class TALLY_API WorkAndWait {
 public:
  static constexpr std::string_view kId = "tally.work_and_wait/1";
  /// Collective. `root` >= 0: rank `root` runs `work` (`progress` null) while the others wait;
  /// `root` == -1: every rank runs `work` and then waits for the others, a rank showing progress
  /// by incrementing `progress`. A wait gives up after `call.timeout` without a sign of life from
  /// a working rank, never because the work is long. An exception from `work` is rethrown on its
  /// rank once the others are released. `work` must not use this backend.
  virtual void work_and_wait(int root, const std::function<void()>& work,
                             const std::atomic<std::uint64_t>* progress,
                             const CallOptions& call) = 0;

 protected:
  ~WorkAndWait() = default;
};

/// This rank's place among the ranks on its host (the launcher's "local rank": what picks a
/// rank's GPU), as the backend's transport knows it: the mpi backend splits its communicator by
/// shared memory (MPI_Comm_split_type), which stays right on a host program's own communicator.
/// Without it the engine reads the launcher's variables (Evaluator::local_rank).
class TALLY_API LocalRank {
 public:
  static constexpr std::string_view kId = "tally.local_rank/1";
  /// 0 .. (ranks of this backend on this host) - 1, numbered in rank order. Not collective.
  virtual int local_rank() const = 0;

 protected:
  ~LocalRank() = default;
};

/// For a backend's find_primitive: `self` as the interface among `Is...` whose kId is `id`, or
/// nullptr.
///   void* find_primitive(std::string_view id) override {
///     return tally::offer_primitives<tally::VaryingAllGather, tally::Reducer>(this, id);
///   }
template <class... Is, class B>
void* offer_primitives(B* self, std::string_view id) {
  void* found = nullptr;
  (void)((id == Is::kId && (found = static_cast<Is*>(self), true)) || ...);
  return found;
}

/// The engine's side: backend `b`'s implementation of interface `I`, or nullptr.
template <class I>
I* get_primitive(DistBackend& b) {
  return static_cast<I*>(b.find_primitive(I::kId));
}

}  // namespace tally
