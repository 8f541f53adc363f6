// HomogeneityScore: how far each predicted cluster holds members of a single class
// (scikit-learn's homogeneity_score).
//
// Formula. h = MI / H(target), with MI as in MutualInfoScore and H(target) the entropy of the
// class frequencies (scikit-learn's entropy); 1 when H(target) = 0 (a single class).
//
// Reference: scikit-learn 1.7.2 sklearn.metrics.homogeneity_score(labels_true=target,
// labels_pred=preds) (homogeneity_completeness_v_measure(...)[0]). torchmetrics 1.9.0
// HomogeneityScore: the same value.
//
// Example: target [0, 0, 0, 1, 1, 1], preds [0, 0, 1, 1, 2, 2] -> 0.6666666666666669.
//
// State: the contingency table (target, pred) -> int64 count (common.hpp, PairCounts), merged
// across ranks by adding counts: exact and order-free.
#include "common.hpp"

namespace tally::clustering {
namespace {

class HomogeneityScore final : public ContingencyMetric {
 public:
  explicit HomogeneityScore(const Params& p)
      : ContingencyMetric(p, "HomogeneityScore", "homogeneity_score") {}

 protected:
  double score(const Contingency& c) const override { return homogeneity(c); }
};

}  // namespace

ComponentInfo homogeneity_info() {
  return metric<HomogeneityScore>(
      "HomogeneityScore",
      "Homogeneity: MI / H(target), 1 when every predicted cluster holds one class only; key "
      "homogeneity_score. Reference: scikit-learn 1.7.2 sklearn.metrics.homogeneity_score("
      "target, preds).",
      {}, pair_inputs(), {},
      {{"homogeneity_score", Better::Higher, Plot::None, "homogeneity in [0, 1]"}});
}
TALLY_COMPONENT(homogeneity_info)

}  // namespace tally::clustering
