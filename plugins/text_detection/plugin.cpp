// The text-detection plugin: HmeanIoU (mmeval's, MMOCR's metric for ICDAR-style text detection),
// polygon IoU through GEOS.
// Each component registers itself in its own file (TALLY_COMPONENT); they are listed in the
// order of the sources in CMakeLists.txt.
#include "tally/sdk/plugin.hpp"

TALLY_PLUGIN("text_detection", "0.1.0")
