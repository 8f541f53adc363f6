// The segmentation plugin: MeanIoU (mmeval's MeanIoU), DiceScore, GeneralizedDiceScore and
// HausdorffDistance (torchmetrics'). Each metric lives in its own file with its formula and
// reference.
// Each component registers itself in its own file (TALLY_COMPONENT); they are listed in the
// order of the sources in CMakeLists.txt.
#include "tally/sdk/plugin.hpp"

TALLY_PLUGIN("segmentation", "0.1.0")
