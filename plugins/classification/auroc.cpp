// AUROC: the area under the ROC curve of a binary, multiclass (one-vs-rest, averaged) or
// multilabel task, exact or binned (torchmetrics' AUROC; the exact binary value is
// scikit-learn's roc_auc_score).
//
// Formula. With the ROC curves of curve_core.hpp (RocCurves; exact or binned thresholds):
//   auc_k = trapz(tpr_k, fpr_k) = sum_i (fpr_{i+1} - fpr_i) (tpr_{i+1} + tpr_i) / 2
//   binary        auc; with max_fpr m < 1 (and a curve with some fpr and tpr above 0), the
//                 McClish-standardised partial area: the curve cut at fpr = m (tpr linearly
//                 interpolated, torch.lerp), A = its trapz, then 0.5 (1 + (A - m^2 / 2) /
//                 (m - m^2 / 2))
//   multiclass    average macro: mean of the auc_k (NaN ones left out); weighted: by each
//                 class's positives; none: the array
//   multilabel    as multiclass, plus micro: the auc of every kept (score, label) element
//                 pooled into one binary curve (binned: the counts summed over the labels)
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.auroc(preds, target, task=...,
// thresholds=..., num_classes=..., num_labels=..., average=..., max_fpr=..., ignore_index=...)
// on float64 preds, run with torch's default dtype float64. Cross-check: scikit-learn 1.7.2
// roc_auc_score(target, preds) (binary exact; max_fpr as its max_fpr; multiclass with
// multi_class="ovr") agree to 1e-15 on the reference cases.
//
// Keys: auroc (functional name; an array per class / label with average none).
//
// Example: task binary, preds [0.1, 0.4, 0.35, 0.8], target [0, 1, 1, 0] -> {auroc: 0.5}
//
// State: that of PrecisionRecallCurve and ROC (curve_core.hpp): exact, every kept score and
// label, concatenated in rank order (the value does not depend on their order); binned, int64
// counts [T, K, 2, 2] summed across ranks: exact, of a fixed size.
#include "common.hpp"
#include "curve_core.hpp"

namespace tally::classification {
namespace {

using namespace curves;

/// {auroc: v}.
Value result(Value v) {
  Value out = Value::map();
  out.set("auroc", std::move(v));
  return out;
}

std::vector<ParamSpec> auroc_params() {
  auto out = curve_params();
  out.push_back(param("average", ParamType::String,
                      "Multiclass: macro (mean over the classes), weighted (by positives) or none "
                      "(an array); multilabel also micro (every element pooled).")
                    .def("macro")
                    .choices({"micro", "macro", "weighted", "none"}));
  out.push_back(param("max_fpr", ParamType::Float,
                      "Binary: the standardised partial area up to this false positive rate, in "
                      "(0, 1].")
                    .optional()
                    .nullable());
  return out;
}

class AUROC final : public CurveMetric {
 public:
  explicit AUROC(const Params& p) : CurveMetric(p, "AUROC"), average_(p.get_string("average")) {
    if (p.has("max_fpr")) {
      max_fpr_ = p.get_number("max_fpr", kPositiveFraction);
    }
    if (cp_.tp.task == Task::Multiclass && average_ == "micro")
      p.fail("average",
             "micro is not an average of task multiclass (torchmetrics 1.9: macro, "
             "weighted or none)");
  }

 protected:
  Value compute(const CurveState& s) const override {
    checked(s);
    if (cp_.tp.task == Task::Multilabel && average_ == "micro") return result(Value(micro(s)));
    RocCurves c = roc_curves(s);
    if (cp_.tp.task == Task::Binary) return result(Value(binary_auc(c.fpr[0], c.tpr[0], max_fpr_)));
    std::vector<double> res;
    for (std::size_t k = 0; k < c.fpr.size(); ++k) res.push_back(trapz(c.fpr[k], c.tpr[k]));
    // Weights: each class's positives (curve_core.hpp).
    return result(average_scores(res, positives(s), average_));
  }

 private:
  /// torchmetrics' _binary_auroc_compute.
  static double binary_auc(const std::vector<double>& fpr, const std::vector<double>& tpr,
                           double max_fpr) {
    double fsum = 0.0, tsum = 0.0;
    for (std::size_t i = 0; i < fpr.size(); ++i) {
      fsum += fpr[i];
      tsum += tpr[i];
    }
    if (max_fpr == 1.0 || fsum == 0.0 || tsum == 0.0) return trapz(fpr, tpr);
    // torch.bucketize(m, fpr, right=True): the first index whose fpr is above m.
    const auto stop =
        static_cast<std::size_t>(std::upper_bound(fpr.begin(), fpr.end(), max_fpr) - fpr.begin());
    if (stop == 0 || stop >= fpr.size()) return trapz(fpr, tpr);  // not reached: fpr ends at 1
    const double weight = (max_fpr - fpr[stop - 1]) / (fpr[stop] - fpr[stop - 1]);
    const double a = tpr[stop - 1], b = tpr[stop], diff = b - a;
    const double cut = std::abs(weight) < 0.5 ? a + weight * diff : b - diff * (1 - weight);
    std::vector<double> x(fpr.begin(), fpr.begin() + static_cast<std::ptrdiff_t>(stop));
    std::vector<double> y(tpr.begin(), tpr.begin() + static_cast<std::ptrdiff_t>(stop));
    x.push_back(max_fpr);
    y.push_back(cut);
    const double partial = trapz(x, y);
    const double min_area = 0.5 * max_fpr * max_fpr;
    return 0.5 * (1 + (partial - min_area) / (max_fpr - min_area));
  }

  /// Multilabel micro: one binary curve of every kept element.
  double micro(const CurveState& s) const {
    const RocCurves c = micro_roc(s);
    return binary_auc(c.fpr[0], c.tpr[0], 1.0);
  }

  std::string average_;
  double max_fpr_ = 1.0;
};

}  // namespace

ComponentInfo auroc_info() {
  return with_results(
      metric<AUROC>(
          "AUROC",
          "Area under the ROC curve (exact or binned; binary with an optional standardised partial "
          "area up to max_fpr; multiclass and multilabel averaged). "
          "Reference: torchmetrics 1.9.0 torchmetrics.functional.auroc(preds, target, task, "
          "thresholds=thresholds, num_classes=num_classes, num_labels=num_labels, average=average, "
          "max_fpr=max_fpr, ignore_index=ignore_index).",
          auroc_params(), tm::task_inputs({.labels = false})),
      {{"auroc", Better::Higher, Plot::None,
        "area under the ROC curve (array: per class / label)"}});
}
TALLY_COMPONENT(auroc_info)

}  // namespace tally::classification
