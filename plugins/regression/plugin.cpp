// The regression plugin: RegressionMAE, RegressionMSE, RMSE and R2 (alias R2Score), equal to
// scikit-learn's mean_absolute_error, mean_squared_error, root_mean_squared_error and r2_score;
// and torchmetrics' PearsonCorrCoef, SpearmanCorrCoef, KendallRankCorrCoef, ConcordanceCorrCoef,
// ExplainedVariance, MeanAbsolutePercentageError, SymmetricMeanAbsolutePercentageError,
// WeightedMeanAbsolutePercentageError, MeanSquaredLogError, CosineSimilarity,
// TweedieDevianceScore, LogCoshError, MinkowskiDistance, KLDivergence and RelativeSquaredError
// (declaring their results themselves). The short names MAE and MSE are the image-restoration
// metrics (mmeval's). Each metric lives in its own file with its formula and reference.
#include <vector>

#include "common.hpp"
#include "tally/sdk/plugin.hpp"

namespace {

std::vector<tally::ComponentInfo> regression_components() {
  using tally::Better;
  using tally::Plot;
  auto mae = tally::regression::mae_info();
  mae.results = {{"mae", Better::Lower, Plot::None, "mean absolute error (array: per output)"}};
  auto mse = tally::regression::mse_info();
  mse.results = {{"mse", Better::Lower, Plot::None, "mean squared error (array: per output)"}};
  auto rmse = tally::regression::rmse_info();
  rmse.results = {
      {"rmse", Better::Lower, Plot::None, "root mean squared error (array: per output)"}};
  auto r2 = tally::regression::r2_info();
  r2.results = {
      {"r2", Better::Higher, Plot::None, "coefficient of determination (array: per output)"}};
  namespace r = tally::regression;
  return {std::move(mae),     std::move(mse),        std::move(rmse),
          std::move(r2),      r::pearson_info(),     r::spearman_info(),
          r::kendall_info(),  r::concordance_info(), r::explained_variance_info(),
          r::mape_info(),     r::smape_info(),       r::wmape_info(),
          r::msle_info(),     r::cosine_info(),      r::tweedie_info(),
          r::log_cosh_info(), r::minkowski_info(),   r::kl_divergence_info(),
          r::rse_info()};
}

}  // namespace

TALLY_PLUGIN("regression", "0.1.0", regression_components)
