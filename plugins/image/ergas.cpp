// ErrorRelativeGlobalDimensionlessSynthesis: ERGAS (Wald 2000), the relative error of a fused or
// sharpened multi-band image.
//
// Formula. For each image, with H x W pixels and C bands:
//   rmse_c = sqrt(sum over pixels of (p - t)^2 / (H W)),  mean_c = mean over pixels of t
//   ergas  = 100 / ratio * sqrt(sum_c (rmse_c / mean_c)^2 / C)
// then the reduction over images: elementwise_mean (mean), sum, or none (one value per image).
// torchmetrics computes it per image (at compute, over every image it kept).
//
// Reference: torchmetrics 1.9.0 torchmetrics.image.ErrorRelativeGlobalDimensionlessSynthesis(
// ratio, reduction).set_dtype(torch.float64), updated with float64 tensors [N, C, H, W].
// Differences: images of several sizes are accepted (torchmetrics concatenates its images, so
// they must share a size); NaN or infinite pixels are input errors. A band whose mean is 0 gives
// an infinite or NaN value, as in torchmetrics.
//
// Example: preds [1, 1, 16, 16] all 0.75 but the first 100 pixels (C order) 0, target [1, 1, 16,
// 16] all 1 -> 16.36900534356013 (torchmetrics).
//
// State: per image value, summed exactly with the count of images, or (reduction none)
// concatenated in rank order = dataset order.
#include <cmath>
#include <string>
#include <vector>

#include "common.hpp"

namespace tally::image {
namespace {

constexpr const char* kErgasType = "ErrorRelativeGlobalDimensionlessSynthesis";
constexpr const char* kErgasKey = "error_relative_global_dimensionless_synthesis";

class Ergas final : public PerImageMetric {
 public:
  explicit Ergas(const Params& p)
      : PerImageMetric(p, kErgasType, kErgasKey), ratio_(p.get_double("ratio")) {
    if (!std::isfinite(ratio_) || ratio_ == 0) p.fail("ratio", "must be a non-zero number");
  }

 protected:
  double image_value(const ImageField& p, const ImageField& t, std::int64_t i,
                     std::int64_t) override {
    const std::int64_t hw = p.plane_size();
    double sum = 0.0;
    for (std::int64_t ch = 0; ch < p.c; ++ch) {
      const double* x = p.plane(i, ch, sx_);
      const double* y = t.plane(i, ch, sy_);
      CompensatedSum sse, st;
      for (std::int64_t k = 0; k < hw; ++k) {
        const double d = x[k] - y[k];
        sse.add(d * d);
        st.add(y[k]);
      }
      const double n = static_cast<double>(hw);
      const double rmse = std::sqrt(sse.value() / n);
      const double q = rmse / (st.value() / n);
      sum += q * q;
    }
    return 100 / ratio_ * std::sqrt(sum / static_cast<double>(p.c));
  }

 private:
  double ratio_;
  std::vector<double> sx_, sy_;
};

}  // namespace

ComponentInfo ergas_info() {
  return metric<Ergas>(
      kErgasType,
      "ERGAS: 100 / ratio times the root mean square over bands of each band's RMSE relative to "
      "its mean, per image; reduced over images. Reference: torchmetrics 1.9.0 "
      "torchmetrics.image.ErrorRelativeGlobalDimensionlessSynthesis(ratio, reduction)"
      ".set_dtype(torch.float64).",
      {param("ratio", ParamType::Float,
             "Ratio of the high-resolution to the low-resolution pixel size (torchmetrics' "
             "ratio).")
           .def(4),
       reduction_param({"elementwise_mean", "sum", "none"}, "image")},
      pair_inputs(""), {"ERGAS"},
      {{kErgasKey, Better::Lower, Plot::None, "0 is perfect; mean over images"}});
}
TALLY_COMPONENT(ergas_info)

}  // namespace tally::image
