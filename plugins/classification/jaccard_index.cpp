// JaccardIndex: intersection over union tp / (tp + fp + fn) of a binary, multiclass or
// multilabel task (torchmetrics' JaccardIndex).
//
// Formula. From the confusion counts of tm_core.hpp:
//   binary           tp / (tp + fp + fn)
//   multiclass       j_c = M_cc / (row_c + col_c - M_cc); multilabel j_l = tp / (tp + fp + fn)
//   average micro    sum num / (sum den - den_ignore), den_ignore the denominator of class
//                    ignore_index when 0 <= ignore_index < C (L for multilabel, as torchmetrics)
//   average macro    mean of j_c over the classes, leaving out class ignore_index and (multiclass)
//                    classes with no sample in row or column
//   average weighted by the support (row sum; multilabel tp + fn); no weight at all gives NaN
//                    (torchmetrics divides by the weights' sum unguarded)
//   average none     [j_c]
// A zero denominator gives zero_division.
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.jaccard_index(preds, target, task=...,
// threshold=..., num_classes=..., num_labels=..., average=..., ignore_index=...,
// zero_division=...) in float64; cross-checked with scikit-learn 1.7.2
// sklearn.metrics.jaccard_score (equal without ignore_index and absent classes).
//
// Key: jaccard_index.
//
// Example: task multiclass, num_classes 3, preds [0, 2, 1, 2], target [0, 1, 1, 2]
//   -> {jaccard_index: 0.6666666666666666}
//
// State: the confusion counts of tm_core.hpp (int64, summed across ranks: exact).
#include "common.hpp"
#include "tm_core.hpp"

namespace tally::classification {
namespace {

using namespace tm;

TaskOptions jaccard_options() {
  TaskOptions o;
  o.average = "macro";
  return o;
}

class JaccardIndex final : public CountMetric {
 public:
  explicit JaccardIndex(const Params& p)
      : CountMetric(p, "JaccardIndex", jaccard_options(), SigmoidOver::Kept),
        zero_division_(p.get_double("zero_division")) {
    if (!std::isfinite(zero_division_))
      p.fail("zero_division", fmt::format("must be a finite number, got {}", zero_division_));
    // torchmetrics formats multilabel batches as its stat scores do (sigmoid over every element).
    if (tp_.task == Task::Multilabel) over_ = SigmoidOver::All;
  }

 protected:
  Value compute(const CountState& state) const override {
    const Stats s = stats_of(tp_, checked(state));
    Value out = Value::map();
    if (tp_.task == Task::Binary) {
      out.set("jaccard_index",
              safe_divide(static_cast<double>(s.tp[0]),
                          static_cast<double>(s.fp[0] + s.fn[0] + s.tp[0]), zero_division_));
      return out;
    }
    const std::size_t k = s.size();
    std::vector<double> num(k), den(k);
    for (std::size_t c = 0; c < k; ++c) {
      num[c] = static_cast<double>(s.tp[c]);
      den[c] = static_cast<double>(s.tp[c] + s.fp[c] + s.fn[c]);
    }
    const bool ignore_in = tp_.ignore_index && *tp_.ignore_index >= 0 &&
                           *tp_.ignore_index < static_cast<std::int64_t>(k);
    if (tp_.average == Average::Micro) {
      double n = 0.0, d = 0.0;
      for (std::size_t c = 0; c < k; ++c) n += num[c], d += den[c];
      if (ignore_in) d -= den[static_cast<std::size_t>(*tp_.ignore_index)];
      out.set("jaccard_index", safe_divide(n, d, zero_division_));
      return out;
    }
    std::vector<double> j(k);
    for (std::size_t c = 0; c < k; ++c) j[c] = safe_divide(num[c], den[c], zero_division_);
    if (tp_.average == Average::None) {
      out.set("jaccard_index", Value(j));
      return out;
    }
    std::vector<double> w(k, 1.0);
    for (std::size_t c = 0; c < k; ++c) {
      if (tp_.average == Average::Weighted) {
        w[c] = static_cast<double>(s.tp[c] + s.fn[c]);
      } else {
        if (!tp_.multilabel() && s.tp[c] + s.fp[c] + s.fn[c] == 0) w[c] = 0.0;
      }
    }
    if (tp_.average == Average::Macro && ignore_in)
      w[static_cast<std::size_t>(*tp_.ignore_index)] = 0.0;
    double wsum = 0.0, x = 0.0;
    for (const double v : w) wsum += v;
    for (std::size_t c = 0; c < k; ++c) x += w[c] * j[c] / wsum;
    out.set("jaccard_index", x);
    return out;
  }

 private:
  double zero_division_;
};

}  // namespace

ComponentInfo jaccard_index_info() {
  auto params = task_params(jaccard_options());
  params.push_back(
      param("zero_division", ParamType::Float, "The index of a class whose union is empty.")
          .def(0.0));
  return with_results(
      metric<JaccardIndex>(
          "JaccardIndex",
          "Jaccard index (intersection over union) of a binary, multiclass or multilabel task; key "
          "jaccard_index. Reference: torchmetrics 1.9.0 "
          "torchmetrics.functional.jaccard_index(preds, "
          "target, task, threshold, num_classes, num_labels, average, ignore_index=ignore_index, "
          "zero_division=zero_division).",
          std::move(params), task_inputs()),
      {{"jaccard_index", Better::Higher, Plot::None,
        "intersection over union (array: per class)"}});
}
TALLY_COMPONENT(jaccard_index_info)

}  // namespace tally::classification
