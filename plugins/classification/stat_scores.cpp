// StatScores: the true positives, false positives, true negatives, false negatives and support
// (tp + fn) of a binary, multiclass or multilabel task (torchmetrics' StatScores).
//
// Formula. With the counts of tm_core.hpp (per class c: tp_c, fp_c, tn_c, fn_c):
//   binary           the four counts and tp + fn, integers
//   average micro    each summed over the classes (integers)
//   average macro    each averaged over the classes (every class, as torchmetrics' mean)
//   average weighted sum_c x_c * (tp_c + fn_c) / sum_c (tp_c + fn_c)
//   average none     arrays, one value a class
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.stat_scores(preds, target, task=...,
// threshold=..., num_classes=..., num_labels=..., average=..., top_k=..., ignore_index=...) on
// float64 preds (the counts are exact; macro and weighted are computed in float64 where
// torchmetrics casts to float32: the reference runs it with float64 as its default dtype).
//
// Keys: tp, fp, tn, fn, support (torchmetrics returns them stacked in this order).
//
// Example: task binary, preds [0.1, 0.9, 0.6, 0.4], target [0, 1, 0, 1]
//   -> {tp: 1, fp: 1, tn: 1, fn: 1, support: 2}
//
// State: the confusion counts of tm_core.hpp (int64, summed across ranks: exact on any number).
#include "common.hpp"
#include "tm_core.hpp"

namespace tally::classification {
namespace {

using namespace tm;

class StatScores final : public CountMetric {
 public:
  explicit StatScores(const Params& p)
      : CountMetric(p, "StatScores", stat_score_options(), SigmoidOver::All) {}

 protected:
  Value compute(const CountState& state) const override {
    const Stats s = stats_of(tp_, checked(state));
    std::vector<std::int64_t> support(s.size());
    for (std::size_t c = 0; c < s.size(); ++c) support[c] = s.tp[c] + s.fn[c];
    const std::vector<std::pair<const char*, const std::vector<std::int64_t>*>> parts = {
        {"tp", &s.tp}, {"fp", &s.fp}, {"tn", &s.tn}, {"fn", &s.fn}, {"support", &support}};
    Value out = Value::map();
    for (const auto& [key, v] : parts) {
      if (tp_.task == Task::Binary || tp_.average == Average::Micro) {
        out.set(key, Value(total_of(*v)));
      } else if (tp_.average == Average::None) {
        out.set(key, Value(*v));
      } else if (tp_.average == Average::Macro) {
        out.set(key, Value(static_cast<double>(total_of(*v)) / static_cast<double>(v->size())));
      } else {
        // torchmetrics: (res * (w / w.sum())).sum(); a zero total weight gives NaN there too.
        const auto wsum = static_cast<double>(total_of(support));
        double x = 0.0;
        for (std::size_t c = 0; c < v->size(); ++c)
          x += static_cast<double>((*v)[c]) * (static_cast<double>(support[c]) / wsum);
        out.set(key, Value(x));
      }
    }
    return out;
  }
};

}  // namespace

ComponentInfo stat_scores_info() {
  return with_results(
      metric<StatScores>(
          "StatScores",
          "True positives, false positives, true negatives, false negatives and support of a "
          "binary, multiclass or multilabel task (integers; macro / weighted averages as floats). "
          "Reference: torchmetrics 1.9.0 torchmetrics.functional.stat_scores(preds, target, "
          "task, threshold, num_classes, num_labels, average, top_k=top_k, "
          "ignore_index=ignore_index).",
          task_params(stat_score_options()), task_inputs()),
      {{"tp", Better::Higher, Plot::None, "true positives"},
       {"fp", Better::Lower, Plot::None, "false positives"},
       {"tn", Better::Higher, Plot::None, "true negatives"},
       {"fn", Better::Lower, Plot::None, "false negatives"},
       {"support", Better::Neither, Plot::None, "tp + fn"}});
}
TALLY_COMPONENT(stat_scores_info)

}  // namespace tally::classification
