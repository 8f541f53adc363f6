// The panoptic plugin: PanopticQuality and ModifiedPanopticQuality (torchmetrics' panoptic
// qualities). Each metric lives in its own file with its formula and reference; the counting they
// share is panoptic_common.cpp.
// Each component registers itself in its own file (TALLY_COMPONENT); they are listed in the
// order of the sources in CMakeLists.txt.
#include "tally/sdk/plugin.hpp"

TALLY_PLUGIN("panoptic", "0.1.0")
