// FBetaScore: the F-beta score (1 + b^2) tp / ((1 + b^2) tp + b^2 fn + fp) of a binary,
// multiclass or multilabel task (torchmetrics' FBetaScore).
//
// Formula. With the counts of tm_core.hpp and b2 = beta^2:
//   binary           (1 + b2) tp / ((1 + b2) tp + b2 fn + fp)
//   average micro    the same on the counts summed over the classes
//   macro, weighted  f_c of each class averaged (tm::adjust_weights)
//   average none     [f_c]
// A zero denominator gives zero_division (0 or 1).
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.fbeta_score(preds, target, task=...,
// beta=..., threshold=..., num_classes=..., num_labels=..., average=..., top_k=...,
// ignore_index=..., zero_division=...) computed in float64; cross-checked with scikit-learn 1.7.2
// sklearn.metrics.fbeta_score (equal where both apply: binary, and multiclass / multilabel
// without absent classes; scikit-learn's macro keeps a class with no tp, fp, fn where
// torchmetrics' multiclass macro leaves it out).
//
// Key: fbeta_score.
//
// Example: task binary, beta 2, preds [0.1, 0.9, 0.6, 0.4], target [0, 1, 0, 1]
//   -> {fbeta_score: 0.5}
//
// State: the confusion counts of tm_core.hpp (int64, summed across ranks: exact).
#include "common.hpp"
#include "tm_core.hpp"

namespace tally::classification {
namespace {

using namespace tm;

double fbeta(double tp, double fp, double fn, double b2, double zero_division) {
  return safe_divide((1 + b2) * tp, (1 + b2) * tp + b2 * fn + fp, zero_division);
}

class FBetaScore final : public CountMetric {
 public:
  explicit FBetaScore(const Params& p)
      : CountMetric(p, "FBetaScore", stat_score_options(), SigmoidOver::All),
        beta_(p.get_double("beta")),
        zero_division_(p.get_double("zero_division")) {
    if (!(beta_ > 0.0) || !std::isfinite(beta_))
      p.fail("beta", fmt::format("must be a finite number above 0, got {}", beta_));
    if (zero_division_ != 0.0 && zero_division_ != 1.0)
      p.fail("zero_division", fmt::format("must be 0 or 1, got {}", zero_division_));
  }

 protected:
  Value compute(const CountState& state) const override {
    const Stats s = stats_of(tp_, checked(state));
    const double b2 = beta_ * beta_;
    Value out = Value::map();
    if (tp_.task == Task::Binary || tp_.average == Average::Micro) {
      out.set("fbeta_score",
              fbeta(static_cast<double>(total_of(s.tp)), static_cast<double>(total_of(s.fp)),
                    static_cast<double>(total_of(s.fn)), b2, zero_division_));
      return out;
    }
    std::vector<double> score(s.size());
    for (std::size_t c = 0; c < s.size(); ++c)
      score[c] = fbeta(static_cast<double>(s.tp[c]), static_cast<double>(s.fp[c]),
                       static_cast<double>(s.fn[c]), b2, zero_division_);
    out.set("fbeta_score", adjust_weights(score, tp_, s));
    return out;
  }

 private:
  double beta_;
  double zero_division_;
};

}  // namespace

ComponentInfo fbeta_score_info() {
  auto params = task_params(stat_score_options());
  params.insert(
      params.begin() + 1,
      param("beta", ParamType::Float, "Weight of recall against precision (> 0).").def(1.0));
  params.push_back(
      param("zero_division", ParamType::Float, "The score where its denominator is 0: 0 or 1.")
          .def(0.0));
  return with_results(
      metric<FBetaScore>(
          "FBetaScore",
          "F-beta score of a binary, multiclass or multilabel task; key fbeta_score. Reference: "
          "torchmetrics 1.9.0 torchmetrics.functional.fbeta_score(preds, target, task, beta, "
          "threshold, num_classes, num_labels, average, top_k=top_k, ignore_index=ignore_index, "
          "zero_division=zero_division).",
          std::move(params), task_inputs()),
      {{"fbeta_score", Better::Higher, Plot::None, "F-beta (array: per class)"}});
}
TALLY_COMPONENT(fbeta_score_info)

}  // namespace tally::classification
