// CohenKappa: Cohen's kappa, the agreement of predictions and targets beyond chance, of a
// binary or multiclass task (torchmetrics' CohenKappa), unweighted or linearly / quadratically
// weighted.
//
// Formula. From the confusion matrix M (rows: target), E = outer(row sums, column sums) / total,
// and weights w_ij = [i != j] (none), |i - j| (linear) or (i - j)^2 (quadratic):
//   kappa = 1 - sum_ij w_ij M_ij / sum_ij w_ij E_ij
// A zero denominator gives what the division gives (NaN or -inf), as torchmetrics'.
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.cohen_kappa(preds, target, task=...,
// threshold=..., num_classes=..., weights=..., ignore_index=...) in float64; cross-checked with
// scikit-learn 1.7.2 sklearn.metrics.cohen_kappa_score(target, pred, weights=...) (equal).
//
// Key: cohen_kappa.
//
// Example: task multiclass, num_classes 3, preds [0, 2, 1, 2], target [0, 1, 1, 2]
//   -> {cohen_kappa: 0.6363636363636364}
//
// State: the confusion counts of tm_core.hpp (int64, summed across ranks: exact).
#include "common.hpp"
#include "tm_core.hpp"

namespace tally::classification {
namespace {

using namespace tm;

TaskOptions kappa_options() {
  TaskOptions o;
  o.tasks = {"binary", "multiclass"};
  return o;
}

class CohenKappa final : public CountMetric {
 public:
  explicit CohenKappa(const Params& p)
      : CountMetric(p, "CohenKappa", kappa_options(), SigmoidOver::Kept),
        weights_(p.has("weights") ? p.get_string("weights") : "none") {}

 protected:
  Value compute(const CountState& state) const override {
    const auto& m = checked(state);
    const std::size_t k = tp_.task == Task::Multiclass ? static_cast<std::size_t>(tp_.classes) : 2;
    std::vector<double> row(k, 0.0), col(k, 0.0);
    for (std::size_t i = 0; i < k; ++i)
      for (std::size_t j = 0; j < k; ++j) {
        row[i] += static_cast<double>(m[i * k + j]);
        col[j] += static_cast<double>(m[i * k + j]);
      }
    double total = 0.0;
    for (const double x : col) total += x;
    double observed = 0.0, expected = 0.0;
    for (std::size_t i = 0; i < k; ++i)
      for (std::size_t j = 0; j < k; ++j) {
        const double d = static_cast<double>(i) - static_cast<double>(j);
        const double w = weights_ == "linear"      ? std::abs(d)
                         : weights_ == "quadratic" ? d * d
                                                   : (i == j ? 0.0 : 1.0);
        observed += w * static_cast<double>(m[i * k + j]);
        expected += w * (row[i] * col[j] / total);
      }
    Value out = Value::map();
    out.set("cohen_kappa", 1.0 - observed / expected);
    return out;
  }

 private:
  std::string weights_;
};

}  // namespace

ComponentInfo cohen_kappa_info() {
  auto params = task_params(kappa_options());
  params.push_back(param("weights", ParamType::String,
                         "Disagreement weights: none (0/1), linear (|i - j|) or quadratic "
                         "((i - j)^2).")
                       .def("none")
                       .choices({"none", "linear", "quadratic"}));
  return with_results(
      metric<CohenKappa>(
          "CohenKappa",
          "Cohen's kappa of a binary or multiclass task, optionally weighted; key cohen_kappa. "
          "Reference: torchmetrics 1.9.0 torchmetrics.functional.cohen_kappa(preds, target, task, "
          "threshold, num_classes, weights=weights, ignore_index=ignore_index).",
          std::move(params), task_inputs()),
      {{"cohen_kappa", Better::Higher, Plot::None, "agreement beyond chance, at most 1"}});
}
TALLY_COMPONENT(cohen_kappa_info)

}  // namespace tally::classification
