// AveragePrecision with a `task` parameter: torchmetrics' AveragePrecision (average_precision.cpp
// keeps mmeval's, and scikit-learn's, AveragePrecision when no task is given, and makes this one
// when it is).
//
// Formula. With the precision-recall curves of PrecisionRecallCurve (curve_core.hpp: exact, one
// point per distinct score and the last point precision 1, recall 0; binned, one per threshold),
// per curve:
//   AP = -sum_i (r_{i+1} - r_i) p_i
//   binary, multilabel micro, and every binned curve: NaN precision and recall read as 0 first
//   (so a binned class with no positives has AP 0); an exact multiclass or multilabel curve
//   keeps its NaN (an exact multiclass class with no positives has recall 0 / 0: AP NaN; an exact
//   binary or multilabel curve with no positive has recall 1 everywhere, torchmetrics' rule, and
//   AP 0)
//   multiclass, multilabel: average macro, the mean of the non-NaN APs; weighted, weighted by
//   each curve's positives (exact: among the kept targets; binned: at the first threshold),
//   normalised over the non-NaN ones; none, the array (NaN included); multilabel micro: one
//   binary curve of every kept element (binned: the counts summed over the labels).
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.average_precision(preds, target,
// task=..., thresholds=..., num_classes=..., num_labels=..., average=..., ignore_index=...) on
// float64 preds, run with torch's default dtype float64 (tests/reference/classification_fixed.py).
//
// Keys: average_precision (an array per class / label with average none).
//
// Example: task binary, preds [0.1, 0.4, 0.35, 0.8], target [0, 1, 1, 0]
//   -> {average_precision: 0.5833333333333333}
//
// State: that of PrecisionRecallCurve (curve_core.hpp): exact, every kept score and label,
// concatenated in rank order; binned, int64 counts [T, K, 2, 2] summed across ranks (a size fixed
// by the parameters).
#include "common.hpp"
#include "curve_core.hpp"

namespace tally::classification {
namespace {

using namespace curves;

/// -sum_i (r_{i+1} - r_i) p_i, NaN read as 0 when `zero_nan`.
double average_precision_of(std::vector<double> p, std::vector<double> r, bool zero_nan) {
  if (zero_nan) {
    for (double& v : p) v = std::isnan(v) ? 0.0 : v;
    for (double& v : r) v = std::isnan(v) ? 0.0 : v;
  }
  double sum = 0.0;
  for (std::size_t i = 0; i + 1 < r.size(); ++i) sum += (r[i + 1] - r[i]) * p[i];
  return -sum;
}

class TmAveragePrecision final : public CurveMetric {
 public:
  explicit TmAveragePrecision(const Params& p)
      : CurveMetric(p, "AveragePrecision"),
        average_(p.has("average") ? p.get_string("average") : "none") {
    if (cp_.tp.task == Task::Multiclass && average_ == "micro")
      p.fail("average",
             "micro is not an average of task multiclass (torchmetrics 1.9: macro, weighted or "
             "none)");
  }

 protected:
  Value compute(const CurveState& s) const override {
    checked(s);
    Value out = Value::map();
    if (cp_.tp.task == Task::Binary || (cp_.tp.task == Task::Multilabel && average_ == "micro")) {
      const Curves c = cp_.tp.task == Task::Binary ? pr_curves(s) : micro_pr(s);
      out.set("average_precision", Value(average_precision_of(c.x[0], c.y[0], true)));
      return out;
    }
    const Curves c = pr_curves(s);
    std::vector<double> res;
    for (std::size_t k = 0; k < c.x.size(); ++k)
      res.push_back(average_precision_of(c.x[k], c.y[k], cp_.binned));
    out.set("average_precision", average_scores(res, positives(s), average_));
    return out;
  }

 private:
  std::string average_;
};

}  // namespace

std::vector<ParamSpec> tm_average_precision_params() {
  auto out = curve_params();
  for (auto& spec : out)
    if (spec.name == "task") {
      spec.optional = true;
      spec.nullable = true;
      spec.doc =
          "Given (binary, multiclass or multilabel): torchmetrics 1.9's AveragePrecision of that "
          "task, on fields preds and target, with thresholds, num_classes, num_labels and "
          "ignore_index. Absent: mmeval's AveragePrecision on pred_scores and gt_labels.";
    }
  return out;
}

std::unique_ptr<Metric> make_tm_average_precision(const Params& p) {
  return std::make_unique<TmAveragePrecision>(p);
}

}  // namespace tally::classification
