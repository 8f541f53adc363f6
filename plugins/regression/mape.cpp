// MeanAbsolutePercentageError: mean absolute percentage error (torchmetrics').
//
// Formula. Over every value of preds p and target y (any shape [N, ...], all values alike):
//   mape = sum |p - y| / max(|y|, 1.17e-6) / (number of values)
//   (a fraction: 0.25 is 25 %).
//
// Reference: torchmetrics 1.9.0 torchmetrics.regression.MeanAbsolutePercentageError() on float64
// tensors. Cross-checked with scikit-learn 1.7.2
// sklearn.metrics.mean_absolute_percentage_error(y, p), equal where |y| >= 1.17e-6 (scikit-learn
// clamps |y| at float64 eps, 2.2e-16, instead; it also averages [N, D] per output first, the same
// value up to rounding).
//
// Example: target [1, 10, 1e6], preds [0.9, 15, 1.2e6] -> 0.26666666666666666 (torchmetrics'
// docstring: 0.2667).
//
// State: the exact sum of the terms (ExactSum) and the number of values (OutputSumsState in
// common.hpp), added exactly across ranks: any sharding gives the same bits; it does not grow
// with N.
#include "common.hpp"

namespace tally::regression {
namespace {

class MeanAbsolutePercentageError final : public SumsMetric {
 public:
  explicit MeanAbsolutePercentageError(const Params& p)
      : SumsMetric(p, {"MeanAbsolutePercentageError", kPreds, kTarget, Layout::Flat, 1}) {}

 protected:
  void add_terms(double p, double y, ExactSum* acc, std::int64_t sample,
                 std::int64_t) const override {
    add_finite(acc[0], std::abs(p - y) / std::max(std::abs(y), kPercentEps),
               "the absolute percentage error", sample);
  }

  Value compute(const OutputSumsState& s) const override {
    const SumBank acc = sums(s);
    return result("mean_absolute_percentage_error", acc[0].value() / static_cast<double>(s.values));
  }
};

}  // namespace

ComponentInfo mape_info() {
  return metric<MeanAbsolutePercentageError>(
      "MeanAbsolutePercentageError",
      "Mean absolute percentage error sum |p - y| / max(|y|, 1.17e-6) / count over every value "
      "(a fraction); key mean_absolute_percentage_error. Reference: torchmetrics 1.9.0 "
      "torchmetrics.regression.MeanAbsolutePercentageError().",
      {}, preds_target_inputs("[N, ...]"), {"MAPE"},
      {{"mean_absolute_percentage_error", Better::Lower, Plot::None,
        "mean absolute percentage error (a fraction)"}});
}
TALLY_COMPONENT(mape_info)

}  // namespace tally::regression
