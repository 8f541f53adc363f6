// ConcordanceCorrCoef: Lin's concordance correlation coefficient of preds and target
// (torchmetrics').
//
// Formula. Per output, over N samples x = preds, y = target, with the sample variances
// sx^2 = sum (x - xbar)^2 / (N - 1), sy^2 likewise, and Pearson's r (PearsonCorrCoef, NaN for a
// constant input):
//   ccc = 2 r sx sy / (sx^2 + sy^2 + (xbar - ybar)^2)
//   num_outputs D > 1: preds and target [N, D], an array of D coefficients.
//
// Reference: torchmetrics 1.9.0 torchmetrics.regression.ConcordanceCorrCoef(num_outputs=D) on
// float64 tensors (SciPy and scikit-learn have no such function). Its sums are exact, so values
// near 1e6 spread by 1e-2 keep every digit (test case "concordance_large_mean", checked against
// exact rational arithmetic).
//
// Example: target [3, -0.5, 2, 7], preds [2.5, 0, 2, 8] -> 0.9777347531461761
// (torchmetrics' docstring: 0.9777).
//
// State: MomentsState (common.hpp), as PearsonCorrCoef: per output the exact sums of x, y, x^2,
// y^2, x y, the extremes and N, merged exactly across ranks; it does not grow with N.
#include "common.hpp"

namespace tally::regression {
namespace {

class ConcordanceCorrCoef final : public MomentsMetric {
 public:
  explicit ConcordanceCorrCoef(const Params& p) : MomentsMetric(p, "ConcordanceCorrCoef") {}

 protected:
  Value compute(const MomentsState& s) const override {
    std::vector<double> r;
    const double nm1 = static_cast<double>(s.n) - 1.0;
    for (const Moments& m : moments(s)) {
      const double vx = m.sxx / nm1, vy = m.syy / nm1;
      r.push_back(2.0 * pearson(m, s.n) * std::sqrt(vx) * std::sqrt(vy) /
                  (vx + vy + m.mean_diff * m.mean_diff));
    }
    Value out = Value::map();
    out.set("concordance_corrcoef", per_output(r, outputs_ > 1));
    return out;
  }
};

}  // namespace

ComponentInfo concordance_info() {
  return metric<ConcordanceCorrCoef>(
      "ConcordanceCorrCoef",
      "Lin's concordance correlation coefficient 2 r sx sy / (sx^2 + sy^2 + (xbar - ybar)^2) of "
      "preds and target, per output, from exact sums; key concordance_corrcoef. Reference: "
      "torchmetrics 1.9.0 torchmetrics.regression.ConcordanceCorrCoef(num_outputs).",
      {num_outputs_param()}, preds_target_inputs("[N] or [N, D]"), {},
      {{"concordance_corrcoef", Better::Higher, Plot::None,
        "concordance correlation in [-1, 1] (array: per output)"}});
}
TALLY_COMPONENT(concordance_info)

}  // namespace tally::regression
