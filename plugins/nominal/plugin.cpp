// The nominal plugin: associations of two categorical series (CramersV, TschuprowsT,
// PearsonsContingencyCoefficient, TheilsU) and inter-rater agreement (FleissKappa), equal to
// torchmetrics 1.9's torchmetrics.nominal classes. Each metric lives in its own file with its
// formula and reference.
// Each component registers itself in its own file (TALLY_COMPONENT); they are listed in the
// order of the sources in CMakeLists.txt.
#include "tally/sdk/plugin.hpp"

TALLY_PLUGIN("nominal", "0.1.0")
