// AdjustedMutualInfoScore: the mutual information adjusted for chance (scikit-learn's
// adjusted_mutual_info_score).
//
// Formula. AMI = (MI - EMI) / (mean(H(target), H(preds)) - EMI), the mean chosen by
// average_method (scikit-learn's _generalized_average), MI as in MutualInfoScore, H the
// entropies of the label frequencies, and EMI the expected mutual information of two random
// labelings with the same class and cluster sizes (a hypergeometric model, scikit-learn's
// _expected_mutual_info_fast; common.hpp, expected_mutual_info). As scikit-learn: numerator
// and denominator kept at least float64 eps away from 0 with their signs; 1 when both
// labelings have a single label, 0 when one of them has.
//
// Reference: scikit-learn 1.7.2 sklearn.metrics.adjusted_mutual_info_score(
// labels_true=target, labels_pred=preds, average_method=...), bit for bit on the reference
// cases (also where rounding noise decides the value: MI - EMI of about 1e-14). torchmetrics
// 1.9.0 AdjustedMutualInfoScore sums the same EMI terms in a Python loop over every nij (to 3e-12
// of scikit-learn in float64) but has no special case for one label (0 where scikit-learn gives
// 1) and does not clamp the numerator (two samples in two matching classes: 0, scikit-learn 1).
//
// Example: target [0, 0, 0, 1, 1, 1], preds [0, 0, 1, 1, 2, 2] -> 0.2987924581708901.
//
// Cost: EMI sums the non-zero terms of every cell's hypergeometric pmf, O(rows * cols *
// sqrt(max cluster size)) lgamma calls, where scikit-learn's loop takes O(rows * cols *
// min(a_i, b_j)) (10^7 labels, 100 classes, 120 clusters: about 3 s on one core). Above 2^24
// cells (thousands of tiny clusters) the cells of equal sizes are summed once each and weighted
// by their number, which changes the last bits only.
//
// State: the contingency table (target, pred) -> int64 count (common.hpp, PairCounts), merged
// across ranks by adding counts: exact and order-free.
#include <limits>

#include "common.hpp"

namespace tally::clustering {
namespace {

class AdjustedMutualInfoScore final : public ContingencyMetric {
 public:
  explicit AdjustedMutualInfoScore(const Params& p)
      : ContingencyMetric(p, "AdjustedMutualInfoScore", "adjusted_mutual_info_score"),
        method_(p.get_string("average_method")) {}

 protected:
  double score(const Contingency& c) const override {
    if (c.rows() == 1 && c.cols() == 1) return 1.0;
    if (c.rows() == 1 || c.cols() == 1) return 0.0;
    const double mi = mutual_info(c);
    const double emi = expected_mutual_info(c);
    const double normalizer =
        generalized_average(entropy(c.row_sums), entropy(c.col_sums), method_);
    constexpr double eps = std::numeric_limits<double>::epsilon();
    // scikit-learn: a difference that rounding pushed to (or past) 0 keeps its sign, at least
    // eps in magnitude.
    double den = normalizer - emi;
    den = den < 0 ? std::min(den, -eps) : std::max(den, eps);
    double num = mi - emi;
    num = num < 0 ? std::min(num, -eps) : std::max(num, eps);
    return num / den;
  }

 private:
  std::string method_;
};

}  // namespace

ComponentInfo adjusted_mutual_info_info() {
  return metric<AdjustedMutualInfoScore>(
      "AdjustedMutualInfoScore",
      "Mutual information adjusted for chance (the expected mutual information of random "
      "labelings of the same sizes subtracted), normalized by a mean (average_method) of the "
      "entropies; key adjusted_mutual_info_score. Reference: scikit-learn 1.7.2 "
      "sklearn.metrics.adjusted_mutual_info_score(target, preds, average_method=...).",
      {average_method_param()}, pair_inputs(), {},
      {{"adjusted_mutual_info_score", Better::Higher, Plot::None, "AMI, <= 1; 0 = chance"}});
}
TALLY_COMPONENT(adjusted_mutual_info_info)

}  // namespace tally::clustering
