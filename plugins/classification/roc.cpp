// ROC: the receiver operating characteristic (false and true positive rates at every threshold)
// of a binary, multiclass (one-vs-rest, per class) or multilabel (per label) task
// (torchmetrics' ROC).
//
// Formula (curve_core.hpp reads the inputs). Exact (thresholds null), per curve, with the points
// of torchmetrics' _binary_clf_curve (one per distinct score s_1 > ... > s_m; tp_i, fp_i the
// positives and negatives scoring at least s_i; P = tp_m, N = fp_m), a first point (0, 0) at
// threshold 1 prepended (torchmetrics' choice; scikit-learn's roc_curve puts +inf there):
//   fpr_i = fp_i / N (all 0 when N = 0),  tpr_i = tp_i / P (all 0 when P = 0)
//   fpr, tpr [m + 1], thresholds [m + 1] = 1, s_1, ..., s_m (decreasing).
// Binned (thresholds T or a list t_1..t_T, pred = score >= t_j), per curve, in reversed
// threshold order: tpr_j = tp_j / (tp_j + fn_j), fpr_j = fp_j / (fp_j + tn_j) (0 for 0 / 0,
// torchmetrics' _safe_divide), thresholds reversed (one array for all curves).
// Multiclass and multilabel: arrays of arrays, one per class / label.
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.roc(preds, target, task=...,
// thresholds=..., num_classes=..., num_labels=..., average=..., ignore_index=...) on float64
// preds, run with torch's default dtype float64 (average: tests/reference/
// classification_fixed.py). scikit-learn 1.7.2 roc_curve(target, preds,
// drop_intermediate=False) gives the same exact binary fpr and tpr (its first threshold is inf
// where torchmetrics' is 1); the reference script records that cross-check.
// average (multiclass only, torchmetrics 1.9's): micro, one curve of every (sample, class) score
// against the one-hot target (binned: the counts summed over the classes); macro, the fpr of
// every class's curve pooled and sorted, the tpr at each the mean over the classes of
// torchmetrics' interp(fpr, fpr_k, tpr_k) (curve_core.hpp), the thresholds pooled and sorted
// decreasing. One curve either way: fpr, tpr, thresholds arrays.
//
// Keys: fpr, tpr, thresholds (torchmetrics' tuple).
//
// Example: task binary, preds [0.1, 0.4, 0.35, 0.8], target [0, 1, 1, 0]
//   -> {fpr: [0, 0.5, 0.5, 0.5, 1], tpr: [0, 0, 0.5, 1, 1], thresholds: [1, 0.8, 0.4, 0.35,
//   0.1]}
//
// State: exact, every kept score and label (concatenated in rank order; the curve does not
// depend on their order); binned, int64 counts [T, K, 2, 2] summed across ranks (curve_core.hpp).
#include "common.hpp"
#include "curve_core.hpp"

namespace tally::classification {
namespace {

using namespace curves;

class ROC final : public CurveMetric {
 public:
  explicit ROC(const Params& p) : CurveMetric(p, "ROC"), average_(curve_average(p, cp_)) {
    // Binned macro interpolates between a curve's points (torchmetrics fails on one).
    if (average_ == "macro" && cp_.binned && cp_.thresholds.size() < 2)
      p.fail("average", "macro needs at least 2 thresholds (it interpolates between points)");
  }

 protected:
  Value compute(const CurveState& s) const override {
    checked(s);
    RocCurves c = average_ == "micro" ? micro_roc(s) : roc_curves(s);
    Value out = Value::map();
    if (average_.empty()) {
      out.set("fpr", pack(std::move(c.fpr)));
      out.set("tpr", pack(std::move(c.tpr)));
      out.set("thresholds", cp_.binned ? binned_thresholds(true) : pack(std::move(c.thresholds)));
      return out;
    }
    if (average_ == "macro") {
      Curves m{std::move(c.fpr), std::move(c.tpr), std::move(c.thresholds)};
      if (cp_.binned) {
        std::vector<double> t(cp_.thresholds.rbegin(), cp_.thresholds.rend());
        m.thresholds.assign(m.x.size(), t);
      }
      m = macro_curve(m, true);
      c.fpr = std::move(m.x);
      c.tpr = std::move(m.y);
      c.thresholds = std::move(m.thresholds);
    }
    out.set("fpr", Value(c.fpr[0]));
    out.set("tpr", Value(c.tpr[0]));
    out.set("thresholds",
            cp_.binned && average_ == "micro" ? binned_thresholds(true) : Value(c.thresholds[0]));
    return out;
  }

 private:
  std::string average_;  // "" (per class), micro or macro
};

}  // namespace

ComponentInfo roc_info() {
  return with_results(
      metric<ROC>(
          "ROC",
          "Receiver operating characteristic: false and true positive rates at every threshold "
          "(exact: every distinct score; or binned) of a binary, multiclass (per class) or "
          "multilabel (per label) task. "
          "Reference: torchmetrics 1.9.0 torchmetrics.functional.roc(preds, target, task, "
          "thresholds=thresholds, num_classes=num_classes, num_labels=num_labels, "
          "average=average, ignore_index=ignore_index).",
          curve_params_with_average(), tm::task_inputs({.labels = false})),
      {{"fpr", Better::Neither, Plot::None, "false positive rate at each threshold (curve)"},
       {"tpr", Better::Neither, Plot::None, "true positive rate at each threshold (curve)"},
       {"thresholds", Better::Neither, Plot::None, "the thresholds, decreasing"}});
}
TALLY_COMPONENT(roc_info)

}  // namespace tally::classification
