// The regression plugin: RegressionMAE, RegressionMSE, RMSE and R2 (alias R2Score), equal to
// scikit-learn's mean_absolute_error, mean_squared_error, root_mean_squared_error and r2_score;
// and torchmetrics' PearsonCorrCoef, SpearmanCorrCoef, KendallRankCorrCoef, ConcordanceCorrCoef,
// ExplainedVariance, MeanAbsolutePercentageError, SymmetricMeanAbsolutePercentageError,
// WeightedMeanAbsolutePercentageError, MeanSquaredLogError, CosineSimilarity,
// TweedieDevianceScore, LogCoshError, MinkowskiDistance, KLDivergence and RelativeSquaredError
// (declaring their results themselves). The short names MAE and MSE are the image-restoration
// metrics (mmeval's). Each metric lives in its own file with its formula and reference.
// Each component registers itself in its own file (TALLY_COMPONENT); they are listed in the
// order of the sources in CMakeLists.txt.
#include "tally/sdk/plugin.hpp"

TALLY_PLUGIN("regression", "0.1.0")
