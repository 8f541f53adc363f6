// RMSE: root mean squared error of float arrays (scikit-learn's root_mean_squared_error).
//
// Formula. For pred p and target y, [N] or [N, D], optional weights w (else 1):
//   err_d = sqrt(sum_i w_i (y_id - p_id)^2 / sum_i w_i)      (the root per output, then:)
//   rmse  = mean_d err_d (uniform_average), or [err_1 .. err_D] (raw_values)
//
// Reference: scikit-learn 1.7.2 sklearn.metrics.root_mean_squared_error(y_true, y_pred,
// sample_weight=w, multioutput=...). Float32 inputs are computed in float64.
//
// Example: y [3, -0.5, 2, 7], p [2.5, 0, 2, 8] -> 0.6123724356957945 (scikit-learn's docstring).
//
// State: per output, the exact sum of w (y - p)^2 and of w (ExactSum), added exactly across
// ranks: shard-independent bits (see ErrorSumState in common.hpp for every field's merge).
#include "common.hpp"

namespace tally::regression {
namespace {

class Rmse final : public ErrorMetric {
 public:
  explicit Rmse(const Params& p) : ErrorMetric(p, "RMSE", "rmse", ErrorKind::RootSquared) {}
};

}  // namespace

ComponentInfo rmse_info() {
  return with_results(
      metric<Rmse>(
          "RMSE",
          "Root mean squared error of arrays (the root per output, then averaged), optionally "
          "weighted: scikit-learn's root_mean_squared_error; key rmse.",
          {multioutput_param()}, regression_inputs()),
      {{"rmse", Better::Lower, Plot::None, "root mean squared error (array: per output)"}});
}
TALLY_COMPONENT(rmse_info)

}  // namespace tally::regression
