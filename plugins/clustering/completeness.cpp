// CompletenessScore: how far all members of a class fall into one predicted cluster
// (scikit-learn's completeness_score).
//
// Formula. c = MI / H(preds), with MI as in MutualInfoScore and H(preds) the entropy of the
// cluster frequencies (scikit-learn's entropy); 1 when H(preds) = 0 (a single cluster).
//
// Reference: scikit-learn 1.7.2 sklearn.metrics.completeness_score(labels_true=target,
// labels_pred=preds) (homogeneity_completeness_v_measure(...)[1]). torchmetrics 1.9.0
// CompletenessScore: the same value.
//
// Example: target [0, 0, 0, 1, 1, 1], preds [0, 0, 1, 1, 2, 2] -> 0.420619835714305.
//
// State: the contingency table (target, pred) -> int64 count (common.hpp, PairCounts), merged
// across ranks by adding counts: exact and order-free.
#include "common.hpp"

namespace tally::clustering {
namespace {

class CompletenessScore final : public ContingencyMetric {
 public:
  explicit CompletenessScore(const Params& p)
      : ContingencyMetric(p, "CompletenessScore", "completeness_score") {}

 protected:
  double score(const Contingency& c) const override { return completeness(c); }
};

}  // namespace

ComponentInfo completeness_info() {
  return metric<CompletenessScore>(
      "CompletenessScore",
      "Completeness: MI / H(preds), 1 when every class lies in one predicted cluster; key "
      "completeness_score. Reference: scikit-learn 1.7.2 sklearn.metrics.completeness_score("
      "target, preds).",
      {}, pair_inputs(), {},
      {{"completeness_score", Better::Higher, Plot::None, "completeness in [0, 1]"}});
}
TALLY_COMPONENT(completeness_info)

}  // namespace tally::clustering
