// The audio plugin: ScaleInvariantSignalDistortionRatio, ScaleInvariantSignalNoiseRatio,
// SignalDistortionRatio, PermutationInvariantTraining and ShortTimeObjectiveIntelligibility, equal
// to torchmetrics 1.9's classes of those names in float64. Each metric lives in its own file with
// its formula and reference; the kernels they share are in kernels.cpp.
// Each component registers itself in its own file (TALLY_COMPONENT); they are listed in the
// order of the sources in CMakeLists.txt.
#include "tally/sdk/plugin.hpp"

TALLY_PLUGIN("audio", "0.1.0")
