// RegressionMAE: mean absolute error of float arrays (scikit-learn's mean_absolute_error).
//
// Named RegressionMAE because the short name MAE is the image-restoration metric (mmeval's
// MeanAbsoluteError, pixels / 255; plugins/restoration/mae.cpp).
//
// Formula. For pred p and target y, [N] or [N, D], optional weights w (else 1):
//   err_d = sum_i w_i |p_id - y_id| / sum_i w_i
//   mae   = mean_d err_d (uniform_average), or [err_1 .. err_D] (raw_values)
//
// Reference: scikit-learn 1.7.2 sklearn.metrics.mean_absolute_error(y_true, y_pred,
// sample_weight=w, multioutput=...). Float32 inputs are computed in float64 (scikit-learn keeps
// float32 when every input is float32).
//
// Example: y [3, -0.5, 2, 7], p [2.5, 0, 2, 8] -> 0.5 (scikit-learn's docstring).
//
// State: per output, the exact sum of w |p - y| and of w (ExactSum, 67 words each), added
// exactly across ranks: any sharding gives the same bits, and the state does not grow with N
// (see ErrorSumState in common.hpp for every field's merge).
#include "common.hpp"

namespace tally::regression {
namespace {

class RegressionMae final : public ErrorMetric {
 public:
  explicit RegressionMae(const Params& p)
      : ErrorMetric(p, "RegressionMAE", "mae", ErrorKind::Absolute) {}
};

}  // namespace

ComponentInfo mae_info() {
  return with_results(
      metric<RegressionMae>(
          "RegressionMAE",
          "Mean absolute error of arrays, optionally weighted: scikit-learn's mean_absolute_error; "
          "key mae. (MAE is the image metric, mmeval's MeanAbsoluteError on pixels / 255.)",
          {multioutput_param()}, regression_inputs()),
      {{"mae", Better::Lower, Plot::None, "mean absolute error (array: per output)"}});
}
TALLY_COMPONENT(mae_info)

}  // namespace tally::regression
