// Counter-based random numbers for the bootstrap.
//
// The generator is Philox4x64-10 (Salmon, Moraes, Dror & Shaw, "Parallel random numbers: as easy
// as 1, 2, 3", SC 2011), the generator of Random123 and of NumPy's numpy.random.Philox. A block is
// a pure function of a 256-bit counter and a 128-bit key, so any draw can be computed without the
// draws before it: resample b of a bootstrap uses the key (seed, b) and the counters 0, 1, 2, ...,
// and its draws depend on (seed, b, n) only, whatever thread computes it and in whatever order.
//
// The stream of resample b (ResampleStream): the 64-bit words w0, w1, w2, w3 of the block at
// counter (0, 0, 0, 0), then those of counter (1, 0, 0, 0), ...; each word gives two 32-bit draws,
// its low half first. This is numpy.random.Philox(counter=2**256 - 1, key=[seed, b]).random_raw()
// (NumPy increments the counter before each block, so 2**256 - 1 starts the stream at counter 0),
// each word split low half first: tests/reference/stats.py ports the resampling to NumPy this way
// and the tests compare the resamples.
//
// A unit index below n comes from a 32-bit draw x by Lemire's multiply-and-reject method (D.
// Lemire, "Fast random integer generation in an interval", ACM TOMACS 2019): m = x * n (64-bit);
// the draw is rejected when the low 32 bits of m are below (2^32 - n) mod n, else the index is
// m >> 32. Exactly uniform. n must be below 2^32.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tally::stats {

using PhiloxCounter = std::array<std::uint64_t, 4>;
using PhiloxKey = std::array<std::uint64_t, 2>;

/// One Philox4x64-10 block: Random123's philox4x64_R(10, ctr, key) (its known-answer vectors are
/// in tests/unit/test_stats.cpp).
inline PhiloxCounter philox4x64(PhiloxCounter c, PhiloxKey k) noexcept {
  __extension__ typedef unsigned __int128 u128;
  constexpr std::uint64_t m0 = 0xD2E7470EE14C6C93ULL, m1 = 0xCA5A826395121157ULL;
  constexpr std::uint64_t w0 = 0x9E3779B97F4A7C15ULL, w1 = 0xBB67AE8584CAA73BULL;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += w0;
      k[1] += w1;
    }
    const u128 p0 = static_cast<u128>(m0) * c[0];
    const u128 p1 = static_cast<u128>(m1) * c[2];
    const auto hi0 = static_cast<std::uint64_t>(p0 >> 64), lo0 = static_cast<std::uint64_t>(p0);
    const auto hi1 = static_cast<std::uint64_t>(p1 >> 64), lo1 = static_cast<std::uint64_t>(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
  }
  return c;
}

/// The 32-bit draws of resample `resample` under `seed` (see the top of this file).
class ResampleStream {
 public:
  ResampleStream(std::uint64_t seed, std::uint64_t resample) noexcept : key_{seed, resample} {}

  std::uint32_t next_u32() noexcept {
    if (pos_ == 8) {
      buffer_ = philox4x64({block_++, 0, 0, 0}, key_);
      pos_ = 0;
    }
    const std::uint64_t w = buffer_[pos_ >> 1];
    const std::uint32_t x =
        (pos_ & 1) ? static_cast<std::uint32_t>(w >> 32) : static_cast<std::uint32_t>(w);
    ++pos_;
    return x;
  }

  /// A uniform integer in [0, n), 0 < n < 2^32 (Lemire's method, see the top of this file).
  std::uint32_t uniform_below(std::uint32_t n) noexcept {
    const std::uint32_t threshold = (0U - n) % n;
    for (;;) {
      const std::uint64_t m = static_cast<std::uint64_t>(next_u32()) * n;
      if (static_cast<std::uint32_t>(m) >= threshold) return static_cast<std::uint32_t>(m >> 32);
    }
  }

 private:
  PhiloxKey key_;
  std::uint64_t block_ = 0;
  PhiloxCounter buffer_{};
  unsigned pos_ = 8;
};

/// The n = out.size() unit indices of resample `resample` (uniform on [0, n), with replacement),
/// in draw order. Throws std::invalid_argument when n >= 2^32.
void resample_indices(std::uint64_t seed, std::uint64_t resample, std::span<std::uint32_t> out);

/// The multiplicities of resample `resample` over n = counts.size() units: counts[i] = how many of
/// the n draws of resample_indices() are unit i (a multinomial(n; 1/n, ..., 1/n) vector summing to
/// n), in O(n). Overwrites counts. Throws std::invalid_argument when n >= 2^32.
void resample_counts(std::uint64_t seed, std::uint64_t resample, std::span<std::uint32_t> counts);

/// A uniformly random permutation of [0, n) drawn from the stream (seed, resample) by
/// Fisher-Yates: for i = n-1 down to 1, swap p[i] and p[uniform_below(i + 1)]. Used to assign
/// units to the groups of the delete-a-group jackknife (bootstrap.hpp).
std::vector<std::uint32_t> random_permutation(std::uint64_t seed, std::uint64_t resample,
                                              std::size_t n);

}  // namespace tally::stats
