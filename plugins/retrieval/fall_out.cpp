// RetrievalFallOut: the fraction of each query's non-relevant documents retrieved in its top k,
// over queries (torchmetrics' RetrievalFallOut).
//
// Formula. Per query of n documents, ranked by score with torch.argsort(descending=True) (ties
// in torchmetrics' order: common.hpp): FO@k = (non-relevant among the first min(top_k, n)) /
// (non-relevant documents of the query). A query with no non-relevant document (every target 1)
// is empty_target_action's, whose default here is pos (1), as in torchmetrics. Then the
// aggregation. Lower is better.
//
// Reference: torchmetrics 1.9.0 torchmetrics.retrieval.RetrievalFallOut(empty_target_action,
// ignore_index, top_k, aggregation)(preds, target, indexes=indexes), run in float64 (stock
// torchmetrics divides in float32).
//
// Example: indexes [0, 0, 0, 1, 1, 1, 1], preds [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2], target
// [0, 0, 1, 0, 1, 0, 1], top_k 2 -> 0.5 (torchmetrics' docstring).
//
// State: every sample's query id, score and relevance (common.hpp), concatenated in rank order.
#include "common.hpp"

namespace tally::retrieval {
namespace {

class RetrievalFallOut final : public RetrievalMetric<std::uint8_t> {
 public:
  static constexpr Identity kIdentity{.name = "RetrievalFallOut",
                                      .key = "retrieval_fall_out",
                                      .key_doc = "mean over queries of fall-out at top_k",
                                      .better = Better::Lower,
                                      .empty_doc = "with no non-relevant document",
                                      .empty_default = "pos"};
  explicit RetrievalFallOut(const Params& p) : RetrievalMetric(p, kIdentity) {}

 protected:
  bool empty(const std::uint8_t* t, std::size_t m) const override {
    for (std::size_t i = 0; i < m; ++i)
      if (t[i] == 0) return false;
    return true;
  }
  const char* empty_words() const override { return "no non-relevant document (target all 1)"; }

  double query_value(const double* p, const std::uint8_t* t, std::size_t m,
                     Scratch& s) const override {
    const std::size_t k = std::min(k_or_all(m), m);
    argsort_desc(p, m, s.ranked);
    std::size_t found = 0, total = 0;
    for (std::size_t r = 0; r < m; ++r) {
      const bool negative = t[static_cast<std::size_t>(s.ranked[r].second)] == 0;
      total += negative ? 1 : 0;
      if (r < k && negative) ++found;
    }
    return static_cast<double>(found) / static_cast<double>(total);
  }
};

}  // namespace

ComponentInfo fall_out_info() {
  return retrieval_component<RetrievalFallOut>(
      "Fraction of each query's non-relevant documents that rank in its top_k by score, "
      "aggregated over queries (lower is better). Reference: torchmetrics 1.9.0 "
      "torchmetrics.retrieval.RetrievalFallOut(...)(preds, target, indexes=indexes).");
}
TALLY_COMPONENT(fall_out_info)

}  // namespace tally::retrieval
