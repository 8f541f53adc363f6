// MinkowskiDistance: the Minkowski (L^p) distance between preds and targets (torchmetrics').
//
// Formula. Over every value of preds x and targets y (any shape [N, ...], all values alike):
//   d = (sum |x - y|^p)^(1/p),  p >= 1
//
// Reference: torchmetrics 1.9.0 torchmetrics.regression.MinkowskiDistance(p) on float64 tensors.
// Cross-checked with SciPy 1.16.3 scipy.spatial.distance.minkowski(x.ravel(), y.ravel(), p)
// (equal to 1e-14 on the test data).
//
// Example: targets [1, 2, 3, 4], preds [4, 3, 2, 1], p 3 -> 3.825862365544778 (56^(1/3)).
//
// State: the exact sum of |x - y|^p (OutputSumsState in common.hpp), added exactly across ranks;
// it does not grow with N.
#include "common.hpp"

namespace tally::regression {
namespace {

class MinkowskiDistance final : public SumsMetric {
 public:
  explicit MinkowskiDistance(const Params& p)
      : SumsMetric(p, {"MinkowskiDistance", kPreds, "targets", Layout::Flat, 1}),
        p_(p.get_double("p")) {
    if (!(p_ >= 1) || !std::isfinite(p_))
      p.fail("p", "must be a finite number >= 1, got " + num(p_));
  }

 protected:
  void add_terms(double x, double y, ExactSum* acc, std::int64_t sample,
                 std::int64_t) const override {
    add_finite(acc[0], std::pow(std::abs(x - y), p_), "|preds - targets|^p", sample);
  }

  Value compute(const OutputSumsState& s) const override {
    const SumBank acc = sums(s);
    return result("minkowski_distance", std::pow(acc[0].value(), 1.0 / p_));
  }

 private:
  double p_;
};

}  // namespace

ComponentInfo minkowski_info() {
  return metric<MinkowskiDistance>(
      "MinkowskiDistance",
      "Minkowski distance (sum |preds - targets|^p)^(1/p) over every value; key "
      "minkowski_distance. Reference: torchmetrics 1.9.0 "
      "torchmetrics.regression.MinkowskiDistance(p).",
      {param("p", ParamType::Float, "The order p of the norm, >= 1 (required).")},
      {InputSpec{kPreds, "Predictions [N, ...], float or integer.", true},
       InputSpec{"targets", "True values, the shape of preds.", true}},
      {}, {{"minkowski_distance", Better::Lower, Plot::None, "the L^p distance"}});
}
TALLY_COMPONENT(minkowski_info)

}  // namespace tally::regression
