// MeanSquaredLogError: mean squared logarithmic error (torchmetrics').
//
// Formula. Over every value of preds p and target y (any shape [N, ...], all values alike),
// each > -1:
//   msle = sum (log1p(p) - log1p(y))^2 / (number of values)
//   A value <= -1 is an InputError (log1p is -inf or NaN there; scikit-learn raises too,
//   torchmetrics returns inf or NaN).
//
// Reference: torchmetrics 1.9.0 torchmetrics.regression.MeanSquaredLogError() on float64 tensors.
// Cross-checked with scikit-learn 1.7.2 sklearn.metrics.mean_squared_log_error(y, p) (the same
// values to 1e-15 on the test data).
//
// Example: target [2.5, 5, 4, 8], preds [3, 5, 2.5, 7] -> 0.03973012298459379 (torchmetrics'
// docstring: 0.0397).
//
// State: the exact sum of the squared log errors and the number of values (OutputSumsState in
// common.hpp), added exactly across ranks; it does not grow with N.
#include "common.hpp"

namespace tally::regression {
namespace {

class MeanSquaredLogError final : public SumsMetric {
 public:
  explicit MeanSquaredLogError(const Params& p)
      : SumsMetric(p, {"MeanSquaredLogError", kPreds, kTarget, Layout::Flat, 1}) {}

 protected:
  void add_terms(double p, double y, ExactSum* acc, std::int64_t sample,
                 std::int64_t) const override {
    if (p <= -1.0 || y <= -1.0)
      check_.fail(p <= -1.0 ? kPreds : kTarget, "sample " + std::to_string(sample) + ": " +
                                                    num(p <= -1.0 ? p : y) +
                                                    " is <= -1 (the log error needs values > -1)");
    const double e = std::log1p(p) - std::log1p(y);
    acc[0].add(e * e);
  }

  Value compute(const OutputSumsState& s) const override {
    const SumBank acc = sums(s);
    return result("mean_squared_log_error", acc[0].value() / static_cast<double>(s.values));
  }
};

}  // namespace

ComponentInfo msle_info() {
  return metric<MeanSquaredLogError>(
      "MeanSquaredLogError",
      "Mean squared logarithmic error sum (log1p(p) - log1p(y))^2 / count over every value "
      "(values > -1); key mean_squared_log_error. Reference: torchmetrics 1.9.0 "
      "torchmetrics.regression.MeanSquaredLogError().",
      {}, preds_target_inputs("[N, ...]"), {"MSLE"},
      {{"mean_squared_log_error", Better::Lower, Plot::None, "mean squared log error"}});
}
TALLY_COMPONENT(msle_info)

}  // namespace tally::regression
