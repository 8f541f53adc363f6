// tally::stats (engine/stats): the generator, the bootstrap's intervals, the paired bootstrap, the
// McNemar tests and the gate's verdict.
// Expected values: tests/reference/expected_stats.json, written by tests/reference/stats.py with
// NumPy 2.3.5, SciPy 1.16.3 and statsmodels 0.15.0 (the calls are recorded per case there):
//  - the generator: numpy.random.Philox blocks and the resamples ported to NumPy;
//  - McNemar: statsmodels.stats.contingency_tables.mcnemar(exact=True / exact=False with and
//    without correction), the mid-p value from scipy.stats.binom, and exact big-integer sums;
//  - intervals: np.percentile and scipy.stats._resampling._bca_interval given the bootstrap
//    distribution of the ported resamples; scipy.stats.bootstrap(n_resamples=10000) for a loose,
//    Monte Carlo comparison;
//  - the paired bootstrap's difference distribution, interval and p-values from the same port.
// Coverage and false-alarm simulations: tests/unit/stats_simulation.hpp, with B from
// TALLY_STATS_SIM_B (default 200 and 100 here; bench/stats runs them with B = 1000, release build).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "stats_simulation.hpp"
#include "tally/stats/stats.hpp"

namespace {

namespace st = tally::stats;
using Json = nlohmann::json;

const Json& reference() {
  static const Json j = [] {
    std::ifstream f(std::string(TALLY_SOURCE_DIR) + "/tests/reference/expected_stats.json");
    return Json::parse(f);
  }();
  return j;
}

std::uint64_t u64(const Json& j) { return std::stoull(j.get<std::string>()); }

double rel(double got, double want) {
  if (got == want) return 0;
  return std::fabs(got - want) / std::max(std::fabs(want), std::numeric_limits<double>::min());
}

#define EXPECT_REL(got, want, tol)                                               \
  do {                                                                           \
    const double g_ = (got), w_ = (want);                                        \
    EXPECT_LE(rel(g_, w_), (tol)) << #got << " = " << g_ << ", expected " << w_; \
  } while (0)

// The weighted statistics of stats.py: mean and population standard deviation.
std::vector<double> weighted(const std::vector<double>& x, const std::vector<std::string>& names,
                             std::span<const std::uint32_t> w) {
  double sw = 0, sx = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sw += w[i];
    sx += w[i] * x[i];
  }
  const double m = sx / sw;
  std::vector<double> out;
  for (const auto& s : names) {
    if (s == "mean") {
      out.push_back(m);
    } else {
      double ss = 0;
      for (std::size_t i = 0; i < x.size(); ++i) ss += w[i] * (x[i] - m) * (x[i] - m);
      out.push_back(std::sqrt(ss / sw));
    }
  }
  return out;
}

std::size_t sim_b(std::size_t fallback) {
  const char* e = std::getenv("TALLY_STATS_SIM_B");
  return e != nullptr ? std::stoul(e) : fallback;
}

// ---- the generator -------------------------------------------------------------------------

TEST(StatsRandom, PhiloxKnownAnswer) {
  // Random123's kat_vectors: philox4x64 10, counter 0, key 0.
  const auto w = st::philox4x64({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(w[0], 0x16554d9eca36314cULL);
  EXPECT_EQ(w[1], 0xdb20fe9d672d0fdcULL);
  EXPECT_EQ(w[2], 0xd7e772cee186176bULL);
  EXPECT_EQ(w[3], 0x7e68b68aec7ba23bULL);
}

TEST(StatsRandom, PhiloxEqualsNumpy) {
  for (const auto& c : reference()["philox_blocks"]) {
    SCOPED_TRACE(c["call"].get<std::string>());
    const st::PhiloxKey key{u64(c["key"][0]), u64(c["key"][1])};
    for (std::uint64_t block = 0; block < 3; ++block) {
      const auto w = st::philox4x64({block, 0, 0, 0}, key);
      for (std::size_t j = 0; j < 4; ++j) EXPECT_EQ(w[j], u64(c["words"][block * 4 + j]));
    }
  }
}

TEST(StatsRandom, ResamplesEqualTheNumpyPort) {
  for (const auto& c : reference()["resamples"]) {
    const auto n = c["n"].get<std::size_t>();
    const auto seed = u64(c["seed"]), b = u64(c["b"]);
    SCOPED_TRACE("seed " + std::to_string(seed) + " b " + std::to_string(b) + " n " +
                 std::to_string(n));
    std::vector<std::uint32_t> idx(n), counts(n);
    st::resample_indices(seed, b, idx);
    st::resample_counts(seed, b, counts);
    const auto head = c["indices_head"].get<std::vector<std::uint32_t>>();
    EXPECT_EQ(std::vector<std::uint32_t>(idx.begin(), idx.begin() + head.size()), head);
    const auto chead = c["counts_head"].get<std::vector<std::uint32_t>>();
    EXPECT_EQ(std::vector<std::uint32_t>(counts.begin(), counts.begin() + chead.size()), chead);
    std::uint64_t sum = 0, sq = 0;
    std::vector<std::uint32_t> bincount(n);
    for (auto i : idx) ++bincount[i];
    for (auto k : counts) {
      sum += k;
      sq += std::uint64_t{k} * k;
    }
    EXPECT_EQ(sum, n);
    EXPECT_EQ(sq, c["counts_sum_sq"].get<std::uint64_t>());
    EXPECT_EQ(bincount, counts);  // counts are the multiplicities of the indices
  }
}

TEST(StatsRandom, StreamAndRejectionEqualTheNumpyPort) {
  const auto& c = reference()["uniform_below"];
  st::ResampleStream raw(u64(c["seed"]), u64(c["b"]));
  for (const auto& v : c["u32"]) EXPECT_EQ(raw.next_u32(), v.get<std::uint32_t>());
  // n = 2^31 + 1: about half the draws are rejected.
  st::ResampleStream s(u64(c["seed"]), u64(c["b"]));
  const auto n = c["n"].get<std::uint32_t>();
  for (const auto& v : c["values"]) EXPECT_EQ(s.uniform_below(n), v.get<std::uint32_t>());
}

TEST(StatsRandom, DrawsAreUniform) {
  // 200000 draws over 10 units: every frequency within 5 standard deviations of 0.1.
  std::vector<std::uint64_t> freq(10);
  std::vector<std::uint32_t> idx(10);
  for (std::uint64_t b = 0; b < 20000; ++b) {
    st::resample_indices(5, b, idx);
    for (auto i : idx) ++freq[i];
  }
  const double sd = std::sqrt(200000 * 0.1 * 0.9);
  for (auto f : freq) EXPECT_LT(std::fabs(static_cast<double>(f) - 20000), 5 * sd);
  // A permutation holds every unit once.
  auto p = st::random_permutation(3, 4, 1000);
  std::sort(p.begin(), p.end());
  for (std::uint32_t i = 0; i < 1000; ++i) EXPECT_EQ(p[i], i);
}

// ---- intervals against SciPy -----------------------------------------------------------------

TEST(StatsBootstrap, IntervalsEqualScipyGivenTheSameDistribution) {
  double worst = 0;
  for (const auto& c : reference()["intervals"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto x = c["data"].get<std::vector<double>>();
    const auto names = c["statistics"].get<std::vector<std::string>>();
    st::BootstrapOptions o;
    o.alpha = c["alpha"].get<double>();
    o.keep_distribution = true;
    const auto B = c["B"].get<std::size_t>();
    const auto r = st::bootstrap(
        x.size(), B, u64(c["seed"]),
        [&](std::span<const std::uint32_t> w) { return weighted(x, names, w); }, o);
    ASSERT_EQ(r.statistics.size(), names.size());
    EXPECT_EQ(r.jackknife_size, x.size());
    for (std::size_t k = 0; k < names.size(); ++k) {
      const auto& e = c["results"][k];
      const auto& s = r.statistics[k];
      SCOPED_TRACE(names[k]);
      const auto head = e["distribution_head"].get<std::vector<double>>();
      for (std::size_t b = 0; b < head.size(); ++b)
        EXPECT_REL(r.distribution[b * names.size() + k], head[b], 1e-13);
      EXPECT_REL(s.estimate, e["estimate"].get<double>(), 1e-13);
      EXPECT_REL(s.standard_error, e["standard_error"].get<double>(), 1e-12);
      EXPECT_REL(s.percentile.low, e["percentile"][0].get<double>(), 1e-12);
      EXPECT_REL(s.percentile.high, e["percentile"][1].get<double>(), 1e-12);
      EXPECT_REL(s.bca.low, e["bca"][0].get<double>(), 1e-12);
      EXPECT_REL(s.bca.high, e["bca"][1].get<double>(), 1e-12);
      EXPECT_REL(s.acceleration, e["acceleration"].get<double>(), 1e-10);
      EXPECT_REL(s.z0, e["z0"].get<double>(), 1e-12);
      EXPECT_EQ(s.finite, B);
      EXPECT_EQ(s.dropped, 0U);
      for (double v :
           {rel(s.percentile.low, e["percentile"][0].get<double>()),
            rel(s.percentile.high, e["percentile"][1].get<double>()),
            rel(s.bca.low, e["bca"][0].get<double>()), rel(s.bca.high, e["bca"][1].get<double>())})
        worst = std::max(worst, v);
    }
  }
  std::printf("max relative difference of the intervals to SciPy: %.3g\n", worst);
}

TEST(StatsBootstrap, SumsPathEqualsTheCallablePath) {
  // The mean through bootstrap_sums (rows {x, 1}) and through a callable: the same bits.
  const auto& c = reference()["intervals"][1];
  const auto x = c["data"].get<std::vector<double>>();
  const tally::stats_sim::MeanRows rows(x);
  st::BootstrapOptions o;
  o.keep_distribution = true;
  const auto a = st::bootstrap_sums(rows.sums(), 500, 9, tally::stats_sim::ratio, o);
  const auto b = st::bootstrap(
      x.size(), 500, 9,
      [&](std::span<const std::uint32_t> w) {
        double s0 = 0, s1 = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
          if (w[i] == 0) continue;
          s0 += static_cast<double>(w[i]) * x[i];
          s1 += static_cast<double>(w[i]) * 1.0;
        }
        return std::vector<double>{s0 / s1};
      },
      o);
  EXPECT_EQ(a.distribution, b.distribution);
  EXPECT_EQ(a.statistics[0].percentile.low, b.statistics[0].percentile.low);
  EXPECT_EQ(a.statistics[0].percentile.high, b.statistics[0].percentile.high);
  // The jackknife sums are S - row (other rounding than a fresh sum): equal to 1e-12.
  EXPECT_REL(a.statistics[0].acceleration, b.statistics[0].acceleration, 1e-9);
  EXPECT_REL(a.statistics[0].bca.low, b.statistics[0].bca.low, 1e-12);
  EXPECT_REL(a.statistics[0].bca.high, b.statistics[0].bca.high, 1e-12);
}

TEST(StatsBootstrap, AgreesWithScipyBootstrapWithinMonteCarloError) {
  const auto& ref = reference()["scipy_bootstrap"];
  const auto x = ref["data"].get<std::vector<double>>();
  const tally::stats_sim::MeanRows rows(x);
  const auto r = st::bootstrap_sums(rows.sums(), 10000, 2026, tally::stats_sim::ratio);
  const auto& s = r.statistics[0];
  for (const auto& c : ref["cases"]) {
    SCOPED_TRACE(c["call"].get<std::string>());
    const double se = c["standard_error"].get<double>();
    const st::Interval& i = c["method"] == "BCa" ? s.bca : s.percentile;
    // The 2.5 % quantile of 10000 resamples has a Monte Carlo error of about 0.03 SE.
    EXPECT_NEAR(i.low, c["low"].get<double>(), 0.15 * se);
    EXPECT_NEAR(i.high, c["high"].get<double>(), 0.15 * se);
    EXPECT_NEAR(s.standard_error, se, 0.03 * se);
  }
}

// ---- the paired bootstrap --------------------------------------------------------------------

TEST(StatsPaired, EqualsTheNumpyPort) {
  const auto& c = reference()["paired"];
  const auto a = c["a"].get<std::vector<double>>(), b = c["b"].get<std::vector<double>>();
  const auto mean = [](const std::vector<double>& v) {
    return [&v](std::span<const std::uint32_t> w) {
      double s0 = 0, s1 = 0;
      for (std::size_t i = 0; i < v.size(); ++i) {
        s0 += w[i] * v[i];
        s1 += w[i];
      }
      return std::vector<double>{s0 / s1};
    };
  };
  st::BootstrapOptions o;
  o.alpha = c["alpha"].get<double>();
  const auto B = c["B"].get<std::size_t>();
  const auto r = st::paired_bootstrap(a.size(), B, u64(c["seed"]), mean(a), mean(b), o);
  const auto& p = r.statistics[0];
  EXPECT_REL(p.difference.estimate, c["difference"].get<double>(), 1e-12);
  EXPECT_REL(p.difference.percentile.low, c["percentile"][0].get<double>(), 1e-12);
  EXPECT_REL(p.difference.percentile.high, c["percentile"][1].get<double>(), 1e-12);
  EXPECT_REL(p.difference.standard_error, c["standard_error"].get<double>(), 1e-12);
  EXPECT_EQ(p.p_increase, c["p_increase"].get<double>());
  EXPECT_EQ(p.p_decrease, c["p_decrease"].get<double>());
  EXPECT_EQ(p.p_two_sided, c["p_two_sided"].get<double>());
  EXPECT_DOUBLE_EQ(p.estimate_b - p.estimate_a, p.difference.estimate);
  // The fast path gives the same.
  const tally::stats_sim::MeanRows ra(a), rb(b);
  const auto q = st::paired_bootstrap_sums(ra.sums(), rb.sums(), B, u64(c["seed"]),
                                           tally::stats_sim::ratio, tally::stats_sim::ratio, o);
  EXPECT_EQ(q.statistics[0].p_two_sided, p.p_two_sided);
  EXPECT_REL(q.statistics[0].difference.percentile.low, p.difference.percentile.low, 1e-12);
  EXPECT_REL(q.statistics[0].difference.bca.high, p.difference.bca.high, 1e-12);
}

TEST(StatsPaired, IdenticalRunsAndARealRegression) {
  std::vector<double> a(4000), b(4000);
  st::ResampleStream s(1, 1);
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = tally::stats_sim::uniform01(s) < 0.85 ? 1 : 0;
    // b loses 4 points: wrong on a[i]-right units with probability 0.047.
    b[i] = (a[i] == 1 && tally::stats_sim::uniform01(s) < 0.047) ? 0 : a[i];
  }
  const tally::stats_sim::MeanRows ra(a), rb(b);
  const auto same = st::paired_bootstrap_sums(ra.sums(), ra.sums(), 1000, 3,
                                              tally::stats_sim::ratio, tally::stats_sim::ratio);
  EXPECT_EQ(same.statistics[0].p_two_sided, 1.0);
  EXPECT_EQ(same.statistics[0].difference.estimate, 0.0);
  EXPECT_EQ(st::decide(same.statistics[0], {}).verdict, st::Verdict::within_noise);
  const auto worse = st::paired_bootstrap_sums(ra.sums(), rb.sums(), 1000, 3,
                                               tally::stats_sim::ratio, tally::stats_sim::ratio);
  const auto& w = worse.statistics[0];
  EXPECT_LT(w.difference.estimate, -0.03);
  EXPECT_EQ(w.p_two_sided, 0.0);  // every resample below 0
  EXPECT_EQ(w.p_decrease, 0.0);
  EXPECT_EQ(w.p_increase, 1.0);
  EXPECT_LT(w.difference.percentile.high, 0.0);
  EXPECT_EQ(st::decide(w, {}).verdict, st::Verdict::regressed);
  EXPECT_EQ(st::decide(w, {0.05, st::Direction::lower_is_better, 0}).verdict,
            st::Verdict::improved);
  EXPECT_EQ(st::decide(w, {0.05, st::Direction::higher_is_better, 0.05}).verdict,
            st::Verdict::within_noise);
}

// ---- determinism -----------------------------------------------------------------------------

template <class R>
void expect_same_bits(const R& a, const R& b) {
  ASSERT_EQ(a.distribution.size(), b.distribution.size());
  EXPECT_EQ(0, std::memcmp(a.distribution.data(), b.distribution.data(),
                           a.distribution.size() * sizeof(double)));
}

TEST(StatsBootstrap, SameBitsOnOneTwoAndEightThreads) {
  const auto& c = reference()["intervals"][1];
  const auto x = c["data"].get<std::vector<double>>();
  const std::vector<std::string> names{"mean", "std"};
  const tally::stats_sim::MeanRows rows(x);
  std::vector<st::BootstrapResult> generic, sums;
  std::vector<st::PairedResult> paired;
  for (unsigned t : {1U, 2U, 8U}) {
    st::BootstrapOptions o;
    o.threads = t;
    o.keep_distribution = true;
    generic.push_back(st::bootstrap(
        x.size(), 777, 42, [&](std::span<const std::uint32_t> w) { return weighted(x, names, w); },
        o));
    sums.push_back(st::bootstrap_sums(rows.sums(), 777, 42, tally::stats_sim::ratio, o));
    paired.push_back(st::paired_bootstrap_sums(
        rows.sums(), rows.sums(), 777, 42, tally::stats_sim::ratio,
        [](std::span<const double> s) { return std::vector<double>{s[0] / s[1] + 1e-3}; }, o));
  }
  for (std::size_t i = 1; i < 3; ++i) {
    expect_same_bits(generic[0], generic[i]);
    expect_same_bits(sums[0], sums[i]);
    expect_same_bits(paired[0], paired[i]);
    for (std::size_t k = 0; k < 2; ++k) {
      const auto &a = generic[0].statistics[k], &b = generic[i].statistics[k];
      EXPECT_EQ(0, std::memcmp(&a, &b, sizeof(st::Summary)));
    }
    EXPECT_EQ(0, std::memcmp(&sums[0].statistics[0], &sums[i].statistics[0], sizeof(st::Summary)));
    EXPECT_EQ(paired[0].statistics[0].p_two_sided, paired[i].statistics[0].p_two_sided);
  }
  // Another seed gives other resamples.
  st::BootstrapOptions o;
  o.keep_distribution = true;
  EXPECT_NE(st::bootstrap_sums(rows.sums(), 777, 43, tally::stats_sim::ratio, o).distribution,
            sums[0].distribution);
}

// ---- the jackknife ---------------------------------------------------------------------------

TEST(StatsBootstrap, CallerJackknifeAndGroupedJackknife) {
  std::vector<double> x(6000);
  st::ResampleStream s(8, 8);
  for (auto& v : x) v = -std::log(tally::stats_sim::uniform01(s));  // skewed: a > 0
  const tally::stats_sim::MeanRows rows(x);
  const double total = std::accumulate(x.begin(), x.end(), 0.0);
  st::BootstrapOptions loo;
  loo.jackknife_max_units = x.size();  // leave-one-out at n = 6000
  const auto full = st::bootstrap_sums(rows.sums(), 300, 5, tally::stats_sim::ratio, loo);
  EXPECT_EQ(full.jackknife_size, 6000U);
  // A caller's jackknife (the closed form (S - x_i) / (n - 1)) gives the same acceleration.
  st::BootstrapOptions with_fn = loo;
  with_fn.jackknife = [&](std::span<const std::uint32_t> out) {
    double sx = total;
    for (auto i : out) sx -= x[i];
    return std::vector<double>{sx / static_cast<double>(x.size() - out.size())};
  };
  const auto mean_fn = [&](std::span<const std::uint32_t> w) {
    double s0 = 0, s1 = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      s0 += w[i] * x[i];
      s1 += w[i];
    }
    return std::vector<double>{s0 / s1};
  };
  const auto caller = st::bootstrap(x.size(), 300, 5, mean_fn, with_fn);
  EXPECT_REL(caller.statistics[0].acceleration, full.statistics[0].acceleration, 1e-8);
  // Default above 5000 units: 1000 random groups. The acceleration estimates the same quantity.
  const auto grouped = st::bootstrap_sums(rows.sums(), 300, 5, tally::stats_sim::ratio);
  EXPECT_EQ(grouped.jackknife_size, 1000U);
  const double a = full.statistics[0].acceleration, g = grouped.statistics[0].acceleration;
  EXPECT_GT(a, 0.002);  // skewness 2 / (6 sqrt(6000)) = 0.0043
  EXPECT_NEAR(g, a, 0.35 * a);
  // The grouped BCa interval is close to the leave-one-out one.
  const double se = full.statistics[0].standard_error;
  EXPECT_NEAR(grouped.statistics[0].bca.low, full.statistics[0].bca.low, 0.05 * se);
  EXPECT_NEAR(grouped.statistics[0].bca.high, full.statistics[0].bca.high, 0.05 * se);
  // The generic path groups the same units (same random order): same jackknife values.
  const auto grouped_fn = st::bootstrap(x.size(), 300, 5, mean_fn);
  EXPECT_REL(grouped_fn.statistics[0].acceleration, g, 1e-8);
}

TEST(StatsBootstrap, ConstantStatisticHasZeroAcceleration) {
  const auto r = st::bootstrap(
      50, 200, 1, [](std::span<const std::uint32_t>) { return std::vector<double>{0.75}; });
  const auto& s = r.statistics[0];
  EXPECT_EQ(s.acceleration, 0.0);  // SciPy: NaN (0/0)
  EXPECT_EQ(s.z0, 0.0);
  EXPECT_EQ(s.percentile.low, 0.75);
  EXPECT_EQ(s.bca.low, 0.75);
  EXPECT_EQ(s.bca.high, 0.75);
  EXPECT_EQ(s.standard_error, 0.0);
}

// ---- NaN policy ------------------------------------------------------------------------------

TEST(StatsBootstrap, NanResamplesAreOmittedAndCountedOrPropagated) {
  // The statistic is NaN when unit 0 is absent from the resample ("a class absent").
  std::vector<double> x(40);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>((i * 37) % 11);
  const auto stat = [&](std::span<const std::uint32_t> w) {
    if (w[0] == 0) return std::vector<double>{std::numeric_limits<double>::quiet_NaN(), 1.0};
    double s0 = 0, s1 = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      s0 += w[i] * x[i];
      s1 += w[i];
    }
    return std::vector<double>{s0 / s1, 1.0};
  };
  const std::size_t B = 1000;
  std::size_t absent = 0;
  std::vector<double> finite;
  std::vector<std::uint32_t> w(x.size());
  for (std::size_t b = 0; b < B; ++b) {
    st::resample_counts(77, b, w);
    if (w[0] == 0)
      ++absent;
    else
      finite.push_back(stat(w)[0]);
  }
  ASSERT_GT(absent, 300U);  // (39/40)^40 = 36 %
  std::sort(finite.begin(), finite.end());
  st::BootstrapOptions o;
  o.keep_distribution = true;
  const auto r = st::bootstrap(x.size(), B, 77, stat, o);
  const auto& s = r.statistics[0];
  EXPECT_EQ(s.dropped, absent);
  EXPECT_EQ(s.finite, B - absent);
  EXPECT_EQ(s.jackknife_dropped, 1U);  // leaving unit 0 out
  EXPECT_EQ(s.percentile.low, st::percentile_sorted(finite, 2.5));
  EXPECT_EQ(s.percentile.high, st::percentile_sorted(finite, 97.5));
  EXPECT_TRUE(std::isfinite(s.bca.low) && std::isfinite(s.bca.high));
  EXPECT_EQ(r.statistics[1].dropped, 0U);
  EXPECT_TRUE(std::isnan(r.distribution[0 * 2]) || std::isfinite(r.distribution[0]));
  o.nan_policy = st::NanPolicy::propagate;
  const auto p = st::bootstrap(x.size(), B, 77, stat, o);
  EXPECT_EQ(p.statistics[0].dropped, absent);
  EXPECT_TRUE(std::isnan(p.statistics[0].percentile.low));
  EXPECT_TRUE(std::isnan(p.statistics[0].bca.high));
  EXPECT_TRUE(std::isnan(p.statistics[0].standard_error));
  EXPECT_EQ(p.statistics[1].percentile.low, 1.0);  // the other statistic is unaffected
  // A NaN point estimate: nothing to give an interval for.
  const auto nan_all = st::bootstrap(10, 100, 1, [](std::span<const std::uint32_t>) {
    return std::vector<double>{std::numeric_limits<double>::quiet_NaN()};
  });
  EXPECT_TRUE(std::isnan(nan_all.statistics[0].percentile.low));
  EXPECT_EQ(nan_all.statistics[0].dropped, 100U);
  EXPECT_EQ(st::decide(st::PairedSummary{}, {}).verdict, st::Verdict::undetermined);
}

// ---- bad input -------------------------------------------------------------------------------

TEST(StatsBootstrap, BadInputThrows) {
  const st::Statistic one = [](std::span<const std::uint32_t>) { return std::vector<double>{1}; };
  EXPECT_THROW(st::bootstrap(0, 10, 1, one), std::invalid_argument);
  EXPECT_THROW(st::bootstrap(10, 0, 1, one), std::invalid_argument);
  EXPECT_THROW(st::bootstrap(std::size_t{1} << 32, 10, 1, one), std::invalid_argument);
  st::BootstrapOptions o;
  o.alpha = 1.0;
  EXPECT_THROW(st::bootstrap(10, 10, 1, one, o), std::invalid_argument);
  EXPECT_THROW(st::bootstrap(10, 10, 1, st::Statistic{}), std::invalid_argument);
  EXPECT_THROW(st::bootstrap(10, 10, 1,
                             [](std::span<const std::uint32_t>) { return std::vector<double>{}; }),
               std::invalid_argument);
  // A resample returning another count than the point estimate.
  EXPECT_THROW(st::bootstrap(10, 10, 1,
                             [](std::span<const std::uint32_t> w) {
                               return std::vector<double>(w[0] == 1 && w[1] == 1 ? 1 : 2, 0.0);
                             }),
               std::invalid_argument);
  // What the statistic throws reaches the caller.
  EXPECT_THROW(st::bootstrap(10, 10, 1,
                             [](std::span<const std::uint32_t> w) {
                               if (w[0] != 1) throw std::runtime_error("boom");
                               return std::vector<double>{1};
                             }),
               std::runtime_error);
  const std::vector<std::uint64_t> off{0, 1, 3};
  const std::vector<std::uint32_t> idx{0, 1, 2};
  const std::vector<double> val{1, 2, 3};
  EXPECT_THROW(st::bootstrap_sums({2, off, idx, val}, 10, 1, tally::stats_sim::ratio),
               std::invalid_argument);  // index 2 >= dimension 2
  const std::vector<std::uint64_t> bad_off{0, 2, 1};
  EXPECT_THROW(st::bootstrap_sums({3, bad_off, idx, val}, 10, 1, tally::stats_sim::ratio),
               std::invalid_argument);
  const std::vector<std::uint64_t> off2{0, 1};
  EXPECT_THROW(st::paired_bootstrap_sums({3, off, idx, val}, {3, off2, idx, val}, 10, 1,
                                         tally::stats_sim::ratio, tally::stats_sim::ratio),
               std::invalid_argument);  // different unit counts
  st::BootstrapOptions with_jack;
  with_jack.jackknife = [](std::span<const std::uint32_t>) { return std::vector<double>{1}; };
  EXPECT_THROW(st::paired_bootstrap(10, 10, 1, one, one, with_jack), std::invalid_argument);
  EXPECT_THROW(st::decide(0.1, 0.01, {0.0, st::Direction::higher_is_better, 0}),
               std::invalid_argument);
  EXPECT_THROW(st::decide(0.1, 0.01, {0.05, st::Direction::higher_is_better, -1}),
               std::invalid_argument);
}

// ---- quantile helpers ------------------------------------------------------------------------

TEST(StatsBootstrap, PercentileIsNumpysLinearQuantile) {
  const std::vector<double> v{1, 2, 4, 8, 16};
  EXPECT_EQ(st::percentile_sorted(v, 0), 1);
  EXPECT_EQ(st::percentile_sorted(v, 100), 16);
  EXPECT_EQ(st::percentile_sorted(v, 50), 4);
  EXPECT_EQ(st::percentile_sorted(v, 62.5), 6);  // index 2.5
  EXPECT_EQ(st::percentile_sorted(v, 10), 1.4);  // index 0.4: 1 + 1 * 0.4
  EXPECT_TRUE(std::isnan(st::percentile_sorted({}, 50)));
  EXPECT_EQ(st::percentile_of_score(v, 4), 0.5);  // (2 + 3) / 10
  EXPECT_EQ(st::percentile_of_score(v, 0), 0.0);
  EXPECT_EQ(st::percentile_of_score(v, 20), 1.0);
  EXPECT_EQ(st::ndtri(0.5), 0.0);
  EXPECT_NEAR(st::ndtri(0.975), 1.959963984540054, 1e-15);
  EXPECT_NEAR(st::ndtri(1e-10), -6.361340902404056, 1e-13);
  EXPECT_NEAR(st::ndtr(-1.959963984540054), 0.025, 1e-16);
  EXPECT_EQ(st::ndtri(0.0), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(st::ndtri(1.5)));
  for (double p : {1e-300, 1e-20, 1e-5, 0.01, 0.3, 0.5, 0.7, 0.99, 1 - 1e-12})
    EXPECT_LE(rel(st::ndtr(st::ndtri(p)), p), 1e-13) << p;
}

// ---- McNemar ---------------------------------------------------------------------------------

TEST(StatsMcNemar, EqualsStatsmodelsAndTheExactSums) {
  double worst_sm = 0, worst_exact = 0, worst_chi2 = 0, worst_mid = 0;
  int cases = 0;
  for (const auto& c : reference()["mcnemar"]) {
    const auto b = c["b"].get<std::uint64_t>(), cc = c["c"].get<std::uint64_t>();
    SCOPED_TRACE("b = " + std::to_string(b) + ", c = " + std::to_string(cc));
    ++cases;
    const auto ex = st::mcnemar_exact(b, cc);
    const double sm = c["exact_pvalue"].get<double>(), big = c["exact_bigint_pvalue"].get<double>();
    EXPECT_EQ(ex.statistic, c["exact_statistic"].get<double>());
    EXPECT_EQ(st::mcnemar_exact(cc, b).pvalue, ex.pvalue);
    // The exact sums are the truth; statsmodels (SciPy's binom.cdf, Boost's ibeta) is off by up
    // to 4.3e-12 in the far tail at b + c = 1e6: the test against it allows its own error.
    const double sm_err = rel(sm, big);
    if (big >= std::numeric_limits<double>::min()) {
      EXPECT_LE(rel(ex.pvalue, big), 2e-15);
      EXPECT_LE(rel(ex.pvalue, sm), std::max(1e-12, 1.01 * sm_err + 2e-15));
      worst_exact = std::max(worst_exact, rel(ex.pvalue, big));
      worst_sm = std::max(worst_sm, rel(ex.pvalue, sm));
    } else {
      // Subnormal or 0: the same double (correctly rounded), within 2 subnormal steps of SciPy.
      EXPECT_EQ(ex.pvalue, big);
      EXPECT_LE(std::fabs(ex.pvalue - sm), 2 * std::numeric_limits<double>::denorm_min());
    }
    const auto mid = st::mcnemar_midp(b, cc);
    const double mid_big = c["midp_bigint_pvalue"].get<double>();
    if (mid_big >= std::numeric_limits<double>::min()) {
      EXPECT_LE(rel(mid.pvalue, mid_big), 2e-15);
      const double mid_sm = c["midp_pvalue"].get<double>();
      EXPECT_LE(rel(mid.pvalue, mid_sm), std::max(1e-12, 1.01 * rel(mid_sm, mid_big) + 2e-15));
      worst_mid = std::max(worst_mid, rel(mid.pvalue, mid_big));
    } else {
      EXPECT_EQ(mid.pvalue, mid_big);
    }
    if (b + cc == 0) {
      EXPECT_EQ(ex.pvalue, 1.0);
      EXPECT_EQ(st::mcnemar_chi2(b, cc).pvalue, 1.0);  // statsmodels: NaN (0/0)
      continue;
    }
    for (bool corr : {true, false}) {
      const auto ch = st::mcnemar_chi2(b, cc, corr);
      const std::string key = corr ? "chi2" : "chi2_nocorr";
      EXPECT_EQ(ch.statistic, c[key + "_statistic"].get<double>());
      const double want = c[key + "_pvalue"].get<double>();
      if (want >= 1e-300) {
        EXPECT_LE(rel(ch.pvalue, want), 1e-12) << key;
        worst_chi2 = std::max(worst_chi2, rel(ch.pvalue, want));
      } else {
        EXPECT_LE(std::fabs(ch.pvalue - want), 1e-300) << key;
      }
    }
  }
  std::printf(
      "%d (b, c) cases; exact test: max rel diff %.3g to statsmodels, %.3g to the exact "
      "sums; mid-p %.3g to the exact sums; chi-square %.3g to statsmodels\n",
      cases, worst_sm, worst_exact, worst_mid, worst_chi2);
}

TEST(StatsMcNemar, SmallCasesByHand) {
  // b + c = 10, min 1: 2 * (1 + 10) / 1024.
  EXPECT_DOUBLE_EQ(st::mcnemar_exact(1, 9).pvalue, 22.0 / 1024);
  EXPECT_DOUBLE_EQ(st::mcnemar_midp(1, 9).pvalue, 12.0 / 1024);
  EXPECT_EQ(st::mcnemar_exact(5, 5).pvalue, 1.0);
  EXPECT_EQ(st::mcnemar_exact(0, 0).pvalue, 1.0);
  EXPECT_EQ(st::mcnemar_exact(0, 1).pvalue, 1.0);
  EXPECT_EQ(st::mcnemar_exact(0, 1000).pvalue, std::ldexp(1.0, -999));
  EXPECT_EQ(st::mcnemar_exact(0, 1070).pvalue, std::ldexp(1.0, -1069));  // subnormal, exact
  EXPECT_EQ(st::mcnemar_exact(0, 1000000).pvalue, 0.0);                  // 2^-999999
  EXPECT_DOUBLE_EQ(st::binomial_cdf_half(3, 10), 176.0 / 1024);
  EXPECT_DOUBLE_EQ(st::binomial_cdf_half(6, 10), 1 - 176.0 / 1024);
  EXPECT_EQ(st::binomial_cdf_half(10, 10), 1.0);
  EXPECT_DOUBLE_EQ(st::binomial_pmf_half(5, 10), 252.0 / 1024);
  EXPECT_EQ(st::binomial_pmf_half(11, 10), 0.0);
}

// ---- the verdict -----------------------------------------------------------------------------

TEST(StatsGate, VerdictTable) {
  using st::Direction;
  using st::Verdict;
  struct Row {
    double diff, p;
    Direction dir;
    double min_effect;
    Verdict want;
  };
  const Row rows[] = {
      {-0.01, 0.001, Direction::higher_is_better, 0, Verdict::regressed},
      {+0.01, 0.001, Direction::higher_is_better, 0, Verdict::improved},
      {-0.01, 0.2, Direction::higher_is_better, 0, Verdict::within_noise},
      {-0.01, 0.05, Direction::higher_is_better, 0, Verdict::within_noise},  // p < alpha, strict
      {-0.01, 0.001, Direction::lower_is_better, 0, Verdict::improved},      // an error fell
      {+0.01, 0.001, Direction::lower_is_better, 0, Verdict::regressed},
      {-0.01, 0.001, Direction::higher_is_better, 0.01, Verdict::within_noise},  // not beyond
      {-0.011, 0.001, Direction::higher_is_better, 0.01, Verdict::regressed},
      {std::nan(""), 0.001, Direction::higher_is_better, 0, Verdict::undetermined},
      {-0.01, std::nan(""), Direction::higher_is_better, 0, Verdict::undetermined},
  };
  for (const auto& r : rows) {
    const auto d = st::decide(r.diff, r.p, {0.05, r.dir, r.min_effect});
    EXPECT_EQ(d.verdict, r.want) << r.diff << " " << r.p << " " << r.min_effect;
  }
  const auto d = st::decide(-0.01, 0.001, {0.05, Direction::lower_is_better, 0});
  EXPECT_EQ(d.change, 0.01);
  EXPECT_TRUE(d.significant);
  EXPECT_EQ(st::to_string(st::Verdict::within_noise), "within noise");
}

// ---- simulations -----------------------------------------------------------------------------

TEST(StatsSimulation, CoverageOfNinetyFivePercentIntervals) {
  // B = 200 under the sanitizers (about 40 s of CPU); B = 100 gives 0.931-0.945, at the band's
  // edge: the percentile interval of few resamples is a little short.
  const std::size_t B = sim_b(200);
  const auto normal = tally::stats_sim::coverage(0, 1000, 200, 0, B, 101, 2);
  const auto bern = tally::stats_sim::coverage(1, 1000, 500, 0.9, B, 202, 2);
  std::printf(
      "coverage over 1000 datasets, B = %zu: mean of 200 normals: percentile %.3f, BCa "
      "%.3f; accuracy of 500 Bernoulli(0.9): percentile %.3f, BCa %.3f\n",
      B, normal.percentile_rate(), normal.bca_rate(), bern.percentile_rate(), bern.bca_rate());
  for (double rate :
       {normal.percentile_rate(), normal.bca_rate(), bern.percentile_rate(), bern.bca_rate()}) {
    EXPECT_GE(rate, 0.93);
    EXPECT_LE(rate, 0.97);
  }
}

TEST(StatsSimulation, FalseAlarmRateOfThePairedTestsIsAboutAlpha) {
  const std::size_t B = sim_b(100);
  const auto f = tally::stats_sim::false_alarm(1000, 500, 0.85, 0.7, B, 303, 2);
  std::printf(
      "H0, 1000 datasets, B = %zu: rejected at alpha 0.05 by the paired bootstrap %.3f, "
      "McNemar exact %.3f, mid-p %.3f; verdict regressed %.3f, improved %.3f\n",
      B, f.rate(f.bootstrap), f.rate(f.mcnemar), f.rate(f.midp), f.rate(f.regressed),
      f.rate(f.improved));
  EXPECT_GE(f.rate(f.bootstrap), 0.03);
  EXPECT_LE(f.rate(f.bootstrap), 0.075);
  EXPECT_LE(f.rate(f.mcnemar), 0.065);  // the exact test is conservative
  EXPECT_LE(f.rate(f.midp), 0.075);
  EXPECT_LE(f.rate(f.regressed), 0.045);  // about alpha / 2
  EXPECT_EQ(f.bootstrap, f.regressed + f.improved);
}

}  // namespace
