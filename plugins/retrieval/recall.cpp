// RetrievalRecall: recall at k of each query's ranking, over queries (torchmetrics'
// RetrievalRecall).
//
// Formula. Per query of n documents, ranked by score with torch.argsort(descending=True) (ties
// in torchmetrics' order: common.hpp): rel_i = target_i when score_i > 0, else 0 (as
// torchmetrics 1.9); R@k = (relevant among the first min(top_k, n)) / (relevant documents of the
// query, whatever their score). A query with no relevant document is empty_target_action's. Then
// the aggregation.
//
// Reference: torchmetrics 1.9.0 torchmetrics.retrieval.RetrievalRecall(empty_target_action,
// ignore_index, top_k, aggregation)(preds, target, indexes=indexes), run in float64 (stock
// torchmetrics divides in float32).
//
// Example: indexes [0, 0, 0, 1, 1, 1, 1], preds [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2], target
// [0, 0, 1, 0, 1, 0, 1], top_k 2 -> 0.75 (torchmetrics' docstring).
//
// State: every sample's query id, score and relevance (common.hpp), concatenated in rank order.
#include "common.hpp"

namespace tally::retrieval {
namespace {

class RetrievalRecall final : public RetrievalMetric<std::uint8_t> {
 public:
  static constexpr Identity kIdentity{.name = "RetrievalRecall",
                                      .key = "retrieval_recall",
                                      .key_doc = "mean over queries of recall at top_k"};
  explicit RetrievalRecall(const Params& p) : RetrievalMetric(p, kIdentity) {}

 protected:
  double query_value(const double* p, const std::uint8_t* t, std::size_t m,
                     Scratch& s) const override {
    const std::size_t k = std::min(k_or_all(m), m);
    argsort_desc(p, m, s.ranked);
    std::size_t found = 0, total = 0;
    for (std::size_t r = 0; r < m; ++r) {
      const auto i = static_cast<std::size_t>(s.ranked[r].second);
      total += t[i];
      if (r < k && t[i] != 0 && p[i] > 0) ++found;
    }
    return static_cast<double>(found) / static_cast<double>(total);
  }
};

}  // namespace

ComponentInfo recall_info() {
  return retrieval_component<RetrievalRecall>(
      "Recall at top_k of each query's ranking by score, aggregated over queries; a relevant "
      "document scored <= 0 counts as not retrieved, as in torchmetrics. Reference: torchmetrics "
      "1.9.0 torchmetrics.retrieval.RetrievalRecall(...)(preds, target, indexes=indexes).");
}
TALLY_COMPONENT(recall_info)

}  // namespace tally::retrieval
