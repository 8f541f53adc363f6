// The retrieval plugin: torchmetrics 1.9's retrieval metrics over (preds, target, indexes), each
// in its own file with its formula and reference; common.hpp holds the grouping by query and the
// tie order they share.
#include <vector>

#include "common.hpp"
#include "tally/sdk/plugin.hpp"

namespace {

std::vector<tally::ComponentInfo> retrieval_components() {
  using namespace tally::retrieval;
  return {map_info(),      mrr_info(),      ndcg_info(),        precision_info(), recall_info(),
          hit_rate_info(), fall_out_info(), r_precision_info(), auroc_info()};
}

}  // namespace

TALLY_PLUGIN("retrieval", "0.1.0", retrieval_components)
