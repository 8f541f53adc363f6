// PrecisionRecallCurve: precision and recall at every threshold of a binary, multiclass
// (one-vs-rest, per class) or multilabel (per label) task (torchmetrics' PrecisionRecallCurve).
//
// Formula (curve_core.hpp reads the inputs). Exact (thresholds null), per curve, with the points
// of torchmetrics' _binary_clf_curve (one per distinct score s_1 > ... > s_m; tp_i, fp_i the
// positives and negatives scoring at least s_i; P = tp_m):
//   precision_i = tp_i / (tp_i + fp_i),  recall_i = tp_i / P  (NaN when P = 0, but torchmetrics
//   sets every recall to 1 when every target is 0: binary and multilabel, P = 0; multiclass,
//   every target is class 0, for every class's curve)
//   returned in increasing threshold order, with a last point precision 1, recall 0:
//   precision [m + 1], recall [m + 1], thresholds [m] = s_m, ..., s_1.
// Binned (thresholds T or a list t_1..t_T, pred = score >= t_j), per curve:
//   precision_j = tp_j / (tp_j + fp_j), recall_j = tp_j / (tp_j + fn_j) (NaN for 0 / 0, as
//   torchmetrics' _safe_divide(zero_division="nan")), then precision 1 and recall 0 appended;
//   thresholds as given (one array for all curves).
// Multiclass and multilabel: arrays of arrays, one per class / label (torchmetrics' lists, or
// [C, T + 1] tensors when binned).
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.precision_recall_curve(preds, target,
// task=..., thresholds=..., num_classes=..., num_labels=..., average=..., ignore_index=...) on
// float64 preds, run with torch's default dtype float64 (average: tests/reference/
// classification_fixed.py). scikit-learn 1.7.2 precision_recall_curve(target,
// preds) gives the same binary exact curve except that it drops the points after full recall
// (drop_intermediate-like truncation) and the reference script records that cross-check.
// average (multiclass only, torchmetrics 1.9's): micro, one curve of every (sample, class) score
// against the one-hot target (binned: the counts summed over the classes); macro, the precisions
// of every class's curve pooled and sorted (NaN last), the recall at each the mean over the
// classes of torchmetrics' interp(precision, precision_k, recall_k) (curve_core.hpp), the
// thresholds pooled and sorted. One curve either way: precision, recall, thresholds arrays.
//
// Keys: precision, recall, thresholds (torchmetrics' tuple).
//
// Example: task binary, preds [0.1, 0.4, 0.35, 0.8], target [0, 1, 1, 0]
//   -> {precision: [0.5, 0.6667, 0.5, 0, 1], recall: [1, 1, 0.5, 0, 0], thresholds: [0.1, 0.35,
//   0.4, 0.8]}
//
// State: exact, every kept score and label (concatenated in rank order; the curve does not
// depend on their order); binned, int64 counts [T, K, 2, 2] summed across ranks (curve_core.hpp).
#include "common.hpp"
#include "curve_core.hpp"

namespace tally::classification {
namespace {

using namespace curves;

class PrecisionRecallCurve final : public CurveMetric {
 public:
  explicit PrecisionRecallCurve(const Params& p)
      : CurveMetric(p, "PrecisionRecallCurve"), average_(curve_average(p, cp_)) {}

 protected:
  Value compute(const CurveState& s) const override {
    checked(s);
    Curves c = average_ == "micro" ? micro_pr(s) : pr_curves(s);
    if (average_ == "macro") {
      if (cp_.binned) c.thresholds.assign(c.x.size(), cp_.thresholds);
      c = macro_curve(c, false);
    }
    Value out = Value::map();
    if (!average_.empty()) {  // one curve
      out.set("precision", Value(c.x[0]));
      out.set("recall", Value(c.y[0]));
      out.set("thresholds", cp_.binned && average_ == "micro" ? binned_thresholds(false)
                                                              : Value(c.thresholds[0]));
      return out;
    }
    out.set("precision", pack(std::move(c.x)));
    out.set("recall", pack(std::move(c.y)));
    out.set("thresholds", cp_.binned ? binned_thresholds(false) : pack(std::move(c.thresholds)));
    return out;
  }

 private:
  std::string average_;  // "" (per class), micro or macro
};

}  // namespace

ComponentInfo precision_recall_curve_info() {
  return with_results(
      metric<PrecisionRecallCurve>(
          "PrecisionRecallCurve",
          "Precision and recall at every threshold (exact: every distinct score; or binned) of a "
          "binary, multiclass (per class) or multilabel (per label) task. "
          "Reference: torchmetrics 1.9.0 torchmetrics.functional.precision_recall_curve(preds, "
          "target, task, thresholds=thresholds, num_classes=num_classes, num_labels=num_labels, "
          "average=average, ignore_index=ignore_index).",
          curve_params_with_average(), tm::task_inputs({.labels = false})),
      {{"precision", Better::Neither, Plot::None, "precision at each threshold (curve)"},
       {"recall", Better::Neither, Plot::None, "recall at each threshold (curve)"},
       {"thresholds", Better::Neither, Plot::None, "the thresholds, increasing"}});
}
TALLY_COMPONENT(precision_recall_curve_info)

}  // namespace tally::classification
