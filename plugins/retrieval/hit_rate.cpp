// RetrievalHitRate: whether a relevant document is among each query's top k, over queries
// (torchmetrics' RetrievalHitRate).
//
// Formula. Per query of n documents, ranked by score with torch.argsort(descending=True) (ties
// in torchmetrics' order: common.hpp): HR@k = 1 when a relevant document is among the first
// min(top_k, n), else 0 (whatever its score: no score > 0 rule here, as in torchmetrics). A query
// with no relevant document is empty_target_action's. Then the aggregation.
//
// Reference: torchmetrics 1.9.0 torchmetrics.retrieval.RetrievalHitRate(empty_target_action,
// ignore_index, top_k, aggregation)(preds, target, indexes=indexes), run in float64.
//
// Example: indexes [0, 0, 0, 1, 1, 1, 1], preds [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2], target
// [1, 0, 0, 0, 1, 0, 1], top_k 2 -> 0.5 (torchmetrics' docstring).
//
// State: every sample's query id, score and relevance (common.hpp), concatenated in rank order.
#include "common.hpp"

namespace tally::retrieval {
namespace {

class RetrievalHitRate final : public RetrievalMetric<std::uint8_t> {
 public:
  static constexpr Identity kIdentity{.name = "RetrievalHitRate",
                                      .key = "retrieval_hit_rate",
                                      .key_doc = "mean over queries of hit (0 or 1) at top_k"};
  explicit RetrievalHitRate(const Params& p) : RetrievalMetric(p, kIdentity) {}

 protected:
  double query_value(const double* p, const std::uint8_t* t, std::size_t m,
                     Scratch& s) const override {
    const std::size_t k = std::min(k_or_all(m), m);
    argsort_desc(p, m, s.ranked);
    for (std::size_t r = 0; r < k; ++r)
      if (t[static_cast<std::size_t>(s.ranked[r].second)] != 0) return 1.0;
    return 0.0;
  }
};

}  // namespace

ComponentInfo hit_rate_info() {
  return retrieval_component<RetrievalHitRate>(
      "Fraction of queries with a relevant document among their top_k by score. Reference: "
      "torchmetrics 1.9.0 torchmetrics.retrieval.RetrievalHitRate(...)(preds, target, "
      "indexes=indexes).");
}
TALLY_COMPONENT(hit_rate_info)

}  // namespace tally::retrieval
