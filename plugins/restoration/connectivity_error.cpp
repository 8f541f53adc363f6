// ConnectivityError: how much the predicted alpha matte breaks the connectivity of the ground
// truth's foreground, over the trimap's unknown region (mmeval's ConnectivityError).
//
// Formula, for image i (mmeval's connectivity_error.py): thresholds t_j = j * step for
// j = 0 .. ceil((1 + step) / step) - 1 (numpy.arange(0, 1 + step, step)). For j = 1, 2, ...: the
// pixels with gt >= t_j and pred >= t_j; omega_j = its largest 4-connected component (the first in
// raster order among equal sizes, as OpenCV's labels and numpy's argmax pick it); a pixel's
// round-down level l = t_{j-1} for the first j whose omega_j does not hold it, 1 when every one
// does.
//   phi(a) = 1 - (a - l) where a - l >= 0.15, else 1
//   CE_i = sum_k |phi(gt_k) - phi(pred_k)| [trimap_k == 128] / norm_const
// Result: connectivity_error = mean_i CE_i.
//
// Reference: mmeval 0.2.1 mmeval.metrics.ConnectivityError(step, norm_const)(pred_alphas,
// gt_alphas, trimaps) with OpenCV 5.0's connectedComponentsWithStats, bit for bit on float64
// mattes (tests/reference/matting.py).
//
// Example: pred_alpha 32x32 zeros, gt_alpha ones, trimap 128 but its first 768 pixels 0 ->
// connectivity_error 0.256 (pred reaches no threshold, so l = 0: phi(gt) = 0, phi(pred) = 1 on the
// 256 unknown pixels, / 1000).
//
// State: one float64 per image (PerSampleState), averaged in dataset order at compute.
#include <cmath>
#include <cstdint>
#include <vector>

#include "matting.hpp"

namespace tally::restoration {
namespace {

class ConnectivityError final : public MattingMetric {
 public:
  static constexpr MattingIdentity kIdentity{.name = "ConnectivityError",
                                             .key = "connectivity_error",
                                             .key_doc = "sum / norm_const, mean over images",
                                             .two_d = true};
  explicit ConnectivityError(const Params& p) : MattingMetric(p, kIdentity), norm_(norm_const(p)) {
    const double step = p.get_number("step", NumberBounds{1e-4, 1.0, false, false});
    // numpy.arange(0, 1 + step, step): ceil((stop - start) / step) values, value j = 0 + j * step.
    const auto count = static_cast<std::int64_t>(std::ceil((1.0 + step) / step));
    for (std::int64_t j = 0; j < count; ++j) thresholds_.push_back(static_cast<double>(j) * step);
  }

 protected:
  double value(const MattingImage& img) override {
    const auto n = static_cast<std::size_t>(img.numel);
    level_.assign(n, -1.0);
    for (std::size_t j = 1; j < thresholds_.size(); ++j) {
      const double t = thresholds_[j];
      largest_component(img, t);
      // mmeval: round_down_map[(round_down_map == -1) & (omega == 0)] = thresh_steps[i - 1].
      for (std::size_t k = 0; k < n; ++k)
        if (level_[k] == -1.0 && label_[k] != best_) level_[k] = thresholds_[j - 1];
    }
    return numpy_sum_of(img.numel, terms_,
                        [&](std::int64_t k) {
                          const auto at = static_cast<std::size_t>(k);
                          const double l = level_[at] == -1.0 ? 1.0 : level_[at];
                          const double dg = img.gt[k] - l, dp = img.pred[k] - l;
                          const double phi_g = 1.0 - (dg >= 0.15 ? dg : 0.0);
                          const double phi_p = 1.0 - (dp >= 0.15 ? dp : 0.0);
                          return img.trimap[k] == 128.0 ? std::abs(phi_g - phi_p) : 0.0;
                        }) /
           norm_;
  }

 private:
  /// Labels the 4-connected components of {gt >= t and pred >= t} in raster order of their first
  /// pixel (label_ 0: outside the set) and sets best_ to the largest one's label (the earliest
  /// among equal sizes), or -1 when the set is empty (then no pixel is in omega).
  void largest_component(const MattingImage& img, double t) {
    const auto n = static_cast<std::size_t>(img.numel);
    const std::int64_t h = img.h, w = img.w;
    label_.assign(n, 0);
    queue_.clear();
    std::int32_t next = 0;
    std::int64_t best_size = 0;
    best_ = -1;  // no component: omega is empty, so every pixel is "not in omega"
    const auto inside = [&](std::size_t k) { return img.gt[k] >= t && img.pred[k] >= t; };
    for (std::size_t start = 0; start < n; ++start) {
      if (label_[start] != 0 || !inside(start)) continue;
      ++next;
      label_[start] = next;
      queue_.assign(1, static_cast<std::int64_t>(start));
      for (std::size_t q = 0; q < queue_.size(); ++q) {
        const std::int64_t k = queue_[q], y = k / w, x = k % w;
        const std::int64_t nb[4] = {x > 0 ? k - 1 : -1, x + 1 < w ? k + 1 : -1, y > 0 ? k - w : -1,
                                    y + 1 < h ? k + w : -1};
        for (const std::int64_t m : nb)
          if (m >= 0 && label_[static_cast<std::size_t>(m)] == 0 &&
              inside(static_cast<std::size_t>(m))) {
            label_[static_cast<std::size_t>(m)] = next;
            queue_.push_back(m);
          }
      }
      if (static_cast<std::int64_t>(queue_.size()) > best_size) {
        best_size = static_cast<std::int64_t>(queue_.size());
        best_ = next;
      }
    }
  }

  double norm_;
  std::vector<double> thresholds_, level_, terms_;
  std::vector<std::int32_t> label_;
  std::vector<std::int64_t> queue_;
  std::int32_t best_ = -1;
};

}  // namespace

ComponentInfo connectivity_error_info() {
  return matting_component<ConnectivityError>(
      "Connectivity error of alpha mattes (the largest 4-connected component of the thresholded "
      "intersection at each step) over the unknown trimap pixels (128), divided by norm_const, "
      "averaged over images; key connectivity_error. Reference: mmeval 0.2.1 "
      "ConnectivityError(step, norm_const)(pred_alphas, gt_alphas, trimaps).",
      {param("step", ParamType::Float,
             "Step between the thresholds 0, step, 2 step, ... (numpy.arange(0, 1 + step, step)), "
             "in [0.0001, 1].")
           .def(0.1),
       norm_const_param()});
}
TALLY_COMPONENT(connectivity_error_info)

}  // namespace tally::restoration
