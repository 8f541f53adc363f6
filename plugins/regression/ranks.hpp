// The rank statistics of SpearmanCorrCoef and KendallRankCorrCoef (ranks.cpp): each a few exact
// integer sums over the sorted samples, computed in O(N) linear passes (stable LSD radix sorts of
// the doubles' bits) and, for Kendall, an O(N log N) inversion count. Scratch arrays are reused
// across the outputs and live on transparent huge pages (madvise) where the kernel allows: at
// 10 M samples, 4 KiB pages cost more in page faults and TLB misses than the sorting itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace tally::regression {

// GCC's 128-bit integer (__extension__: -Wpedantic knows it is not ISO C++).
__extension__ typedef __int128 Int128;

/// `bytes` of memory, at `aligned` (2 MiB aligned from 4 MiB on: an anonymous mapping advised to
/// use huge pages); returns what big_free() takes, with the size in mapped_bytes.
void* big_alloc(std::size_t bytes, std::size_t& mapped_bytes, void*& aligned);
void big_free(void* base, std::size_t mapped_bytes);

/// An uninitialized array of T that only grows (its contents are not kept when it does); from
/// 4 MiB on, an anonymous mapping advised to use huge pages.
template <class T>
class BigArray {
 public:
  BigArray() = default;
  BigArray(const BigArray&) = delete;
  BigArray& operator=(const BigArray&) = delete;
  ~BigArray() { release(); }
  /// Room for n elements; the previous contents are lost when it grows.
  void reserve(std::size_t n) {
    if (n <= cap_) return;
    release();
    base_ = big_alloc(n * sizeof(T), bytes_, data_);
    cap_ = n;
  }
  T* data() { return static_cast<T*>(data_); }
  void swap(BigArray& o) noexcept {
    std::swap(base_, o.base_);
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    std::swap(cap_, o.cap_);
  }

 private:
  void release() {
    if (base_ != nullptr) big_free(base_, bytes_);
    base_ = data_ = nullptr;
    bytes_ = cap_ = 0;
  }
  void* base_ = nullptr;  // what was allocated (mapped)
  void* data_ = nullptr;  // the array (2 MiB aligned when mapped)
  std::size_t bytes_ = 0, cap_ = 0;
};

/// The scratch arrays of the rank statistics: two keys and two payloads an element (a radix pass
/// moves them from one to the other).
struct RankScratch {
  BigArray<std::uint64_t> key[2];
  BigArray<std::uint32_t> pay[2];
  void reserve(std::size_t n) {
    for (auto& k : key) k.reserve(n);
    for (auto& p : pay) p.reserve(n);
  }
};

/// Spearman's sums over the average ranks, doubled so that they are integers (2 rx_i, 2 ry_i;
/// ties share the mean of their ranks, as scipy.stats.rankdata(method="average")), exact:
/// sx = sum 2 rx, sxx = sum (2 rx)^2, sxy = sum (2 rx)(2 ry), and the same for y.
struct SpearmanSums {
  Int128 sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
};
/// The sums of n <= 2^31 pairs (x[i * stride], y[i * stride]), no NaN.
SpearmanSums spearman_sums(const double* x, const double* y, std::size_t n, std::size_t stride,
                           RankScratch& s);

/// The ties of one variable: over the groups of t equal values.
struct Ties {
  std::int64_t pairs = 0;  // sum t (t - 1) / 2
  double v1 = 0, v2 = 0;   // sum t (t - 1) (2t + 5), sum t (t - 1) (t - 2), in ascending order
  std::int64_t distinct = 0;
  void add(std::int64_t t) {
    ++distinct;
    pairs += t * (t - 1) / 2;
    const auto dt = static_cast<double>(t);
    v1 += dt * (dt - 1.0) * (2.0 * dt + 5.0);
    v2 += dt * (dt - 1.0) * (dt - 2.0);
  }
};

/// Kendall's pair counts (Knight's algorithm): the ties of x and of y, the pairs tied in both
/// (joint), and the discordant pairs (the inversions of y in (x, y) order).
struct KendallCounts {
  Ties x, y;
  std::int64_t joint = 0, discordant = 0;
};
/// The counts of n <= 2^31 pairs (x[i * stride], y[i * stride]), no NaN.
KendallCounts kendall_counts(const double* x, const double* y, std::size_t n, std::size_t stride,
                             RankScratch& s);

}  // namespace tally::regression
