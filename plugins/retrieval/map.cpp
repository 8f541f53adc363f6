// RetrievalMAP: mean average precision of a ranking, over queries (torchmetrics' RetrievalMAP).
//
// Formula. Per query of n documents: the k = min(top_k, n) best-scored (torch.topk, ties in
// torchmetrics' order: common.hpp); rel_i = target_i when score_i > 0, else 0 (torchmetrics 1.9
// counts a relevant document scored <= 0 as not relevant); with r_1 < ... < r_R the ranks of the
// relevant documents among the k, AP = (1/R) sum_j j / r_j, and 0 when R = 0. A query with no
// relevant document at all is empty_target_action's (neg: 0). The result is the aggregation
// (mean by default) of the per-query values.
//
// Reference: torchmetrics 1.9.0 torchmetrics.retrieval.RetrievalMAP(empty_target_action,
// ignore_index, top_k, aggregation)(preds, target, indexes=indexes), run in float64
// (tests/reference/retrieval.py; stock torchmetrics computes AP in float32, within 1e-6).
//
// Example: indexes [0, 0, 0, 1, 1, 1, 1], preds [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2], target
// [0, 0, 1, 0, 1, 0, 1] -> 0.7917 (torchmetrics' docstring).
//
// State: every sample's query id, score and relevance (common.hpp), concatenated in rank order.
#include "common.hpp"

namespace tally::retrieval {
namespace {

class RetrievalMAP final : public RetrievalMetric<std::uint8_t> {
 public:
  static constexpr Identity kIdentity{.name = "RetrievalMAP",
                                      .key = "retrieval_average_precision",
                                      .key_doc = "mean over queries of average precision"};
  explicit RetrievalMAP(const Params& p) : RetrievalMetric(p, kIdentity) {}

 protected:
  double query_value(const double* p, const std::uint8_t* t, std::size_t m,
                     Scratch& s) const override {
    const std::size_t k = std::min(k_or_all(m), m);
    topk(p, m, k, s.ranked);
    double sum = 0.0;
    std::size_t found = 0;
    for (std::size_t r = 0; r < k; ++r) {
      const auto i = static_cast<std::size_t>(s.ranked[r].second);
      if (t[i] != 0 && p[i] > 0) {
        ++found;
        sum += static_cast<double>(found) / static_cast<double>(r + 1);
      }
    }
    return found == 0 ? 0.0 : sum / static_cast<double>(found);
  }
};

}  // namespace

ComponentInfo map_info() {
  return retrieval_component<RetrievalMAP>(
      "Mean average precision of the ranking of each query's documents by score, aggregated "
      "over queries; a relevant document scored <= 0 counts as not relevant, as in torchmetrics. "
      "Reference: torchmetrics 1.9.0 torchmetrics.retrieval.RetrievalMAP(...)(preds, target, "
      "indexes=indexes).",
      {"RetrievalMeanAveragePrecision"});
}
TALLY_COMPONENT(map_info)

}  // namespace tally::retrieval
