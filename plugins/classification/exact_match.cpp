// ExactMatch: the fraction of samples whose every label is right (torchmetrics' ExactMatch),
// for multiclass (one label a sample: the accuracy) and multilabel tasks.
//
// Formula. A sample matches when pred == target on every element whose target is not
// ignore_index (a sample whose elements are all ignored matches; it still counts in the total,
// as torchmetrics');  exact_match = matching samples / samples.
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.exact_match(preds, target, task=...,
// num_classes=..., num_labels=..., threshold=..., ignore_index=...) in float64; cross-checked with
// scikit-learn 1.7.2 sklearn.metrics.accuracy_score (multilabel: subset accuracy; equal without
// ignore_index).
//
// Key: exact_match.
//
// Example: task multilabel, num_labels 3, preds [[0, 1, 1], [1, 0, 1]], target [[0, 1, 0],
// [1, 0, 1]] -> {exact_match: 0.5}
//
// State: matching samples and samples (int64, summed across ranks: exact).
#include "common.hpp"
#include "tm_core.hpp"

namespace tally::classification {
namespace {

using namespace tm;

TaskOptions exact_match_options() {
  TaskOptions o;
  o.tasks = {"multiclass", "multilabel"};
  o.multidim_average = true;
  return o;
}

struct MatchState {
  std::int64_t correct = 0;
  std::int64_t n = 0;
  TALLY_STATE(sum(correct), sum(n))
};

class ExactMatch final : public TypedMetric<MatchState> {
 public:
  explicit ExactMatch(const Params& p)
      : check_(p.owner_or("ExactMatch")), tp_(read_task(p, exact_match_options())) {}

 protected:
  void update(MatchState& s, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Formatted f = format_batch(check_, tp_, batch, s.n, SigmoidOver::All, true);
    for (const unsigned char m : f.sample_match) s.correct += m;
    s.n += f.samples;
  }

  Value compute(const MatchState& s) const override {
    if (s.n == 0) check_.fail("no samples");
    Value out = Value::map();
    out.set("exact_match", static_cast<double>(s.correct) / static_cast<double>(s.n));
    return out;
  }

 private:
  InputChecker check_;
  TaskParams tp_;
};

}  // namespace

ComponentInfo exact_match_info() {
  return with_results(
      metric<ExactMatch>(
          "ExactMatch",
          "Fraction of samples with every label right (multiclass: accuracy; multilabel: subset "
          "accuracy); key exact_match. Reference: torchmetrics 1.9.0 "
          "torchmetrics.functional.exact_match(preds, target, task, num_classes=num_classes, "
          "num_labels=num_labels, threshold=threshold, ignore_index=ignore_index).",
          task_params(exact_match_options()), task_inputs()),
      {{"exact_match", Better::Higher, Plot::None, "fraction of samples with every label right"}});
}
TALLY_COMPONENT(exact_match_info)

}  // namespace tally::classification
