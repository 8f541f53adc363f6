// The object collectives, written once over a DistBackend's transport primitives (as mmeval's
// TensorBaseDistBackend). Every decision below -- chunked or not, how many rounds, how much a
// rank sends in a round -- depends only on values every rank holds after the size exchange, so
// all ranks issue the same sequence of primitive calls whatever their own object is.
#include "tally/collectives.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "tally/sdk/error.hpp"

namespace tally {

namespace {

// At least n bytes of `buf`. Grows only, and without copying the old contents (they are dead):
// once a buffer has seen the largest payload, later collectives allocate and touch no new pages.
std::byte* grow(std::vector<std::byte>& buf, std::size_t n) {
  if (buf.size() < n) {
    std::vector<std::byte>().swap(buf);
    buf.resize(n);
  }
  return buf.data();
}

void copy_bytes(std::byte* dst, const std::byte* src, std::size_t n) {
  if (n != 0) std::memcpy(dst, src, n);
}

/// Views of the objects packed in rank order at `out`, counts[r] bytes each.
GatheredObjects packed_views(const std::byte* out, std::span<const std::size_t> counts) {
  GatheredObjects gathered;
  gathered.objects.reserve(counts.size());
  std::size_t at = 0;
  for (const std::size_t n : counts) {
    gathered.objects.emplace_back(out + at, n);
    at += n;
  }
  return gathered;
}

/// Moves every rank's object (counts[r] bytes) in rounds of at most `per_rank` bytes a rank:
/// round k moves bytes [k*c, (k+1)*c) of every object (fewer or none for objects that end
/// sooner), so no call moves more than world * c <= chunk_bytes() in all. `move(send,
/// round_counts, stage)` is the transport call of one round; where `out` is not null the round's
/// bytes are then copied from `stage` to their places in `out`.
template <class Move>
void move_in_rounds(std::span<const std::byte> object, std::span<const std::size_t> counts,
                    std::size_t largest, std::size_t per_rank,
                    std::vector<std::size_t>& round_counts, std::byte* stage, std::byte* out,
                    Move move) {
  const std::size_t world = counts.size();
  round_counts.resize(world);
  for (std::size_t begin = 0; begin < largest; begin += per_rank) {
    for (std::size_t r = 0; r < world; ++r)
      round_counts[r] = counts[r] > begin ? std::min(per_rank, counts[r] - begin) : 0;
    const std::byte* send = object.size() > begin ? object.data() + begin : nullptr;
    move(send, std::span<const std::size_t>(round_counts), stage);
    if (out == nullptr) continue;
    std::size_t from = 0;
    std::size_t to = 0;
    for (std::size_t r = 0; r < world; ++r) {
      copy_bytes(out + to + begin, stage + from, round_counts[r]);
      from += round_counts[r];
      to += counts[r];
    }
  }
}

}  // namespace

struct Collectives::Impl {
  explicit Impl(DistBackend& backend)
      : b(&backend),
        varying(get_primitive<VaryingAllGather>(backend)),
        rooted(get_primitive<RootedGather>(backend)),
        reducer(get_primitive<Reducer>(backend)),
        waiter(get_primitive<WorkAndWait>(backend)),
        world(static_cast<std::size_t>(backend.world_size())),
        limit(backend.chunk_bytes()) {
    check_chunk(limit, "its chunk_bytes");
    chunk = limit;
  }

  void check_chunk(std::size_t n, const char* what) const {
    if (n < world || n == 0)
      throw ConfigError(fmt::format(
          "{} backend: {} ({}) must be at least the world size ({}): every round moves at "
          "least one byte per rank",
          b->name(), what, n, world));
  }

  /// `call` with its name prefixed by the collective: "all_gather_object (sync payload)". The
  /// name lives in name_ until the next collective starts.
  CallOptions named(const char* collective, const CallOptions& call) {
    name_.assign(collective);
    if (!call.name.empty()) {
      name_ += " (";
      name_.append(call.name);
      name_ += ')';
    }
    return {name_, call.timeout};
  }

  [[noreturn]] void fail(const CallOptions& c, const std::string& what) const {
    throw RuntimeError(
        fmt::format("{} backend: rank {}: {}: {}", b->name(), b->rank(), c.name, what));
  }

  /// Calls the transport: an Error from it is this rank's own transport failure (a peer gone, a
  /// deadline passed), not one the ranks agreed on; its context says so (backend, rank).
  template <class F>
  void transport(F&& call) const {
    try {
      call();
    } catch (const Error& e) {
      rethrow_as_transport(e);
    }
  }
  /// `e` again, marked as this rank's transport failure unless a backend marked it already.
  [[noreturn]] void rethrow_as_transport(const Error& e) const {
    if (!e.context().backend.empty()) throw;
    rethrow_with(e, {.backend = b->name(), .rank = b->rank()}, e.what());
  }

  void check_root(const CallOptions& c, int root, const char* role) const {
    if (root < 0 || root >= static_cast<int>(world))
      fail(c, fmt::format("{} rank {} is outside [0, {})", role, root, world));
  }

  std::span<const std::byte> detach_from_recv(std::span<const std::byte> object);
  std::pair<std::size_t, std::size_t> exchange_sizes(std::size_t mine, const CallOptions& c);
  void all_gather_fixed(std::span<const std::byte> record, std::span<std::byte> out,
                        const CallOptions& c);
  void all_gather_varying(const std::byte* send, std::span<const std::size_t> counts,
                          std::byte* recv, const CallOptions& c);
  void gather_varying(const std::byte* send, std::span<const std::size_t> counts, std::byte* recv,
                      int root, const CallOptions& c);
  void reduce_values(std::int64_t* values, std::size_t n, ReduceOp op, int root,
                     const CallOptions& c);
  void broadcast_chunked(std::byte* buf, std::size_t n, int src, const CallOptions& c);
  void work_and_wait(int root, const std::function<void()>& work,
                     const std::atomic<std::uint64_t>* progress, const CallOptions& c);

  DistBackend* b;
  // The optional primitives the backend offers (nullptr: the fallbacks below).
  VaryingAllGather* varying;
  RootedGather* rooted;
  Reducer* reducer;
  WorkAndWait* waiter;
  std::size_t world;
  std::size_t limit;  // the backend's chunk_bytes()
  std::size_t chunk = 0;
  std::string name_;
  // Reused across collectives: a sync does not pay for fresh pages every time.
  std::vector<std::byte> recv_;
  std::vector<std::byte> staging_;
  std::vector<std::byte> pad_send_;
  std::vector<std::byte> pad_recv_;   // the all_gather_varying fallback: padded contributions
  std::vector<std::byte> send_copy_;  // see detach_from_recv
  std::vector<std::byte> scratch_;    // the gather_varying fallback, on ranks other than the root
  std::vector<std::byte> reduce_in_;  // the reduce_values fallback: every rank's values, at root
  std::vector<std::int64_t> sizes_;   // every rank's object size
  std::vector<std::size_t> counts_;   // ... as counts
  std::vector<std::size_t> round_counts_;
};

Collectives::Collectives(DistBackend& backend) : impl_(std::make_unique<Impl>(backend)) {}
Collectives::~Collectives() = default;
Collectives::Collectives(Collectives&&) noexcept = default;
Collectives& Collectives::operator=(Collectives&&) noexcept = default;

DistBackend& Collectives::backend() const noexcept { return *impl_->b; }
int Collectives::rank() const { return impl_->b->rank(); }
int Collectives::world_size() const { return impl_->b->world_size(); }
std::size_t Collectives::chunk_bytes() const noexcept { return impl_->chunk; }

void Collectives::set_chunk_bytes(std::size_t n) {
  impl_->check_chunk(n, "chunk_bytes");
  if (n > impl_->limit)
    throw ConfigError(fmt::format("{} backend: chunk_bytes ({}) must be at most the backend's ({})",
                                  impl_->b->name(), n, impl_->limit));
  impl_->chunk = n;
}

// `object` itself, or a copy of it in send_copy_ when it is a view into recv_ (a result of the
// previous collective passed back in), which this collective is about to overwrite.
std::span<const std::byte> Collectives::Impl::detach_from_recv(std::span<const std::byte> object) {
  if (object.empty() || recv_.empty()) return object;
  const std::less<const std::byte*> before;
  const std::byte* lo = recv_.data();
  const std::byte* hi = lo + recv_.size();
  if (before(object.data(), lo) || !before(object.data(), hi)) return object;
  std::byte* copy = grow(send_copy_, object.size());
  copy_bytes(copy, object.data(), object.size());
  return {copy, object.size()};
}

void Collectives::Impl::all_gather_fixed(std::span<const std::byte> record,
                                         std::span<std::byte> out, const CallOptions& c) {
  const std::size_t n = record.size();
  if (out.size() != n * world)
    fail(c, fmt::format("the output holds {} bytes, expected world_size * record size = {}",
                        out.size(), n * world));
  if (n == 0) return;
  if (n * world <= chunk) {
    transport([&] { b->all_gather_equal(record.data(), n, out.data(), c); });
    return;
  }
  // Rounds of `per_rank` bytes of every rank's record, gathered into staging_ and then copied to
  // their places in `out`.
  const std::size_t per_rank = chunk / world;
  std::byte* stage = grow(staging_, per_rank * world);
  for (std::size_t begin = 0; begin < n; begin += per_rank) {
    const std::size_t len = std::min(per_rank, n - begin);
    transport([&] { b->all_gather_equal(record.data() + begin, len, stage, c); });
    for (std::size_t r = 0; r < world; ++r)
      copy_bytes(out.data() + r * n + begin, stage + r * len, len);
  }
}

// Every rank's object size into sizes_ and counts_; returns the total and the largest.
std::pair<std::size_t, std::size_t> Collectives::Impl::exchange_sizes(std::size_t mine_size,
                                                                      const CallOptions& c) {
  const auto mine = static_cast<std::int64_t>(mine_size);
  sizes_.resize(world);
  all_gather_fixed(std::as_bytes(std::span(&mine, 1)), std::as_writable_bytes(std::span(sizes_)),
                   c);
  counts_.resize(world);
  std::size_t total = 0;
  std::size_t largest = 0;
  for (std::size_t r = 0; r < world; ++r) {
    if (sizes_[r] < 0)
      fail(c, fmt::format("rank {} announced a negative size ({}): the ranks are not running the "
                          "same collective",
                          r, sizes_[r]));
    counts_[r] = static_cast<std::size_t>(sizes_[r]);
    total += counts_[r];
    largest = std::max(largest, counts_[r]);
  }
  return {total, largest};
}

// The varying all-gather: the backend's, or every contribution padded to the largest, gathered
// with all_gather_equal and unpadded (for transports without one, e.g. NCCL).
void Collectives::Impl::all_gather_varying(const std::byte* send,
                                           std::span<const std::size_t> counts, std::byte* recv,
                                           const CallOptions& c) {
  if (varying != nullptr) {
    transport([&] { varying->all_gather_varying(send, counts, recv, c); });
    return;
  }
  const auto me = static_cast<std::size_t>(b->rank());
  const std::size_t largest = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  if (largest == 0) return;
  // Every rank sends `width` bytes a round (its own bytes, padded); rounds keep
  // width * world <= chunk_bytes() even when one rank holds nearly all the bytes.
  const std::size_t per_rank = chunk / world;
  const std::size_t first_width = std::min(per_rank, largest);
  std::byte* padded = grow(pad_recv_, first_width * world);
  std::byte* pad = grow(pad_send_, first_width);
  for (std::size_t begin = 0; begin < largest; begin += per_rank) {
    const std::size_t width = std::min(per_rank, largest - begin);
    const std::size_t own = counts[me] > begin ? std::min(width, counts[me] - begin) : 0;
    const std::byte* out = pad;
    if (own == width) {
      out = send + begin;
    } else if (own != 0) {
      copy_bytes(pad, send + begin, own);  // the rest of the pad is ignored by the receivers
    }
    transport([&] { b->all_gather_equal(out, width, padded, c); });
    std::size_t at = 0;
    for (std::size_t r = 0; r < world; ++r) {
      const std::size_t len = counts[r] > begin ? std::min(width, counts[r] - begin) : 0;
      copy_bytes(recv + at + begin, padded + r * width, len);
      at += counts[r];
    }
  }
}

// The rooted gather: the backend's, or an all-gather (into scratch on the other ranks).
void Collectives::Impl::gather_varying(const std::byte* send, std::span<const std::size_t> counts,
                                       std::byte* recv, int root, const CallOptions& c) {
  if (rooted != nullptr) {
    transport([&] { rooted->gather_varying(send, counts, recv, root, c); });
    return;
  }
  if (b->rank() == root) {
    all_gather_varying(send, counts, recv, c);
    return;
  }
  std::size_t total = 0;
  for (const std::size_t n : counts) total += n;
  all_gather_varying(send, counts, grow(scratch_, total), c);
}

// The reduction of one round: the backend's, or every rank's values gathered to the root
// (gather_varying) and combined there in rank order (the root holds world_size * n values).
void Collectives::Impl::reduce_values(std::int64_t* values, std::size_t n, ReduceOp op, int root,
                                      const CallOptions& c) {
  const std::size_t bytes = n * sizeof(std::int64_t);
  // The backend's reduction, unless a chunk smaller than a value a rank (tests) asks for rounds.
  if (reducer != nullptr && bytes * world <= chunk) {
    transport([&] { reducer->reduce_values(values, n, op, root, c); });
    return;
  }
  counts_.assign(world, bytes);
  const bool is_root = b->rank() == root;
  std::byte* in = is_root ? grow(reduce_in_, bytes * world) : nullptr;
  const std::span<const std::byte> mine(reinterpret_cast<const std::byte*>(values), bytes);
  if (bytes * world <= chunk) {
    gather_varying(mine.data(), counts_, in, root, c);
  } else {  // a chunk smaller than a value a rank (tests): byte rounds, as gather_object's
    const std::size_t per_rank = chunk / world;
    std::byte* stage = is_root ? grow(staging_, per_rank * world) : nullptr;
    move_in_rounds(mine, counts_, bytes, per_rank, round_counts_, stage, in,
                   [&](const std::byte* send, std::span<const std::size_t> rc, std::byte* to) {
                     gather_varying(send, rc, to, root, c);
                   });
  }
  if (!is_root) return;
  // Combined in rank order (combine: the sum wraps like MPI_SUM instead of overflowing).
  for (std::size_t r = 0; r < world; ++r) {
    if (r == static_cast<std::size_t>(root)) continue;
    const std::byte* row = in + r * bytes;
    for (std::size_t i = 0; i < n; ++i) {
      std::int64_t v = 0;
      std::memcpy(&v, row + i * sizeof v, sizeof v);
      values[i] = combine(op, values[i], v);
    }
  }
}

void Collectives::Impl::broadcast_chunked(std::byte* buf, std::size_t n, int src,
                                          const CallOptions& c) {
  for (std::size_t begin = 0; begin < n; begin += chunk)
    transport([&] { b->broadcast(buf + begin, std::min(chunk, n - begin), src, c); });
}

// The backend's wait for working ranks, or `work` where it is due: the ranks then wait for each
// other in the next collective, under the transport's own deadline.
void Collectives::Impl::work_and_wait(int root, const std::function<void()>& work,
                                      const std::atomic<std::uint64_t>* progress,
                                      const CallOptions& c) {
  if (waiter != nullptr && world > 1) {
    // What `work` throws is the work's own error; anything else is the wait's (a peer that
    // showed no sign of life): the transport's.
    std::atomic<bool> work_failed{false};
    const std::function<void()> watched = [&] {
      try {
        work();
      } catch (...) {
        work_failed = true;
        throw;
      }
    };
    try {
      waiter->work_and_wait(root, watched, progress, c);
    } catch (const Error& e) {
      if (work_failed) throw;
      rethrow_as_transport(e);
    }
    return;
  }
  if (root < 0 || b->rank() == root) work();
}

GatheredObjects Collectives::all_gather_object(std::span<const std::byte> object,
                                               const CallOptions& call) {
  Impl& m = *impl_;
  const CallOptions c = m.named("all_gather_object", call);
  object = m.detach_from_recv(object);

  // 1. Every rank's size.
  const auto [total, largest] = m.exchange_sizes(object.size(), c);

  // 2. The bytes, packed in rank order in recv_.
  std::byte* out = grow(m.recv_, total);
  if (total == 0) {
    // Nothing to move; every rank knows it, so every rank skips the call.
  } else if (total <= m.chunk) {
    m.all_gather_varying(object.data(), m.counts_, out, c);
  } else {
    const std::size_t per_rank = m.chunk / m.world;
    std::byte* stage = grow(m.staging_, std::min(total, per_rank * m.world));
    move_in_rounds(object, m.counts_, largest, per_rank, m.round_counts_, stage, out,
                   [&](const std::byte* send, std::span<const std::size_t> rc, std::byte* to) {
                     m.all_gather_varying(send, rc, to, c);
                   });
  }
  return packed_views(out, m.counts_);
}

GatheredObjects Collectives::gather_object(std::span<const std::byte> object, int root,
                                           const CallOptions& call) {
  Impl& m = *impl_;
  const CallOptions c = m.named("gather_object", call);
  m.check_root(c, root, "root");
  const bool is_root = m.b->rank() == root;
  object = m.detach_from_recv(object);
  // Every rank learns every size (a few bytes each): the rounds below then depend only on values
  // all ranks hold, as in all_gather_object.
  const auto [total, largest] = m.exchange_sizes(object.size(), c);

  std::byte* out = is_root ? grow(m.recv_, total) : nullptr;
  if (total == 0) {
    // Nothing to move.
  } else if (total <= m.chunk) {
    m.gather_varying(object.data(), m.counts_, out, root, c);
  } else {
    const std::size_t per_rank = m.chunk / m.world;
    std::byte* stage = is_root ? grow(m.staging_, std::min(total, per_rank * m.world)) : nullptr;
    move_in_rounds(object, m.counts_, largest, per_rank, m.round_counts_, stage, out,
                   [&](const std::byte* send, std::span<const std::size_t> rc, std::byte* to) {
                     m.gather_varying(send, rc, to, root, c);
                   });
  }
  return is_root ? packed_views(out, m.counts_) : GatheredObjects{};
}

std::span<const std::byte> Collectives::broadcast_object(std::span<const std::byte> object, int src,
                                                         const CallOptions& call) {
  Impl& m = *impl_;
  const CallOptions c = m.named("broadcast_object", call);
  m.check_root(c, src, "source");
  const bool is_src = m.b->rank() == src;
  if (is_src) object = m.detach_from_recv(object);

  std::int64_t size = is_src ? static_cast<std::int64_t>(object.size()) : 0;
  m.broadcast_chunked(std::as_writable_bytes(std::span(&size, 1)).data(), sizeof size, src, c);
  if (size < 0)
    m.fail(c, fmt::format("rank {} announced a negative size ({}): the ranks are not running the "
                          "same collective",
                          src, size));
  const auto n = static_cast<std::size_t>(size);
  // The source copies its object into recv_ too: the returned view must not depend on the
  // caller keeping its argument alive.
  std::byte* out = grow(m.recv_, n);
  if (is_src) copy_bytes(out, object.data(), n);
  m.broadcast_chunked(out, n, src, c);
  return {out, n};
}

void Collectives::all_gather_fixed(std::span<const std::byte> record, std::span<std::byte> out,
                                   const CallOptions& call) {
  Impl& m = *impl_;
  m.all_gather_fixed(record, out, m.named("all_gather_fixed", call));
}

void Collectives::reduce(std::span<std::int64_t> values, ReduceOp op, int root,
                         const CallOptions& call) {
  Impl& m = *impl_;
  const CallOptions c = m.named("reduce", call);
  m.check_root(c, root, "root");
  if (values.empty()) return;
  // Rounds of at most chunk_bytes() in all, as for the objects, and of at most 4 MiB a rank: Open
  // MPI's MPI_Reduce allocates its temporary buffers per call, and above glibc's mmap threshold
  // (32 MiB at most) every call pays the first touch of fresh pages (bench/RESULTS.md: 64 MiB a
  // rank in one call 66-88 ms, in 4 MiB rounds 27-37 ms, on 2 ranks). Every rank holds the same
  // count, so every rank issues the same calls.
  constexpr std::size_t kRoundBytes = std::size_t{4} << 20;
  const std::size_t per_round =
      std::max<std::size_t>(1, std::min(kRoundBytes, m.chunk / m.world) / sizeof(std::int64_t));
  for (std::size_t begin = 0; begin < values.size(); begin += per_round)
    m.reduce_values(values.data() + begin, std::min(per_round, values.size() - begin), op, root, c);
}

void Collectives::run_on_root(int root, const std::function<void()>& work,
                              const CallOptions& call) {
  Impl& m = *impl_;
  const CallOptions c = m.named("run_on_root", call);
  m.check_root(c, root, "root");
  m.work_and_wait(root, work, nullptr, c);
}

void Collectives::run_on_every_rank(const std::function<void()>& work,
                                    const std::atomic<std::uint64_t>& progress,
                                    const CallOptions& call) {
  Impl& m = *impl_;
  m.work_and_wait(-1, work, &progress, m.named("run_on_every_rank", call));
}

void Collectives::barrier(const CallOptions& call) {
  Impl& m = *impl_;
  m.transport([&] { m.b->barrier(m.named("barrier", call)); });
}

}  // namespace tally
