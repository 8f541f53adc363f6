// AdjustedRandScore: the Rand index adjusted for chance (scikit-learn's adjusted_rand_score).
//
// Formula. From the pair confusion matrix of the N (N - 1) ordered pairs of samples (tp: pairs
// together in both labelings, tn: apart in both, fp / fn: together in one only; scikit-learn's
// pair_confusion_matrix):
//   ARI = 2 (tp tn - fn fp) / ((tp + fn)(fn + tn) + (tp + fp)(fp + tn)),   1 when fn = fp = 0
// computed in exact 128-bit integers and rounded once each (Python's big integers, as
// scikit-learn converts them before this formula); in long double above 2^30 samples, where
// the products could leave 128 bits. Ranges over [-0.5, 1]; 0 for a random labeling.
//
// Reference: scikit-learn 1.7.2 sklearn.metrics.adjusted_rand_score(labels_true=target,
// labels_pred=preds). torchmetrics 1.9.0 AdjustedRandScore computes the same formula in int64 /
// float32 arithmetic (the same values up to float32 rounding).
//
// Example: target [0, 0, 0, 1, 1, 1], preds [0, 0, 1, 1, 2, 2] -> 0.24242424242424243.
//
// State: the contingency table (target, pred) -> int64 count (common.hpp, PairCounts), merged
// across ranks by adding counts: exact and order-free.
#include "common.hpp"

namespace tally::clustering {
namespace {

class AdjustedRandScore final : public ContingencyMetric {
 public:
  explicit AdjustedRandScore(const Params& p)
      : ContingencyMetric(p, "AdjustedRandScore", "adjusted_rand_score") {}

 protected:
  double score(const Contingency& c) const override {
    const PairConfusion m = pair_confusion(c);
    if (m.fn == 0 && m.fp == 0) return 1.0;
    if (c.n < (std::int64_t{1} << 30)) {
      const int128 num = m.tp * m.tn - m.fn * m.fp;
      const int128 den = (m.tp + m.fn) * (m.fn + m.tn) + (m.tp + m.fp) * (m.fp + m.tn);
      return 2.0 * static_cast<double>(num) / static_cast<double>(den);
    }
    using L = long double;
    const L tp = static_cast<L>(m.tp), tn = static_cast<L>(m.tn), fp = static_cast<L>(m.fp),
            fn = static_cast<L>(m.fn);
    return static_cast<double>(2.0L * (tp * tn - fn * fp) /
                               ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn)));
  }
};

}  // namespace

ComponentInfo adjusted_rand_info() {
  return metric<AdjustedRandScore>(
      "AdjustedRandScore",
      "Rand index adjusted for chance between predicted clusters and true classes, from the "
      "pair confusion matrix in exact integers; key adjusted_rand_score. Reference: "
      "scikit-learn 1.7.2 sklearn.metrics.adjusted_rand_score(target, preds).",
      {}, pair_inputs(), {"AdjustedRandIndex"},
      {{"adjusted_rand_score", Better::Higher, Plot::None, "ARI in [-0.5, 1]; 0 = chance"}});
}
TALLY_COMPONENT(adjusted_rand_info)

}  // namespace tally::clustering
