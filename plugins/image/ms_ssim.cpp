// MultiScaleStructuralSimilarityIndexMeasure: multi-scale SSIM (Wang, Simoncelli and Bovik 2003),
// torchmetrics' definition.
//
// Formula. For each image pair (x, y) [C, H, W] and each scale s = 0 .. S-1 (S = len(betas)),
// with the images average-pooled 2x2 s times (torch's avg_pool2d: an odd last row / column is
// dropped), and a window G (gaussian_kernel: the outer product of torchmetrics' _gaussian taps of
// size 2 int(3.5 sigma + 0.5) + 1 per axis; else uniform kernel_size, 1 / (kh kw)):
//   mu_x = G * x, s_xx = max(G * x^2 - mu_x^2, 0), s_xy = G * (x y) - mu_x mu_y (likewise y)
//   L = data_range: given, or max(max x - min x, max y - min y) of the image at that scale;
//   C1 = (k1 L)^2, C2 = (k2 L)^2
//   cs_s  = mean over channels and the valid positions (the window inside the image) of
//           (2 s_xy + C2) / (s_xx + s_yy + C2)
//   sim_s = mean over channels and every position of the image reflect-padded by the window's
//           radius of (2 mu_x mu_y + C1)(2 s_xy + C2) / ((mu_x^2 + mu_y^2 + C1)(s_xx + s_yy + C2))
//   m_s = cs_s for s < S-1, m_{S-1} = sim_{S-1}; normalize relu: max(m_s, 0); simple: (m_s + 1)/2
//   ms_ssim = prod_s m_s ^ beta_s
// then reduction over images: elementwise_mean (mean), sum, or none (one value per image).
// The betas are rounded to float32 first: torchmetrics makes them a float32 tensor
// (torch.tensor(betas)); the powers are taken in float64. data_range [lo, hi] clamps the images
// to [lo, hi] at each scale (the pooling is of the unclamped images, as in torchmetrics) and uses
// L = hi - lo.
//
// Reference: torchmetrics 1.9.0
//   torchmetrics.image.MultiScaleStructuralSimilarityIndexMeasure(gaussian_kernel, kernel_size,
//   sigma, reduction, data_range, k1, k2, betas, normalize).set_dtype(torch.float64), updated with
//   float64 tensors [N, C, H, W]. Differences, on purpose: with data_range None torchmetrics takes
//   L over each update() batch; tally over each image (equal to torchmetrics fed one image per
//   update), so the result does not depend on how the data is batched or sharded. NaN or infinite
//   pixels are input errors. Sizes torchmetrics rejects (H or W < 2^S; H // max(1, S-1)^2 <=
//   kernel_size[0] - 1, W likewise; a reflect pad >= the image at some scale) are input errors.
//
// Computation: per image, channel by channel, the five local moments come from a separable
// filter (a horizontal pass per row into a ring of rows, then a vertical pass: kh + kv taps per
// pixel instead of kh kv), vectorised, for the baseline and AVX2 (TALLY_SIMD_CLONES). Scale 0 is
// read in place (float64) and only the pooled scales are stored. At scales before the last only
// the valid window positions are needed (cs is cropped), so no padding is built there.
//
// Example: preds [1, 1, 16, 16] all 0.75 but the first 100 pixels (C order) 0, target [1, 1, 16,
// 16] all 1 but the first 128 pixels 0, betas [0.5, 0.5], sigma 0.5, kernel_size 3, data_range 1
// -> 0.6285602198477... (torchmetrics: 0.6285602198477831).
//
// State: per image value, summed exactly (ExactSum, merged across ranks exactly) with the count of
// images, or (reduction none) concatenated in rank order = dataset order.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common.hpp"

namespace tally::image {
namespace {

constexpr const char* kMsSsimType = "MultiScaleStructuralSimilarityIndexMeasure";
constexpr const char* kMsSsimKey = "multiscale_structural_similarity_index_measure";

/// The cs row sum (valid positions) from the five moments.
TALLY_SIMD_CLONES double cs_row(const double* const* m, double c2, double* tmp, std::int64_t n) {
  const double *mx = m[0], *my = m[1], *fxx = m[2], *fyy = m[3], *fxy = m[4];
#pragma omp simd
  for (std::int64_t c = 0; c < n; ++c) {
    const double sxx = std::max(fxx[c] - mx[c] * mx[c], 0.0);
    const double syy = std::max(fyy[c] - my[c] * my[c], 0.0);
    const double sxy = fxy[c] - mx[c] * my[c];
    tmp[c] = (2 * sxy + c2) / ((sxx + syy) + c2);
  }
  return lane_sum(tmp, n);
}

/// The SSIM map's row sum from the five moments.
TALLY_SIMD_CLONES double ssim_row(const double* const* m, double c1, double c2, double* tmp,
                                  std::int64_t n) {
  const double *mx = m[0], *my = m[1], *fxx = m[2], *fyy = m[3], *fxy = m[4];
#pragma omp simd
  for (std::int64_t c = 0; c < n; ++c) {
    const double mxx = mx[c] * mx[c], myy = my[c] * my[c], mxy = mx[c] * my[c];
    const double sxx = std::max(fxx[c] - mxx, 0.0);
    const double syy = std::max(fyy[c] - myy, 0.0);
    const double sxy = fxy[c] - mxy;
    const double upper = 2 * sxy + c2, lower = (sxx + syy) + c2;
    tmp[c] = ((2 * mxy + c1) * upper) / ((mxx + myy + c1) * lower);
  }
  return lane_sum(tmp, n);
}

class MsSsim final : public PerImageMetric {
 public:
  explicit MsSsim(const Params& p)
      : PerImageMetric(p, kMsSsimType, kMsSsimKey),
        gaussian_(p.get_bool("gaussian_kernel")),
        kernel_size_(pair_of_sizes(p, "kernel_size", true)),
        sigma_(pair_of_sigmas(p, "sigma")),
        k1_(p.get_double("k1")),
        k2_(p.get_double("k2")),
        normalize_(p.has("normalize") ? p.get_string("normalize") : "") {
    for (const double b : p.get_double_list("betas")) {
      if (!std::isfinite(b)) p.fail("betas", "must be finite numbers");
      betas_.push_back(static_cast<double>(static_cast<float>(b)));  // torch.tensor(betas)
    }
    if (betas_.empty() || betas_.size() > 10)
      p.fail("betas",
             "must hold 1 to 10 exponents (one per scale), got " + std::to_string(betas_.size()));
    if (!std::isfinite(k1_) || !std::isfinite(k2_)) p.fail("k1", "k1 and k2 must be finite");
    if (p.has("data_range")) {
      // One number (the range) or two [min, max].
      const auto r = p.get_number_list("data_range", kFinite, ListOrder::Any, 1, 2);
      if (r.size() == 1) {
        range_ = p.check_number("data_range", r[0], kPositive);
      } else {
        p.check_range("data_range", r[0], r[1], kFinite);
        lo_ = r[0], hi_ = r[1], clamp_ = true;
        range_ = p.check_number("data_range", r[1] - r[0], kPositive, "max - min");
      }
    }
    for (int a = 0; a < 2; ++a) {
      const auto k =
          gaussian_ ? static_cast<std::int64_t>(3.5 * sigma_[a] + 0.5) * 2 + 1 : kernel_size_[a];
      taps_[a] = gaussian_ ? gaussian_taps(k, sigma_[a]) : std::vector<double>(k, 1.0);
      pad_[a] = (k - 1) / 2;
    }
    // The uniform window: sums of the row taps (1), times 1 / (kh kw) in the vertical taps
    // (torch's kernel holds 1 / (kh kw) at every tap: the same up to rounding).
    if (!gaussian_)
      for (auto& v : taps_[0]) v = 1.0 / static_cast<double>(kernel_size_[0] * kernel_size_[1]);
  }

 protected:
  void check_batch(const ImageField& x, std::int64_t first) override {
    const auto s = static_cast<std::int64_t>(betas_.size());
    const std::string where = "sample " + std::to_string(first) + " onwards (" +
                              std::to_string(x.h) + "x" + std::to_string(x.w) + ")";
    if (x.h < (std::int64_t{1} << s) || x.w < (std::int64_t{1} << s))
      check_.fail(kPreds, where + ": with " + std::to_string(s) +
                              " betas the images must be at least " +
                              std::to_string(std::int64_t{1} << s) + " pixels high and wide");
    const std::int64_t div = std::max<std::int64_t>(1, s - 1) * std::max<std::int64_t>(1, s - 1);
    for (int a = 0; a < 2; ++a) {
      const std::int64_t size = a == 0 ? x.h : x.w;
      if (size / div <= kernel_size_[a] - 1)
        check_.fail(kPreds, where + ": with " + std::to_string(s) + " betas and kernel_size " +
                                std::to_string(kernel_size_[a]) + " the image " +
                                (a == 0 ? "height" : "width") + " must be larger than " +
                                std::to_string((kernel_size_[a] - 1) * div) +
                                " (torchmetrics' check)");
    }
    std::int64_t h = x.h, w = x.w;
    for (std::int64_t k = 0; k < s; ++k, h /= 2, w /= 2)
      if (pad_[0] >= h || pad_[1] >= w)
        check_.fail(kPreds, where + ": at scale " + std::to_string(k) + " the image is " +
                                std::to_string(h) + "x" + std::to_string(w) +
                                ", too small for the window's reflect padding of " +
                                std::to_string(pad_[0]) + "x" + std::to_string(pad_[1]));
  }

  double image_value(const ImageField& p, const ImageField& t, std::int64_t i,
                     std::int64_t) override {
    const auto s_count = static_cast<std::int64_t>(betas_.size());
    const std::int64_t c = p.c;
    std::int64_t h = p.h, w = p.w;
    xs_.resize(static_cast<std::size_t>(c));
    ys_.resize(static_cast<std::size_t>(c));
    if (tmp_.size() < static_cast<std::size_t>(w)) tmp_.resize(static_cast<std::size_t>(w));
    std::vector<double> m(static_cast<std::size_t>(s_count));
    for (std::int64_t s = 0; s < s_count; ++s) {
      const bool last = s == s_count - 1;
      // The planes at this scale: scale 0 straight from the batch (converted when float32),
      // later scales pooled from the one before. torchmetrics clamps (data_range [lo, hi]) a copy
      // at each scale and pools the unclamped images, and so does this.
      const auto plane = [&](bool pred, std::int64_t ch) -> const double* {
        auto& own = (pred ? xs_ : ys_)[static_cast<std::size_t>(ch)];
        if (s > 0) return own.data();
        return (pred ? p : t).plane(i, ch, own);
      };
      const auto clamped = [&](const double* v, std::vector<double>& out) -> const double* {
        if (!clamp_) return v;
        out.resize(static_cast<std::size_t>(h * w));
        for (std::int64_t k = 0; k < h * w; ++k)
          out[static_cast<std::size_t>(k)] = std::min(std::max(v[k], lo_), hi_);
        return out.data();
      };
      double range = range_.value_or(0.0);
      if (!range_) {
        double rx = 0.0, ry = 0.0;
        for (int which = 0; which < 2; ++which) {
          double lo = std::numeric_limits<double>::infinity(), hi = -lo;
          for (std::int64_t ch = 0; ch < c; ++ch) {
            const double* v = plane(which == 0, ch);
            for (std::int64_t k = 0; k < h * w; ++k)
              lo = std::min(lo, v[k]), hi = std::max(hi, v[k]);
          }
          (which == 0 ? rx : ry) = hi - lo;
        }
        range = std::max(rx, ry);
      }
      const double c1 = (k1_ * range) * (k1_ * range), c2 = (k2_ * range) * (k2_ * range);
      CompensatedSum total;
      std::int64_t count = 0;
      for (std::int64_t ch = 0; ch < c; ++ch) {
        const double* raw_x = plane(true, ch);
        const double* raw_y = plane(false, ch);
        const double* x = clamped(raw_x, cx_);
        const double* y = clamped(raw_y, cy_);
        if (last) {
          filter_.run(x, y, h, w, taps_[0], taps_[1], pad_[0], pad_[1], h, w,
                      [&](std::int64_t, const double* const* mo) {
                        total.add(ssim_row(mo, c1, c2, tmp_.data(), w));
                      });
          count += h * w;
        } else {
          const std::int64_t ho = h - 2 * pad_[0], wo = w - 2 * pad_[1];
          if (ho > 0 && wo > 0) {
            filter_.run(x, y, h, w, taps_[0], taps_[1], 0, 0, ho, wo,
                        [&](std::int64_t, const double* const* mo) {
                          total.add(cs_row(mo, c2, tmp_.data(), wo));
                        });
            count += ho * wo;
          }
          // Pool this channel for the next scale (into separate buffers: the planes of this
          // scale stay until every channel is done).
          avg_pool2(raw_x, h, w, pooled_);
          next_x_.resize(static_cast<std::size_t>(c));
          next_x_[static_cast<std::size_t>(ch)].swap(pooled_);
          avg_pool2(raw_y, h, w, pooled_);
          next_y_.resize(static_cast<std::size_t>(c));
          next_y_[static_cast<std::size_t>(ch)].swap(pooled_);
        }
      }
      // torch crops cs with [pad:-pad], which is empty for a pad of 0: its mean is NaN.
      const bool empty = count == 0 || (!last && (pad_[0] == 0 || pad_[1] == 0));
      m[static_cast<std::size_t>(s)] = empty ? std::numeric_limits<double>::quiet_NaN()
                                             : total.value() / static_cast<double>(count);
      if (!last) {
        xs_.swap(next_x_);
        ys_.swap(next_y_);
        h /= 2, w /= 2;
      }
    }
    double result = 1.0;
    for (std::int64_t s = 0; s < s_count; ++s) {
      double v = m[static_cast<std::size_t>(s)];
      if (normalize_ == "relu" && v < 0) v = 0.0;  // torch.relu keeps NaN
      if (normalize_ == "simple") v = (v + 1) / 2;
      result *= std::pow(v, betas_[static_cast<std::size_t>(s)]);
    }
    return result;
  }

 private:
  bool gaussian_;
  std::vector<std::int64_t> kernel_size_;
  std::vector<double> sigma_;
  double k1_, k2_;
  std::string normalize_;
  std::vector<double> betas_;
  std::optional<double> range_;
  double lo_ = 0.0, hi_ = 0.0;
  bool clamp_ = false;
  std::vector<double> taps_[2];
  std::int64_t pad_[2] = {0, 0};
  MomentFilter filter_;
  std::vector<std::vector<double>> xs_, ys_, next_x_, next_y_;
  std::vector<double> pooled_, tmp_, cx_, cy_;
};

}  // namespace

ComponentInfo ms_ssim_info() {
  return metric<MsSsim>(
      kMsSsimType,
      "Multi-scale structural similarity of [N, C, H, W] images: per image, the contrast-"
      "structure term at each scale but the last and SSIM at the last, raised to the betas and "
      "multiplied; reduced over images. data_range null: per image and scale (torchmetrics: per "
      "update batch). Reference: torchmetrics 1.9.0 "
      "torchmetrics.image.MultiScaleStructuralSimilarityIndexMeasure(gaussian_kernel, "
      "kernel_size, sigma, reduction, data_range, k1, k2, betas, normalize)"
      ".set_dtype(torch.float64).",
      {param("gaussian_kernel", ParamType::Bool,
             "A Gaussian window (true; its size 2 int(3.5 sigma + 0.5) + 1 follows sigma) or a "
             "uniform kernel_size window (false).")
           .def(true),
       param("kernel_size", ParamType::IntList,
             "Uniform window size (rows, columns; one value for both), odd; also bounds the "
             "smallest image as in torchmetrics.")
           .def(Value::Array{Value(11)}),
       param("sigma", ParamType::FloatList,
             "Standard deviation of the Gaussian window (rows, columns; one value for both).")
           .def(Value::Array{Value(1.5)}),
       reduction_param({"elementwise_mean", "sum", "none"}, "image"),
       param("data_range", ParamType::FloatList,
             "The range L of the pixel values (one number), or [min, max]: the images are "
             "clamped to it and L = max - min. null: per image and scale, max(max x - min x, "
             "max y - min y).")
           .optional()
           .nullable(),
       param("k1", ParamType::Float, "C1 = (k1 L)^2.").def(0.01),
       param("k2", ParamType::Float, "C2 = (k2 L)^2.").def(0.03),
       param("betas", ParamType::FloatList,
             "The exponent of each scale (their number is the number of scales); rounded to "
             "float32 as torchmetrics does.")
           .def(Value::Array{Value(0.0448), Value(0.2856), Value(0.3001), Value(0.2363),
                             Value(0.1333)}),
       param("normalize", ParamType::String,
             "relu: negative per-scale values become 0; simple: (v + 1) / 2; null: neither.")
           .def("relu")
           .nullable()
           .choices({"relu", "simple"})},
      pair_inputs(""), {"MS_SSIM", "MultiScaleSSIM"},
      {{kMsSsimKey, Better::Higher, Plot::None, "in [0, 1] with relu; mean over images"}});
}
TALLY_COMPONENT(ms_ssim_info)

}  // namespace tally::image
