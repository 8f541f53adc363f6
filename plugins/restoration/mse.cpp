// MSE: mean squared error of images, on the 0..1 scale (pixel values divided by 255).
//
// The short name MSE belongs to this image metric, mmeval's MeanSquaredError; scikit-learn's
// mean_squared_error on arrays is RegressionMSE (plugins/regression).
//
// Formula. For a sample (an image or a video, any shape) with d = gt/255 - pred/255:
//   no mask:  MSE = mean(d^2) over every element
//   mask m:   MSE = sum(d^2 * m) / sum(m)      (m broadcast against the image; note: unlike
//             MAE, no channel scale, so a [H, W, 1] mask on 3 channels gives 3x: mmeval's rule)
//   video [T, ...] with a mask: the mean over frames of the per-frame masked MSE (mask[t])
// Result: mse = (1/N) sum_i MSE_i.
//
// Reference: mmeval 0.2.1 mmeval.metrics.MeanSquaredError (mse.py), exactly its formulas.
// Differences, on purpose: float32 images are computed in float64 (mmeval: float32
// arithmetic); an all-zero mask is an input error (mmeval: 0/0 = NaN); so are NaN pixels and
// shapes that differ.
//
// Example (mmeval's docstring): pred 32x32x3 ones, gt twos, mask twos with rows 0..15 zero
//   -> sum(d^2 m) = 3072 * 2/255^2, sum(m) = 6144 -> 1.5378700499807768e-05.
//
// State: one float64 per sample, concatenated across ranks in rank order and averaged in dataset
// order at compute, so any number of ranks gives the same bits.
#include "pixel_error.hpp"

namespace tally::restoration {
namespace {

class Mse final : public PixelError {
 public:
  explicit Mse(const Params& p) : PixelError(p, "MSE", "mse", true) {}
};

}  // namespace

ComponentInfo mse_info() {
  return with_results(
      metric<Mse>(
          "MSE",
          "Mean squared error of images on the 0..1 scale (pixels / 255), optionally masked, "
          "averaged over images. mmeval's MeanSquaredError; key mse. For scikit-learn's "
          "mean_squared_error on arrays use RegressionMSE.",
          {}, pixel_error_inputs(), {"MeanSquaredError"}),
      {{"mse", Better::Lower, Plot::None, "0..1 scale, mean over images"}});
}
TALLY_COMPONENT(mse_info)

}  // namespace tally::restoration
