// RetrievalPrecision: precision at k of each query's ranking, over queries (torchmetrics'
// RetrievalPrecision).
//
// Formula. Per query of n documents: k = top_k (all n when null, and n when adaptive_k and
// top_k > n); the min(k, n) best-scored documents (torch.topk, ties in torchmetrics' order:
// common.hpp); rel_i = target_i when score_i > 0, else 0 (as torchmetrics 1.9); P@k = (relevant
// among them) / k. Without adaptive_k a query shorter than top_k still divides by top_k. A query
// with no relevant document is empty_target_action's. Then the aggregation.
//
// Reference: torchmetrics 1.9.0 torchmetrics.retrieval.RetrievalPrecision(empty_target_action,
// ignore_index, top_k, adaptive_k, aggregation)(preds, target, indexes=indexes), run in float64
// (stock torchmetrics divides in float32).
//
// Example: indexes [0, 0, 0, 1, 1, 1, 1], preds [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2], target
// [0, 0, 1, 0, 1, 0, 1], top_k 2 -> 0.5 (torchmetrics' docstring).
//
// State: every sample's query id, score and relevance (common.hpp), concatenated in rank order.
#include "common.hpp"

namespace tally::retrieval {
namespace {

class RetrievalPrecision final : public RetrievalMetric<std::uint8_t> {
 public:
  static constexpr Identity kIdentity{.name = "RetrievalPrecision",
                                      .key = "retrieval_precision",
                                      .key_doc = "mean over queries of precision at top_k"};
  explicit RetrievalPrecision(const Params& p)
      : RetrievalMetric(p, kIdentity), adaptive_(p.get_bool("adaptive_k")) {}

 protected:
  double query_value(const double* p, const std::uint8_t* t, std::size_t m,
                     Scratch& s) const override {
    std::size_t k = k_or_all(m);
    if (adaptive_ && k > m) k = m;
    const std::size_t kept = std::min(k, m);
    topk(p, m, kept, s.ranked);
    std::size_t relevant = 0;
    for (std::size_t r = 0; r < kept; ++r) {
      const auto i = static_cast<std::size_t>(s.ranked[r].second);
      relevant += t[i] != 0 && p[i] > 0 ? 1 : 0;
    }
    return static_cast<double>(relevant) / static_cast<double>(k);
  }

 private:
  bool adaptive_;
};

}  // namespace

ComponentInfo precision_info() {
  return retrieval_component<RetrievalPrecision>(
      "Precision at top_k of each query's ranking by score, aggregated over queries; a relevant "
      "document scored <= 0 counts as not relevant, as in torchmetrics. Reference: torchmetrics "
      "1.9.0 torchmetrics.retrieval.RetrievalPrecision(...)(preds, target, indexes=indexes).",
      {},
      {param("adaptive_k", ParamType::Bool,
             "When top_k exceeds a query's documents, divide by their number instead of "
             "top_k (torchmetrics' adaptive_k).")
           .def(false)});
}
TALLY_COMPONENT(precision_info)

}  // namespace tally::retrieval
