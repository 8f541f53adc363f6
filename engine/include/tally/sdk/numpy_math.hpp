// NumPy's floating-point reductions, reproduced bit for bit (header-only, part of the SDK).
//
// A metric whose reference is Python (mmeval, scikit-learn, pycocotools) usually ends with
// numpy.sum / numpy.mean / numpy.nanmean over a list of per-sample or per-class values. A plain
// running sum gives other bits; these functions perform NumPy's additions in NumPy's order, so
// the result equals the reference exactly (given the same input values in the same order).
//
//   tally::numpy::sum(a, n)       numpy.sum(a) == numpy.add.reduce(a) == a.sum()
//   tally::numpy::mean(a, n)      numpy.mean(a)
//   tally::numpy::nanmean(a, n)   numpy.nanmean(a)
//   tally::numpy::pairwise_sum    the kernel itself (no identity added; see below)
//   tally::numpy::weak_scalar<T>  a Python float as NumPy 2 casts it for an array of dtype T
//
// for a 1-D array `a` of n float32 (T = float) or float64 (T = double) values, contiguous in
// memory, reduced in its own dtype (NumPy sums float32 in float32). The kernel is pairwise_sum of
// numpy/_core/src/umath/loops_utils.h.src (PW_BLOCKSIZE 128), identical in NumPy 1.x and 2.x:
//   n < 8:        res = -0.0; res += a[i] for i in order (-0.0 so that a sum of -0.0s is -0.0);
//   8 <= n <= 128: eight accumulators r[j] = a[j], r[j] += a[i + j] for each further block of 8,
//                 res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the remaining
//                 n % 8 values added in order;
//   n > 128:      n2 = n / 2 rounded down to a multiple of 8, pairwise(a, n2) + pairwise(a + n2,
//                 n - n2).
// numpy.add.reduce adds that to the identity: sum = 0 + pairwise_sum (so sum() of -0.0s is +0.0,
// and the sum of no values is +0.0). numpy.mean divides by the count as NumPy's _mean does:
// ret.dtype.type(ret / count) with count an np.intp, i.e. in float64 and then rounded to T (for
// float32 this equals a float32 division up to 2^24 values, and differs above).
// numpy.nanmean sums the array with NaNs replaced by 0 and divides by the count of non-NaN values
// the same way. An empty array (or an all-NaN one for nanmean) gives NaN, as NumPy (which also
// warns).
//
// Checked bit for bit against numpy 2.3.5's sum, mean and nanmean of random float32 and float64
// arrays of 0 to 50000 values (with NaNs, all NaN, all -0.0), a float32 mean of 2^24 + 3
// values, and the reference values of the keypoint, flow, language, restoration, regression,
// detection, segmentation and text plugins' tests.
//
// Not covered: reductions along an axis of an N-D array (NumPy then adds whole rows elementwise,
// another order), a strided (non-contiguous) view, and a reduction that casts (an integer array,
// or dtype= another type: NumPy then sums buffered chunks of 8192 values). Copy such data into a
// contiguous array of the result type first only where NumPy would make the same copy.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>
#include <vector>

namespace tally::numpy {

/// NumPy's pairwise_sum kernel over a[0, n), accumulating in T; -0.0 for n == 0.
template <class T>
inline T pairwise_sum(const T* a, std::size_t n) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "tally::numpy reproduces float32 and float64 reductions");
  if (n < 8) {
    T res = T(-0.0);
    for (std::size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    T r[8];
    for (std::size_t j = 0; j < 8; ++j) r[j] = a[j];
    std::size_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (std::size_t j = 0; j < 8; ++j) r[j] += a[i + j];
    T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  std::size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

/// numpy.sum(a): the identity 0 plus the pairwise sum (+0.0 for an empty array).
template <class T>
inline T sum(const T* a, std::size_t n) {
  return T(0) + pairwise_sum(a, n);
}
template <class T, class Alloc>
inline T sum(const std::vector<T, Alloc>& a) {
  return sum(a.data(), a.size());
}

namespace detail {
/// NumPy's ret.dtype.type(ret / count) with count an np.intp: divided in float64, rounded to T.
template <class T>
inline T divide_by_count(T total, std::size_t count) {
  return static_cast<T>(static_cast<double>(total) / static_cast<double>(count));
}
}  // namespace detail

/// numpy.mean(a) (NaN for an empty array).
template <class T>
inline T mean(const T* a, std::size_t n) {
  return detail::divide_by_count(sum(a, n), n);
}
template <class T, class Alloc>
inline T mean(const std::vector<T, Alloc>& a) {
  return mean(a.data(), a.size());
}

/// numpy.nanmean(a): the sum with NaNs replaced by 0, divided by the number of non-NaN values
/// (NaN when there is none).
template <class T>
inline T nanmean(const T* a, std::size_t n) {
  std::vector<T> zeroed(a, a + n);
  std::size_t count = 0;
  for (T& v : zeroed) {
    if (std::isnan(v))
      v = T(0);
    else
      ++count;
  }
  return detail::divide_by_count(sum(zeroed.data(), n), count);
}
template <class T, class Alloc>
inline T nanmean(const std::vector<T, Alloc>& a) {
  return nanmean(a.data(), a.size());
}

/// A Python float `x` in an operation with an array of dtype T, as NumPy 2 evaluates it (NEP 50:
/// the scalar is "weak" and cast to T first, so `a > x` compares in float32 for a float32 array;
/// PyTorch does the same for a tensor and a Python number): x rounded to the nearest T, as the C
/// cast NumPy uses. For float that is an infinity from FLT_MAX + half an ulp (2^103) on, and
/// FLT_MAX just below it, without the undefined behaviour of casting an out-of-range double.
template <class T>
inline T weak_scalar(double x) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "tally::numpy reproduces float32 and float64 arithmetic");
  if constexpr (std::is_same_v<T, double>) {
    return x;
  } else {
    constexpr double kMax = static_cast<double>(std::numeric_limits<float>::max());
    constexpr double kOverflow = kMax + 0x1p103;  // halfway to 2^128: rounds (to even) up
    if (x >= kOverflow) return std::numeric_limits<float>::infinity();
    if (x <= -kOverflow) return -std::numeric_limits<float>::infinity();
    if (x > kMax) return std::numeric_limits<float>::max();
    if (x < -kMax) return -std::numeric_limits<float>::max();
    return static_cast<float>(x);
  }
}

}  // namespace tally::numpy
