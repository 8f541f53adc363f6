// RecallAtFixedPrecision: the highest recall among the thresholds whose precision reaches
// min_precision, and that threshold, of a binary, multiclass (per class) or multilabel (per
// label) task (torchmetrics' RecallAtFixedPrecision).
//
// Formula. With the precision-recall curves of PrecisionRecallCurve (curve_core.hpp: exact, one
// point per distinct score; binned, one per threshold), the last point (precision 1, recall 0,
// no threshold) left out, per curve:
//   the points (r_i, p_i, t_i) with p_i >= min_precision (a NaN precision never does); the one
//   of the largest recall, then the largest precision, then the largest threshold
//   (torchmetrics' _lexargmax); none: recall 0. A recall of 0 gives the threshold NaN
//   (torchmetrics' sentinel).
//   A NaN recall among those points (a class or label with no positive target, where the exact
//   recall is 0 / 0 or the binned one NaN, and min_precision low enough to keep its points) makes
//   torchmetrics fail (IndexError in _lexargmax): tally fails with an InputError.
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.recall_at_fixed_precision(preds, target,
// task=..., min_precision=..., thresholds=..., num_classes=..., num_labels=...,
// ignore_index=...) on float64 preds, run with torch's default dtype float64
// (tests/reference/classification_fixed.py).
//
// Keys: recall, threshold (torchmetrics' tuple; arrays per class / label).
//
// Example: task binary, min_precision 0.5, preds [0.1, 0.4, 0.35, 0.8], target [0, 1, 1, 0]
//   -> {recall: 1, threshold: 0.35}
//
// State: that of PrecisionRecallCurve (curve_core.hpp): exact, every kept score and label,
// concatenated in rank order; binned, int64 counts [T, K, 2, 2] summed across ranks (a size fixed
// by the parameters).
#include "common.hpp"
#include "curve_core.hpp"

namespace tally::classification {
namespace {

using namespace curves;

class RecallAtFixedPrecision final : public CurveMetric {
 public:
  explicit RecallAtFixedPrecision(const Params& p)
      : CurveMetric(p, "RecallAtFixedPrecision"), min_(unit_param(p, "min_precision")) {}

 protected:
  Value compute(const CurveState& s) const override {
    checked(s);
    const Curves c = pr_curves(s);
    std::vector<std::pair<double, double>> best;
    for (std::size_t k = 0; k < c.x.size(); ++k)
      best.push_back(
          recall_at_precision(c.x[k], c.y[k], cp_.binned ? cp_.thresholds : c.thresholds[k], k));
    return operating_point("recall", best);
  }

 private:
  /// torchmetrics' _recall_at_precision.
  std::pair<double, double> recall_at_precision(const std::vector<double>& p,
                                                const std::vector<double>& r,
                                                const std::vector<double>& t, std::size_t k) const {
    std::size_t best = t.size();
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (!(p[i] >= min_)) continue;
      if (std::isnan(r[i]))
        check_.fail(
            kTarget,
            fmt::format("{}the recall is NaN (no positive target) at a threshold whose "
                        "precision reaches min_precision {}: torchmetrics 1.9 fails here",
                        cp_.tp.task == Task::Binary ? std::string() : fmt::format("curve {}: ", k),
                        min_));
      if (best == t.size() || r[i] > r[best] || (r[i] == r[best] && p[i] > p[best]) ||
          (r[i] == r[best] && p[i] == p[best] && t[i] > t[best]))
        best = i;
    }
    if (best == t.size() || r[best] == 0.0) return {best == t.size() ? 0.0 : r[best], std::nan("")};
    return {r[best], t[best]};
  }

  double min_;
};

}  // namespace

ComponentInfo recall_at_fixed_precision_info() {
  return with_results(
      metric<RecallAtFixedPrecision>(
          "RecallAtFixedPrecision",
          "The highest recall at a threshold whose precision reaches min_precision, and that "
          "threshold (NaN when the recall is 0), of a binary, multiclass (per class) or multilabel "
          "(per label) task, exact or binned. "
          "Reference: torchmetrics 1.9.0 torchmetrics.functional.recall_at_fixed_precision(preds, "
          "target, task, min_precision=min_precision, thresholds=thresholds, "
          "num_classes=num_classes, num_labels=num_labels, ignore_index=ignore_index).",
          operating_point_params(
              "min_precision", "The least precision a threshold must reach, in [0, 1] (required)."),
          tm::task_inputs({.labels = false})),
      {{"recall", Better::Higher, Plot::None, "best recall at the minimum precision"},
       {"threshold", Better::Neither, Plot::None,
        "the threshold of that point (array: per class / label)"}});
}
TALLY_COMPONENT(recall_at_fixed_precision_info)

}  // namespace tally::classification
