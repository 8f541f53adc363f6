// SymmetricMeanAbsolutePercentageError: symmetric mean absolute percentage error
// (torchmetrics').
//
// Formula. Over every value of preds p and target y (any shape [N, ...], all values alike):
//   smape = 2 sum |p - y| / max(|y| + |p|, 1.17e-6) / (number of values)    (in [0, 2])
//
// Reference: torchmetrics 1.9.0 torchmetrics.regression.SymmetricMeanAbsolutePercentageError() on
// float64 tensors (SciPy and scikit-learn have no such function).
//
// Example: target [1, 10, 1e6], preds [0.9, 15, 1.2e6] -> 0.22902711323763958
// (torchmetrics' docstring: 0.2290).
//
// State: the exact sum of the terms and the number of values (OutputSumsState in common.hpp),
// added exactly across ranks; it does not grow with N.
#include "common.hpp"

namespace tally::regression {
namespace {

class SymmetricMeanAbsolutePercentageError final : public SumsMetric {
 public:
  explicit SymmetricMeanAbsolutePercentageError(const Params& p)
      : SumsMetric(p, {"SymmetricMeanAbsolutePercentageError", kPreds, kTarget, Layout::Flat, 1}) {}

 protected:
  void add_terms(double p, double y, ExactSum* acc, std::int64_t sample,
                 std::int64_t) const override {
    add_finite(acc[0], std::abs(p - y) / std::max(std::abs(y) + std::abs(p), kPercentEps),
               "the symmetric percentage error", sample);
  }

  Value compute(const OutputSumsState& s) const override {
    const SumBank acc = sums(s);
    // torchmetrics doubles the sum, then divides.
    return result("symmetric_mean_absolute_percentage_error",
                  2.0 * acc[0].value() / static_cast<double>(s.values));
  }
};

}  // namespace

ComponentInfo smape_info() {
  return metric<SymmetricMeanAbsolutePercentageError>(
      "SymmetricMeanAbsolutePercentageError",
      "Symmetric mean absolute percentage error 2 sum |p - y| / max(|y| + |p|, 1.17e-6) / count "
      "over every value; key symmetric_mean_absolute_percentage_error. Reference: torchmetrics "
      "1.9.0 torchmetrics.regression.SymmetricMeanAbsolutePercentageError().",
      {}, preds_target_inputs("[N, ...]"), {"SMAPE"},
      {{"symmetric_mean_absolute_percentage_error", Better::Lower, Plot::None,
        "symmetric mean absolute percentage error, in [0, 2]"}});
}
TALLY_COMPONENT(smape_info)

}  // namespace tally::regression
