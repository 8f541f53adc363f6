// TotalVariation: the anisotropic total variation of images (Rudin, Osher and Fatemi 1992).
//
// Formula. For each image x [C, H, W]:
//   tv = sum over c, h, w of |x[c, h+1, w] - x[c, h, w]| + sum of |x[c, h, w+1] - x[c, h, w]|
// then the reduction over images: sum (the default), mean, or none (one value per image).
//
// Reference: torchmetrics 1.9.0 torchmetrics.image.TotalVariation(reduction)
// .set_dtype(torch.float64), updated with float64 tensors [N, C, H, W]. Difference: NaN or
// infinite pixels are input errors.
//
// Example: img [1, 1, 16, 16] all 1 but the first 128 pixels (rows 0..7) 0 -> 16.0
// (torchmetrics).
//
// State: per image value, summed exactly with the count of images, or (reduction none)
// concatenated in rank order = dataset order.
#include <cmath>
#include <string>
#include <vector>

#include "common.hpp"

namespace tally::image {
namespace {

constexpr const char* kTvType = "TotalVariation";
constexpr const char* kTvKey = "total_variation";

class TotalVariation final : public PerImageMetric {
 public:
  explicit TotalVariation(const Params& p) : PerImageMetric(p, kTvType, kTvKey, {.pair = false}) {}

 protected:
  double image_value(const ImageField& p, const ImageField&, std::int64_t i,
                     std::int64_t) override {
    CompensatedSum rows, cols;  // torch sums the two directions apart, then adds them
    for (std::int64_t ch = 0; ch < p.c; ++ch) {
      const double* x = p.plane(i, ch, sx_);
      for (std::int64_t r = 0; r < p.h; ++r) {
        const double* a = x + r * p.w;
        if (r + 1 < p.h)
          for (std::int64_t c = 0; c < p.w; ++c) rows.add(std::abs(a[p.w + c] - a[c]));
        for (std::int64_t c = 0; c + 1 < p.w; ++c) cols.add(std::abs(a[c + 1] - a[c]));
      }
    }
    return rows.value() + cols.value();
  }

 private:
  std::vector<double> sx_;
};

}  // namespace

ComponentInfo tv_info() {
  return metric<TotalVariation>(
      kTvType,
      "Anisotropic total variation of each image (sum of absolute differences of vertical and "
      "horizontal neighbours over every channel); reduced over images. Reference: torchmetrics "
      "1.9.0 torchmetrics.image.TotalVariation(reduction).set_dtype(torch.float64).",
      {reduction_param({"sum", "mean", "none"}, "image")},
      {InputSpec{kImg, "Images [N, C, H, W], float32 or float64 (computed in float64).", true}},
      {"TV"}, {{kTvKey, Better::Lower, Plot::None, "sum over images by default"}});
}
TALLY_COMPONENT(tv_info)

}  // namespace tally::image
