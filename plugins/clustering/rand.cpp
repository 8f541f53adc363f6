// RandScore: the fraction of sample pairs on which two labelings agree (scikit-learn's
// rand_score).
//
// Formula. With the pair confusion matrix C of the N (N - 1) ordered pairs (scikit-learn's
// pair_confusion_matrix): RI = (C00 + C11) / (N^2 - N), both counts rounded to float64 and
// divided once (NumPy's int64 division); 1 when they are equal or N^2 - N = 0 (one sample).
//
// Reference: scikit-learn 1.7.2 sklearn.metrics.rand_score(labels_true=target,
// labels_pred=preds). torchmetrics 1.9.0 RandScore: the same formula.
//
// Example: target [0, 0, 0, 1, 1, 1], preds [0, 0, 1, 1, 2, 2] -> 0.6666666666666666.
//
// State: the contingency table (target, pred) -> int64 count (common.hpp, PairCounts), merged
// across ranks by adding counts: exact and order-free.
#include "common.hpp"

namespace tally::clustering {
namespace {

class RandScore final : public ContingencyMetric {
 public:
  explicit RandScore(const Params& p) : ContingencyMetric(p, "RandScore", "rand_score") {}

 protected:
  double score(const Contingency& c) const override {
    const PairConfusion m = pair_confusion(c);
    const int128 num = m.tn + m.tp;
    const int128 den = m.tn + m.fp + m.fn + m.tp;
    if (num == den || den == 0) return 1.0;
    return static_cast<double>(num) / static_cast<double>(den);
  }
};

}  // namespace

ComponentInfo rand_info() {
  return metric<RandScore>(
      "RandScore",
      "Rand index: the fraction of sample pairs that both labelings put together or both put "
      "apart; key rand_score. Reference: scikit-learn 1.7.2 sklearn.metrics.rand_score(target, "
      "preds).",
      {}, pair_inputs(), {"RandIndex"},
      {{"rand_score", Better::Higher, Plot::None, "Rand index in [0, 1]"}});
}
TALLY_COMPONENT(rand_info)

}  // namespace tally::clustering
