// RetrievalMRR: mean reciprocal rank of the first relevant document, over queries
// (torchmetrics' RetrievalMRR).
//
// Formula. Per query of n documents: the k = min(top_k, n) best-scored (torch.topk, ties in
// torchmetrics' order: common.hpp); rel_i = target_i when score_i > 0, else 0 (as torchmetrics
// 1.9); RR = 1 / r with r the rank of the first relevant document among the k, 0 when there is
// none. A query with no relevant document at all is empty_target_action's. Then the aggregation.
//
// Reference: torchmetrics 1.9.0 torchmetrics.retrieval.RetrievalMRR(empty_target_action,
// ignore_index, top_k, aggregation)(preds, target, indexes=indexes), run in float64 (stock
// torchmetrics rounds 1 / r to float32).
//
// Example: indexes [0, 0, 0, 1, 1, 1, 1], preds [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2], target
// [0, 0, 1, 0, 1, 0, 1] -> 0.75 (torchmetrics' docstring).
//
// State: every sample's query id, score and relevance (common.hpp), concatenated in rank order.
#include "common.hpp"

namespace tally::retrieval {
namespace {

class RetrievalMRR final : public RetrievalMetric<std::uint8_t> {
 public:
  static constexpr Identity kIdentity{.name = "RetrievalMRR",
                                      .key = "retrieval_reciprocal_rank",
                                      .key_doc = "mean over queries of 1 / rank of the first hit"};
  explicit RetrievalMRR(const Params& p) : RetrievalMetric(p, kIdentity) {}

 protected:
  double query_value(const double* p, const std::uint8_t* t, std::size_t m,
                     Scratch& s) const override {
    const std::size_t k = std::min(k_or_all(m), m);
    topk(p, m, k, s.ranked);
    for (std::size_t r = 0; r < k; ++r) {
      const auto i = static_cast<std::size_t>(s.ranked[r].second);
      if (t[i] != 0 && p[i] > 0) return 1.0 / static_cast<double>(r + 1);
    }
    return 0.0;
  }
};

}  // namespace

ComponentInfo mrr_info() {
  return retrieval_component<RetrievalMRR>(
      "Mean reciprocal rank of each query's first relevant document, aggregated over queries; a "
      "relevant document scored <= 0 counts as not relevant, as in torchmetrics. Reference: "
      "torchmetrics 1.9.0 torchmetrics.retrieval.RetrievalMRR(...)(preds, target, "
      "indexes=indexes).",
      {"MeanReciprocalRank"});
}
TALLY_COMPONENT(mrr_info)

}  // namespace tally::retrieval
