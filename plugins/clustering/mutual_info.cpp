// MutualInfoScore: the mutual information of two labelings, in nats (scikit-learn's
// mutual_info_score).
//
// Formula. With the contingency table n_ij (classes i = target labels, clusters j = pred
// labels), a_i = sum_j n_ij, b_j = sum_i n_ij, N = sum n_ij:
//   MI = sum_{n_ij > 0} n_ij / N * log(N n_ij / (a_i b_j))
// as scikit-learn evaluates it (per cell nm * (log n_ij - log N) + nm * (log N + log N -
// log(a_i b_j)), terms under float64 eps set to 0, NumPy's pairwise sum in row-major cell order,
// clipped at 0); 0 when there is one class or one cluster.
//
// Reference: scikit-learn 1.7.2 sklearn.metrics.mutual_info_score(labels_true=target,
// labels_pred=preds). torchmetrics 1.9.0 MutualInfoScore: the same value (its terms arranged
// otherwise, so its last bits differ; no eps clipping).
//
// Example: target [0, 0, 0, 1, 1, 1], preds [0, 0, 1, 1, 2, 2] -> 0.4620981203732969.
//
// State: the contingency table (target, pred) -> int64 count (common.hpp, PairCounts), merged
// across ranks by adding counts: exact and order-free.
#include "common.hpp"

namespace tally::clustering {
namespace {

class MutualInfoScore final : public ContingencyMetric {
 public:
  explicit MutualInfoScore(const Params& p)
      : ContingencyMetric(p, "MutualInfoScore", "mutual_info_score") {}

 protected:
  double score(const Contingency& c) const override { return mutual_info(c); }
};

}  // namespace

ComponentInfo mutual_info_info() {
  return metric<MutualInfoScore>(
      "MutualInfoScore",
      "Mutual information between predicted clusters and true classes, in nats; key "
      "mutual_info_score. Reference: scikit-learn 1.7.2 "
      "sklearn.metrics.mutual_info_score(target, preds).",
      {}, pair_inputs(), {},
      {{"mutual_info_score", Better::Higher, Plot::None, "mutual information (nats), >= 0"}});
}
TALLY_COMPONENT(mutual_info_info)

}  // namespace tally::clustering
