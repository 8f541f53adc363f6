// WeightedMeanAbsolutePercentageError: weighted mean absolute percentage error (torchmetrics').
//
// Formula. Over every value of preds p and target y (any shape [N, ...], all values alike):
//   wmape = sum |p - y| / max(sum |y|, 1.17e-6)
//
// Reference: torchmetrics 1.9.0 torchmetrics.regression.WeightedMeanAbsolutePercentageError() on
// float64 tensors (SciPy and scikit-learn have no such function).
//
// Example: target [1, 10, 1e6], preds [0.9, 15, 1.2e6] -> 0.20000289996810036.
//
// State: the exact sums of |p - y| and of |y| (OutputSumsState in common.hpp), added exactly
// across ranks; it does not grow with N.
#include "common.hpp"

namespace tally::regression {
namespace {

class WeightedMeanAbsolutePercentageError final : public SumsMetric {
 public:
  explicit WeightedMeanAbsolutePercentageError(const Params& p)
      : SumsMetric(p, {"WeightedMeanAbsolutePercentageError", kPreds, kTarget, Layout::Flat, 2}) {}

 protected:
  void add_terms(double p, double y, ExactSum* acc, std::int64_t sample,
                 std::int64_t) const override {
    add_finite(acc[0], std::abs(p - y), "the absolute error", sample);
    acc[1].add(std::abs(y));
  }

  Value compute(const OutputSumsState& s) const override {
    const SumBank acc = sums(s);
    return result("weighted_mean_absolute_percentage_error",
                  acc[0].value() / std::max(acc[1].value(), kPercentEps));
  }
};

}  // namespace

ComponentInfo wmape_info() {
  return metric<WeightedMeanAbsolutePercentageError>(
      "WeightedMeanAbsolutePercentageError",
      "Weighted mean absolute percentage error sum |p - y| / max(sum |y|, 1.17e-6) over every "
      "value; key weighted_mean_absolute_percentage_error. Reference: torchmetrics 1.9.0 "
      "torchmetrics.regression.WeightedMeanAbsolutePercentageError().",
      {}, preds_target_inputs("[N, ...]"), {"WMAPE"},
      {{"weighted_mean_absolute_percentage_error", Better::Lower, Plot::None,
        "weighted mean absolute percentage error (a fraction)"}});
}
TALLY_COMPONENT(wmape_info)

}  // namespace tally::regression
