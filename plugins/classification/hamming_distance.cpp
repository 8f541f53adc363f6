// HammingDistance: the fraction of wrong labels of a binary, multiclass or multilabel task
// (torchmetrics' HammingDistance).
//
// Formula. With the counts of tm_core.hpp:
//   binary                 1 - (tp + tn) / (tp + fp + tn + fn)
//   multilabel, micro      the same on the counts summed over the labels
//   multiclass, micro      1 - sum tp / sum (tp + fn)  (the error rate)
//   macro, weighted        h_c = 1 - (tp + tn) / all (multilabel) or 1 - tp / (tp + fn)
//                          (multiclass) averaged (tm::adjust_weights)
//   average none           [h_c]
// A zero denominator counts as a ratio of 0 (so a distance of 1), as torchmetrics'.
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.hamming_distance(preds, target,
// task=..., threshold=..., num_classes=..., num_labels=..., average=..., top_k=...,
// ignore_index=...) in float64; cross-checked with scikit-learn 1.7.2
// sklearn.metrics.hamming_loss (equal for binary, multiclass micro and multilabel micro).
//
// Key: hamming_distance.
//
// Example: task multilabel, num_labels 3, preds [[0, 1, 1], [1, 0, 1]], target [[0, 1, 0],
// [1, 0, 1]] -> {hamming_distance: 0.16666666666666663}
//
// State: the confusion counts of tm_core.hpp (int64, summed across ranks: exact).
#include "common.hpp"
#include "tm_core.hpp"

namespace tally::classification {
namespace {

using namespace tm;

class HammingDistance final : public CountMetric {
 public:
  explicit HammingDistance(const Params& p)
      : CountMetric(p, "HammingDistance", stat_score_options(), SigmoidOver::All) {}

 protected:
  Value compute(const CountState& state) const override {
    const Stats s = stats_of(tp_, checked(state));
    const bool pooled = tp_.task != Task::Multiclass;  // binary and multilabel: every cell
    const auto h = [&](std::int64_t tp, std::int64_t fp, std::int64_t tn, std::int64_t fn) {
      return pooled ? 1.0 - safe_divide(static_cast<double>(tp + tn),
                                        static_cast<double>(tp + tn + fp + fn))
                    : 1.0 - safe_divide(static_cast<double>(tp), static_cast<double>(tp + fn));
    };
    Value out = Value::map();
    if (tp_.task == Task::Binary || tp_.average == Average::Micro) {
      out.set("hamming_distance",
              h(total_of(s.tp), total_of(s.fp), total_of(s.tn), total_of(s.fn)));
      return out;
    }
    std::vector<double> score(s.size());
    for (std::size_t c = 0; c < s.size(); ++c) score[c] = h(s.tp[c], s.fp[c], s.tn[c], s.fn[c]);
    out.set("hamming_distance", adjust_weights(score, tp_, s));
    return out;
  }
};

}  // namespace

ComponentInfo hamming_distance_info() {
  return with_results(
      metric<HammingDistance>(
          "HammingDistance",
          "Fraction of wrong labels of a binary, multiclass or multilabel task; key "
          "hamming_distance. Reference: torchmetrics 1.9.0 "
          "torchmetrics.functional.hamming_distance(preds, target, task, threshold, num_classes, "
          "num_labels, average, top_k=top_k, ignore_index=ignore_index).",
          task_params(stat_score_options()), task_inputs()),
      {{"hamming_distance", Better::Lower, Plot::None,
        "fraction of wrong labels (array: per class)"}});
}
TALLY_COMPONENT(hamming_distance_info)

}  // namespace tally::classification
