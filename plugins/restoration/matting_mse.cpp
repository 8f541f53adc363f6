// MattingMSE: mean squared error of alpha mattes over the trimap's unknown region (mmeval's
// MattingMeanSquaredError).
//
// Formula. For image i with u_i = the number of trimap pixels equal to 128:
//   MSE_i = sum_k (pred_k - gt_k)^2 / u_i   (the sum over EVERY pixel, as mmeval: the prediction is
//           expected to be masked by the trimap already), or 0 when u_i = 0
// Result: matting_mse = mean_i MSE_i.
//
// Reference: mmeval 0.2.1 mmeval.metrics.MattingMeanSquaredError()(pred_alphas, gt_alphas,
// trimaps), bit for bit on float64 mattes (tests/reference/matting.py).
//
// Example: pred_alpha 32x32 zeros, gt_alpha ones, trimap 128 but its first 768 pixels 0 ->
// matting_mse 4 (1024 / 256 unknown pixels).
//
// State: one float64 per image (PerSampleState), averaged in dataset order at compute.
#include "matting.hpp"

namespace tally::restoration {
namespace {

class MattingMse final : public MattingMetric {
 public:
  static constexpr MattingIdentity kIdentity{
      .name = "MattingMSE",
      .key = "matting_mse",
      .key_doc = "per unknown trimap pixel, mean over images"};
  explicit MattingMse(const Params& p) : MattingMetric(p, kIdentity) {}

 protected:
  double value(const MattingImage& img) override {
    std::int64_t unknown = 0;
    for (std::int64_t k = 0; k < img.numel; ++k) unknown += img.trimap[k] == 128.0;
    if (unknown == 0) return 0.0;
    const double sum = numpy_sum_of(img.numel, terms_, [&](std::int64_t k) {
      const double d = img.pred[k] - img.gt[k];
      return d * d;
    });
    return sum / static_cast<double>(unknown);
  }

 private:
  std::vector<double> terms_;
};

}  // namespace

ComponentInfo matting_mse_info() {
  return matting_component<MattingMse>(
      "Squared error of alpha mattes summed over every pixel, divided by the number of unknown "
      "trimap pixels (128; 0 when there is none), averaged over images; key matting_mse. "
      "Reference: mmeval 0.2.1 MattingMeanSquaredError()(pred_alphas, gt_alphas, trimaps).",
      {}, {"MattingMeanSquaredError"});
}
TALLY_COMPONENT(matting_mse_info)

}  // namespace tally::restoration
