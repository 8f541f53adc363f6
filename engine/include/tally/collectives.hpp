// Collectives: the engine's object collectives over a DistBackend's transport primitives, after
// mmeval's TensorBaseDistBackend: all_gather_object, gather_object, broadcast_object,
// all_gather_fixed, reduce, and waits for working ranks. Objects are byte strings of any size,
// 0 included. The algorithms -- size exchange, padding to the largest where the transport needs
// equal sizes, unpadding, rounds of at most chunk_bytes(), receive buffers reused across calls,
// fallbacks for the primitives a backend does not offer -- are written once here, in libtally,
// so a backend plugin implements only transport (tally/sdk/dist_backend.hpp).
//
// Part of libtally's public API (host programs, tests, benchmarks), not of the plugin ABI: a
// plugin never includes it, so its layout and algorithms can change in any release.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "tally/sdk/dist_backend.hpp"
#include "tally/sdk/export.hpp"

namespace tally {

/// Byte strings gathered from every rank, in rank order. The views point into the Collectives'
/// receive buffer: they stay valid until the next collective on the same Collectives.
struct GatheredObjects {
  std::vector<std::span<const std::byte>> objects;
  std::size_t size() const { return objects.size(); }
  std::span<const std::byte> operator[](std::size_t i) const { return objects[i]; }
};

/// Every decision -- chunked or not, how many rounds, how much a rank sends in a round -- depends
/// only on values every rank holds after the size exchange, so all ranks issue the same sequence
/// of primitive calls whatever their own object is. Every collective takes a CallOptions whose
/// `name` says what the call is for ("sync payload"; messages then read
/// "all_gather_object (sync payload)") and whose `timeout` is its deadline (0: the backend's).
class TALLY_API Collectives {
 public:
  /// ConfigError when backend.chunk_bytes() is less than its world size.
  explicit Collectives(DistBackend& backend);
  ~Collectives();
  Collectives(Collectives&&) noexcept;
  Collectives& operator=(Collectives&&) noexcept;
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;

  DistBackend& backend() const noexcept;
  int rank() const;
  int world_size() const;

  /// Every rank's object, in rank order, on every rank.
  GatheredObjects all_gather_object(std::span<const std::byte> object,
                                    const CallOptions& call = {});
  /// Every rank's object, in rank order, on rank `root` only (other ranks get an empty list): what
  /// a sync needs when one rank computes. Memory and traffic on the other ranks stay their own
  /// object's where the backend has a rooted gather (RootedGather); otherwise an all-gather.
  GatheredObjects gather_object(std::span<const std::byte> object, int root,
                                const CallOptions& call = {});
  /// The object of rank `src`, on every rank (the argument is ignored on other ranks). The view
  /// stays valid until the next collective.
  std::span<const std::byte> broadcast_object(std::span<const std::byte> object, int src,
                                              const CallOptions& call = {});
  /// A fixed-size record from every rank into `out` (world_size * record.size() bytes).
  void all_gather_fixed(std::span<const std::byte> record, std::span<std::byte> out,
                        const CallOptions& call = {});
  /// Element-wise `op` of every rank's `values` into `values` on rank `root`; on the other ranks
  /// `values` is left unspecified. Every rank passes the same number of values (the caller agrees
  /// on it first: a mismatch is undefined, as for MPI_Reduce). Memory and traffic at the root are
  /// those of one rank's values where the backend has a Reducer, which is why states made of
  /// counts are reduced rather than gathered. `sum` wraps on overflow, as MPI_SUM does: callers
  /// bound their values.
  void reduce(std::span<std::int64_t> values, ReduceOp op, int root, const CallOptions& call = {});
  /// Collective: rank `root` runs `work` (local work that may take long, such as computing the
  /// results) while the other ranks wait for it. With a backend that has WorkAndWait (mpi) their
  /// wait is bounded by `call.timeout` only while `root` shows no sign of life; otherwise they
  /// wait in the next collective. An exception from `work` is rethrown on `root` once the others
  /// are released. `work` must not use this backend.
  void run_on_root(int root, const std::function<void()>& work, const CallOptions& call = {});
  /// Collective: every rank runs `work` (reading its shard, say), then waits until every rank has
  /// finished; `progress` (which `work` increments, a batch at a time) is a rank's sign of life.
  void run_on_every_rank(const std::function<void()>& work,
                         const std::atomic<std::uint64_t>& progress, const CallOptions& call = {});
  /// The backend's barrier, under `call`'s name and deadline.
  void barrier(const CallOptions& call = {});

  /// Largest number of bytes one primitive call moves in all (sum over ranks); larger objects go
  /// in rounds. The backend's chunk_bytes() unless set lower.
  std::size_t chunk_bytes() const noexcept;
  /// ConfigError for less than world_size() (a round moves at least a byte a rank) and for more
  /// than the backend's chunk_bytes(). Tests set it small to exercise the rounds.
  void set_chunk_bytes(std::size_t n);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tally
