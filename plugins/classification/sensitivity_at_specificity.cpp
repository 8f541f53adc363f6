// SensitivityAtSpecificity: the highest sensitivity (true positive rate) among the thresholds
// whose specificity (1 - false positive rate) reaches min_specificity, and that threshold, of a
// binary, multiclass (per class) or multilabel (per label) task (torchmetrics'
// SensitivityAtSpecificity).
//
// Formula. With the ROC curves of ROC (curve_core.hpp: exact, (0, 0) at threshold 1 and one point
// per distinct score; binned, one per threshold, reversed), per curve:
//   the points with 1 - fpr_i >= min_specificity; among them the first of the largest tpr_i
//   (torch.argmax) and its threshold; none: sensitivity 0 and threshold 1e6 (torchmetrics'
//   sentinel).
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.sensitivity_at_specificity(preds, target,
// task=..., min_specificity=..., thresholds=..., num_classes=..., num_labels=...,
// ignore_index=...) on float64 preds, run with torch's default dtype float64
// (tests/reference/classification_fixed.py).
//
// Keys: sensitivity, threshold (torchmetrics' tuple; arrays per class / label).
//
// Example: task binary, min_specificity 0.5, preds [0.1, 0.4, 0.35, 0.8], target [0, 1, 1, 0]
//   -> {sensitivity: 1, threshold: 0.35}
//
// State: that of ROC (curve_core.hpp): exact, every kept score and label, concatenated in rank
// order; binned, int64 counts [T, K, 2, 2] summed across ranks (a size fixed by the parameters).
#include "common.hpp"
#include "curve_core.hpp"

namespace tally::classification {
namespace {

using namespace curves;

class SensitivityAtSpecificity final : public CurveMetric {
 public:
  explicit SensitivityAtSpecificity(const Params& p)
      : CurveMetric(p, "SensitivityAtSpecificity"), min_(unit_param(p, "min_specificity")) {}

 protected:
  Value compute(const CurveState& s) const override {
    return roc_operating_point(s, min_, /*sensitivity_first=*/true);
  }

 private:
  double min_;
};

}  // namespace

ComponentInfo sensitivity_at_specificity_info() {
  return with_results(
      metric<SensitivityAtSpecificity>(
          "SensitivityAtSpecificity",
          "The highest sensitivity (true positive rate) at a threshold whose specificity reaches "
          "min_specificity, and that threshold (0 and 1e6 when none does), of a binary, multiclass "
          "(per class) or multilabel (per label) task, exact or binned. "
          "Reference: torchmetrics 1.9.0 torchmetrics.functional.sensitivity_at_specificity(preds, "
          "target, task, min_specificity=min_specificity, thresholds=thresholds, "
          "num_classes=num_classes, num_labels=num_labels, ignore_index=ignore_index).",
          operating_point_params("min_specificity",
                                 "The least specificity a threshold must reach, in [0, 1] "
                                 "(required)."),
          tm::task_inputs({.labels = false})),
      {{"sensitivity", Better::Higher, Plot::None, "best sensitivity at the minimum specificity"},
       {"threshold", Better::Neither, Plot::None,
        "the threshold of that point (array: per class / label)"}});
}
TALLY_COMPONENT(sensitivity_at_specificity_info)

}  // namespace tally::classification
