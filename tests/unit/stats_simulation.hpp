// Simulations of tally::stats' intervals and paired tests (issue 22's validation): coverage of the
// 95 % percentile and BCa intervals over simulated datasets, and the false-alarm rate of the paired
// tests when both runs have the same distribution. Shared by tests/unit/test_stats.cpp (a smaller
// B under the sanitizers) and bench/stats/stats_bench.cpp (B = 1000, release build), so that the
// closing numbers come from the same code. Standard C++ and tally_stats only.
//
// Dataset d of a simulation draws its data from the Philox stream (sim_seed, d) (uniforms from
// 32-bit draws, normals by Box-Muller) and bootstraps with the seed sim_seed * 1000003 + d + 1.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <vector>

#include "tally/stats/stats.hpp"

namespace tally::stats_sim {

inline double uniform01(stats::ResampleStream& s) {
  return (static_cast<double>(s.next_u32()) + 0.5) / 4294967296.0;
}

inline double normal(stats::ResampleStream& s) {
  const double u1 = uniform01(s), u2 = uniform01(s);
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
}

inline std::uint64_t boot_seed(std::uint64_t sim_seed, std::size_t d) {
  return sim_seed * 1000003ULL + d + 1;
}

// Units with rows {x_i, 1}: the weighted mean is s[0] / s[1].
struct MeanRows {
  std::vector<std::uint64_t> offsets;
  std::vector<std::uint32_t> indices;
  std::vector<double> values;
  explicit MeanRows(const std::vector<double>& x) {
    offsets.push_back(0);
    for (double v : x) {
      indices.push_back(0);
      values.push_back(v);
      indices.push_back(1);
      values.push_back(1.0);
      offsets.push_back(indices.size());
    }
  }
  stats::UnitSums sums() const { return {2, offsets, indices, values}; }
};

inline std::vector<double> ratio(std::span<const double> s) { return {s[0] / s[1]}; }

struct Coverage {
  std::size_t datasets = 0, percentile = 0, bca = 0;
  double percentile_rate() const {
    return static_cast<double>(percentile) / static_cast<double>(datasets);
  }
  double bca_rate() const { return static_cast<double>(bca) / static_cast<double>(datasets); }
};

// kind 0: the mean of n N(1, 2^2) values (true value 1); kind 1: the accuracy of n Bernoulli(p)
// outcomes (true value p); kind 2: the mean of n Exponential(1) values (true value 1, skewed).
inline Coverage coverage(int kind, std::size_t datasets, std::size_t n, double p, std::size_t B,
                         std::uint64_t sim_seed, unsigned threads, double alpha = 0.05) {
  Coverage c;
  stats::BootstrapOptions o;
  o.alpha = alpha;
  o.threads = threads;
  const double truth = kind == 1 ? p : 1.0;
  for (std::size_t d = 0; d < datasets; ++d) {
    stats::ResampleStream s(sim_seed, d);
    std::vector<double> x(n);
    for (auto& v : x) {
      if (kind == 0)
        v = 1.0 + 2.0 * normal(s);
      else if (kind == 1)
        v = uniform01(s) < p ? 1.0 : 0.0;
      else
        v = -std::log(uniform01(s));
    }
    const MeanRows rows(x);
    const auto r = stats::bootstrap_sums(rows.sums(), B, boot_seed(sim_seed, d), ratio, o);
    const auto& st = r.statistics[0];
    ++c.datasets;
    if (st.percentile.low <= truth && truth <= st.percentile.high) ++c.percentile;
    if (st.bca.low <= truth && truth <= st.bca.high) ++c.bca;
  }
  return c;
}

struct FalseAlarm {
  std::size_t datasets = 0, bootstrap = 0, mcnemar = 0, midp = 0, regressed = 0, improved = 0;
  double rate(std::size_t k) const {
    return static_cast<double>(k) / static_cast<double>(datasets);
  }
};

// Two runs with the same accuracy p on n units, correlated as real runs are: run b keeps run a's
// outcome with probability `keep`, else draws its own. Counts the datasets where each test
// rejects H0 at alpha (two-sided), and the gate's verdicts.
inline FalseAlarm false_alarm(std::size_t datasets, std::size_t n, double p, double keep,
                              std::size_t B, std::uint64_t sim_seed, unsigned threads,
                              double alpha = 0.05) {
  FalseAlarm f;
  stats::BootstrapOptions o;
  o.alpha = alpha;
  o.threads = threads;
  o.bca = false;
  for (std::size_t d = 0; d < datasets; ++d) {
    stats::ResampleStream s(sim_seed, d);
    std::vector<double> a(n), b(n);
    std::uint64_t only_a = 0, only_b = 0;
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = uniform01(s) < p ? 1.0 : 0.0;
      b[i] = uniform01(s) < keep ? a[i] : (uniform01(s) < p ? 1.0 : 0.0);
      if (a[i] > b[i]) ++only_a;
      if (b[i] > a[i]) ++only_b;
    }
    const MeanRows ra(a), rb(b);
    const auto r = stats::paired_bootstrap_sums(ra.sums(), rb.sums(), B, boot_seed(sim_seed, d),
                                                ratio, ratio, o);
    const auto& st = r.statistics[0];
    ++f.datasets;
    if (st.p_two_sided < alpha) ++f.bootstrap;
    if (stats::mcnemar_exact(only_a, only_b).pvalue < alpha) ++f.mcnemar;
    if (stats::mcnemar_midp(only_a, only_b).pvalue < alpha) ++f.midp;
    const auto v = stats::decide(st, {alpha, stats::Direction::higher_is_better, 0.0}).verdict;
    if (v == stats::Verdict::regressed) ++f.regressed;
    if (v == stats::Verdict::improved) ++f.improved;
  }
  return f;
}

}  // namespace tally::stats_sim
