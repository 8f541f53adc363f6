#include "tally/stats/bootstrap.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>

#include "tally/sdk/parallel.hpp"
#include "tally/stats/normal.hpp"
#include "tally/stats/random.hpp"

namespace tally::stats {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// The stream that orders the units into jackknife groups (no resample uses it: B < 2^64 - 1).
constexpr std::uint64_t kGroupStream = std::numeric_limits<std::uint64_t>::max();

[[noreturn]] void fail(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string("tally::stats::") + fn + ": " + what);
}

void check_common(const char* fn, std::size_t n, std::size_t b, const BootstrapOptions& o) {
  if (n == 0) fail(fn, "the number of units must be at least 1, got 0");
  if (n > std::numeric_limits<std::uint32_t>::max())
    fail(fn, "the number of units must be below 2^32, got " + std::to_string(n));
  if (b == 0) fail(fn, "the number of resamples must be at least 1, got 0");
  if (!(o.alpha > 0 && o.alpha < 1))
    fail(fn, "alpha must lie in (0, 1), got " + std::to_string(o.alpha));
  if (o.bca && o.jackknife_groups == 0 && n > o.jackknife_max_units)
    fail(fn, "jackknife_groups must be at least 1");
}

unsigned thread_count(unsigned requested, std::size_t tasks) {
  unsigned t = requested != 0 ? requested : std::max(1U, std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::min<std::size_t>(t, std::max<std::size_t>(tasks, 1)));
}

void check_size(const char* fn, const char* what, std::size_t got, std::size_t k) {
  if (got != k)
    fail(fn, std::string(what) + " returned " + std::to_string(got) + " values, but " +
                 std::to_string(k) + " at the point estimate");
}

// Runs the B resamples: make_worker() builds one worker per thread, worker(w, out) writes the K
// values of the resample with multiplicities w. Resample b's values land at dist[b * K].
template <class MakeWorker>
std::vector<double> run_resamples(std::size_t n, std::size_t B, std::uint64_t seed, std::size_t K,
                                  unsigned threads, MakeWorker&& make_worker) {
  std::vector<double> dist(B * K);
  const unsigned T = thread_count(threads, B);
  parallel_for(T, static_cast<int>(T), [&](std::size_t part) {
    auto worker = make_worker();
    std::vector<std::uint32_t> w(n);
    for (std::size_t b = B * part / T; b < B * (part + 1) / T; ++b) {
      resample_counts(seed, b, w);
      worker(std::span<const std::uint32_t>(w), std::span<double>(dist).subspan(b * K, K));
    }
  });
  return dist;
}

// The jackknife groups: n single units, or G groups of a random order of the units.
struct Groups {
  std::vector<std::uint32_t> order;  // the units, group by group
  std::vector<std::size_t> start;    // group g: order[start[g] .. start[g + 1])
  std::size_t size() const { return start.size() - 1; }
  std::span<const std::uint32_t> group(std::size_t g) const {
    return std::span<const std::uint32_t>(order).subspan(start[g], start[g + 1] - start[g]);
  }
};

Groups make_groups(std::size_t n, std::uint64_t seed, const BootstrapOptions& o) {
  Groups g;
  if (n <= o.jackknife_max_units) {
    g.order.resize(n);
    for (std::size_t i = 0; i < n; ++i) g.order[i] = static_cast<std::uint32_t>(i);
    g.start.resize(n + 1);
    for (std::size_t i = 0; i <= n; ++i) g.start[i] = i;
    return g;
  }
  const std::size_t G = std::min(o.jackknife_groups, n);
  g.order = random_permutation(seed, kGroupStream, n);
  g.start.resize(G + 1);
  for (std::size_t i = 0; i <= G; ++i) g.start[i] = n * i / G;
  return g;
}

// The G x K jackknife values: make_eval() builds one evaluator per thread, eval(group) returns the
// K values without the group's units.
template <class MakeEval>
std::vector<double> run_jackknife(const char* fn, const Groups& groups, std::size_t K,
                                  unsigned threads, MakeEval&& make_eval) {
  const std::size_t G = groups.size();
  std::vector<double> jack(G * K);
  const unsigned T = thread_count(threads, G);
  parallel_for(T, static_cast<int>(T), [&](std::size_t part) {
    auto eval = make_eval();
    for (std::size_t g = G * part / T; g < G * (part + 1) / T; ++g) {
      const std::vector<double> v = eval(groups.group(g));
      check_size(fn, "the jackknife", v.size(), K);
      std::copy(v.begin(), v.end(), jack.begin() + static_cast<std::ptrdiff_t>(g * K));
    }
  });
  return jack;
}

// SciPy's acceleration from the jackknife values (non-finite ones left out under omit).
double acceleration(std::vector<double> jack, NanPolicy policy, std::size_t& dropped) {
  const auto finite_end =
      std::stable_partition(jack.begin(), jack.end(), [](double v) { return std::isfinite(v); });
  dropped = static_cast<std::size_t>(jack.end() - finite_end);
  if (dropped > 0 && policy == NanPolicy::propagate) return kNaN;
  jack.erase(finite_end, jack.end());
  const auto n = static_cast<double>(jack.size());
  if (jack.empty()) return kNaN;
  double mean = 0;
  for (double v : jack) mean += v;
  mean /= n;
  double s2 = 0, s3 = 0;
  for (double v : jack) {
    const double u = (n - 1) * (mean - v);
    s2 += u * u;
    s3 += u * u * u;
  }
  if (s2 == 0) return 0.0;  // a constant jackknife: no skewness to correct (SciPy: 0/0 = NaN)
  const double nums = s3 / (n * n * n), dens = s2 / (n * n);
  return 1.0 / 6.0 * nums / std::pow(dens, 1.5);
}

// The sorted finite values of column k of a B x K table; `dropped` counts the others.
std::vector<double> finite_sorted(const std::vector<double>& dist, std::size_t B, std::size_t K,
                                  std::size_t k, std::size_t& dropped) {
  std::vector<double> v;
  v.reserve(B);
  for (std::size_t b = 0; b < B; ++b) {
    const double x = dist[b * K + k];
    if (std::isfinite(x)) v.push_back(x);
  }
  dropped = B - v.size();
  std::sort(v.begin(), v.end());
  return v;
}

Summary summarize(double estimate, const std::vector<double>& sorted, std::size_t dropped,
                  const std::vector<double>* jack, const BootstrapOptions& o) {
  Summary s;
  s.estimate = estimate;
  s.finite = sorted.size();
  s.dropped = dropped;
  std::size_t jack_dropped = 0;
  if (jack != nullptr) s.acceleration = acceleration(*jack, o.nan_policy, jack_dropped);
  s.jackknife_dropped = jack_dropped;
  if (!std::isfinite(estimate)) return s;
  if (dropped > 0 && o.nan_policy == NanPolicy::propagate) return s;
  if (sorted.size() < 2) return s;
  const auto m = static_cast<double>(sorted.size());
  double mean = 0;
  for (double v : sorted) mean += v;
  mean /= m;
  double ss = 0;
  for (double v : sorted) ss += (v - mean) * (v - mean);
  s.standard_error = std::sqrt(ss / (m - 1));
  s.bias = mean - estimate;
  const double tail = o.alpha / 2;
  s.percentile = {percentile_sorted(sorted, tail * 100),
                  percentile_sorted(sorted, (1 - tail) * 100)};
  if (jack != nullptr) {
    s.z0 = ndtri(percentile_of_score(sorted, estimate));
    const double a = s.acceleration;
    const double z_alpha = ndtri(tail), z_1alpha = -z_alpha;
    const double num1 = s.z0 + z_alpha, num2 = s.z0 + z_1alpha;
    const double alpha_1 = ndtr(s.z0 + num1 / (1 - a * num1));
    const double alpha_2 = ndtr(s.z0 + num2 / (1 - a * num2));
    s.bca = {percentile_sorted(sorted, alpha_1 * 100), percentile_sorted(sorted, alpha_2 * 100)};
  }
  return s;
}

// Everything a summary needs, from either path.
struct Evaluated {
  std::size_t K = 0;
  std::vector<double> estimate;  // K
  std::vector<double> dist;      // B x K
  std::vector<double> jack;      // G x K, empty without BCa
  std::size_t G = 0;
};

std::vector<Summary> summaries(const Evaluated& e, std::size_t B, const BootstrapOptions& o,
                               std::vector<std::vector<double>>* sorted_out = nullptr) {
  std::vector<Summary> out;
  for (std::size_t k = 0; k < e.K; ++k) {
    std::size_t dropped = 0;
    std::vector<double> sorted = finite_sorted(e.dist, B, e.K, k, dropped);
    std::vector<double> jack;
    if (e.G > 0) {
      jack.resize(e.G);
      for (std::size_t g = 0; g < e.G; ++g) jack[g] = e.jack[g * e.K + k];
    }
    out.push_back(summarize(e.estimate[k], sorted, dropped, e.G > 0 ? &jack : nullptr, o));
    if (sorted_out != nullptr) sorted_out->push_back(std::move(sorted));
  }
  return out;
}

void check_sums(const char* fn, const UnitSums& u) {
  if (u.offsets.size() < 2) fail(fn, "offsets must hold n + 1 >= 2 entries");
  if (u.offsets[0] != 0) fail(fn, "offsets[0] must be 0");
  const std::size_t n = u.units();
  for (std::size_t i = 0; i < n; ++i)
    if (u.offsets[i + 1] < u.offsets[i])
      fail(fn, "offsets must not decrease (unit " + std::to_string(i) + ")");
  if (u.offsets[n] != u.indices.size() || u.indices.size() != u.values.size())
    fail(fn, "offsets[n], indices and values must have the same length");
  for (double v : u.values)
    if (!std::isfinite(v)) fail(fn, "the values must be finite");
  for (std::uint32_t j : u.indices)
    if (j >= u.dimension)
      fail(fn, "a component index " + std::to_string(j) + " is not below the dimension " +
                   std::to_string(u.dimension));
}

// sums = sum_i w[i] * row_i (units in index order); w empty: every weight 1.
void accumulate(const UnitSums& u, std::span<const std::uint32_t> w, std::vector<double>& sums) {
  std::fill(sums.begin(), sums.end(), 0.0);
  const std::size_t n = u.units();
  const std::uint64_t* off = u.offsets.data();
  const std::uint32_t* idx = u.indices.data();
  const double* val = u.values.data();
  double* s = sums.data();
  if (w.empty()) {
    for (std::size_t j = 0; j < off[n]; ++j) s[idx[j]] += val[j];
    return;
  }
  // No branch on w[i] == 0 (a third of the units, at random: mispredicted): adding 0 * v = +0
  // leaves a sum as it is (values are finite, checked).
  for (std::size_t i = 0; i < n; ++i) {
    const double x = w[i];
    for (std::uint64_t j = off[i]; j < off[i + 1]; ++j) s[idx[j]] += x * val[j];
  }
}

// The jackknife sums: S minus the rows of the group's units.
void subtract_group(const UnitSums& u, std::span<const std::uint32_t> group,
                    std::vector<double>& sums) {
  for (std::uint32_t i : group)
    for (std::uint64_t j = u.offsets[i]; j < u.offsets[i + 1]; ++j)
      sums[u.indices[j]] -= u.values[j];
}

template <class T>
BootstrapResult make_result(std::size_t n, std::size_t B, std::uint64_t seed,
                            const BootstrapOptions& o, T&& e) {
  BootstrapResult r;
  r.units = n;
  r.resamples = B;
  r.seed = seed;
  r.alpha = o.alpha;
  r.jackknife_size = e.G;
  r.statistics = summaries(e, B, o);
  if (o.keep_distribution) r.distribution = std::move(e.dist);
  return r;
}

// Paired: the difference's summaries plus the p-values from its sorted finite resamples.
PairedResult make_paired(std::size_t n, std::size_t B, std::uint64_t seed,
                         const BootstrapOptions& o, Evaluated&& diff,
                         const std::vector<double>& est_a, const std::vector<double>& est_b) {
  PairedResult r;
  r.units = n;
  r.resamples = B;
  r.seed = seed;
  r.alpha = o.alpha;
  r.jackknife_size = diff.G;
  std::vector<std::vector<double>> sorted;
  const std::vector<Summary> s = summaries(diff, B, o, &sorted);
  for (std::size_t k = 0; k < diff.K; ++k) {
    PairedSummary p;
    p.estimate_a = est_a[k];
    p.estimate_b = est_b[k];
    p.difference = s[k];
    const bool usable = std::isfinite(s[k].estimate) && !sorted[k].empty() &&
                        !(s[k].dropped > 0 && o.nan_policy == NanPolicy::propagate);
    if (usable) {
      const std::vector<double>& v = sorted[k];
      const auto below = static_cast<double>(std::lower_bound(v.begin(), v.end(), 0.0) - v.begin());
      const auto upto = static_cast<double>(std::upper_bound(v.begin(), v.end(), 0.0) - v.begin());
      const auto m = static_cast<double>(v.size());
      p.p_increase = (below + upto) / (2 * m);              // L
      p.p_decrease = ((m - upto) + (m - below)) / (2 * m);  // U
      p.p_two_sided = std::min(1.0, 2 * std::min(p.p_increase, p.p_decrease));
    }
    r.statistics.push_back(p);
  }
  if (o.keep_distribution) r.distribution = std::move(diff.dist);
  return r;
}

}  // namespace

double percentile_sorted(std::span<const double> sorted, double q_percent) noexcept {
  const std::size_t n = sorted.size();
  if (n == 0 || std::isnan(q_percent)) return kNaN;
  const double q = q_percent / 100;
  const double vi = static_cast<double>(n - 1) * q;
  if (vi >= static_cast<double>(n - 1)) return sorted[n - 1];
  if (vi < 0) return sorted[0];
  const double prev = std::floor(vi);
  const auto i = static_cast<std::size_t>(prev);
  const double g = vi - prev;
  const double a = sorted[i], b = sorted[i + 1];
  const double d = b - a;
  return g >= 0.5 ? b - d * (1 - g) : a + d * g;
}

double percentile_of_score(std::span<const double> sorted, double score) noexcept {
  if (sorted.empty()) return kNaN;
  const auto below =
      static_cast<double>(std::lower_bound(sorted.begin(), sorted.end(), score) - sorted.begin());
  const auto upto =
      static_cast<double>(std::upper_bound(sorted.begin(), sorted.end(), score) - sorted.begin());
  return (below + upto) / (2 * static_cast<double>(sorted.size()));
}

BootstrapResult bootstrap(std::size_t n, std::size_t B, std::uint64_t seed,
                          const Statistic& statistic, const BootstrapOptions& o) {
  const char* fn = "bootstrap";
  check_common(fn, n, B, o);
  if (!statistic) fail(fn, "the statistic is empty");
  Evaluated e;
  {
    const std::vector<std::uint32_t> ones(n, 1U);
    e.estimate = statistic(ones);
  }
  e.K = e.estimate.size();
  if (e.K == 0) fail(fn, "the statistic returned no values");
  const std::size_t K = e.K;
  e.dist = run_resamples(n, B, seed, K, o.threads, [&] {
    return [&](std::span<const std::uint32_t> w, std::span<double> out) {
      const std::vector<double> v = statistic(w);
      check_size(fn, "a resample's statistic", v.size(), K);
      std::copy(v.begin(), v.end(), out.begin());
    };
  });
  if (o.bca) {
    const Groups groups = make_groups(n, seed, o);
    e.G = groups.size();
    if (o.jackknife) {
      e.jack = run_jackknife(fn, groups, K, o.threads, [&] {
        return [&](std::span<const std::uint32_t> left_out) { return o.jackknife(left_out); };
      });
    } else {
      e.jack = run_jackknife(fn, groups, K, o.threads, [&] {
        return [&, w = std::vector<std::uint32_t>(n, 1U)](
                   std::span<const std::uint32_t> left_out) mutable {
          for (std::uint32_t i : left_out) w[i] = 0;
          std::vector<double> v = statistic(std::span<const std::uint32_t>(w));
          for (std::uint32_t i : left_out) w[i] = 1;
          return v;
        };
      });
    }
  }
  return make_result(n, B, seed, o, std::move(e));
}

BootstrapResult bootstrap_sums(const UnitSums& units, std::size_t B, std::uint64_t seed,
                               const Finalize& finalize, const BootstrapOptions& o) {
  const char* fn = "bootstrap_sums";
  check_sums(fn, units);
  const std::size_t n = units.units();
  check_common(fn, n, B, o);
  if (!finalize) fail(fn, "the finalize callable is empty");
  Evaluated e;
  std::vector<double> total(units.dimension);
  accumulate(units, {}, total);
  e.estimate = finalize(total);
  e.K = e.estimate.size();
  if (e.K == 0) fail(fn, "finalize returned no values");
  const std::size_t K = e.K;
  e.dist = run_resamples(n, B, seed, K, o.threads, [&] {
    return [&, sums = std::vector<double>(units.dimension)](std::span<const std::uint32_t> w,
                                                            std::span<double> out) mutable {
      accumulate(units, w, sums);
      const std::vector<double> v = finalize(sums);
      check_size(fn, "finalize", v.size(), K);
      std::copy(v.begin(), v.end(), out.begin());
    };
  });
  if (o.bca) {
    const Groups groups = make_groups(n, seed, o);
    e.G = groups.size();
    e.jack = run_jackknife(fn, groups, K, o.threads, [&] {
      return [&, sums = std::vector<double>()](std::span<const std::uint32_t> left_out) mutable {
        sums = total;
        subtract_group(units, left_out, sums);
        return finalize(sums);
      };
    });
  }
  return make_result(n, B, seed, o, std::move(e));
}

PairedResult paired_bootstrap(std::size_t n, std::size_t B, std::uint64_t seed,
                              const Statistic& statistic_a, const Statistic& statistic_b,
                              const BootstrapOptions& o, const Jackknife& jackknife_a,
                              const Jackknife& jackknife_b) {
  const char* fn = "paired_bootstrap";
  check_common(fn, n, B, o);
  if (!statistic_a || !statistic_b) fail(fn, "a statistic is empty");
  if (o.jackknife) fail(fn, "options.jackknife must be empty: pass jackknife_a and jackknife_b");
  if (static_cast<bool>(jackknife_a) != static_cast<bool>(jackknife_b))
    fail(fn, "pass both jackknife_a and jackknife_b, or neither");
  std::vector<double> est_a, est_b;
  {
    const std::vector<std::uint32_t> ones(n, 1U);
    est_a = statistic_a(ones);
    est_b = statistic_b(ones);
  }
  if (est_a.empty()) fail(fn, "statistic_a returned no values");
  check_size(fn, "statistic_b", est_b.size(), est_a.size());
  Evaluated e;
  e.K = est_a.size();
  const std::size_t K = e.K;
  e.estimate.resize(K);
  for (std::size_t k = 0; k < K; ++k) e.estimate[k] = est_b[k] - est_a[k];
  const auto diff = [&](const std::vector<double>& a, const std::vector<double>& b) {
    check_size(fn, "statistic_a", a.size(), K);
    check_size(fn, "statistic_b", b.size(), K);
    std::vector<double> d(K);
    for (std::size_t k = 0; k < K; ++k) d[k] = b[k] - a[k];
    return d;
  };
  e.dist = run_resamples(n, B, seed, K, o.threads, [&] {
    return [&](std::span<const std::uint32_t> w, std::span<double> out) {
      const std::vector<double> d = diff(statistic_a(w), statistic_b(w));
      std::copy(d.begin(), d.end(), out.begin());
    };
  });
  if (o.bca) {
    const Groups groups = make_groups(n, seed, o);
    e.G = groups.size();
    if (jackknife_a) {
      e.jack = run_jackknife(fn, groups, K, o.threads, [&] {
        return [&](std::span<const std::uint32_t> left_out) {
          return diff(jackknife_a(left_out), jackknife_b(left_out));
        };
      });
    } else {
      e.jack = run_jackknife(fn, groups, K, o.threads, [&] {
        return [&, w = std::vector<std::uint32_t>(n, 1U)](
                   std::span<const std::uint32_t> left_out) mutable {
          for (std::uint32_t i : left_out) w[i] = 0;
          const std::span<const std::uint32_t> ws(w);
          std::vector<double> d = diff(statistic_a(ws), statistic_b(ws));
          for (std::uint32_t i : left_out) w[i] = 1;
          return d;
        };
      });
    }
  }
  return make_paired(n, B, seed, o, std::move(e), est_a, est_b);
}

PairedResult paired_bootstrap_sums(const UnitSums& units_a, const UnitSums& units_b, std::size_t B,
                                   std::uint64_t seed, const Finalize& finalize_a,
                                   const Finalize& finalize_b, const BootstrapOptions& o) {
  const char* fn = "paired_bootstrap_sums";
  check_sums(fn, units_a);
  check_sums(fn, units_b);
  const std::size_t n = units_a.units();
  if (units_b.units() != n)
    fail(fn, "the runs must cover the same units: " + std::to_string(n) + " and " +
                 std::to_string(units_b.units()));
  check_common(fn, n, B, o);
  if (!finalize_a || !finalize_b) fail(fn, "a finalize callable is empty");
  std::vector<double> total_a(units_a.dimension), total_b(units_b.dimension);
  accumulate(units_a, {}, total_a);
  accumulate(units_b, {}, total_b);
  const std::vector<double> est_a = finalize_a(total_a), est_b = finalize_b(total_b);
  if (est_a.empty()) fail(fn, "finalize_a returned no values");
  check_size(fn, "finalize_b", est_b.size(), est_a.size());
  Evaluated e;
  e.K = est_a.size();
  const std::size_t K = e.K;
  e.estimate.resize(K);
  for (std::size_t k = 0; k < K; ++k) e.estimate[k] = est_b[k] - est_a[k];
  const auto diff = [&](const std::vector<double>& a, const std::vector<double>& b) {
    check_size(fn, "finalize_a", a.size(), K);
    check_size(fn, "finalize_b", b.size(), K);
    std::vector<double> d(K);
    for (std::size_t k = 0; k < K; ++k) d[k] = b[k] - a[k];
    return d;
  };
  e.dist = run_resamples(n, B, seed, K, o.threads, [&] {
    return [&, sa = std::vector<double>(units_a.dimension),
            sb = std::vector<double>(units_b.dimension)](std::span<const std::uint32_t> w,
                                                         std::span<double> out) mutable {
      accumulate(units_a, w, sa);
      accumulate(units_b, w, sb);
      const std::vector<double> d = diff(finalize_a(sa), finalize_b(sb));
      std::copy(d.begin(), d.end(), out.begin());
    };
  });
  if (o.bca) {
    const Groups groups = make_groups(n, seed, o);
    e.G = groups.size();
    e.jack = run_jackknife(fn, groups, K, o.threads, [&] {
      return [&, sa = std::vector<double>(),
              sb = std::vector<double>()](std::span<const std::uint32_t> left_out) mutable {
        sa = total_a;
        sb = total_b;
        subtract_group(units_a, left_out, sa);
        subtract_group(units_b, left_out, sb);
        return diff(finalize_a(sa), finalize_b(sb));
      };
    });
  }
  return make_paired(n, B, seed, o, std::move(e), est_a, est_b);
}

}  // namespace tally::stats
