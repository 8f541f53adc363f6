// VMeasureScore: the weighted harmonic mean of homogeneity and completeness (scikit-learn's
// v_measure_score).
//
// Formula. v = (1 + beta) h c / (beta h + c), h and c as in HomogeneityScore and
// CompletenessScore; 0 when h + c = 0. beta > 1 weighs completeness more, beta < 1
// homogeneity. With beta = 1 it equals NormalizedMutualInfoScore with the arithmetic mean.
//
// Reference: scikit-learn 1.7.2 sklearn.metrics.v_measure_score(labels_true=target,
// labels_pred=preds, beta=...). torchmetrics 1.9.0 VMeasureScore returns 1 (not 0) when
// h + c = 0.
//
// Example: target [0, 0, 0, 1, 1, 1], preds [0, 0, 1, 1, 2, 2] -> 0.5158037429793889.
//
// State: the contingency table (target, pred) -> int64 count (common.hpp, PairCounts), merged
// across ranks by adding counts: exact and order-free.
#include <cmath>

#include "common.hpp"

namespace tally::clustering {
namespace {

class VMeasureScore final : public ContingencyMetric {
 public:
  explicit VMeasureScore(const Params& p)
      : ContingencyMetric(p, "VMeasureScore", "v_measure_score"), beta_(p.get_double("beta")) {
    if (!(beta_ >= 0.0) || !std::isfinite(beta_))
      p.fail("beta", "must be a finite number >= 0, got " + std::to_string(beta_));
  }

 protected:
  double score(const Contingency& c) const override {
    const double h = homogeneity(c), k = completeness(c);
    if (h + k == 0.0) return 0.0;
    return (1 + beta_) * h * k / (beta_ * h + k);
  }

 private:
  double beta_;
};

}  // namespace

ComponentInfo v_measure_info() {
  return metric<VMeasureScore>(
      "VMeasureScore",
      "V-measure: (1 + beta) h c / (beta h + c) of homogeneity h and completeness c; key "
      "v_measure_score. Reference: scikit-learn 1.7.2 sklearn.metrics.v_measure_score(target, "
      "preds, beta=...).",
      {param("beta", ParamType::Float,
             "Weight of completeness against homogeneity (scikit-learn's and torchmetrics' "
             "beta), >= 0.")
           .def(1.0)},
      pair_inputs(), {"VMeasure"},
      {{"v_measure_score", Better::Higher, Plot::None, "V-measure in [0, 1]"}});
}
TALLY_COMPONENT(v_measure_info)

}  // namespace tally::clustering
