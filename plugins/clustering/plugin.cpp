// The clustering plugin: the extrinsic metrics AdjustedRandScore, RandScore, MutualInfoScore,
// NormalizedMutualInfoScore, AdjustedMutualInfoScore, HomogeneityScore, CompletenessScore,
// VMeasureScore and FowlkesMallowsIndex (predicted cluster labels against true classes, from one
// shared contingency state), and the intrinsic CalinskiHarabaszScore, DaviesBouldinScore and
// DunnIndex (points and their cluster labels). Names and inputs are torchmetrics 1.9's; values
// are scikit-learn 1.7.2's (DunnIndex: torchmetrics'). Each metric lives in its own file with
// its formula and reference.
#include <vector>

#include "common.hpp"
#include "tally/sdk/plugin.hpp"

namespace {

std::vector<tally::ComponentInfo> clustering_components() {
  using namespace tally::clustering;
  return {adjusted_rand_info(),        rand_info(),
          mutual_info_info(),          normalized_mutual_info_info(),
          adjusted_mutual_info_info(), homogeneity_info(),
          completeness_info(),         v_measure_info(),
          fowlkes_mallows_info(),      calinski_harabasz_info(),
          davies_bouldin_info(),       dunn_info()};
}

}  // namespace

TALLY_PLUGIN("clustering", "0.1.0", clustering_components)
