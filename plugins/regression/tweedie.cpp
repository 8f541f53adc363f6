// TweedieDevianceScore: mean Tweedie deviance of preds from targets (torchmetrics').
//
// Formula. Over every value of preds p and targets y (any shape [N, ...], all values alike),
// for the parameter power:
//   power = 0 (normal):   d = (y - p)^2
//   power = 1 (Poisson):  d = 2 (y log(y / p) + p - y)            (y log(.) = 0 where y = 0)
//   power = 2 (gamma):    d = 2 (log(p / y) + y / p - 1)
//   otherwise:            d = 2 (max(y, 0)^(2-power) / ((1-power)(2-power))
//                                - y p^(1-power) / (1-power) + p^(2-power) / (2-power))
//   score = sum d / (number of values)
//   Domains (InputError otherwise, as torchmetrics raises): power < 0: p > 0; 1 <= power < 2:
//   p > 0, y >= 0; power >= 2: p > 0, y > 0. 0 < power < 1 is not defined (ConfigError).
//
// Reference: torchmetrics 1.9.0 torchmetrics.regression.TweedieDevianceScore(power) on float64
// tensors. Cross-checked with scikit-learn 1.7.2 sklearn.metrics.mean_tweedie_deviance(y, p,
// power=power) (the same formulas; equal to 1e-14 on the test data).
//
// Example: targets [1, 2, 3, 4], preds [4, 3, 2, 1] -> 5.0 (torchmetrics' docstring, power 0).
//
// State: the exact sum of the deviances and the number of values (OutputSumsState in common.hpp),
// added exactly across ranks; it does not grow with N.
#include "common.hpp"

namespace tally::regression {
namespace {

class TweedieDevianceScore final : public SumsMetric {
 public:
  explicit TweedieDevianceScore(const Params& p)
      : SumsMetric(p, {"TweedieDevianceScore", kPreds, "targets", Layout::Flat, 1}),
        power_(p.get_double("power")) {
    if (!std::isfinite(power_) || (power_ > 0 && power_ < 1))
      p.fail("power",
             "must be <= 0 or >= 1 (the deviance is not defined for 0 < power < 1), "
             "got " +
                 num(power_));
  }

 protected:
  void add_terms(double p, double y, ExactSum* acc, std::int64_t sample,
                 std::int64_t) const override {
    const auto need = [&](bool ok, const char* field, double v, const char* what) {
      if (!ok)
        check_.fail(field, "sample " + std::to_string(sample) + ": " + num(v) + " must be " + what +
                               " for power " + num(power_));
    };
    double d = 0;
    if (power_ == 0) {
      d = (y - p) * (y - p);
    } else if (power_ < 0) {
      need(p > 0, kPreds, p, "> 0");
    } else if (power_ < 2) {
      need(p > 0, kPreds, p, "> 0");
      need(y >= 0, "targets", y, ">= 0");
    } else {
      need(p > 0, kPreds, p, "> 0");
      need(y > 0, "targets", y, "> 0");
    }
    if (power_ == 1) {
      d = 2 * ((y == 0 ? 0.0 : y * std::log(y / p)) + p - y);
    } else if (power_ == 2) {
      d = 2 * (std::log(p / y) + y / p - 1);
    } else if (power_ != 0) {
      const double a = std::pow(std::max(y, 0.0), 2 - power_) / ((1 - power_) * (2 - power_));
      const double b = y * std::pow(p, 1 - power_) / (1 - power_);
      const double c = std::pow(p, 2 - power_) / (2 - power_);
      d = 2 * (a - b + c);
    }
    add_finite(acc[0], d, "the deviance", sample);
  }

  Value compute(const OutputSumsState& s) const override {
    const SumBank acc = sums(s);
    return result("tweedie_deviance_score", acc[0].value() / static_cast<double>(s.values));
  }

 private:
  double power_;
};

}  // namespace

ComponentInfo tweedie_info() {
  return metric<TweedieDevianceScore>(
      "TweedieDevianceScore",
      "Mean Tweedie deviance of preds from targets for a power (0 normal, 1 Poisson, 2 gamma, "
      "else compound); key tweedie_deviance_score. Reference: torchmetrics 1.9.0 "
      "torchmetrics.regression.TweedieDevianceScore(power).",
      {param("power", ParamType::Float,
             "The Tweedie power: <= 0, or >= 1 (0: squared error, 1: Poisson, 2: gamma).")
           .def(0.0)},
      {InputSpec{kPreds, "Predicted means [N, ...], float or integer.", true},
       InputSpec{"targets", "True values, the shape of preds.", true}},
      {"MeanTweedieDeviance"},
      {{"tweedie_deviance_score", Better::Lower, Plot::None, "mean Tweedie deviance"}});
}
TALLY_COMPONENT(tweedie_info)

}  // namespace tally::regression
