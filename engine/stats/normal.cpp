#include "tally/stats/normal.hpp"

#include <cmath>
#include <limits>
#include <numbers>

namespace tally::stats {

double ndtr(double x) noexcept {
  if (std::isnan(x)) return x;
  const double t = x * (std::numbers::sqrt2 / 2);
  const double z = std::fabs(t);
  if (z < std::numbers::sqrt2 / 2) return 0.5 + 0.5 * std::erf(t);
  const double y = 0.5 * std::erfc(z);
  return t > 0 ? 1.0 - y : y;
}

namespace {

// The lower-tail quantile, 0 < p <= 1/2.
double lower_quantile(double p) {
  // P. J. Acklam's rational approximations (relative error below 1.15e-9).
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  double x;
  if (p < 0.02425) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  // Halley steps on f(x) = Phi(x) - p, Phi(x) = erfc(-x / sqrt 2) / 2 (x <= 0: no cancellation).
  // Below 1e-300 exp(x^2 / 2) would overflow: Acklam's value stands there.
  for (int step = 0; step < 2 && p >= 1e-300; ++step) {
    const double e = 0.5 * std::erfc(-x * (std::numbers::sqrt2 / 2)) - p;
    const double u = e * std::sqrt(2 * std::numbers::pi) * std::exp(x * x / 2);
    x = x - u / (1 + x * u / 2);
  }
  return x;
}

}  // namespace

double ndtri(double p) noexcept {
  if (std::isnan(p) || p < 0 || p > 1) return std::numeric_limits<double>::quiet_NaN();
  if (p == 0) return -std::numeric_limits<double>::infinity();
  if (p == 1) return std::numeric_limits<double>::infinity();
  if (p > 0.5) return -lower_quantile(1.0 - p);
  return lower_quantile(p);
}

}  // namespace tally::stats
