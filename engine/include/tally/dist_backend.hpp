// DistBackend: the interface of dist-backend plugins, after mmeval's BaseDistBackend
// (is_initialized, rank, world_size, all_gather_object, broadcast_object, barrier).
//
// Objects are byte strings (msgpack). The object algorithms -- size exchange, padding to the
// largest where the transport needs equal sizes, unpadding, chunking of large payloads, reuse of
// the receive buffer -- are written once here, as in mmeval's TensorBaseDistBackend. A backend
// supplies only the transport primitives in the protected section.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tally/export.hpp"

namespace tally {

/// Element-wise combination of reduce(): exact on int64 (no rounding, so no order dependence).
enum class ReduceOp : std::uint8_t { sum, min, max };

/// `a op b`, as every reduce_values combines two ranks' values: the sum wraps (two's complement)
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

/// Byte strings gathered from every rank, in rank order. The views point into the backend's
/// receive buffer: they stay valid until the next collective on the same backend.
struct GatheredObjects {
  std::vector<std::span<const std::byte>> objects;
  std::size_t size() const { return objects.size(); }
  std::span<const std::byte> operator[](std::size_t i) const { return objects[i]; }
};

class TALLY_API DistBackend {
 public:
  virtual ~DistBackend();

  /// "nondist", "mpi", "nccl".
  virtual std::string name() const = 0;
  virtual bool is_initialized() const = 0;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual void barrier() = 0;

  /// Every rank's object, in rank order, on every rank. Objects may differ in size (0 included).
  GatheredObjects all_gather_object(std::span<const std::byte> object);
  /// Every rank's object, in rank order, on rank `root` only (other ranks get an empty list): what
  /// a sync needs when one rank computes. Memory and traffic on the other ranks stay their own
  /// object's; backends whose transport has a rooted gather (MPI_Gatherv) use it, the others
  /// fall back to an all-gather. Objects may differ in size (0 included).
  GatheredObjects gather_object(std::span<const std::byte> object, int root);
  /// The object of rank `src`, on every rank (the argument is ignored on other ranks). The view
  /// stays valid until the next collective.
  std::span<const std::byte> broadcast_object(std::span<const std::byte> object, int src);
  /// A fixed-size record from every rank into `out` (world_size * record.size() bytes).
  void all_gather_fixed(std::span<const std::byte> record, std::span<std::byte> out);
  /// Element-wise `op` of every rank's `values` into `values` on rank `root`; on the other ranks
  /// `values` is left unspecified. Every rank passes the same number of values (the caller agrees
  /// on it first: a mismatch is undefined, as for MPI_Reduce). Memory and traffic at the root are
  /// those of one rank's values, not world_size times them, which is why states made of counts
  /// are reduced rather than gathered. `sum` wraps on overflow, as MPI_SUM does: callers bound
  /// their values (the evaluator keeps each rank's counts under 2^62 / world_size).
  void reduce(std::span<std::int64_t> values, ReduceOp op, int root);
  /// Collective: rank `root` runs `work` (local work that may take long, such as computing the
  /// results) while the other ranks wait for it. Their wait is bounded by the backend's timeout
  /// only while `root` shows no sign of life: a root that is working says so (the mpi backend:
  /// a heartbeat every timeout / 4 from a thread of the root), so work longer than the timeout
  /// never makes the others give up on a live root. An exception from `work` is rethrown on
  /// `root` once the others are released. `work` must not use this backend.
  void run_on_root(int root, const std::function<void()>& work);
  /// Collective: every rank runs `work` (reading its shard, say), then waits until every rank has
  /// finished. A rank's wait is bounded by the timeout only while a rank still working shows no
  /// progress: the mpi backend sends a heartbeat every timeout / 4 while `progress` (which `work`
  /// increments, a batch at a time) has moved since the last one, so a slow but moving rank is
  /// waited for and a stuck one is not. An exception from `work` is rethrown on its rank once
  /// every rank has finished. `work` must not use this backend.
  void run_on_every_rank(const std::function<void()>& work,
                         const std::atomic<std::uint64_t>& progress);

  /// Largest number of bytes one transport call may move in all (sum over ranks); larger objects
  /// go in rounds. Backends set it from their limits (MPI: int counts); tests set it small.
  std::size_t chunk_bytes() const noexcept { return chunk_bytes_; }
  /// ConfigError for 0 and for less than world_size() (a round moves at least a byte a rank).
  void set_chunk_bytes(std::size_t n);

 protected:
  // ---- transport primitives -------------------------------------------------------------------
  /// Every rank contributes `n` bytes (the same n on every rank); `recv` receives
  /// world_size * n bytes in rank order. n * world_size <= chunk_bytes().
  virtual void all_gather_equal(const std::byte* send, std::size_t n, std::byte* recv) = 0;
  /// Rank r contributes counts[r] bytes; `recv` receives them packed in rank order.
  /// sum(counts) <= chunk_bytes(). The default pads every contribution to the largest count,
  /// calls all_gather_equal and unpads (for transports without a varying all-gather, e.g. NCCL).
  virtual void all_gather_varying(const std::byte* send, std::span<const std::size_t> counts,
                                  std::byte* recv);
  /// Rank r contributes counts[r] bytes; on rank `root`, `recv` receives them packed in rank
  /// order (elsewhere `recv` is null). sum(counts) <= chunk_bytes(). The default calls
  /// all_gather_varying (into a scratch buffer on the other ranks); MPI overrides it with
  /// MPI_Gatherv.
  virtual void gather_varying(const std::byte* send, std::span<const std::size_t> counts,
                              std::byte* recv, int root);
  /// `n` bytes from rank `src` into `buf` on every rank. n <= chunk_bytes().
  virtual void broadcast(std::byte* buf, std::size_t n, int src) = 0;
  /// Element-wise `op` of every rank's `n` values into `values` on rank `root` (in place; the
  /// other ranks' `values` may be overwritten). n * 8 <= min(4 MiB, chunk_bytes() / world_size()),
  /// or n = 1 where chunk_bytes() holds less than a value a rank. The default
  /// gathers every rank's values to the root with gather_varying and combines them there (the
  /// root holds world_size * n values for the round); MPI overrides it with MPI_Reduce and NCCL
  /// with ncclReduce.
  virtual void reduce_values(std::int64_t* values, std::size_t n, ReduceOp op, int root);
  /// run_on_root (`root` >= 0, `progress` null) and run_on_every_rank (`root` -1). The default
  /// runs `work` where it is due and returns: the ranks then wait for each other in the next
  /// collective, under the transport's own deadline.
  virtual void work_and_wait(int root, const std::function<void()>& work,
                             const std::atomic<std::uint64_t>* progress);

 private:
  /// Every rank's object size into sizes_ and counts_ (all_gather_fixed); returns the total and
  /// the largest. `who` names the collective in errors.
  std::pair<std::size_t, std::size_t> exchange_sizes(std::size_t mine, const char* who);
  /// `object` itself, or a copy of it in send_copy_ when it is a view into recv_ (a result of the
  /// previous collective passed back in), which this collective is about to overwrite.
  std::span<const std::byte> detach_from_recv(std::span<const std::byte> object);
  /// broadcast() in pieces of at most chunk_bytes().
  void broadcast_chunked(std::byte* buf, std::size_t n, int src);

  std::size_t chunk_bytes_ = std::size_t{1} << 30;
  // Reused across collectives: a sync does not pay for fresh pages every time.
  std::vector<std::byte> recv_;
  std::vector<std::byte> staging_;
  std::vector<std::byte> pad_send_;
  std::vector<std::byte> pad_recv_;   // the default all_gather_varying: padded contributions
  std::vector<std::byte> send_copy_;  // see detach_from_recv
  std::vector<std::byte> scratch_;    // the default gather_varying, on ranks other than the root
  std::vector<std::byte> reduce_in_;  // the default reduce_values: every rank's values, at the root
  std::vector<std::int64_t> sizes_;   // all_gather_object: every rank's object size
  std::vector<std::size_t> counts_;   // ... as counts, and the counts of one round
  std::vector<std::size_t> round_counts_;
};

}  // namespace tally
