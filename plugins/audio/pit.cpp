// PermutationInvariantTraining (PIT): the metric of the best assignment of estimated speakers to
// reference speakers, per sample (Yu et al., "Permutation invariant training of deep models for
// speaker-independent multi-talker speech separation", 2017).
//
// Formula. A sample is preds and target [S, T] (S speakers). M[j][i] = metric_func(preds[i],
// target[j]) for every pair (metric_func: scale_invariant_signal_distortion_ratio,
// scale_invariant_signal_noise_ratio or signal_distortion_ratio, with their parameters). The
// sample's value is the best (eval_func max or min) over permutations P of
//   mean_j M[j][P(j)]
// found as torchmetrics finds it: mode speaker-wise with S < 3, and mode permutation-wise
// (which evaluates metric_func on each permuted stack: the same pairwise values), by trying every
// permutation; speaker-wise with S >= 3 by the Hungarian algorithm (scipy's
// linear_sum_assignment in torchmetrics; the optimum is the same, its mean taken over the
// assigned pairs). The result is the mean over samples.
//
// Reference: torchmetrics 1.9.0 torchmetrics.audio.PermutationInvariantTraining(
// torchmetrics.functional.audio.<metric_func>, mode=..., eval_func=..., **kwargs)
// .set_dtype(torch.float64), update(preds.double(), target.double()), compute() (scipy 1.17.1 for
// linear_sum_assignment). A NaN pair value makes the exhaustive search's max / min NaN (torch's
// max propagates it); the Hungarian path rejects it, as scipy does (InputError).
//
// Example: preds [[[-0.0579, 0.3560, -0.9604], [-0.1719, 0.3205, 0.2951]]], target [[[1.0958,
// -0.1648, 0.5228], [-0.4100, 1.1942, -0.5103]]], metric_func
// scale_invariant_signal_distortion_ratio -> -5.1091 (torchmetrics' docstring).
//
// State: the exact sum of the per-sample best values and their count (MeanState in common.hpp).
#include <algorithm>
#include <limits>
#include <numeric>

#include "common.hpp"

namespace tally::audio {
namespace {

constexpr std::int64_t kMaxPermutationWiseSpeakers = 8;  // 8! = 40320 permutations a sample

/// The minimum-cost assignment of the square matrix `cost` (n x n, row-major, finite): for each
/// row its column (the shortest augmenting path algorithm with potentials, O(n^3)).
std::vector<std::size_t> hungarian(const std::vector<double>& cost, std::size_t n) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> u(n + 1, 0.0), v(n + 1, 0.0);
  std::vector<std::size_t> match(n + 1, 0), way(n + 1, 0);  // match[col] = row (1-based)
  for (std::size_t row = 1; row <= n; ++row) {
    match[0] = row;
    std::size_t col0 = 0;
    std::vector<double> minv(n + 1, inf);
    std::vector<bool> used(n + 1, false);
    do {
      used[col0] = true;
      const std::size_t i0 = match[col0];
      double delta = inf;
      std::size_t col1 = 0;
      for (std::size_t j = 1; j <= n; ++j) {
        if (used[j]) continue;
        const double cur = cost[(i0 - 1) * n + (j - 1)] - u[i0] - v[j];
        if (cur < minv[j]) minv[j] = cur, way[j] = col0;
        if (minv[j] < delta) delta = minv[j], col1 = j;
      }
      for (std::size_t j = 0; j <= n; ++j) {
        if (used[j])
          u[match[j]] += delta, v[j] -= delta;
        else
          minv[j] -= delta;
      }
      col0 = col1;
    } while (match[col0] != 0);
    do {
      const std::size_t col1 = way[col0];
      match[col0] = match[col1];
      col0 = col1;
    } while (col0 != 0);
  }
  std::vector<std::size_t> assignment(n);
  for (std::size_t j = 1; j <= n; ++j) assignment[match[j] - 1] = j - 1;
  return assignment;
}

enum class Func { SiSdr, SiSnr, Sdr };

class PermutationInvariantTraining final : public SignalMeanMetric {
 public:
  explicit PermutationInvariantTraining(const Params& p)
      : SignalMeanMetric(p, "PermutationInvariantTraining", "permutation_invariant_training", 2) {
    const std::string f = p.get_string("metric_func");
    func_ = f == "scale_invariant_signal_distortion_ratio" ? Func::SiSdr
            : f == "scale_invariant_signal_noise_ratio"    ? Func::SiSnr
                                                           : Func::Sdr;
    permutation_wise_ = p.get_string("mode") == "permutation-wise";
    maximize_ = p.get_string("eval_func") == "max";
    // torchmetrics passes the extra keyword arguments to metric_func: one it does not take is a
    // TypeError there, a ConfigError here.
    if (func_ == Func::SiSnr && p.has("zero_mean"))
      p.fail("zero_mean",
             "is not a parameter of scale_invariant_signal_noise_ratio (it is always zero-mean)");
    if (func_ != Func::Sdr)
      for (const char* name : {"use_cg_iter", "filter_length", "load_diag"})
        if (p.has(name))
          p.fail(name, "is a parameter of signal_distortion_ratio only, not of " + f);
    zero_mean_ = p.has("zero_mean") && p.get_bool("zero_mean");
    if (func_ == Func::Sdr) {
      options_ = read_sdr_options(p, zero_mean_);
    }
  }

 protected:
  void signal_values(const Signals& s, const std::string& where,
                     std::vector<double>& out) const override {
    if (s.shape.size() != 2)
      check_.fail(kPreds, where + ": must be [S, T] (speakers, time), got " + shape_text(s.shape));
    const std::int64_t spk = s.shape[0];
    if (spk > kMaxSpeakers)
      check_.fail(kPreds, where + ": has " + std::to_string(spk) + " speakers, more than " +
                              std::to_string(kMaxSpeakers));
    if (permutation_wise_ && spk > kMaxPermutationWiseSpeakers)
      check_.fail(kPreds, where + ": has " + std::to_string(spk) +
                              " speakers: mode permutation-wise tries all S! permutations, at "
                              "most " +
                              std::to_string(kMaxPermutationWiseSpeakers) +
                              " speakers (speaker-wise finds the same optimum by the Hungarian "
                              "algorithm)");
    const auto n = static_cast<std::size_t>(spk);
    std::vector<double> m(n * n);  // m[target j][pred i]
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t i = 0; i < n; ++i)
        m[j * n + i] =
            pair_value(s, static_cast<std::int64_t>(i), static_cast<std::int64_t>(j), where);
    if (!permutation_wise_ && spk >= 3) {
      for (const double v : m)
        if (std::isnan(v))
          check_.fail(kPreds, where +
                                  ": a speaker pair's value is NaN: the assignment is "
                                  "undefined (scipy's linear_sum_assignment rejects it)");
      std::vector<double> cost(m);
      if (maximize_)
        for (auto& c : cost) c = -c;
      // +-inf values: the Hungarian algorithm needs finite costs; clamp them to the largest
      // finite ones (the assignment of the infinite entries is then the same).
      for (auto& c : cost)
        if (std::isinf(c))
          c = c > 0 ? std::numeric_limits<double>::max() / 4
                    : -std::numeric_limits<double>::max() / 4;
      const auto assign = hungarian(cost, n);
      double sum = 0.0;
      for (std::size_t j = 0; j < n; ++j) sum += m[j * n + assign[j]];
      out.push_back(sum / static_cast<double>(n));
      return;
    }
    std::vector<std::size_t> perm(n);
    std::iota(perm.begin(), perm.end(), std::size_t{0});
    double best = 0.0;
    bool first = true, nan = false;
    do {
      double sum = 0.0;
      for (std::size_t j = 0; j < n; ++j) sum += m[j * n + perm[j]];
      const double v = sum / static_cast<double>(n);
      if (std::isnan(v)) nan = true;
      if (first || (maximize_ ? v > best : v < best)) best = v;
      first = false;
    } while (std::next_permutation(perm.begin(), perm.end()));
    out.push_back(nan ? std::numeric_limits<double>::quiet_NaN() : best);
  }

 private:
  double pair_value(const Signals& s, std::int64_t pred, std::int64_t target,
                    const std::string& where) const {
    const double* p = s.pred_row(pred);
    const double* t = s.target_row(target);
    switch (func_) {
      case Func::SiSdr:
        return si_sdr(p, t, s.length, zero_mean_);
      case Func::SiSnr:
        return si_sdr(p, t, s.length, true);
      case Func::Sdr:
        break;
    }
    const auto v = sdr(p, t, s.length, options_);
    if (!v)
      check_.fail(kTarget, where + ", speaker " + std::to_string(target) +
                               ": the Toeplitz system is singular (a silent target; torchmetrics' "
                               "torch.linalg.solve raises): set load_diag");
    return *v;
  }

  Func func_ = Func::SiSdr;
  bool permutation_wise_ = false, maximize_ = true, zero_mean_ = false;
  SdrOptions options_;
};

}  // namespace

ComponentInfo pit_info() {
  std::vector<ParamSpec> params{
      param("metric_func", ParamType::String,
            "The pairwise metric (torchmetrics.functional.audio's function of that name).")
          .choices({"scale_invariant_signal_distortion_ratio", "scale_invariant_signal_noise_ratio",
                    "signal_distortion_ratio"}),
      param("mode", ParamType::String,
            "speaker-wise (a matrix of speaker pairs, then the best assignment) or "
            "permutation-wise (metric_func on each permutation of the estimates).")
          .def("speaker-wise")
          .choices({"speaker-wise", "permutation-wise"}),
      param("eval_func", ParamType::String,
            "Whether the best permutation has the largest (max) or smallest (min) mean.")
          .def("max")
          .choices({"max", "min"}),
      param("zero_mean", ParamType::Bool,
            "metric_func's zero_mean (scale_invariant_signal_distortion_ratio and "
            "signal_distortion_ratio; default false).")
          .optional()
          .nullable(),
  };
  for (auto spec : sdr_params()) {
    // Unset unless given, so that giving one to another metric_func is an error.
    spec.default_value = Value();
    spec.optional = true;
    spec.nullable = true;
    spec.doc = "signal_distortion_ratio's " + spec.name + " (metric_func signal_distortion_ratio" +
               (spec.name == "filter_length" ? "; default 512)." : ").") + " " + spec.doc;
    params.push_back(std::move(spec));
  }
  return with_results(
      metric<PermutationInvariantTraining>(
          "PermutationInvariantTraining",
          "Permutation invariant training: per sample, the mean of metric_func over speakers under "
          "the best assignment of estimated to reference speakers, then the mean over samples; key "
          "permutation_invariant_training. Reference: torchmetrics 1.9.0 "
          "torchmetrics.audio.PermutationInvariantTraining(<metric_func>, mode=..., eval_func=..., "
          "**kwargs) in float64.",
          std::move(params), signal_inputs({.speakers = true}), {"PIT"}),
      {{"permutation_invariant_training", Better::Higher, Plot::None,
        "mean over samples of the best permutation's metric_func (higher is better for the dB "
        "metrics with eval_func max)"}});
}
TALLY_COMPONENT(pit_info)

}  // namespace tally::audio
