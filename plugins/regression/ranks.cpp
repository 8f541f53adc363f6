// Sorting and ranking for SpearmanCorrCoef and KendallRankCorrCoef (common.hpp): a stable radix
// sort of doubles (a fixed number of linear passes, where a comparison sort of 10 M values makes
// ~23 passes with unpredictable branches), average ranks, and an inversion count.
#include <array>
#include <bit>
#include <cstring>

#include "common.hpp"

namespace tally::regression {
namespace {

/// The bits of x as an unsigned integer that sorts as x does (-0.0 as 0.0; no NaN).
inline std::uint64_t sortable(double x) {
  if (x == 0.0) x = 0.0;
  const auto b = std::bit_cast<std::uint64_t>(x);
  return (b >> 63) != 0 ? ~b : b | (std::uint64_t{1} << 63);
}

}  // namespace

void sort_permutation(const double* keys, std::size_t n, std::size_t stride,
                      std::vector<std::uint32_t>& perm, std::vector<std::uint64_t>* sorted) {
  constexpr unsigned kBits = 11, kPasses = 6;
  constexpr std::size_t kBuckets = std::size_t{1} << kBits;
  if (perm.empty()) {
    perm.resize(n);
    for (std::size_t i = 0; i < n; ++i) perm[i] = static_cast<std::uint32_t>(i);
  }
  std::vector<std::uint64_t> k(n), k2(n);
  std::vector<std::uint32_t> p2(n);
  std::vector<std::size_t> hist(kPasses * kBuckets, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t key = sortable(keys[static_cast<std::size_t>(perm[i]) * stride]);
    k[i] = key;
    for (unsigned pass = 0; pass < kPasses; ++pass)
      ++hist[pass * kBuckets + ((key >> (pass * kBits)) & (kBuckets - 1))];
  }
  for (unsigned pass = 0; pass < kPasses; ++pass) {
    std::size_t* h = hist.data() + pass * kBuckets;
    // Every key has the same digit here: the pass would not move anything.
    if (n == 0 || h[(k[0] >> (pass * kBits)) & (kBuckets - 1)] == n) continue;
    std::size_t at = 0;
    for (std::size_t b = 0; b < kBuckets; ++b) {
      const std::size_t c = h[b];
      h[b] = at;
      at += c;
    }
    const unsigned shift = pass * kBits;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t to = h[(k[i] >> shift) & (kBuckets - 1)]++;
      k2[to] = k[i];
      p2[to] = perm[i];
    }
    k.swap(k2);
    perm.swap(p2);
  }
  if (sorted != nullptr) *sorted = std::move(k);
}

std::vector<std::int64_t> twice_average_ranks(const double* v, std::size_t n, std::size_t stride) {
  std::vector<std::uint32_t> perm;
  std::vector<std::uint64_t> key;
  sort_permutation(v, n, stride, perm, &key);
  std::vector<std::int64_t> out(n);
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i + 1;
    while (j < n && key[j] == key[i]) ++j;
    // Ranks i + 1 .. j share their mean (i + 1 + j) / 2.
    const auto twice = static_cast<std::int64_t>(i + 1 + j);
    for (std::size_t t = i; t < j; ++t) out[perm[t]] = twice;
    i = j;
  }
  return out;
}

std::int64_t count_inversions(std::vector<std::uint32_t>& v) {
  const std::size_t n = v.size();
  constexpr std::size_t kRun = 32;
  std::int64_t inv = 0;
  // Insertion sort of short runs: each shift is one inversion.
  for (std::size_t b = 0; b < n; b += kRun) {
    const std::size_t e = std::min(n, b + kRun);
    for (std::size_t i = b + 1; i < e; ++i) {
      const std::uint32_t x = v[i];
      std::size_t j = i;
      while (j > b && v[j - 1] > x) {
        v[j] = v[j - 1];
        --j;
      }
      inv += static_cast<std::int64_t>(i - j);
      v[j] = x;
    }
  }
  std::vector<std::uint32_t> buf(n);
  for (std::size_t width = kRun; width < n; width *= 2) {
    for (std::size_t lo = 0; lo < n; lo += 2 * width) {
      const std::size_t mid = std::min(n, lo + width), hi = std::min(n, lo + 2 * width);
      std::size_t i = lo, j = mid, o = lo;
      // Taking from the right half jumps over the (mid - i) larger values left of it.
      while (i < mid && j < hi) {
        if (v[j] < v[i]) {
          inv += static_cast<std::int64_t>(mid - i);
          buf[o++] = v[j++];
        } else {
          buf[o++] = v[i++];
        }
      }
      while (i < mid) buf[o++] = v[i++];
      while (j < hi) buf[o++] = v[j++];
    }
    v.swap(buf);
  }
  return inv;
}

}  // namespace tally::regression
