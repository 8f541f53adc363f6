// GradientError: the squared difference of the Gaussian gradient magnitudes of the predicted and
// the ground-truth alpha mattes over the trimap's unknown region (mmeval's GradientError).
//
// Formula, for image i (mmeval's gradient_error.py):
//   a' = (a - min a) / (max a - min a) for each matte (cv2.normalize(a, 0 -> 1, NORM_MINMAX); all 0
//        when max - min <= DBL_EPSILON)
//   K[y][x] = g(y - r) dg(x - r) / ||g dg||_F, r = ceil(sigma sqrt(-2 ln(sqrt(2 pi) sigma 0.01))),
//        g the Gaussian of std sigma, dg its derivative (gauss_filter); Kt its transpose
//   grad(a') = sqrt((a' * K)^2 + (a' * Kt)^2), * = cv2.filter2D's correlation, borders replicated
//   GE_i = sum_k (grad(gt')_k - grad(pred')_k)^2 [trimap_k == 128] / norm_const
// Result: gradient_error = mean_i GE_i.
//
// Reference: mmeval 0.2.1 mmeval.metrics.GradientError(sigma, norm_const)(pred_alphas, gt_alphas,
// trimaps) with OpenCV 5.0 (opencv-python 5.0.0.93), on float64 mattes: equal to 1e-12 relative
// (tests/reference/matting.py). The kernel is separable (g times dg), so tally filters rows then
// columns, 2 (2r + 1) products a pixel instead of (2r + 1)^2; OpenCV filters a kernel of 50 or more
// taps through a DFT. Both round differently in the last bits of a gradient, nothing more.
//
// Example: pred_alpha 32x32 zeros, gt_alpha 0 in its top 16 rows and 1 below, trimap 128 everywhere
// -> gradient_error 0.6269029122053189 (the ground truth's edge alone: the prediction is constant).
//
// State: one float64 per image (PerSampleState), averaged in dataset order at compute.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "matting.hpp"

namespace tally::restoration {
namespace {

class GradientError final : public MattingMetric {
 public:
  static constexpr MattingIdentity kIdentity{.name = "GradientError",
                                             .key = "gradient_error",
                                             .key_doc = "sum / norm_const, mean over images",
                                             .two_d = true};
  explicit GradientError(const Params& p) : MattingMetric(p, kIdentity), norm_(norm_const(p)) {
    const double sigma = p.get_double("sigma");
    // mmeval's kernel radius needs sqrt(2 pi) sigma epsilon < 1 (else the log is >= 0 and the
    // square root NaN); 20 keeps the kernel at most 2 * 87 + 1 taps.
    if (!(sigma > 0.0) || sigma > 20.0)
      p.fail("sigma", "must be in (0, 20], got " + std::to_string(sigma));
    const double root_two_pi = std::sqrt(2 * std::numbers::pi);
    const double half = std::ceil(sigma * std::sqrt(-2 * std::log(root_two_pi * sigma * 1e-2)));
    radius_ = static_cast<std::int64_t>(half);
    const auto size = static_cast<std::size_t>(2 * radius_ + 1);
    const auto gaussian = [&](double x) {
      return std::exp(-x * x / (2 * sigma * sigma)) / (sigma * root_two_pi);
    };
    g_.resize(size);
    dg_.resize(size);
    for (std::size_t i = 0; i < size; ++i) {
      const double x = static_cast<double>(i) - half;
      g_[i] = gaussian(x);
      dg_[i] = -x * gaussian(x) / (sigma * sigma);
    }
    // norm = sqrt(sum of the squared (2r+1)^2 kernel), numpy's pairwise sum over it in C order.
    std::vector<double> squares(size * size);
    for (std::size_t i = 0; i < size; ++i)
      for (std::size_t j = 0; j < size; ++j) {
        const double k = g_[i] * dg_[j];
        squares[i * size + j] = k * k;
      }
    const double norm = std::sqrt(numpy::sum(squares.data(), squares.size()));
    for (double& d : dg_) d /= norm;
  }

 protected:
  double value(const MattingImage& img) override {
    gradient(img.gt, img.h, img.w, gt_grad_);
    gradient(img.pred, img.h, img.w, pred_grad_);
    return numpy_sum_of(img.numel, terms_,
                        [&](std::int64_t k) {
                          const double d = gt_grad_[static_cast<std::size_t>(k)] -
                                           pred_grad_[static_cast<std::size_t>(k)];
                          return img.trimap[k] == 128.0 ? d * d : 0.0;
                        }) /
           norm_;
  }

 private:
  /// sqrt(fx^2 + fy^2) of the min-max normalised matte, fx = a' correlated with g (rows) x dg
  /// (columns), fy with its transpose; borders replicated (BORDER_REPLICATE).
  void gradient(const double* a, std::int64_t h, std::int64_t w, std::vector<double>& out) {
    const auto n = static_cast<std::size_t>(h * w);
    const auto [lo, hi] = std::minmax_element(a, a + n);
    const double smin = *lo, smax = *hi;
    const double scale =
        smax - smin > std::numeric_limits<double>::epsilon() ? 1.0 / (smax - smin) : 0.0;
    const double shift = 0.0 - smin * scale;
    norm_a_.resize(n);
    for (std::size_t k = 0; k < n; ++k) norm_a_[k] = a[k] * scale + shift;
    // Along x first: rx = a' correlated with dg along rows, ry = with g; then along y:
    // fx = rx correlated with g along columns, fy = ry with dg.
    rx_.resize(n);
    ry_.resize(n);
    const std::int64_t r = radius_;
    const auto clamp = [](std::int64_t v, std::int64_t n1) {
      return std::clamp<std::int64_t>(v, 0, n1 - 1);
    };
    for (std::int64_t y = 0; y < h; ++y) {
      const double* row = norm_a_.data() + y * w;
      for (std::int64_t x = 0; x < w; ++x) {
        double sx = 0.0, sy = 0.0;
        for (std::int64_t t = -r; t <= r; ++t) {
          const double v = row[clamp(x + t, w)];
          sx += dg_[static_cast<std::size_t>(t + r)] * v;
          sy += g_[static_cast<std::size_t>(t + r)] * v;
        }
        rx_[static_cast<std::size_t>(y * w + x)] = sx;
        ry_[static_cast<std::size_t>(y * w + x)] = sy;
      }
    }
    out.resize(n);
    for (std::int64_t y = 0; y < h; ++y)
      for (std::int64_t x = 0; x < w; ++x) {
        double fx = 0.0, fy = 0.0;
        for (std::int64_t t = -r; t <= r; ++t) {
          const auto at = static_cast<std::size_t>(clamp(y + t, h) * w + x);
          fx += g_[static_cast<std::size_t>(t + r)] * rx_[at];
          fy += dg_[static_cast<std::size_t>(t + r)] * ry_[at];
        }
        out[static_cast<std::size_t>(y * w + x)] = std::sqrt(fx * fx + fy * fy);
      }
  }

  double norm_;
  std::int64_t radius_ = 0;
  std::vector<double> g_, dg_;  // dg_ already divided by the kernel's norm
  std::vector<double> norm_a_, rx_, ry_, gt_grad_, pred_grad_, terms_;
};

}  // namespace

ComponentInfo gradient_error_info() {
  return matting_component<GradientError>(
      "Squared difference of the Gaussian-gradient magnitudes of the min-max normalised mattes "
      "over the unknown trimap pixels (128), divided by norm_const, averaged over images; key "
      "gradient_error. Reference: mmeval 0.2.1 GradientError(sigma, norm_const)(pred_alphas, "
      "gt_alphas, trimaps).",
      {param("sigma", ParamType::Float,
             "Standard deviation of the Gaussian whose derivative filters the mattes (mmeval's "
             "sigma), in (0, 20].")
           .def(1.4),
       norm_const_param()});
}
TALLY_COMPONENT(gradient_error_info)

}  // namespace tally::restoration
