// The object algorithms of DistBackend, written once over the transport primitives (as mmeval's
// TensorBaseDistBackend). Every decision below -- chunked or not, how many rounds, how much a
// rank sends in a round -- depends only on values every rank holds after the size exchange, so
// all ranks issue the same sequence of primitive calls whatever their own object is.
#include "tally/dist_backend.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>

#include "tally/error.hpp"

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

[[noreturn]] void fail(const DistBackend& b, const std::string& what) {
  throw RuntimeError(b.name() + " backend: rank " + std::to_string(b.rank()) + ": " + what);
}

}  // namespace

DistBackend::~DistBackend() = default;

void DistBackend::run_on_root(int root, const std::function<void()>& work) {
  work_and_wait(root, work, nullptr);
}

void DistBackend::run_on_every_rank(const std::function<void()>& work,
                                    const std::atomic<std::uint64_t>& progress) {
  work_and_wait(-1, work, &progress);
}

void DistBackend::work_and_wait(int root, const std::function<void()>& work,
                                const std::atomic<std::uint64_t>*) {
  if (root < 0 || rank() == root) work();
}

void DistBackend::set_chunk_bytes(std::size_t n) {
  if (n == 0) throw ConfigError(name() + " backend: chunk_bytes must be at least 1");
  const auto world = static_cast<std::size_t>(world_size());
  if (n < world) {
    throw ConfigError(name() + " backend: chunk_bytes (" + std::to_string(n) +
                      ") must be at least the world size (" + std::to_string(world) +
                      "): every round moves at least one byte per rank");
  }
  chunk_bytes_ = n;
}

std::span<const std::byte> DistBackend::detach_from_recv(std::span<const std::byte> object) {
  if (object.empty() || recv_.empty()) return object;
  const std::less<const std::byte*> before;
  const std::byte* lo = recv_.data();
  const std::byte* hi = lo + recv_.size();
  if (before(object.data(), lo) || !before(object.data(), hi)) return object;
  std::byte* copy = grow(send_copy_, object.size());
  copy_bytes(copy, object.data(), object.size());
  return {copy, object.size()};
}

void DistBackend::all_gather_fixed(std::span<const std::byte> record, std::span<std::byte> out) {
  const auto world = static_cast<std::size_t>(world_size());
  const std::size_t n = record.size();
  if (out.size() != n * world) {
    fail(*this, "all_gather_fixed: the output holds " + std::to_string(out.size()) +
                    " bytes, expected world_size * record size = " + std::to_string(n * world));
  }
  if (n == 0) return;
  if (n * world <= chunk_bytes_) {
    all_gather_equal(record.data(), n, out.data());
    return;
  }
  // Rounds of `per_rank` bytes of every rank's record, gathered into staging_ and then copied to
  // their places in `out`.
  const std::size_t per_rank = chunk_bytes_ / world;
  std::byte* stage = grow(staging_, per_rank * world);
  for (std::size_t begin = 0; begin < n; begin += per_rank) {
    const std::size_t len = std::min(per_rank, n - begin);
    all_gather_equal(record.data() + begin, len, stage);
    for (std::size_t r = 0; r < world; ++r)
      copy_bytes(out.data() + r * n + begin, stage + r * len, len);
  }
}

std::pair<std::size_t, std::size_t> DistBackend::exchange_sizes(std::size_t mine_size,
                                                                const char* who) {
  const auto world = static_cast<std::size_t>(world_size());
  const auto mine = static_cast<std::int64_t>(mine_size);
  sizes_.resize(world);
  all_gather_fixed(std::as_bytes(std::span(&mine, 1)), std::as_writable_bytes(std::span(sizes_)));
  counts_.resize(world);
  std::size_t total = 0;
  std::size_t largest = 0;
  for (std::size_t r = 0; r < world; ++r) {
    if (sizes_[r] < 0) {
      fail(*this, std::string(who) + ": rank " + std::to_string(r) +
                      " announced a negative size (" + std::to_string(sizes_[r]) +
                      "): the ranks are not running the same collective");
    }
    counts_[r] = static_cast<std::size_t>(sizes_[r]);
    total += counts_[r];
    largest = std::max(largest, counts_[r]);
  }
  return {total, largest};
}

GatheredObjects DistBackend::all_gather_object(std::span<const std::byte> object) {
  const auto world = static_cast<std::size_t>(world_size());
  object = detach_from_recv(object);

  // 1. Every rank's size.
  const auto [total, largest] = exchange_sizes(object.size(), "all_gather_object");

  // 2. The bytes, packed in rank order in recv_.
  std::byte* out = grow(recv_, total);
  if (total == 0) {
    // Nothing to move; every rank knows it, so every rank skips the call.
  } else if (total <= chunk_bytes_) {
    all_gather_varying(object.data(), counts_, out);
  } else {
    const std::size_t per_rank = chunk_bytes_ / world;
    std::byte* stage = grow(staging_, std::min(total, per_rank * world));
    move_in_rounds(object, counts_, largest, per_rank, round_counts_, stage, out,
                   [this](const std::byte* send, std::span<const std::size_t> c, std::byte* to) {
                     all_gather_varying(send, c, to);
                   });
  }
  return packed_views(out, counts_);
}

GatheredObjects DistBackend::gather_object(std::span<const std::byte> object, int root) {
  if (root < 0 || root >= world_size()) {
    fail(*this, "gather_object: root rank " + std::to_string(root) + " is outside [0, " +
                    std::to_string(world_size()) + ")");
  }
  const auto world = static_cast<std::size_t>(world_size());
  const bool is_root = rank() == root;
  object = detach_from_recv(object);
  // Every rank learns every size (a few bytes each): the rounds below then depend only on values
  // all ranks hold, as in all_gather_object.
  const auto [total, largest] = exchange_sizes(object.size(), "gather_object");

  std::byte* out = is_root ? grow(recv_, total) : nullptr;
  if (total == 0) {
    // Nothing to move.
  } else if (total <= chunk_bytes_) {
    gather_varying(object.data(), counts_, out, root);
  } else {
    const std::size_t per_rank = chunk_bytes_ / world;
    std::byte* stage = is_root ? grow(staging_, std::min(total, per_rank * world)) : nullptr;
    move_in_rounds(object, counts_, largest, per_rank, round_counts_, stage, out,
                   [this, root](const std::byte* send, std::span<const std::size_t> c,
                                std::byte* to) { gather_varying(send, c, to, root); });
  }
  return is_root ? packed_views(out, counts_) : GatheredObjects{};
}

void DistBackend::gather_varying(const std::byte* send, std::span<const std::size_t> counts,
                                 std::byte* recv, int root) {
  if (rank() == root) {
    all_gather_varying(send, counts, recv);
    return;
  }
  std::size_t total = 0;
  for (const std::size_t c : counts) total += c;
  all_gather_varying(send, counts, grow(scratch_, total));
}

void DistBackend::reduce(std::span<std::int64_t> values, ReduceOp op, int root) {
  if (root < 0 || root >= world_size()) {
    fail(*this, "reduce: root rank " + std::to_string(root) + " is outside [0, " +
                    std::to_string(world_size()) + ")");
  }
  if (values.empty()) return;
  // Rounds of at most chunk_bytes() in all, as for the objects, and of at most 4 MiB a rank: Open
  // MPI's MPI_Reduce allocates its temporary buffers per call, and above glibc's mmap threshold
  // (32 MiB at most) every call pays the first touch of fresh pages (bench/RESULTS.md: 64 MiB a
  // rank in one call 66-88 ms, in 4 MiB rounds 27-37 ms, on 2 ranks). Every rank holds the same
  // count, so every rank issues the same calls.
  constexpr std::size_t kRoundBytes = std::size_t{4} << 20;
  const std::size_t per_round = std::max<std::size_t>(
      1, std::min(kRoundBytes, chunk_bytes_ / static_cast<std::size_t>(world_size())) /
             sizeof(std::int64_t));
  for (std::size_t begin = 0; begin < values.size(); begin += per_round)
    reduce_values(values.data() + begin, std::min(per_round, values.size() - begin), op, root);
}

void DistBackend::reduce_values(std::int64_t* values, std::size_t n, ReduceOp op, int root) {
  const auto world = static_cast<std::size_t>(world_size());
  const std::size_t bytes = n * sizeof(std::int64_t);
  counts_.assign(world, bytes);
  const bool is_root = rank() == root;
  std::byte* in = is_root ? grow(reduce_in_, bytes * world) : nullptr;
  const std::span<const std::byte> mine(reinterpret_cast<const std::byte*>(values), bytes);
  if (bytes * world <= chunk_bytes_) {
    gather_varying(mine.data(), counts_, in, root);
  } else {  // a chunk smaller than a value a rank (tests): byte rounds, as gather_object's
    const std::size_t per_rank = chunk_bytes_ / world;
    std::byte* stage = is_root ? grow(staging_, per_rank * world) : nullptr;
    move_in_rounds(mine, counts_, bytes, per_rank, round_counts_, stage, in,
                   [this, root](const std::byte* send, std::span<const std::size_t> c,
                                std::byte* to) { gather_varying(send, c, to, root); });
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

void DistBackend::broadcast_chunked(std::byte* buf, std::size_t n, int src) {
  for (std::size_t begin = 0; begin < n; begin += chunk_bytes_)
    broadcast(buf + begin, std::min(chunk_bytes_, n - begin), src);
}

std::span<const std::byte> DistBackend::broadcast_object(std::span<const std::byte> object,
                                                         int src) {
  if (src < 0 || src >= world_size()) {
    fail(*this, "broadcast_object: source rank " + std::to_string(src) + " is outside [0, " +
                    std::to_string(world_size()) + ")");
  }
  const bool is_src = rank() == src;
  if (is_src) object = detach_from_recv(object);

  std::int64_t size = is_src ? static_cast<std::int64_t>(object.size()) : 0;
  broadcast_chunked(std::as_writable_bytes(std::span(&size, 1)).data(), sizeof size, src);
  if (size < 0) {
    fail(*this, "broadcast_object: rank " + std::to_string(src) + " announced a negative size (" +
                    std::to_string(size) + "): the ranks are not running the same collective");
  }
  const auto n = static_cast<std::size_t>(size);
  // The source copies its object into recv_ too: the returned view must not depend on the
  // caller keeping its argument alive.
  std::byte* out = grow(recv_, n);
  if (is_src) copy_bytes(out, object.data(), n);
  broadcast_chunked(out, n, src);
  return {out, n};
}

void DistBackend::all_gather_varying(const std::byte* send, std::span<const std::size_t> counts,
                                     std::byte* recv) {
  const std::size_t world = counts.size();
  const auto me = static_cast<std::size_t>(rank());
  const std::size_t largest = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  if (largest == 0) return;
  // Every rank sends `width` bytes a round (its own bytes, padded); rounds keep
  // width * world <= chunk_bytes() even when one rank holds nearly all the bytes.
  const std::size_t per_rank = chunk_bytes_ / world;
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
    all_gather_equal(out, width, padded);
    std::size_t at = 0;
    for (std::size_t r = 0; r < world; ++r) {
      const std::size_t len = counts[r] > begin ? std::min(width, counts[r] - begin) : 0;
      copy_bytes(recv + at + begin, padded + r * width, len);
      at += counts[r];
    }
  }
}

}  // namespace tally
