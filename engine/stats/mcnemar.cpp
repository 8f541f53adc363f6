#include "tally/stats/mcnemar.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace tally::stats {

namespace {

using ld = long double;

constexpr std::uint64_t kMaxN = 1ULL << 53;

void check_n(std::uint64_t n, const char* fn) {
  if (n >= kMaxN)
    throw std::invalid_argument(std::string("tally::stats::") + fn +
                                ": n must be below 2^53, got " + std::to_string(n));
}

// log(sqrt(2 pi))
constexpr ld kLnSqrt2Pi = 0.918938533204672741780329736405617639861L;
constexpr ld kLn2Pi = 1.837877066409345483560659472811235279723L;

// stirlerr(m) = log(m!) - (m + 1/2) log(m) + m - log(sqrt(2 pi)), m >= 1 an integer.
ld stirlerr(std::uint64_t m) {
  if (m <= 40) {
    ld f = 1;
    for (std::uint64_t i = 2; i <= m; ++i) f *= static_cast<ld>(i);
    const auto x = static_cast<ld>(m);
    return std::log(f) - (x + 0.5L) * std::log(x) + x - kLnSqrt2Pi;
  }
  // The Stirling series; the first omitted term is below 1e-23 at m > 40.
  const auto x = static_cast<ld>(m);
  const ld x2 = x * x;
  constexpr ld s0 = 1.0L / 12, s1 = 1.0L / 360, s2 = 1.0L / 1260, s3 = 1.0L / 1680,
               s4 = 1.0L / 1188, s5 = 691.0L / 360360, s6 = 1.0L / 156;
  return (s0 - (s1 - (s2 - (s3 - (s4 - (s5 - s6 / x2) / x2) / x2) / x2) / x2) / x2) / x;
}

// bd0(x, np) = x log(x / np) + np - x, without cancellation (Loader 2000).
ld bd0(ld x, ld np) {
  if (std::fabs(x - np) < 0.1L * (x + np)) {
    ld v = (x - np) / (x + np);
    ld s = (x - np) * v;
    ld ej = 2 * x * v;
    v = v * v;
    for (int j = 1; j < 2000; ++j) {
      ej *= v;
      const ld s1 = s + ej / (2 * j + 1);
      if (s1 == s) return s1;
      s = s1;
    }
    return s;
  }
  return x * std::log1p((x - np) / np) + np - x;
}

ld pmf_half(std::uint64_t k, std::uint64_t n) {
  if (k > n) return 0;
  // 2^-n exactly (0 in long double beyond n = 16445, far below any double).
  if (k == 0 || k == n)
    return std::ldexp(1.0L, -static_cast<int>(std::min<std::uint64_t>(n, 20000)));
  const ld np = static_cast<ld>(n) / 2;
  const auto x = static_cast<ld>(k), y = static_cast<ld>(n - k);
  const ld lc = stirlerr(n) - stirlerr(k) - stirlerr(n - k) - bd0(x, np) - bd0(y, np);
  const ld lf = kLn2Pi + std::log(x) + std::log1p(-x / static_cast<ld>(n));
  return std::exp(lc - 0.5L * lf);
}

// P(X <= k) and P(X = k), X ~ Binomial(n, 1/2), k <= n / 2 (the terms below k decrease).
void cdf_lower_half(std::uint64_t k, std::uint64_t n, ld& cdf, ld& pmf) {
  pmf = pmf_half(k, n);
  ld sum = pmf, term = pmf;
  for (std::uint64_t i = k; i > 0; --i) {
    term *= static_cast<ld>(i) / static_cast<ld>(n - i + 1);
    sum += term;
    if (term < sum * 1e-22L) break;
  }
  cdf = sum;
}

}  // namespace

double binomial_pmf_half(std::uint64_t k, std::uint64_t n) {
  check_n(n, "binomial_pmf_half");
  return static_cast<double>(pmf_half(k, n));
}

double binomial_cdf_half(std::uint64_t k, std::uint64_t n) {
  check_n(n, "binomial_cdf_half");
  if (k >= n) return 1.0;
  ld cdf, pmf;
  if (2 * k <= n) {
    cdf_lower_half(k, n, cdf, pmf);
    return static_cast<double>(cdf);
  }
  // P(X <= k) = 1 - P(X <= n - k - 1) by symmetry.
  cdf_lower_half(n - k - 1, n, cdf, pmf);
  return static_cast<double>(1 - cdf);
}

McNemarResult mcnemar_exact(std::uint64_t b, std::uint64_t c) {
  check_n(b + c, "mcnemar_exact");
  const std::uint64_t k = std::min(b, c), n = b + c;
  McNemarResult r;
  r.statistic = static_cast<double>(k);
  if (n == 0) return r;
  ld cdf, pmf;
  cdf_lower_half(k, n, cdf, pmf);
  r.pvalue = static_cast<double>(std::min<ld>(1, 2 * cdf));
  return r;
}

McNemarResult mcnemar_midp(std::uint64_t b, std::uint64_t c) {
  check_n(b + c, "mcnemar_midp");
  const std::uint64_t k = std::min(b, c), n = b + c;
  McNemarResult r;
  r.statistic = static_cast<double>(k);
  if (n == 0) return r;
  ld cdf, pmf;
  cdf_lower_half(k, n, cdf, pmf);
  r.pvalue = static_cast<double>(std::min<ld>(1, 2 * cdf - pmf));
  return r;
}

McNemarResult mcnemar_chi2(std::uint64_t b, std::uint64_t c, bool correction) {
  check_n(b + c, "mcnemar_chi2");
  McNemarResult r;
  if (b + c == 0) {
    r.statistic = 0;
    return r;
  }
  const auto diff = static_cast<ld>(b > c ? b - c : c - b) - (correction ? 1 : 0);
  // As statsmodels: the integer square, then one division in double.
  r.statistic = static_cast<double>(diff * diff) / static_cast<double>(b + c);
  r.pvalue = static_cast<double>(std::erfc(std::sqrt(static_cast<ld>(r.statistic) / 2)));
  return r;
}

}  // namespace tally::stats
