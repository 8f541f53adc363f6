// The clustering plugin: the extrinsic metrics AdjustedRandScore, RandScore, MutualInfoScore,
// NormalizedMutualInfoScore, AdjustedMutualInfoScore, HomogeneityScore, CompletenessScore,
// VMeasureScore and FowlkesMallowsIndex (predicted cluster labels against true classes, from one
// shared contingency state), and the intrinsic CalinskiHarabaszScore, DaviesBouldinScore and
// DunnIndex (points and their cluster labels). Names and inputs are torchmetrics 1.9's; values
// are scikit-learn 1.7.2's (DunnIndex: torchmetrics'). Each metric lives in its own file with
// its formula and reference.
// Each component registers itself in its own file (TALLY_COMPONENT); they are listed in the
// order of the sources in CMakeLists.txt.
#include "tally/sdk/plugin.hpp"

TALLY_PLUGIN("clustering", "0.1.0")
