// RegressionMSE: mean squared error of float arrays (scikit-learn's mean_squared_error).
//
// Named RegressionMSE because the short name MSE is the image-restoration metric (mmeval's
// MeanSquaredError, pixels / 255; plugins/restoration/mse.cpp).
//
// Formula. For pred p and target y, [N] or [N, D], optional weights w (else 1):
//   err_d = sum_i w_i (y_id - p_id)^2 / sum_i w_i
//   mse   = mean_d err_d (uniform_average), or [err_1 .. err_D] (raw_values)
//
// Reference: scikit-learn 1.7.2 sklearn.metrics.mean_squared_error(y_true, y_pred,
// sample_weight=w, multioutput=...). Float32 inputs are computed in float64.
//
// Example: y [3, -0.5, 2, 7], p [2.5, 0, 2, 8] -> 0.375 (scikit-learn's docstring).
//
// State: per output, the exact sum of w (y - p)^2 and of w (ExactSum), added exactly across
// ranks: shard-independent bits (see ErrorSumState in common.hpp for every field's merge).
#include "common.hpp"

namespace tally::regression {
namespace {

class RegressionMse final : public ErrorMetric {
 public:
  explicit RegressionMse(const Params& p)
      : ErrorMetric(p, "RegressionMSE", "mse", ErrorKind::Squared) {}
};

}  // namespace

ComponentInfo mse_info() {
  return with_results(
      metric<RegressionMse>(
          "RegressionMSE",
          "Mean squared error of arrays, optionally weighted: scikit-learn's mean_squared_error; "
          "key mse. (MSE is the image metric, mmeval's MeanSquaredError on pixels / 255.)",
          {multioutput_param()}, regression_inputs()),
      {{"mse", Better::Lower, Plot::None, "mean squared error (array: per output)"}});
}
TALLY_COMPONENT(mse_info)

}  // namespace tally::regression
