// NormalizedMutualInfoScore: the mutual information divided by a mean of the two entropies
// (scikit-learn's normalized_mutual_info_score).
//
// Formula. NMI = MI / mean(H(target), H(preds)), the mean chosen by average_method
// (arithmetic, geometric, min, max: scikit-learn's _generalized_average), with MI as in
// MutualInfoScore and H(x) = -sum_k p_k log p_k over the label frequencies (scikit-learn's
// entropy). 1 when both labelings have a single label; 0 when MI = 0.
//
// Reference: scikit-learn 1.7.2 sklearn.metrics.normalized_mutual_info_score(
// labels_true=target, labels_pred=preds, average_method=...). torchmetrics 1.9.0
// NormalizedMutualInfoScore gives the same values (to 1e-12 with float64 tensors and
// torch.set_default_dtype(float64); its default float32 arithmetic rounds at about 1e-7), except
// that it returns its MI, 0, when one label makes both entropies 0 (scikit-learn: 1).
//
// Example: target [0, 0, 0, 1, 1, 1], preds [0, 0, 1, 1, 2, 2] -> 0.5158037429793889.
//
// State: the contingency table (target, pred) -> int64 count (common.hpp, PairCounts), merged
// across ranks by adding counts: exact and order-free.
#include "common.hpp"

namespace tally::clustering {
namespace {

class NormalizedMutualInfoScore final : public ContingencyMetric {
 public:
  explicit NormalizedMutualInfoScore(const Params& p)
      : ContingencyMetric(p, "NormalizedMutualInfoScore", "normalized_mutual_info_score"),
        method_(p.get_string("average_method")) {}

 protected:
  double score(const Contingency& c) const override {
    if (c.rows() == 1 && c.cols() == 1) return 1.0;
    const double mi = mutual_info(c);
    if (mi == 0.0) return 0.0;
    return mi / generalized_average(entropy(c.row_sums), entropy(c.col_sums), method_);
  }

 private:
  std::string method_;
};

}  // namespace

ComponentInfo normalized_mutual_info_info() {
  return metric<NormalizedMutualInfoScore>(
      "NormalizedMutualInfoScore",
      "Mutual information normalized by a mean (average_method) of the entropies of the true "
      "classes and the predicted clusters; key normalized_mutual_info_score. Reference: "
      "scikit-learn 1.7.2 sklearn.metrics.normalized_mutual_info_score(target, preds, "
      "average_method=...).",
      {average_method_param()}, pair_inputs(), {},
      {{"normalized_mutual_info_score", Better::Higher, Plot::None, "NMI in [0, 1]"}});
}
TALLY_COMPONENT(normalized_mutual_info_info)

}  // namespace tally::clustering
