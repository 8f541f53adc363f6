// tally_stats_bench: issue 22's closing numbers for the statistics core (engine/stats).
//   tally_stats_bench coverage [B] [threads]  coverage of 95 % intervals over 1000 datasets and the
//                                             false-alarm rate of the paired tests (the code of
//                                             tests/unit/stats_simulation.hpp, B = 1000 default)
//   tally_stats_bench speed [threads]         bootstrap B = 1000 of an accuracy over 1 M units
//   tally_stats_bench all                     both
// Prints wall and process CPU (user + system) seconds per measurement.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "stats_simulation.hpp"
#include "tally/stats/stats.hpp"

namespace {

namespace st = tally::stats;
namespace sim = tally::stats_sim;

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

struct Timer {
  std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
  double cpu = cpu_seconds();
  void report(const char* what) const {
    const double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
    std::printf("  %-58s wall %7.3f s  cpu %7.3f s\n", what, w, cpu_seconds() - cpu);
    std::fflush(stdout);
  }
};

void coverage(std::size_t B, unsigned threads) {
  std::printf("coverage, 1000 datasets each, B = %zu, 95 %% intervals (band 0.93-0.97):\n", B);
  Timer t;
  const auto normal = sim::coverage(0, 1000, 200, 0, B, 101, threads);
  std::printf("  mean of n=200 N(1, 4):           percentile %.3f  BCa %.3f\n",
              normal.percentile_rate(), normal.bca_rate());
  const auto bern = sim::coverage(1, 1000, 500, 0.9, B, 202, threads);
  std::printf("  accuracy, n=500 Bernoulli(0.9):  percentile %.3f  BCa %.3f\n",
              bern.percentile_rate(), bern.bca_rate());
  const auto expo = sim::coverage(2, 1000, 30, 0, B, 404, threads);
  std::printf("  mean of n=30 Exponential(1):     percentile %.3f  BCa %.3f  (skewed, small n)\n",
              expo.percentile_rate(), expo.bca_rate());
  const auto f = sim::false_alarm(1000, 500, 0.85, 0.7, B, 303, threads);
  std::printf(
      "false alarms under H0 (1000 datasets, n=500, accuracy 0.85 both, alpha 0.05):\n"
      "  paired bootstrap %.3f  McNemar exact %.3f  mid-p %.3f  verdict regressed %.3f "
      "improved %.3f\n",
      f.rate(f.bootstrap), f.rate(f.mcnemar), f.rate(f.midp), f.rate(f.regressed),
      f.rate(f.improved));
  t.report("all simulations");
}

void speed(unsigned threads) {
  const std::size_t n = 1'000'000, B = 1000;
  std::printf("speed: n = %zu units, B = %zu, threads = %u\n", n, B, threads);
  std::vector<std::uint8_t> correct(n), correct_b(n);
  st::ResampleStream s(1, 2);
  for (std::size_t i = 0; i < n; ++i) {
    correct[i] = sim::uniform01(s) < 0.9;
    correct_b[i] = sim::uniform01(s) < 0.98 ? correct[i] : !correct[i];
  }
  {
    Timer t;
    std::vector<std::uint32_t> w(n);
    for (std::size_t b = 0; b < 100; ++b) st::resample_counts(7, b, w);
    t.report("resample_counts x 100 (1 thread)");
  }
  st::BootstrapOptions o;
  o.threads = threads;
  {
    Timer t;
    const auto r = st::bootstrap(
        n, B, 7,
        [&](std::span<const std::uint32_t> w) {
          std::uint64_t sc = 0, sw = 0;
          for (std::size_t i = 0; i < w.size(); ++i) {
            sc += std::uint64_t{w[i]} * correct[i];
            sw += w[i];
          }
          return std::vector<double>{static_cast<double>(sc) / static_cast<double>(sw)};
        },
        o);
    t.report("bootstrap(callable sum(w*c)/sum(w)), BCa, 1000 groups");
    std::printf("    accuracy %.6f  percentile [%.6f, %.6f]  BCa [%.6f, %.6f]  se %.6f\n",
                r.statistics[0].estimate, r.statistics[0].percentile.low,
                r.statistics[0].percentile.high, r.statistics[0].bca.low, r.statistics[0].bca.high,
                r.statistics[0].standard_error);
  }
  // The CSR path: unit i contributes {correct_i, 1}.
  std::vector<double> xa(n), xb(n);
  for (std::size_t i = 0; i < n; ++i) {
    xa[i] = correct[i];
    xb[i] = correct_b[i];
  }
  const sim::MeanRows ra(xa), rb(xb);
  {
    Timer t;
    const auto r = st::bootstrap_sums(ra.sums(), B, 7, sim::ratio, o);
    t.report("bootstrap_sums(rows {c_i, 1}), BCa, 1000 groups");
    std::printf("    accuracy %.6f  percentile [%.6f, %.6f]  BCa [%.6f, %.6f]\n",
                r.statistics[0].estimate, r.statistics[0].percentile.low,
                r.statistics[0].percentile.high, r.statistics[0].bca.low, r.statistics[0].bca.high);
  }
  {
    Timer t;
    st::BootstrapOptions loo = o;
    loo.jackknife_max_units = n;
    const auto r = st::bootstrap_sums(ra.sums(), B, 7, sim::ratio, loo);
    t.report("bootstrap_sums, leave-one-out jackknife (1 M values)");
    std::printf("    BCa [%.6f, %.6f]  a = %.3g\n", r.statistics[0].bca.low,
                r.statistics[0].bca.high, r.statistics[0].acceleration);
  }
  {
    Timer t;
    const auto r = st::paired_bootstrap_sums(ra.sums(), rb.sums(), B, 7, sim::ratio, sim::ratio, o);
    t.report("paired_bootstrap_sums (two runs), BCa");
    std::printf("    difference %.6f  p two-sided %.4f  verdict %s\n",
                r.statistics[0].difference.estimate, r.statistics[0].p_two_sided,
                std::string(st::to_string(st::decide(r.statistics[0], {}).verdict)).c_str());
  }
  {
    // A COCO-val-sized proxy: 5000 images, each with 80 classes x 3 counts (a sparse row of ~40
    // entries), finalize: a mean over classes of ratios. (The real detection metrics need their
    // own per-image records: this only measures the resampling and summing.)
    const std::size_t images = 5000, dim = 240;
    std::vector<std::uint64_t> off{0};
    std::vector<std::uint32_t> idx;
    std::vector<double> val;
    st::ResampleStream g(3, 3);
    for (std::size_t i = 0; i < images; ++i) {
      for (std::uint32_t c = 0; c < 80; ++c) {
        if (g.uniform_below(6) != 0) continue;
        idx.insert(idx.end(), {3 * c, 3 * c + 1, 3 * c + 2});
        val.insert(val.end(), {double(g.uniform_below(5)), double(g.uniform_below(3)),
                               double(1 + g.uniform_below(6))});
      }
      off.push_back(idx.size());
    }
    const st::UnitSums u{dim, off, idx, val};
    const st::Finalize fin = [](std::span<const double> sm) {
      double acc = 0;
      for (std::size_t c = 0; c < 80; ++c)
        acc += sm[3 * c] / (sm[3 * c] + sm[3 * c + 1] + sm[3 * c + 2]);
      return std::vector<double>{acc / 80};
    };
    Timer t;
    st::bootstrap_sums(u, B, 7, fin, o);
    t.report("COCO-size proxy: 5000 units x ~40 entries, BCa (leave-one-out)");
  }
  {
    Timer t;
    double p = 0;
    for (int r = 0; r < 100; ++r) p += st::mcnemar_exact(499000 + r, 501000).pvalue;
    t.report("mcnemar_exact, b + c = 1e6, x 100");
    std::printf("    (sum of p %.6g)\n", p);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "all";
  if (mode == "coverage" || mode == "all") {
    const std::size_t B = argc > 2 && mode == "coverage" ? std::stoul(argv[2]) : 1000;
    const unsigned t =
        argc > 3 && mode == "coverage" ? static_cast<unsigned>(std::stoul(argv[3])) : 0;
    coverage(B, t);
  }
  if (mode == "speed" || mode == "all") {
    const unsigned t = argc > 2 && mode == "speed" ? static_cast<unsigned>(std::stoul(argv[2])) : 0;
    speed(t);
  }
  if (mode != "coverage" && mode != "speed" && mode != "all") {
    std::fprintf(stderr,
                 "usage: tally_stats_bench [coverage [B [threads]] | speed [threads] | all]\n");
    return 2;
  }
  return 0;
}
