#include "row_kernels.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "tally/sdk/simd.hpp"

namespace tally::classification {

namespace {

// 32-byte vectors: one AVX2 register, two SSE2 registers in the baseline clone. M is the mask
// type comparisons of V give (lanes of -1 or 0, as wide as the scores).
template <class T>
struct Vec;
template <>
struct Vec<float> {
  typedef float V __attribute__((vector_size(32)));
  typedef std::int32_t M __attribute__((vector_size(32)));
  static constexpr int kW = 8;
};
template <>
struct Vec<double> {
  typedef double V __attribute__((vector_size(32)));
  typedef std::int64_t M __attribute__((vector_size(32)));
  static constexpr int kW = 4;
};

// Vectors go by reference: passing or returning a 32-byte vector by value changes the ABI
// between the baseline and the AVX2 clone (-Wpsabi).
template <class V, class T>
[[gnu::always_inline]] inline void load(V& v, const T* p) {
  __builtin_memcpy(&v, p, sizeof v);  // an unaligned load
}

template <class M>
[[gnu::always_inline]] inline std::int64_t lane_sum(const M& m) {
  std::int64_t s = 0;
  for (int l = 0; l < static_cast<int>(sizeof(M) / sizeof(m[0])); ++l) s += m[l];
  return s;
}

template <class M>
[[gnu::always_inline]] inline bool any_lane(const M& m) {
  decltype(m[0] | 0) a = 0;
  for (int l = 0; l < static_cast<int>(sizeof(M) / sizeof(m[0])); ++l) a |= m[l];
  return a != 0;
}

}  // namespace

template <class T>
TALLY_SIMD_CLONES std::int64_t true_class_ranks(const T* s, std::int64_t rows, std::int64_t cols,
                                                const std::int64_t* y, std::int32_t cap,
                                                std::int32_t* ranks) {
  using V = typename Vec<T>::V;
  using M = typename Vec<T>::M;
  constexpr int kW = Vec<T>::kW;
  if (cols <= 2 * kW) {
    // Short rows (10 classes): the whole row in two vectors, lanes past the row masked off, no
    // branch on y (the split at y below leaves short rows to its scalar tails, whose branches on
    // a random y mispredict: 262,144 rows of 10 float32 classes went at 40 M rows/s). The two
    // vectors read up to 2 * kW scores from the row's start: rows whose read would pass the end
    // of the matrix take the scalar loop.
    using Lane = decltype(M{}[0] | 0);
    M lo{}, hi{};
    for (int l = 0; l < kW; ++l) {
      lo[l] = l;
      hi[l] = kW + l;
    }
    const M width = M{} + static_cast<Lane>(cols);
    const M in_lo = lo < width, in_hi = hi < width;
    std::int64_t i = 0;
    const std::int64_t vector_rows =
        rows * cols >= 2 * kW ? std::min<std::int64_t>(rows, (rows * cols - 2 * kW) / cols + 1) : 0;
    for (; i < vector_rows; ++i) {
      const T* row = s + i * cols;
      const std::int64_t yi = y[i];
      const T sy = row[yi];
      const V sv = V{} + sy;
      const M yv = M{} + static_cast<Lane>(yi);
      V a, b;
      load(a, row);
      load(b, row + kW);
      const M above = (((a > sv) | ((a == sv) & (lo > yv))) & in_lo) +
                      (((b > sv) | ((b == sv) & (hi > yv))) & in_hi);
      const M nan = ((a != a) & in_lo) | ((b != b) & in_hi);
      if (any_lane(nan)) return i;
      ranks[i] = static_cast<std::int32_t>(std::min<std::int64_t>(-lane_sum(above), cap));
    }
    for (; i < rows; ++i) {
      const T* row = s + i * cols;
      const std::int64_t yi = y[i];
      const T sy = row[yi];
      std::int64_t r = 0;
      bool bad = sy != sy;
      for (std::int64_t c = 0; c < cols; ++c) {
        const T v = row[c];
        r += static_cast<std::int64_t>((v > sy) | ((v == sy) & (c > yi)));
        bad |= v != v;
      }
      if (bad) return i;
      ranks[i] = static_cast<std::int32_t>(std::min<std::int64_t>(r, cap));
    }
    return -1;
  }
  for (std::int64_t i = 0; i < rows; ++i) {
    const T* row = s + i * cols;
    const std::int64_t yi = y[i];
    const T sy = row[yi];
    const V sv = V{} + sy;
    // Lanes count at most cols / kW each: exact for any row that fits in memory.
    M above{}, nan{};
    std::int64_t tail = 0;
    bool tail_nan = sy != sy;
    std::int64_t c = 0;
    for (; c + kW <= yi; c += kW) {
      V v;
      load(v, row + c);
      above -= v > sv;
      nan |= v != v;
    }
    for (; c < yi; ++c) {
      tail += row[c] > sy;
      tail_nan |= row[c] != row[c];
    }
    for (c = yi + 1; c + kW <= cols; c += kW) {
      V v;
      load(v, row + c);
      above -= v >= sv;
      nan |= v != v;
    }
    for (; c < cols; ++c) {
      tail += row[c] >= sy;
      tail_nan |= row[c] != row[c];
    }
    if (tail_nan || any_lane(nan)) return i;
    ranks[i] = static_cast<std::int32_t>(std::min<std::int64_t>(tail + lane_sum(above), cap));
  }
  return -1;
}

template <class T>
TALLY_SIMD_CLONES std::int64_t row_argmax(const T* s, std::int64_t rows, std::int64_t cols,
                                          std::int64_t* out) {
  using V = typename Vec<T>::V;
  using M = typename Vec<T>::M;
  using Lane = decltype(M{}[0] | 0);
  constexpr int kW = Vec<T>::kW;
  // Lanes pay from 4 vectors per row on (measured on 40 M float32 scores: in rows of 10
  // classes, 99 ms with lanes, 37 ms without; in rows of 100, 22 and 35 ms). Lane indices are as
  // wide as the scores: float32 rows wider than int32 take the scalar loop.
  const bool lanes = cols >= 4 * kW && cols <= std::numeric_limits<Lane>::max() - kW;
  M iota;
  for (int l = 0; l < kW; ++l) iota[l] = l;
  for (std::int64_t i = 0; i < rows; ++i) {
    const T* row = s + i * cols;
    T best_value = row[0];
    std::int64_t best = 0;
    bool nan = row[0] != row[0];
    std::int64_t c = 1;
    if (lanes) {
      // Each lane keeps its largest score and the first index holding it (strict >); the
      // first index among the lanes holding the largest is then the first of the row.
      V best_v;
      load(best_v, row);
      M best_i = iota, idx = iota, nan_v = best_v != best_v;
      for (c = kW; c + kW <= cols; c += kW) {
        V v;
        load(v, row + c);
        idx += kW;
        const M gt = v > best_v;
        best_v = gt ? v : best_v;
        best_i = gt ? idx : best_i;
        nan_v |= v != v;
      }
      nan = any_lane(nan_v);
      // Branch-free (selects, not jumps: which lane wins is data, and mispredicted branches
      // here cost more than the vector loop on rows of a few dozen classes).
      best_value = best_v[0];
      for (int l = 1; l < kW; ++l) best_value = best_v[l] > best_value ? best_v[l] : best_value;
      best = std::numeric_limits<std::int64_t>::max();
      for (int l = 0; l < kW; ++l) {
        const auto at = static_cast<std::int64_t>(best_i[l]);
        best = best_v[l] == best_value && at < best ? at : best;
      }
    }
    for (; c < cols; ++c) {
      nan |= row[c] != row[c];
      const bool gt = row[c] > best_value;
      best_value = gt ? row[c] : best_value;
      best = gt ? c : best;
    }
    if (nan) return i;
    out[i] = best;
  }
  return -1;
}

template std::int64_t true_class_ranks<float>(const float*, std::int64_t, std::int64_t,
                                              const std::int64_t*, std::int32_t, std::int32_t*);
template std::int64_t true_class_ranks<double>(const double*, std::int64_t, std::int64_t,
                                               const std::int64_t*, std::int32_t, std::int32_t*);
template std::int64_t row_argmax<float>(const float*, std::int64_t, std::int64_t, std::int64_t*);
template std::int64_t row_argmax<double>(const double*, std::int64_t, std::int64_t, std::int64_t*);

}  // namespace tally::classification
