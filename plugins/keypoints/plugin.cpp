// The keypoints plugin: PCKAccuracy, MpiiPCKAccuracy, JhmdbPCKAccuracy, KeypointAUC,
// KeypointEndPointError and KeypointNME, mmeval's pose-estimation metrics. Each metric lives in
// its own file with its formula and reference; common.hpp holds the inputs and the distance.
// Each component registers itself in its own file (TALLY_COMPONENT); they are listed in the
// order of the sources in CMakeLists.txt.
#include "tally/sdk/plugin.hpp"

TALLY_PLUGIN("keypoints", "0.1.0")
