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
// task=..., thresholds=..., num_classes=..., num_labels=..., ignore_index=...) on float64 preds,
// run with torch's default dtype float64. scikit-learn 1.7.2 precision_recall_curve(target,
// preds) gives the same binary exact curve except that it drops the points after full recall
// (drop_intermediate-like truncation) and the reference script records that cross-check.
// torchmetrics' `average` (micro / macro interpolated curves) is not supported.
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
  explicit PrecisionRecallCurve(const Params& p) : CurveMetric(p, "PrecisionRecallCurve") {}

 protected:
  Value compute(const CurveState& s) const override {
    checked(s);
    const std::int64_t k_all = cp_.curves();
    std::vector<std::vector<double>> prec(static_cast<std::size_t>(k_all)), rec = prec, thr = prec;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (std::int64_t k = 0; k < k_all; ++k) {
      auto& p = prec[static_cast<std::size_t>(k)];
      auto& r = rec[static_cast<std::size_t>(k)];
      if (cp_.binned) {
        for (std::size_t t = 0; t < cp_.thresholds.size(); ++t) {
          const std::int64_t tp = count(s, t, k, 3), fp = count(s, t, k, 1), fn = count(s, t, k, 2);
          p.push_back(tp + fp == 0 ? nan : static_cast<double>(tp) / static_cast<double>(tp + fp));
          r.push_back(tp + fn == 0 ? nan : static_cast<double>(tp) / static_cast<double>(tp + fn));
        }
      } else {
        auto pairs = exact_pairs(s, k);
        const ExactCurve c = exact_curve(pairs);
        const auto pos = static_cast<double>(c.tps.back());
        bool all_negative = c.tps.back() == 0;
        if (cp_.tp.task == Task::Multiclass)
          all_negative =
              std::all_of(s.labels.begin(), s.labels.end(), [](std::int32_t y) { return y == 0; });
        for (std::size_t i = c.tps.size(); i-- > 0;) {
          const auto tp = static_cast<double>(c.tps[i]);
          p.push_back(tp / (tp + static_cast<double>(c.fps[i])));
          r.push_back(all_negative ? 1.0 : tp / pos);
          thr[static_cast<std::size_t>(k)].push_back(c.thresholds[i]);
        }
      }
      p.push_back(1.0);
      r.push_back(0.0);
    }
    Value out = Value::map();
    out.set("precision", pack(std::move(prec)));
    out.set("recall", pack(std::move(rec)));
    out.set("thresholds", cp_.binned ? binned_thresholds(false) : pack(std::move(thr)));
    return out;
  }
};

}  // namespace

ComponentInfo precision_recall_curve_info() {
  return metric<PrecisionRecallCurve>(
      "PrecisionRecallCurve",
      "Precision and recall at every threshold (exact: every distinct score; or binned) of a "
      "binary, multiclass (per class) or multilabel (per label) task. "
      "Reference: torchmetrics 1.9.0 torchmetrics.functional.precision_recall_curve(preds, "
      "target, task, thresholds=thresholds, num_classes=num_classes, num_labels=num_labels, "
      "ignore_index=ignore_index).",
      curve_params(), tm::task_inputs(false));
}

}  // namespace tally::classification
