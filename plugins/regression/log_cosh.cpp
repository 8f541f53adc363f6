// LogCoshError: mean log-cosh error (torchmetrics').
//
// Formula. Per output, over N samples of preds p and target y:
//   e = mean_i log(cosh(p_i - y_i))
//   num_outputs D > 1: preds and target [N, D], an array of D values.
// log cosh(d) is computed as log1p(2 sinh^2(d / 2)) (|d| <= 20) or |d| - log 2 + log1p(e^-2|d|):
// accurate for every d. torchmetrics evaluates log((e^d + e^-d) / 2), which is 0 for |d| < 1e-8
// (the true value d^2 / 2 is lost) and inf for |d| > 710; elsewhere the two agree to 1e-15.
//
// Reference: torchmetrics 1.9.0 torchmetrics.regression.LogCoshError(num_outputs=D) on float64
// tensors (SciPy and scikit-learn have no such function).
//
// Example: target [2.5, 5, 4, 8], preds [3, 5, 2.5, 7] -> 0.3523338771137753 (torchmetrics'
// docstring: 0.3523).
//
// State: per output the exact sum of the terms, and N (OutputSumsState in common.hpp), added
// exactly across ranks; it does not grow with N.
#include "common.hpp"

namespace tally::regression {
namespace {

class LogCoshError final : public SumsMetric {
 public:
  explicit LogCoshError(const Params& p)
      : SumsMetric(p, {"LogCoshError", kPreds, kTarget, Layout::Outputs, 1},
                   p.get_size("num_outputs")) {}

 protected:
  void add_terms(double p, double y, ExactSum* acc, std::int64_t sample,
                 std::int64_t) const override {
    const double d = std::abs(p - y);
    if (!std::isfinite(d))
      check_.fail(kPreds,
                  "sample " + std::to_string(sample) + ": preds - target overflows float64");
    double v;
    if (d <= 20) {
      const double s = std::sinh(d / 2);
      v = std::log1p(2 * s * s);
    } else {
      v = d - std::log(2.0) + std::log1p(std::exp(-2 * d));
    }
    acc[0].add(v);
  }

  Value compute(const OutputSumsState& s) const override {
    const SumBank acc = sums(s);
    std::vector<double> e(acc.size());
    for (std::size_t k = 0; k < e.size(); ++k) e[k] = acc[k].value() / static_cast<double>(s.n);
    return result("log_cosh_error", per_output(e, num_outputs_ > 1));
  }
};

}  // namespace

ComponentInfo log_cosh_info() {
  return metric<LogCoshError>(
      "LogCoshError",
      "Mean log-cosh error mean log(cosh(preds - target)), per output; key log_cosh_error. "
      "Reference: torchmetrics 1.9.0 torchmetrics.regression.LogCoshError(num_outputs).",
      {num_outputs_param()}, preds_target_inputs("[N] or [N, D]"), {},
      {{"log_cosh_error", Better::Lower, Plot::None, "mean log-cosh error (array: per output)"}});
}
TALLY_COMPONENT(log_cosh_info)

}  // namespace tally::regression
