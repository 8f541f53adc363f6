// LogAUC: the area under the ROC curve with a logarithmic false positive rate axis, over
// fpr_range, normalised by the range's width in log10 (torchmetrics' LogAUC), of a binary,
// multiclass (per class, averaged) or multilabel (per label, averaged) task.
//
// Formula. With the ROC curves of ROC (curve_core.hpp: exact or binned), per curve, with the
// range [a, b] (torchmetrics' _binary_logauc_compute):
//   fewer than 2 points: 0
//   tpr' = sort(tpr ++ interp([a, b], fpr, tpr)),  fpr' = sort(fpr ++ [a, b])  (each sorted on
//   its own; interp is torchmetrics.utilities.data's, numpy.interp-like but extrapolating, with
//   +-inf or NaN slopes where fpr repeats: data_interp below)
//   i, j = the last indices where log10 fpr' equals log10 a and log10 b
//   logauc = trapz(log10 fpr'[i..j], tpr'[i..j]) / (log10 b - log10 a)
//   (a = 0 puts -inf on the axis, and a repeated fpr at the segment used an infinite slope:
//   torchmetrics' NaN and inf, reproduced)
//   multiclass, multilabel: average none (torchmetrics' default): the array; macro: the mean of
//   the non-NaN values.
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.logauc(preds, target, task=...,
// thresholds=..., num_classes=..., num_labels=..., fpr_range=(a, b), average=...,
// ignore_index=...) on float64 preds, run with torch's default dtype float64
// (tests/reference/classification_fixed.py). torchmetrics 1.9 does not check fpr_range for task
// multilabel; tally checks it for every task.
//
// Keys: logauc (an array per class / label with average none).
//
// Example: task binary, fpr_range [0.1, 0.9], preds [0.1, 0.4, 0.35, 0.8], target [0, 1, 1, 0]
//   -> {logauc: 0.2675132396410364}
//
// State: that of ROC (curve_core.hpp): exact, every kept score and label, concatenated in rank
// order; binned, int64 counts [T, K, 2, 2] summed across ranks (a size fixed by the parameters).
#include <fmt/ranges.h>

#include "common.hpp"
#include "curve_core.hpp"

namespace tally::classification {
namespace {

using namespace curves;

std::vector<ParamSpec> logauc_params() {
  auto out = curve_params();
  out.push_back(param("fpr_range", ParamType::FloatList,
                      "[a, b], 0 <= a < b <= 1: the false positive rates the area spans.")
                    .def(Value::Array{Value(0.001), Value(0.1)}));
  out.push_back(param("average", ParamType::String,
                      "Multiclass and multilabel: none (or null; an array, one value a class / "
                      "label) or macro (the mean of the non-NaN values).")
                    .def("none")
                    .nullable()
                    .choices({"macro", "none"}));
  return out;
}

/// torchmetrics.utilities.data.interp(x, xp, fp), the one LogAUC uses (not curve_core.hpp's
/// interp of the averaged curves): xp and fp in the order of torch.argsort(xp) (not stable: ties
/// in the order of std::sort with torch's comparator, as ATen's CPU sort), the slopes
/// (fp_{i+1} - fp_i) / (xp_{i+1} - xp_i) (a repeated xp gives +-inf or NaN), the segment i =
/// searchsorted(xp, x) - 1 clamped to [0, |xp| - 2], and fp_i + slope_i (x - xp_i).
std::vector<double> data_interp(const std::vector<double>& x, const std::vector<double>& xp,
                                const std::vector<double>& fp) {
  std::vector<std::pair<double, std::size_t>> order;
  for (std::size_t i = 0; i < xp.size(); ++i) order.emplace_back(xp[i], i);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return (!std::isnan(a.first) && std::isnan(b.first)) || a.first < b.first;
  });
  std::vector<double> xs, fs, slope;
  for (const auto& [v, i] : order) {
    xs.push_back(v);
    fs.push_back(fp[i]);
  }
  for (std::size_t i = 0; i + 1 < xs.size(); ++i)
    slope.push_back((fs[i + 1] - fs[i]) / (xs[i + 1] - xs[i]));
  std::vector<double> out;
  for (const double v : x) {
    const auto first = std::lower_bound(xs.begin(), xs.end(), v,
                                        [](double a, double b) {
                                          return (!std::isnan(a) && std::isnan(b)) || a < b;
                                        }) -
                       xs.begin();
    const auto i = static_cast<std::size_t>(
        std::clamp<std::ptrdiff_t>(first - 1, 0, static_cast<std::ptrdiff_t>(slope.size()) - 1));
    out.push_back(fs[i] + slope[i] * (v - xs[i]));
  }
  return out;
}

/// torchmetrics' _binary_logauc_compute.
double binary_logauc(const std::vector<double>& fpr, const std::vector<double>& tpr, double a,
                     double b) {
  if (fpr.size() < 2) return 0.0;
  std::vector<double> t = tpr, f = fpr;
  const std::vector<double> range = {a, b};
  const auto at = data_interp(range, fpr, tpr);
  t.insert(t.end(), at.begin(), at.end());
  f.insert(f.end(), range.begin(), range.end());
  sort_values(t);
  sort_values(f);
  std::vector<double> log_f;
  for (const double v : f) log_f.push_back(std::log10(v));
  const double lo = std::log10(a), hi = std::log10(b);
  std::size_t i = 0, j = 0;
  for (std::size_t k = 0; k < log_f.size(); ++k) {
    if (log_f[k] == lo) i = k;
    if (log_f[k] == hi) j = k;
  }
  if (j < i) return 0.0;
  const std::vector<double> x(log_f.begin() + static_cast<std::ptrdiff_t>(i),
                              log_f.begin() + static_cast<std::ptrdiff_t>(j + 1));
  const std::vector<double> y(t.begin() + static_cast<std::ptrdiff_t>(i),
                              t.begin() + static_cast<std::ptrdiff_t>(j + 1));
  return trapz(x, y) * 1.0 / (hi - lo);
}

class LogAUC final : public CurveMetric {
 public:
  explicit LogAUC(const Params& p)
      : CurveMetric(p, "LogAUC"), average_(p.has("average") ? p.get_string("average") : "none") {
    const auto r = p.get_number_list("fpr_range", kUnitInterval, ListOrder::Any, 2, 2);
    p.check_range("fpr_range", r[0], r[1], kUnitInterval);
    a_ = r[0];
    b_ = r[1];
  }

 protected:
  Value compute(const CurveState& s) const override {
    checked(s);
    const RocCurves c = roc_curves(s);
    std::vector<double> res;
    for (std::size_t k = 0; k < c.fpr.size(); ++k)
      res.push_back(binary_logauc(c.fpr[k], c.tpr[k], a_, b_));
    Value out = Value::map();
    out.set("logauc",
            cp_.tp.task == Task::Binary ? Value(res[0]) : average_scores(res, {}, average_));
    return out;
  }

 private:
  std::string average_;
  double a_ = 0.001, b_ = 0.1;
};

}  // namespace

ComponentInfo logauc_info() {
  return with_results(
      metric<LogAUC>(
          "LogAUC",
          "Area under the ROC curve over fpr_range on a log10 false positive rate axis, normalised "
          "by the range's log width, of a binary, multiclass (per class) or multilabel (per label) "
          "task, exact or binned; average none or macro. "
          "Reference: torchmetrics 1.9.0 torchmetrics.functional.logauc(preds, target, task, "
          "thresholds=thresholds, num_classes=num_classes, num_labels=num_labels, "
          "fpr_range=fpr_range, average=average, ignore_index=ignore_index).",
          logauc_params(), tm::task_inputs({.labels = false})),
      {{"logauc", Better::Higher, Plot::None,
        "ROC area over fpr_range on a log axis (array: per class / label)"}});
}
TALLY_COMPONENT(logauc_info)

}  // namespace tally::classification
