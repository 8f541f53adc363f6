// The image-restoration plugin: PSNR, SNR, SSIM, MAE and MSE (mmeval's PeakSignalNoiseRatio,
// SignalNoiseRatio, StructuralSimilarity, MeanAbsoluteError, MeanSquaredError), and the
// alpha-matting metrics SAD, MattingMSE, GradientError and ConnectivityError (mmeval's
// SumAbsoluteDifferences, MattingMeanSquaredError, GradientError, ConnectivityError), and the
// no-reference NIQE (NaturalImageQualityEvaluator). Each metric
// lives in its own file with its formula and references.
#include <vector>

#include "common.hpp"
#include "matting.hpp"
#include "tally/sdk/plugin.hpp"

namespace {

std::vector<tally::ComponentInfo> restoration_components() {
  using tally::Better;
  using tally::Plot;
  auto psnr = tally::restoration::psnr_info();
  psnr.results = {{"psnr", Better::Higher, Plot::None, "dB, mean over images"}};
  auto snr = tally::restoration::snr_info();
  snr.results = {{"snr", Better::Higher, Plot::None, "dB, mean over images"}};
  auto ssim = tally::restoration::ssim_info();
  ssim.results = {{"ssim", Better::Higher, Plot::None, "in [-1, 1], mean over images"}};
  auto mae = tally::restoration::mae_info();
  mae.results = {{"mae", Better::Lower, Plot::None, "0..1 scale, mean over images"}};
  auto mse = tally::restoration::mse_info();
  mse.results = {{"mse", Better::Lower, Plot::None, "0..1 scale, mean over images"}};
  auto sad = tally::restoration::sad_info();
  sad.results = {
      {"sad", Better::Lower, Plot::None, "sum over pixels / norm_const, mean over images"}};
  auto matting_mse = tally::restoration::matting_mse_info();
  matting_mse.results = {
      {"matting_mse", Better::Lower, Plot::None, "per unknown trimap pixel, mean over images"}};
  auto gradient = tally::restoration::gradient_error_info();
  gradient.results = {
      {"gradient_error", Better::Lower, Plot::None, "sum / norm_const, mean over images"}};
  auto connectivity = tally::restoration::connectivity_error_info();
  connectivity.results = {
      {"connectivity_error", Better::Lower, Plot::None, "sum / norm_const, mean over images"}};
  auto niqe = tally::restoration::niqe_info();
  niqe.results = {{"niqe", Better::Lower, Plot::None, "no-reference, mean over images"}};
  std::vector<tally::ComponentInfo> out;
  for (auto* c :
       {&psnr, &snr, &ssim, &mae, &mse, &sad, &matting_mse, &gradient, &connectivity, &niqe})
    out.push_back(std::move(*c));
  return out;
}

}  // namespace

TALLY_PLUGIN("restoration", "0.1.0", restoration_components)
