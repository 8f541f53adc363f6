// The bootstrap over units (samples, images, queries): standard errors, percentile and BCa
// intervals, and the paired bootstrap of two runs over the same units with its p-values.
//
// Resampling. Resample b (b = 0 .. B-1) draws n units with replacement (random.hpp: the draws
// depend on (seed, b, n) only) and hands the statistic the multiplicity of each unit, w[i] = how
// many times unit i was drawn (sum n). The point estimate is the statistic at w = 1 for every unit.
// The B resamples run on `threads` threads (tally/sdk/parallel.hpp's parallel_for, contiguous
// blocks of resamples); every result is the same, bit for bit, for any number of threads.
//
// Two forms of statistic:
//  - Statistic: any callable from the multiplicities (span<const uint32_t>, size n) to K values.
//    It must weight unit i by w[i] and normalise by the weights (the jackknife calls it with sum
//    w < n), and be safe to call from several threads at once.
//  - UnitSums + Finalize, for sum-decomposable metrics (accuracy, counts, sums): unit i
//    contributes a sparse vector (CSR row i); a resample's summed vector is sum_i w[i] * row_i
//    (units in index order, so the sums have the same bits for any thread count) and Finalize
//    turns the summed vector into the K statistics: the form for count-based metrics (no metric
//    code runs over the n units; the jackknife is S minus a group's rows, O(n) in all), e.g.
//    accuracy: row_i = {correct_i, 1}, finalize = s[0] / s[1]. (For one such ratio a hand-written
//    Statistic with integer sums was faster in bench/stats: 7.3 s against 10.2 s of CPU for
//    B = 1000 over 1 M units.)
//
// Intervals, at level 1 - alpha (tails alpha/2 each), from the resamples whose value is finite:
//  - percentile: the alpha/2 and 1 - alpha/2 quantiles of the bootstrap distribution, by NumPy's
//    default (linear, Hyndman & Fan type 7) quantile: equal to
//    scipy.stats.bootstrap(..., method='percentile') given the same distribution.
//  - BCa (Efron & Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 14.3 and 15.4, the
//    sections SciPy's _bca_interval cites; DiCiccio & Efron, Statistical Science 11, 1996): z0 =
//    Phi^-1(F(theta_hat)), F(t) = (#{theta* < t} + #{theta* <= t}) / (2 B) (SciPy's
//    _percentile_of_score); the acceleration a = sum U^3 / (6 (sum U^2)^1.5), U_j = (G -
//    1)(mean(theta_(.)) - theta_(j)) over the G jackknife values theta_(j); the interval is the
//    alpha_1 and alpha_2 quantiles, alpha_i = Phi(z0 + (z0 + z) / (1 - a (z0 + z))) with z =
//    Phi^-1(alpha/2) and Phi^-1(1 - alpha/2). Equal to SciPy 1.16's
//    scipy.stats._resampling._bca_interval (what scipy.stats.bootstrap(method='BCa') uses) given
//    the same distribution and jackknife values, with one difference: when every jackknife value
//    is the same (sum U^2 = 0, e.g. a metric that is constant on the sample) a = 0 here, where
//    SciPy gets 0/0 = NaN. When theta_hat lies outside the bootstrap distribution (F = 0 or 1, z0
//    infinite) the BCa interval is NaN, as SciPy's (which warns: DegenerateDataWarning).
//  - standard_error: the standard deviation (ddof = 1) of the finite bootstrap values (SciPy's
//    BootstrapResult.standard_error).
//
// Jackknife (for the BCa acceleration). With n <= jackknife_max_units (default 5000): the n
// leave-one-out values (the statistic with w[i] = 0 for one unit, 1 for the others), as SciPy. For
// larger n: the delete-a-group jackknife with G = jackknife_groups (default 1000) groups: the
// units are put in a random order (random_permutation(seed, 2^64 - 1, n), so groups do not follow
// any order of the data), group g holds the units at positions [n g / G, n (g + 1) / G) of that
// order, and theta_(g) is the statistic with the group's units at weight 0. The formula for a is
// unchanged with G in place of n: sum U^3 / (sum U^2)^1.5 estimates the same skewness of the
// influence values whether they are summed per unit or per group of m = n / G units (E[sum_g
// L_g^k] = n E[L^k] for k = 2, 3 at equal group sizes), with more Monte Carlo noise; at such n the
// acceleration is small (of order 1 / sqrt(n)) and the BCa interval is close to the percentile
// one. A Jackknife callable, when given, replaces the G statistic evaluations: it receives the
// units left out (one unit, or a group) and returns the K values without them. For UnitSums the
// jackknife needs no callable: theta_(g) = Finalize(S - sum of the group's rows), S the full sum.
//
// Non-finite statistics (NanPolicy): a resample can give NaN (e.g. a class absent from it).
//  - omit (default): for each statistic, the resamples and jackknife values that are not finite
//    (NaN or +-inf) are left out of its standard error, intervals and p-values, and counted in
//    Summary::dropped and Summary::jackknife_dropped. (scipy.stats.bootstrap does not omit: its
//    intervals become NaN.) Callers should look at `dropped`: a large fraction means the interval
//    describes the resamples where the statistic exists, not the metric.
//  - propagate: a statistic with any non-finite resample value gets NaN for its standard error,
//    intervals and p-values (SciPy's behaviour); `dropped` still counts them.
// With fewer than 2 finite resample values, the standard error and intervals are NaN. A
// non-finite point estimate gives NaN intervals and p-values.
//
// Paired bootstrap (two runs, a and b, scored on the same n units): the same resamples for both
// runs (resample b draws the same units for a and b), so that the distribution of the difference
// theta_b* - theta_a* keeps the pairing. The difference is bootstrapped as a statistic in its own
// right (its point estimate, standard error, percentile and BCa intervals; its jackknife values are
// the differences of the runs' jackknife values). p-values for H0: difference = 0, from the
// finite resample differences d*_1 .. d*_B':
//    L = (#{d* < 0} + #{d* = 0} / 2) / B',   U = 1 - L = (#{d* > 0} + #{d* = 0} / 2) / B'
//    p_two_sided = min(1, 2 min(L, U)),  p_decrease = U (H1: b < a),  p_increase = L (H1: b > a).
// This is the test that the percentile interval inverts (Efron & Tibshirani 1993, ch. 15-16: the
// achieved significance level of a bootstrap confidence interval is the fraction of bootstrap
// replications on the far side of the null value; the paired form is Koehn 2004's paired
// bootstrap resampling for MT evaluation): 0 lies outside the (1 - alpha) percentile interval
// when p_two_sided < alpha (up to the quantile interpolation), and ties at 0 count half, as in
// z0's F above. The resolution is 1/B': with B = 1000, p < 0.001 reads 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <vector>

namespace tally::stats {

/// K statistics from the multiplicities w (size n) of one resample.
using Statistic = std::function<std::vector<double>(std::span<const std::uint32_t> weights)>;
/// K statistics without the given units (one unit, or a jackknife group), the others at weight 1.
using Jackknife = std::function<std::vector<double>(std::span<const std::uint32_t> left_out)>;
/// K statistics from the summed contribution vector (size UnitSums::dimension).
using Finalize = std::function<std::vector<double>(std::span<const double> sums)>;

/// Each unit's contribution as one row of a CSR matrix: unit i adds values[j] at component
/// indices[j] for j in [offsets[i], offsets[i+1]). offsets has n + 1 entries, offsets[0] = 0,
/// non-decreasing; indices below dimension; values finite. The spans must outlive the call.
struct UnitSums {
  std::size_t dimension = 0;
  std::span<const std::uint64_t> offsets;
  std::span<const std::uint32_t> indices;
  std::span<const double> values;
  std::size_t units() const { return offsets.empty() ? 0 : offsets.size() - 1; }
};

enum class NanPolicy { omit, propagate };

struct BootstrapOptions {
  double alpha = 0.05;             ///< intervals at level 1 - alpha, alpha in (0, 1)
  unsigned threads = 0;            ///< 0: std::thread::hardware_concurrency()
  bool keep_distribution = false;  ///< fill BootstrapResult::distribution
  bool bca = true;                 ///< compute the jackknife and BCa intervals
  NanPolicy nan_policy = NanPolicy::omit;
  std::size_t jackknife_max_units = 5000;  ///< leave-one-out jackknife up to this many units
  std::size_t jackknife_groups = 1000;     ///< G of the delete-a-group jackknife above it
  Jackknife jackknife;                     ///< optional cheaper jackknife (bootstrap() only)
};

struct Interval {
  double low = std::numeric_limits<double>::quiet_NaN();
  double high = std::numeric_limits<double>::quiet_NaN();
};

/// One statistic's bootstrap summary.
struct Summary {
  double estimate = std::numeric_limits<double>::quiet_NaN();        ///< at w = 1 (all units once)
  double standard_error = std::numeric_limits<double>::quiet_NaN();  ///< std (ddof 1) of theta*
  double bias = std::numeric_limits<double>::quiet_NaN();            ///< mean(theta*) - estimate
  Interval percentile;
  Interval bca;
  double z0 = std::numeric_limits<double>::quiet_NaN();            ///< BCa bias correction
  double acceleration = std::numeric_limits<double>::quiet_NaN();  ///< BCa acceleration a
  std::size_t finite = 0;             ///< resamples with a finite value (used)
  std::size_t dropped = 0;            ///< resamples with a non-finite value
  std::size_t jackknife_dropped = 0;  ///< jackknife values that were not finite
};

struct BootstrapResult {
  std::size_t units = 0;
  std::size_t resamples = 0;
  std::uint64_t seed = 0;
  double alpha = 0.05;
  std::size_t jackknife_size = 0;   ///< n (leave-one-out), G (groups), or 0 (no BCa)
  std::vector<Summary> statistics;  ///< K entries
  /// With keep_distribution: the B x K resample values, distribution[b * K + k], in resample
  /// order (non-finite values included).
  std::vector<double> distribution;
};

/// The bootstrap of `statistic` over n_units units with B resamples. Throws std::invalid_argument
/// for n_units = 0 or >= 2^32, B = 0, alpha outside (0, 1), a statistic returning no values or a
/// different count than at w = 1; rethrows what the statistic throws (the lowest resample's).
BootstrapResult bootstrap(std::size_t n_units, std::size_t resamples, std::uint64_t seed,
                          const Statistic& statistic, const BootstrapOptions& options = {});

/// The same for a sum-decomposable statistic (the fast path; options.jackknife is not used).
/// Throws std::invalid_argument for malformed CSR input (offsets, an index >= dimension).
BootstrapResult bootstrap_sums(const UnitSums& units, std::size_t resamples, std::uint64_t seed,
                               const Finalize& finalize, const BootstrapOptions& options = {});

/// One statistic of a paired bootstrap: the runs' point estimates and the difference b - a.
struct PairedSummary {
  double estimate_a = std::numeric_limits<double>::quiet_NaN();
  double estimate_b = std::numeric_limits<double>::quiet_NaN();
  Summary difference;  ///< of theta_b - theta_a (estimate, standard error, intervals)
  double p_two_sided = std::numeric_limits<double>::quiet_NaN();  ///< H1: b != a
  double p_decrease = std::numeric_limits<double>::quiet_NaN();   ///< H1: b < a (U above)
  double p_increase = std::numeric_limits<double>::quiet_NaN();   ///< H1: b > a (L above)
};

struct PairedResult {
  std::size_t units = 0;
  std::size_t resamples = 0;
  std::uint64_t seed = 0;
  double alpha = 0.05;
  std::size_t jackknife_size = 0;
  std::vector<PairedSummary> statistics;  ///< K entries
  std::vector<double> distribution;       ///< with keep_distribution: B x K differences b - a
};

/// The paired bootstrap of two runs' statistics over the same n_units units (same K for both).
/// options.jackknife must be empty (it would be ambiguous): pass jackknife_a and jackknife_b
/// (both or neither) for cheaper jackknife values of each run.
PairedResult paired_bootstrap(std::size_t n_units, std::size_t resamples, std::uint64_t seed,
                              const Statistic& statistic_a, const Statistic& statistic_b,
                              const BootstrapOptions& options = {},
                              const Jackknife& jackknife_a = {}, const Jackknife& jackknife_b = {});

/// The paired bootstrap on the fast path: both runs' contributions over the same units.
PairedResult paired_bootstrap_sums(const UnitSums& units_a, const UnitSums& units_b,
                                   std::size_t resamples, std::uint64_t seed,
                                   const Finalize& finalize_a, const Finalize& finalize_b,
                                   const BootstrapOptions& options = {});

/// NumPy's default quantile (method 'linear') of ascending finite values at percent q, as
/// np.percentile(sorted, q): the value at virtual index (n - 1) q / 100, linearly interpolated
/// the way NumPy's _lerp does. NaN for an empty input or a NaN q.
double percentile_sorted(std::span<const double> sorted, double q_percent) noexcept;

/// SciPy's _percentile_of_score: (#{x < score} + #{x <= score}) / (2 n) over ascending values.
double percentile_of_score(std::span<const double> sorted, double score) noexcept;

}  // namespace tally::stats
