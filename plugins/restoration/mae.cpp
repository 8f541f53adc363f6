// MAE: mean absolute error of images, on the 0..1 scale (pixel values divided by 255).
//
// The short name MAE belongs to this image metric, mmeval's MeanAbsoluteError; scikit-learn's
// mean_absolute_error on arrays is RegressionMAE (plugins/regression).
//
// Formula. For a sample (an image or a video, any shape) with d = gt/255 - pred/255:
//   no mask:  MAE = mean(|d|) over every element
//   mask m:   MAE = sum(|d| * m) / (sum(m) * scale + 1e-12),  scale = numel(d) / numel(m)
//             (m broadcast against the image; scale counts the channels a [H, W, 1] mask covers)
//   video [T, ...] with a mask: the mean over frames of the per-frame masked MAE (mask[t])
// Result: mae = (1/N) sum_i MAE_i.
//
// Reference: mmeval 0.2.1 mmeval.metrics.MeanAbsoluteError (mae.py), exactly its formulas;
// no crop and no colour conversion (mmeval has none for MAE). Differences, on purpose: float32
// images are computed in float64 (mmeval computes float32 images in float32 arithmetic, so it
// differs from the exact value by ~1e-7); NaN pixels and shapes that differ are input errors.
//
// Example (mmeval's docstring): pred 32x32x3 ones, gt twos, mask twos with rows 0..15 zero
//   -> sum(|d| m) = 16*32*3 * 2/255, sum(m) * 1 = 3072 -> 0.00392156862745098.
//
// State: one float64 per sample, concatenated across ranks in rank order and averaged in dataset
// order at compute, so any number of ranks gives the same bits.
#include "pixel_error.hpp"

namespace tally::restoration {
namespace {

class Mae final : public PixelError {
 public:
  explicit Mae(const Params& p) : PixelError(p, "MAE", "mae", false) {}
};

}  // namespace

ComponentInfo mae_info() {
  return with_results(
      metric<Mae>(
          "MAE",
          "Mean absolute error of images on the 0..1 scale (pixels / 255), optionally masked, "
          "averaged over images. mmeval's MeanAbsoluteError; key mae. For scikit-learn's "
          "mean_absolute_error on arrays use RegressionMAE.",
          {}, pixel_error_inputs(), {"MeanAbsoluteError"}),
      {{"mae", Better::Lower, Plot::None, "0..1 scale, mean over images"}});
}
TALLY_COMPONENT(mae_info)

}  // namespace tally::restoration
