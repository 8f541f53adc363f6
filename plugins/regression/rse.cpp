// RelativeSquaredError: squared error relative to the target's variance (torchmetrics').
//
// Formula. Per output, over N samples of preds p and target y:
//   rse_d = sum (y - p)^2 / max(sum (y - ybar)^2, float64 eps)
//   squared false: sqrt(rse_d); the result is the mean over the D outputs (num_outputs).
// The centred sum comes from exact sums (no cancellation; torchmetrics computes
// sum y^2 - (sum y)^2 / N in float64, which loses digits when the mean is large against the
// spread: see the test case "rse_large_mean").
//
// Reference: torchmetrics 1.9.0 torchmetrics.regression.RelativeSquaredError(num_outputs=D,
// squared=...) on float64 tensors (equivalently 1 - sklearn.metrics.r2_score per output, for a
// target that is not constant).
//
// Example: target [3, -0.5, 2, 7], preds [2.5, 0, 2, 8] -> 0.05139186295503212 (torchmetrics'
// docstring: 0.0514).
//
// State: per output the exact sums of y, y^2 and (y - p)^2 (products split exactly by fma), and N
// (OutputSumsState in common.hpp), added exactly across ranks; it does not grow with N.
#include "common.hpp"

namespace tally::regression {
namespace {

class RelativeSquaredError final : public SumsMetric {
 public:
  explicit RelativeSquaredError(const Params& p)
      : SumsMetric(p, {"RelativeSquaredError", kPreds, kTarget, Layout::Outputs, 3},
                   p.get_size("num_outputs")),
        squared_(p.get_bool("squared")) {}

 protected:
  void add_terms(double p, double y, ExactSum* acc, std::int64_t sample,
                 std::int64_t) const override {
    check_magnitude(p, y, sample);
    const double e = y - p;  // torchmetrics: residual = target - preds, then squared
    acc[0].add(y);
    add_product(acc[1], y, y);
    add_product(acc[2], e, e);
  }

  Value compute(const OutputSumsState& s) const override {
    const SumBank acc = sums(s);
    std::vector<double> rse(static_cast<std::size_t>(s.outputs));
    for (std::size_t k = 0; k < rse.size(); ++k) {
      const ExactSum* a = &acc[3 * k];
      const double den =
          std::max(centered_sum(a[1], a[0], a[0], s.n), std::numeric_limits<double>::epsilon());
      rse[k] = a[2].value() / den;
      if (!squared_) rse[k] = std::sqrt(rse[k]);
    }
    return result("relative_squared_error", numpy::mean(rse));
  }

 private:
  bool squared_;
};

}  // namespace

ComponentInfo rse_info() {
  return metric<RelativeSquaredError>(
      "RelativeSquaredError",
      "Relative squared error sum (y - p)^2 / sum (y - ybar)^2 per output (its square root with "
      "squared false), averaged over the outputs; key relative_squared_error. Reference: "
      "torchmetrics 1.9.0 torchmetrics.regression.RelativeSquaredError(num_outputs, squared).",
      {num_outputs_param(),
       param("squared", ParamType::Bool, "false: the square root of each output's error.")
           .def(true)},
      preds_target_inputs("[N] or [N, D]"), {},
      {{"relative_squared_error", Better::Lower, Plot::None,
        "relative squared error (mean over outputs)"}});
}
TALLY_COMPONENT(rse_info)

}  // namespace tally::regression
