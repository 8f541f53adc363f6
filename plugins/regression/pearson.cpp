// PearsonCorrCoef: Pearson's correlation coefficient of preds and target (torchmetrics').
//
// Formula. Per output, over N samples x = preds, y = target:
//   r = sum (x - xbar)(y - ybar) / sqrt(sum (x - xbar)^2 sum (y - ybar)^2), clamped to [-1, 1]
//   NaN (as torchmetrics) when var(x) / max|x - xbar|^2 or the same for y is below sqrt(float64
//   eps) = 1.49e-8, or not finite: a constant input, or N < 2.
//   num_outputs D > 1: preds and target [N, D], an array of D coefficients.
//
// Reference: torchmetrics 1.9.0 torchmetrics.regression.PearsonCorrCoef(num_outputs=D) on float64
// tensors. Cross-checked with SciPy 1.16.3 scipy.stats.pearsonr(x, y) (the same values to 1e-12
// on the test data; SciPy also gives NaN for a constant input, and raises for N < 2). Where the
// mean is large against the spread (values near 1e6 spread by 1e-2), this metric keeps every digit
// (its sums are exact); torchmetrics' and SciPy's float64 passes keep most of them (see the test
// case "pearson_large_mean", checked against exact rational arithmetic).
//
// Example: target [3, -0.5, 2, 7], preds [2.5, 0, 2, 8] -> 0.9848696184482703 (torchmetrics'
// docstring: 0.9849).
//
// State: per output the exact sums of x, y, x^2, y^2 and x y (ExactSum; a product split exactly in
// two by fma), the least and greatest x and y, and N (MomentsState in common.hpp): merged across
// ranks exactly (merge), by min/max and by a sum, so any sharding gives the same bits; the state
// does not grow with N. The centred sums are formed once, from the exact totals (centered_sum).
#include "common.hpp"

namespace tally::regression {
namespace {

class PearsonCorrCoef final : public MomentsMetric {
 public:
  explicit PearsonCorrCoef(const Params& p) : MomentsMetric(p, "PearsonCorrCoef") {}

 protected:
  Value compute(const MomentsState& s) const override {
    std::vector<double> r;
    for (const Moments& m : moments(s)) r.push_back(pearson(m, s.n));
    Value out = Value::map();
    out.set("pearson_corrcoef", per_output(r, outputs_ > 1));
    return out;
  }
};

}  // namespace

ComponentInfo pearson_info() {
  return metric<PearsonCorrCoef>(
      "PearsonCorrCoef",
      "Pearson's correlation coefficient of preds and target, per output, from exact sums "
      "(no digits lost when the mean is large against the spread); key pearson_corrcoef. "
      "Reference: torchmetrics 1.9.0 torchmetrics.regression.PearsonCorrCoef(num_outputs).",
      {num_outputs_param()}, preds_target_inputs("[N] or [N, D]"), {},
      {{"pearson_corrcoef", Better::Higher, Plot::None,
        "Pearson's r in [-1, 1] (array: per output)"}});
}
TALLY_COMPONENT(pearson_info)

}  // namespace tally::regression
