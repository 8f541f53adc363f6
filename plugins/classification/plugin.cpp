// The classification plugin: Accuracy, SingleLabelMetric (alias SingleLabelPrecisionRecallF1score),
// ConfusionMatrix, MultiLabelMetric (alias MultiLabelPrecisionRecallF1score), AveragePrecision,
// ROCAUC, F1Score and PrecisionRecallF1score (mmeval's factory of the two); and torchmetrics'
// task-based StatScores, Specificity, FBetaScore, HammingDistance, JaccardIndex, ExactMatch,
// MatthewsCorrCoef, CohenKappa and CalibrationError (tm_core.hpp). Each metric lives in its own
// file with its formula and references.
// Each component registers itself in its own file (TALLY_COMPONENT); they are listed in the
// order of the sources in CMakeLists.txt.
#include "tally/sdk/plugin.hpp"

TALLY_PLUGIN("classification", "0.1.0")
