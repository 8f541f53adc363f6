// PrecisionAtFixedRecall: the highest precision among the thresholds whose recall reaches
// min_recall, and that threshold, of a binary, multiclass (per class) or multilabel (per label)
// task (torchmetrics' PrecisionAtFixedRecall).
//
// Formula. With the precision-recall curves of PrecisionRecallCurve (curve_core.hpp: exact, one
// point per distinct score; binned, one per threshold), the last point (precision 1, recall 0,
// no threshold) left out, per curve:
//   the points (p_i, r_i, t_i) with r_i >= min_recall; the largest of them compared as tuples
//   (precision first, then recall, then threshold, as Python's max over torchmetrics' tuples; a
//   NaN precision is never larger, nor smaller); none: precision 0. A precision of 0 gives the
//   threshold NaN (torchmetrics' sentinel).
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.precision_at_fixed_recall(preds, target,
// task=..., min_recall=..., thresholds=..., num_classes=..., num_labels=..., ignore_index=...)
// on float64 preds, run with torch's default dtype float64
// (tests/reference/classification_fixed.py).
//
// Keys: precision, threshold (torchmetrics' tuple; arrays per class / label).
//
// Example: task binary, min_recall 0.5, preds [0.1, 0.4, 0.35, 0.8], target [0, 1, 1, 0]
//   -> {precision: 0.6666666666666666, threshold: 0.35}
//
// State: that of PrecisionRecallCurve (curve_core.hpp): exact, every kept score and label,
// concatenated in rank order; binned, int64 counts [T, K, 2, 2] summed across ranks (a size fixed
// by the parameters).
#include "common.hpp"
#include "curve_core.hpp"

namespace tally::classification {
namespace {

using namespace curves;

/// torchmetrics' _precision_at_recall: Python's max over the (precision, recall, threshold)
/// tuples whose recall reaches min_recall.
std::pair<double, double> precision_at_recall(const std::vector<double>& p,
                                              const std::vector<double>& r,
                                              const std::vector<double>& t, double min_recall) {
  const auto greater = [](const double* a, const double* b) {
    for (int k = 0; k < 3; ++k)
      if (!(a[k] == b[k])) return a[k] > b[k];
    return false;
  };
  bool found = false;
  double best[3] = {0.0, 0.0, 0.0};
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (!(r[i] >= min_recall)) continue;
    const double item[3] = {p[i], r[i], t[i]};
    if (!found || greater(item, best)) std::copy(item, item + 3, best);
    found = true;
  }
  if (!found || best[0] == 0.0) return {found ? best[0] : 0.0, std::nan("")};
  return {best[0], best[2]};
}

class PrecisionAtFixedRecall final : public CurveMetric {
 public:
  explicit PrecisionAtFixedRecall(const Params& p)
      : CurveMetric(p, "PrecisionAtFixedRecall"), min_(unit_param(p, "min_recall")) {}

 protected:
  Value compute(const CurveState& s) const override {
    checked(s);
    const Curves c = pr_curves(s);
    std::vector<std::pair<double, double>> best;
    for (std::size_t k = 0; k < c.x.size(); ++k)
      best.push_back(
          precision_at_recall(c.x[k], c.y[k], cp_.binned ? cp_.thresholds : c.thresholds[k], min_));
    return operating_point("precision", best);
  }

 private:
  double min_;
};

}  // namespace

ComponentInfo precision_at_fixed_recall_info() {
  return with_results(
      metric<PrecisionAtFixedRecall>(
          "PrecisionAtFixedRecall",
          "The highest precision at a threshold whose recall reaches min_recall, and that "
          "threshold "
          "(NaN when the precision is 0), of a binary, multiclass (per class) or multilabel (per "
          "label) task, exact or binned. "
          "Reference: torchmetrics 1.9.0 torchmetrics.functional.precision_at_fixed_recall(preds, "
          "target, task, min_recall=min_recall, thresholds=thresholds, num_classes=num_classes, "
          "num_labels=num_labels, ignore_index=ignore_index).",
          operating_point_params("min_recall",
                                 "The least recall a threshold must reach, in [0, 1] (required)."),
          tm::task_inputs({.labels = false})),
      {{"precision", Better::Higher, Plot::None, "best precision at the minimum recall"},
       {"threshold", Better::Neither, Plot::None,
        "the threshold of that point (array: per class / label)"}});
}
TALLY_COMPONENT(precision_at_fixed_recall_info)

}  // namespace tally::classification
