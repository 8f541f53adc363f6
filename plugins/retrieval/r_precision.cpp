// RetrievalRPrecision: precision at R, R being each query's number of relevant documents, over
// queries (torchmetrics' RetrievalRPrecision).
//
// Formula. Per query of n documents with R relevant, ranked by score with
// torch.argsort(descending=True) (ties in torchmetrics' order: common.hpp): RP = (relevant
// among the first R) / R. A query with no relevant document is empty_target_action's. Then the
// aggregation. torchmetrics' RetrievalRPrecision has no top_k.
//
// Reference: torchmetrics 1.9.0 torchmetrics.retrieval.RetrievalRPrecision(empty_target_action,
// ignore_index, aggregation)(preds, target, indexes=indexes), run in float64 (stock torchmetrics
// divides in float32).
//
// Example: indexes [0, 0, 0, 1, 1, 1, 1], preds [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2], target
// [0, 0, 1, 0, 1, 0, 1] -> 0.75 (torchmetrics' docstring).
//
// State: every sample's query id, score and relevance (common.hpp), concatenated in rank order.
#include "common.hpp"

namespace tally::retrieval {
namespace {

class RetrievalRPrecision final : public RetrievalMetric<std::uint8_t> {
 public:
  static constexpr Identity kIdentity{.name = "RetrievalRPrecision",
                                      .key = "retrieval_r_precision",
                                      .key_doc = "mean over queries of precision at R",
                                      .top_k = false};
  explicit RetrievalRPrecision(const Params& p) : RetrievalMetric(p, kIdentity) {}

 protected:
  double query_value(const double* p, const std::uint8_t* t, std::size_t m,
                     Scratch& s) const override {
    std::size_t relevant = 0;
    for (std::size_t i = 0; i < m; ++i) relevant += t[i];
    argsort_desc(p, m, s.ranked);
    std::size_t found = 0;
    for (std::size_t r = 0; r < relevant; ++r)
      found += t[static_cast<std::size_t>(s.ranked[r].second)];
    return static_cast<double>(found) / static_cast<double>(relevant);
  }
};

}  // namespace

ComponentInfo r_precision_info() {
  return retrieval_component<RetrievalRPrecision>(
      "Precision at R (each query's number of relevant documents) of the ranking by score, "
      "aggregated over queries. Reference: torchmetrics 1.9.0 "
      "torchmetrics.retrieval.RetrievalRPrecision(...)(preds, target, indexes=indexes).");
}
TALLY_COMPONENT(r_precision_info)

}  // namespace tally::retrieval
