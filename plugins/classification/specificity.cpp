// Specificity: tn / (tn + fp) of a binary, multiclass or multilabel task (torchmetrics'
// Specificity).
//
// Formula. With the counts of tm_core.hpp:
//   binary           tn / (tn + fp)
//   average micro    sum_c tn_c / sum_c (tn_c + fp_c)
//   macro, weighted  s_c = tn_c / (tn_c + fp_c) averaged (tm::adjust_weights: macro leaves out
//                    the multiclass classes with no tp, fp or fn; weighted by tp_c + fn_c)
//   average none     [s_c]
// A zero denominator gives 0 (torchmetrics' _safe_divide).
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.specificity(preds, target, task=...,
// threshold=..., num_classes=..., num_labels=..., average=..., top_k=..., ignore_index=...),
// computed in float64 (float64 preds; torchmetrics' float32 casts made float64). Cross-checked
// with scikit-learn 1.7.2 recall_score of the negated labels (binary).
//
// Key: specificity.
//
// Example: task binary, preds [0.1, 0.9, 0.6, 0.4, 0.2], target [0, 1, 0, 1, 0]
//   -> {specificity: 0.6666666666666666}
//
// State: the confusion counts of tm_core.hpp (int64, summed across ranks: exact).
#include "common.hpp"
#include "tm_core.hpp"

namespace tally::classification {
namespace {

using namespace tm;

class Specificity final : public CountMetric {
 public:
  explicit Specificity(const Params& p)
      : CountMetric(p, "Specificity", stat_score_options(), SigmoidOver::All) {}

 protected:
  Value compute(const CountState& state) const override {
    const Stats s = stats_of(tp_, checked(state));
    Value out = Value::map();
    if (tp_.task == Task::Binary || tp_.average == Average::Micro) {
      const auto tn = static_cast<double>(total_of(s.tn));
      out.set("specificity", safe_divide(tn, tn + static_cast<double>(total_of(s.fp))));
      return out;
    }
    std::vector<double> score(s.size());
    for (std::size_t c = 0; c < s.size(); ++c)
      score[c] = safe_divide(static_cast<double>(s.tn[c]), static_cast<double>(s.tn[c] + s.fp[c]));
    out.set("specificity", adjust_weights(score, tp_, s));
    return out;
  }
};

}  // namespace

ComponentInfo specificity_info() {
  return with_results(
      metric<Specificity>(
          "Specificity",
          "Specificity tn / (tn + fp) of a binary, multiclass or multilabel task (0 where no "
          "negatives); key specificity. Reference: torchmetrics 1.9.0 "
          "torchmetrics.functional.specificity(preds, target, task, threshold, num_classes, "
          "num_labels, average, top_k=top_k, ignore_index=ignore_index).",
          task_params(stat_score_options()), task_inputs()),
      {{"specificity", Better::Higher, Plot::None, "tn / (tn + fp) (array: per class)"}});
}
TALLY_COMPONENT(specificity_info)

}  // namespace tally::classification
