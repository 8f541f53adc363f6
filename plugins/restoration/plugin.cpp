// The image-restoration plugin: PSNR, SNR, SSIM, MAE and MSE (mmeval's PeakSignalNoiseRatio,
// SignalNoiseRatio, StructuralSimilarity, MeanAbsoluteError, MeanSquaredError). Each metric lives
// in its own file with its formula and references.
#include <vector>

#include "common.hpp"
#include "tally/plugin.hpp"

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
  return {std::move(psnr), std::move(snr), std::move(ssim), std::move(mae), std::move(mse)};
}

}  // namespace

TALLY_PLUGIN("restoration", "0.1.0", restoration_components)
