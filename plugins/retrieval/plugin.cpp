// The retrieval plugin: torchmetrics 1.9's retrieval metrics over (preds, target, indexes), each
// in its own file with its formula and reference; common.hpp holds the grouping by query and the
// tie order they share.
// Each component registers itself in its own file (TALLY_COMPONENT); they are listed in the
// order of the sources in CMakeLists.txt.
#include "tally/sdk/plugin.hpp"

TALLY_PLUGIN("retrieval", "0.1.0")
