// NumPy's summation and number formatting, reproduced exactly, for metrics whose reference
// (mmeval) sums float32 or float64 arrays with numpy.sum / numpy.mean or prints a Python float
// into a result key. Shared by the keypoints and flow plugins (header-only).
//
// numpy.add.reduce over a contiguous 1-D array is `0 + pairwise_sum(a, n)`, where pairwise_sum is
// the blocked pairwise summation of numpy/_core/src/umath/loops_utils.h.src: fewer than 8
// elements are added in order; up to 128 with 8 interleaved accumulators combined as
// ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the remainder in order; above 128 the
// array is split at n/2 rounded down to a multiple of 8 and the halves summed recursively.
// Checked bit for bit against numpy 2.3.5's numpy.sum of float32 arrays of 1 to 50000 elements,
// and by the float32 reference cases of the keypoint and flow tests (up to ~9500 values).
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <system_error>

namespace tally::numpy {

/// numpy's pairwise_sum over a[0, n), accumulating in T (float32 arrays sum in float32).
template <class T>
T pairwise_sum(const T* a, std::int64_t n) {
  if (n < 8) {
    T res = T(0);
    for (std::int64_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    T r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    std::int64_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  std::int64_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

/// numpy.sum(a) of a contiguous 1-D array of n elements of T (the identity 0 plus the pairwise
/// sum; 0 for an empty array).
template <class T>
T sum(const T* a, std::int64_t n) {
  return T(0) + pairwise_sum(a, n);
}

/// Python's repr() of a float, as an f-string prints it ("0.2", "1.0", "1e-05", "1e+16"): the
/// shortest digits that round-trip, fixed notation for decimal exponents -4 <= e < 16, else
/// scientific with at least two exponent digits. Used for mmeval's keys such as f"PCK@{thr}".
inline std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  std::string sign;
  if (!s.empty() && s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  const auto e_at = s.find('e');
  std::string digits = s.substr(0, e_at);
  const int exp10 = std::atoi(s.c_str() + e_at + 1);
  if (const auto dot = digits.find('.'); dot != std::string::npos) digits.erase(dot, 1);
  const int nd = static_cast<int>(digits.size());
  const int decpt = exp10 + 1;  // value = 0.d1d2... x 10^decpt
  if (decpt <= -4 || decpt > 16) {
    std::string out = sign + digits.substr(0, 1);
    if (nd > 1) out += "." + digits.substr(1);
    out += exp10 < 0 ? "e-" : "e+";
    const int ae = exp10 < 0 ? -exp10 : exp10;
    if (ae < 10) out += "0";
    return out + std::to_string(ae);
  }
  if (decpt <= 0) return sign + "0." + std::string(static_cast<std::size_t>(-decpt), '0') + digits;
  if (decpt >= nd)
    return sign + digits + std::string(static_cast<std::size_t>(decpt - nd), '0') + ".0";
  return sign + digits.substr(0, static_cast<std::size_t>(decpt)) + "." +
         digits.substr(static_cast<std::size_t>(decpt));
}

}  // namespace tally::numpy
