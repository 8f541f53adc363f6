// SpecificityAtSensitivity: the highest specificity (1 - false positive rate) among the
// thresholds whose sensitivity (true positive rate) reaches min_sensitivity, and that threshold,
// of a binary, multiclass (per class) or multilabel (per label) task (torchmetrics'
// SpecificityAtSensitivity).
//
// Formula. With the ROC curves of ROC (curve_core.hpp: exact, (0, 0) at threshold 1 and one point
// per distinct score; binned, one per threshold, reversed), per curve:
//   the points with tpr_i >= min_sensitivity; among them the first of the largest 1 - fpr_i
//   (torch.argmax) and its threshold; none: specificity 0 and threshold 1e6 (torchmetrics'
//   sentinel).
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.specificity_at_sensitivity(preds, target,
// task=..., min_sensitivity=..., thresholds=..., num_classes=..., num_labels=...,
// ignore_index=...) on float64 preds, run with torch's default dtype float64
// (tests/reference/classification_fixed.py).
//
// Keys: specificity, threshold (torchmetrics' tuple; arrays per class / label).
//
// Example: task binary, min_sensitivity 0.5, preds [0.1, 0.4, 0.35, 0.8], target [0, 1, 1, 0]
//   -> {specificity: 0.5, threshold: 0.4}
//
// State: that of ROC (curve_core.hpp): exact, every kept score and label, concatenated in rank
// order; binned, int64 counts [T, K, 2, 2] summed across ranks (a size fixed by the parameters).
#include "common.hpp"
#include "curve_core.hpp"

namespace tally::classification {
namespace {

using namespace curves;

class SpecificityAtSensitivity final : public CurveMetric {
 public:
  explicit SpecificityAtSensitivity(const Params& p)
      : CurveMetric(p, "SpecificityAtSensitivity"), min_(unit_param(p, "min_sensitivity")) {}

 protected:
  Value compute(const CurveState& s) const override {
    return roc_operating_point(s, min_, /*sensitivity_first=*/false);
  }

 private:
  double min_;
};

}  // namespace

ComponentInfo specificity_at_sensitivity_info() {
  return with_results(
      metric<SpecificityAtSensitivity>(
          "SpecificityAtSensitivity",
          "The highest specificity (1 - false positive rate) at a threshold whose sensitivity "
          "reaches min_sensitivity, and that threshold (0 and 1e6 when none does), of a binary, "
          "multiclass (per class) or multilabel (per label) task, exact or binned. "
          "Reference: torchmetrics 1.9.0 torchmetrics.functional.specificity_at_sensitivity(preds, "
          "target, task, min_sensitivity=min_sensitivity, thresholds=thresholds, "
          "num_classes=num_classes, num_labels=num_labels, ignore_index=ignore_index).",
          operating_point_params("min_sensitivity",
                                 "The least sensitivity a threshold must reach, in [0, 1] "
                                 "(required)."),
          tm::task_inputs({.labels = false})),
      {{"specificity", Better::Higher, Plot::None, "best specificity at the minimum sensitivity"},
       {"threshold", Better::Neither, Plot::None,
        "the threshold of that point (array: per class / label)"}});
}
TALLY_COMPONENT(specificity_at_sensitivity_info)

}  // namespace tally::classification
