// Python's repr() of a float, for mmeval's result keys that print one (f"PCK@{thr}"). NumPy's
// sums and means (numpy.sum of the float32 distances and of the per-keypoint accuracies) are the
// SDK's tally/sdk/numpy_math.hpp, included here for the plugins and tests that use both.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <system_error>

#include "tally/sdk/numpy_math.hpp"

namespace tally::numpy {

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
