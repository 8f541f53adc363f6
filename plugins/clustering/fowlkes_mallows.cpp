// FowlkesMallowsIndex: the geometric mean of pairwise precision and recall (scikit-learn's
// fowlkes_mallows_score).
//
// Formula. With the contingency table n_ij, class sizes a_i and cluster sizes b_j:
//   tk = sum n_ij^2 - N, pk = sum_j b_j^2 - N, qk = sum_i a_i^2 - N   (exact integers)
//   FMI = sqrt(tk / pk) * sqrt(tk / qk),   0 when tk = 0
// (each ratio of two integers rounded to float64 first, as NumPy divides int64 arrays).
//
// Reference: scikit-learn 1.7.2 sklearn.metrics.fowlkes_mallows_score(labels_true=target,
// labels_pred=preds). torchmetrics 1.9.0 FowlkesMallowsIndex: the same formula.
//
// Example: target [0, 0, 0, 1, 1, 1], preds [0, 0, 1, 1, 2, 2] -> 0.4714045207910317.
//
// State: the contingency table (target, pred) -> int64 count (common.hpp, PairCounts), merged
// across ranks by adding counts: exact and order-free.
#include <cmath>

#include "common.hpp"

namespace tally::clustering {
namespace {

class FowlkesMallowsIndex final : public ContingencyMetric {
 public:
  explicit FowlkesMallowsIndex(const Params& p)
      : ContingencyMetric(p, "FowlkesMallowsIndex", "fowlkes_mallows_index") {}

 protected:
  double score(const Contingency& c) const override {
    int128 tk = -static_cast<int128>(c.n), pk = tk, qk = tk;
    for (const std::int64_t x : c.count) tk += static_cast<int128>(x) * x;
    for (const std::int64_t x : c.col_sums) pk += static_cast<int128>(x) * x;
    for (const std::int64_t x : c.row_sums) qk += static_cast<int128>(x) * x;
    if (tk == 0) return 0.0;
    const auto t = static_cast<double>(tk);
    return std::sqrt(t / static_cast<double>(pk)) * std::sqrt(t / static_cast<double>(qk));
  }
};

}  // namespace

ComponentInfo fowlkes_mallows_info() {
  return metric<FowlkesMallowsIndex>(
      "FowlkesMallowsIndex",
      "Fowlkes-Mallows index: the geometric mean of the pairwise precision and recall of the "
      "predicted clusters against the true classes; key fowlkes_mallows_index. Reference: "
      "scikit-learn 1.7.2 sklearn.metrics.fowlkes_mallows_score(target, preds).",
      {}, pair_inputs(), {"FowlkesMallowsScore"},
      {{"fowlkes_mallows_index", Better::Higher, Plot::None, "FMI in [0, 1]"}});
}
TALLY_COMPONENT(fowlkes_mallows_info)

}  // namespace tally::clustering
