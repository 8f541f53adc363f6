// McNemar's test for paired binary outcomes (run a and run b scored right/wrong on the same
// units): only the discordant pairs count, b = #{a right, b wrong} and c = #{a wrong, b right}
// (statsmodels' table[0][1] and table[1][0] of the 2x2 table [[both right, a only], [b only, both
// wrong]]). Under H0 (the runs are equally accurate) b ~ Binomial(b + c, 1/2) given b + c.
//
// The binomial probabilities are computed in long double (x86-64: 64-bit significand, exponent
// down to 2^-16445) by Loader's saddle-point form (C. Loader, "Fast and accurate computation of
// binomial probabilities", 2000; R's dbinom_raw): pmf(k) = exp(stirlerr(n) - stirlerr(k) -
// stirlerr(n-k) - bd0(k, n/2) - bd0(n-k, n/2)) / sqrt(2 pi k (n-k) / n), and the CDF sums pmf(k),
// pmf(k-1) = pmf(k) k / (n-k+1), ... until the terms fall below 1e-22 of the sum. The result is
// rounded to double once, so the p-values are correct to about one unit in the last place for any
// b + c (tested against exact big-integer sums up to b + c = 1e6), including tiny positive values
// down to the smallest subnormal; a p-value below 2^-1074 is 0.
#pragma once

#include <cstdint>

namespace tally::stats {

struct McNemarResult {
  double statistic = 0;  ///< exact, mid-p: min(b, c); chi-square: the chi-square statistic
  double pvalue = 1;
};

/// P(X <= k) for X ~ Binomial(n, 1/2) (1 when k >= n). n below 2^53.
double binomial_cdf_half(std::uint64_t k, std::uint64_t n);
/// P(X = k) for X ~ Binomial(n, 1/2) (0 when k > n). n below 2^53.
double binomial_pmf_half(std::uint64_t k, std::uint64_t n);

/// The exact (conditional binomial) McNemar test, two-sided: statistic = min(b, c), pvalue =
/// min(1, 2 P(X <= min(b, c))), X ~ Binomial(b + c, 1/2); 1 when b + c = 0. Equal to statsmodels
/// 0.15's statsmodels.stats.contingency_tables.mcnemar(table, exact=True).
McNemarResult mcnemar_exact(std::uint64_t b, std::uint64_t c);

/// The mid-p McNemar test: pvalue = min(1, 2 P(X <= k) - P(X = k)), k = min(b, c) (Fagerland,
/// Lydersen & Laake, BMC Med. Res. Methodol. 13:91, 2013: closer to the nominal level than the
/// exact test, which is conservative). 1 when b + c = 0.
McNemarResult mcnemar_midp(std::uint64_t b, std::uint64_t c);

/// The asymptotic McNemar test: statistic = (|b - c| - corr)^2 / (b + c), corr = 1 with the
/// continuity correction (Edwards 1948) else 0, pvalue = P(chi2_1 > statistic) = erfc(sqrt(stat /
/// 2)). Equal to statsmodels' mcnemar(table, exact=False, correction=correction), including its
/// (|b - c| - 1)^2 = 1 when b = c. b + c = 0: statistic 0 and pvalue 1 (statsmodels: 0/0 = NaN).
McNemarResult mcnemar_chi2(std::uint64_t b, std::uint64_t c, bool correction = true);

}  // namespace tally::stats
