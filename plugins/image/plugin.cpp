// The image-quality plugin: torchmetrics 1.9's image metrics on [N, C, H, W] float images
// (MultiScaleStructuralSimilarityIndexMeasure, ...), each in its own file with its formula and
// reference.
// Each component registers itself in its own file (TALLY_COMPONENT); they are listed in the
// order of the sources in CMakeLists.txt.
#include "tally/sdk/plugin.hpp"

TALLY_PLUGIN("image", "0.1.0")
