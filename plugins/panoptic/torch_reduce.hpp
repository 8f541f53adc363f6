// torch.sum and torch.mean of a contiguous 1-D CPU tensor of float32 or float64, reproduced bit for
// bit. torchmetrics' PanopticQuality averages its per-class values with torch.mean: rq in float32
// (true_positives / (tp + 0.5 fp + 0.5 fn) is an int32 tensor over a float32 one), pq and sq in
// float64. A float32 mean taken in another order is off by an ulp of float32 (6e-8 relative) now
// and then, far outside 1e-9: so the additions here are ATen's, in ATen's order.
//
// ATen's CPU sum (aten/src/ATen/native/cpu/SumKernel.cpp, cascade_sum) accumulates in the
// tensor's own type (opmath of float is float):
//   n >= L (L = 8 lanes of float, 4 of double: 32-byte vectors): the first (n / L) * L values as
//     n / L vectors, summed lane-wise by row_sum; then acc = 0, acc += each of the n % L values
//     left, in order, then acc += each lane of the vector sum, in lane order;
//   n < L: row_sum over the scalars.
//   row_sum(x, m): four accumulators over rows of 4 (multi_row_sum over m / 4 rows, a cascade of
//     4 levels flushed every 2^p rows, p = max(4, ceil_log2(m / 4) / 4)), the m % 4 values left
//     added to the first, then the first += the second, third and fourth.
// torch.mean is that sum divided by the count in the tensor's type (mean_out: sum_out(...)
// .div_(count)); the mean of nothing is 0 / 0 = NaN.
//
// Checked bit for bit against torch 2.15.0 (CPU capability AVX512, and AVX2 through
// ATEN_CPU_CAPABILITY=avx2: the sum kernel uses 32-byte vectors under both) on 3000 random
// float32 and float64 arrays of 0 to 300 values (sum and mean).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

namespace tally::panoptic::torch_cpu {

namespace detail {

/// ATen's utils::CeilLog2: 1 for x <= 2, else ceil(log2(x)).
inline std::int64_t ceil_log2(std::int64_t x) {
  if (x <= 2) return 1;
  return 64 - __builtin_clzll(static_cast<unsigned long long>(x - 1));
}

template <class V>
void add_to(V& a, const V& b) {
  for (std::size_t l = 0; l < a.size(); ++l) a[l] += b[l];
}

/// multi_row_sum<acc, 4>: four accumulators (one a column) over `rows` rows; get(i, k) is the
/// value (a vector of lanes) of row i, column k.
template <class V, class Get>
std::array<V, 4> multi_row_sum(const Get& get, std::int64_t rows) {
  constexpr int kLevels = 4, kCols = 4;
  const std::int64_t level_power = std::max<std::int64_t>(4, ceil_log2(rows) / kLevels);
  const std::int64_t level_step = std::int64_t{1} << level_power;
  const std::int64_t level_mask = level_step - 1;
  std::array<std::array<V, kCols>, kLevels> acc{};
  std::int64_t i = 0;
  while (i + level_step <= rows) {
    for (std::int64_t j = 0; j < level_step; ++j, ++i)
      for (int k = 0; k < kCols; ++k) add_to(acc[0][k], get(i, k));
    for (int j = 1; j < kLevels; ++j) {
      for (int k = 0; k < kCols; ++k) {
        add_to(acc[j][k], acc[j - 1][k]);
        acc[j - 1][k] = V{};
      }
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < rows; ++i)
    for (int k = 0; k < kCols; ++k) add_to(acc[0][k], get(i, k));
  for (int j = 1; j < kLevels; ++j)
    for (int k = 0; k < kCols; ++k) add_to(acc[0][k], acc[j][k]);
  return acc[0];
}

/// row_sum: get(i) is element i (a vector of lanes) of m elements.
template <class V, class Get>
V row_sum(const Get& get, std::int64_t m) {
  constexpr std::int64_t kIlp = 4;
  const std::int64_t rows = m / kIlp;
  auto partial = multi_row_sum<V>([&](std::int64_t i, int k) { return get(i * kIlp + k); }, rows);
  for (std::int64_t i = rows * kIlp; i < m; ++i) add_to(partial[0], get(i));
  for (int k = 1; k < kIlp; ++k) add_to(partial[0], partial[k]);
  return partial[0];
}

}  // namespace detail

/// torch.sum of x[0, n) (T = float or double).
template <class T>
T sum(const T* x, std::int64_t n) {
  constexpr std::int64_t kLanes = 32 / sizeof(T);
  if (n >= kLanes) {
    using V = std::array<T, kLanes>;
    const std::int64_t vectors = n / kLanes;
    const V lanes = detail::row_sum<V>(
        [&](std::int64_t i) {
          V v;
          std::copy_n(x + i * kLanes, kLanes, v.begin());
          return v;
        },
        vectors);
    T acc = 0;
    for (std::int64_t k = vectors * kLanes; k < n; ++k) acc += x[k];
    for (const T v : lanes) acc += v;
    return acc;
  }
  using S = std::array<T, 1>;
  return detail::row_sum<S>([&](std::int64_t i) { return S{x[i]}; }, n)[0];
}

/// torch.mean of x[0, n): the sum divided by n in T (NaN for n = 0).
template <class T>
T mean(const T* x, std::int64_t n) {
  return sum(x, n) / static_cast<T>(n);
}

}  // namespace tally::panoptic::torch_cpu
