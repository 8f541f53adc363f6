// The detection plugin: COCODetection, LVISDetection, VOCMeanAP, OIDMeanAP, DOTAMeanAP,
// AVAMeanAP and ProposalRecall. Each metric lives in its own file with its formula and references;
// tally_support/mask.hpp (plugins/support) is the port of pycocotools' maskApi.c.
// Each component registers itself in its own file (TALLY_COMPONENT); they are listed in the
// order of the sources in CMakeLists.txt.
#include "tally/sdk/plugin.hpp"

TALLY_PLUGIN("detection", "0.1.0")
