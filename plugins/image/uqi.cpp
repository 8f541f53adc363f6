// UniversalImageQualityIndex: Wang and Bovik's universal image quality index (2002) with
// torchmetrics' Gaussian window.
//
// Formula. For each image, channel and position where the k x k Gaussian window (torchmetrics'
// _gaussian taps, sigma per axis) lies inside the image:
//   mu_x = G * x, s_xx = max(G * x^2 - mu_x^2, 0), s_xy = G * (x y) - mu_x mu_y (likewise y)
//   q = (2 mu_x mu_y)(2 s_xy) / ((mu_x^2 + mu_y^2)(s_xx + s_yy) + eps),  eps = 2^-52
//   uqi = sum of q over every image, channel and position / their number (elementwise_mean), or
//         the sum (sum)
// torchmetrics averages over all pixels of all images (not per image first).
//
// Reference: torchmetrics 1.9.0 torchmetrics.image.UniversalImageQualityIndex(kernel_size, sigma,
// reduction).set_dtype(torch.float64), updated with float64 tensors [N, C, H, W]. Differences, on
// purpose: reduction none (torchmetrics returns the whole [N, C, H', W'] map) is not offered; a
// non-square kernel_size is refused (torchmetrics pads the two axes with each other's pad and then
// averages over another count than it sums); images smaller than the window are input errors
// (torchmetrics: a negative count, or a pad error); NaN or infinite pixels are input errors. On
// constant images (zero variance) both give rounding noise over eps (not a meaningful value).
//
// Example: preds [1, 1, 6, 6] with element k (C order) = ((3 k + 2) % 11) / 10, target the same
// with ((3 k + 1) % 11) / 10, kernel_size 3, sigma 1 -> 0.42468579926080735 (torchmetrics). (UQI
// of a flat window is rounding noise over eps, so the example has texture everywhere.)
//
// State: the exact sum of q (ExactSum, merged exactly across ranks), the count of positions and
// of images (summed).
#include <string>
#include <vector>

#include "common.hpp"

namespace tally::image {
namespace {

constexpr const char* kUqiType = "UniversalImageQualityIndex";
constexpr const char* kUqiKey = "universal_image_quality_index";

class Uqi final : public TypedMetric<SumState> {
 public:
  explicit Uqi(const Params& p)
      : check_(p.owner_or(kUqiType)),
        sum_(reduction_of(p) == Reduce::Sum),
        window_(make_window(p)) {}

 protected:
  static UqiWindow make_window(const Params& p) {
    const auto k = pair_of_sizes(p, "kernel_size", true);
    if (k[0] != k[1])
      p.fail("kernel_size",
             "must be square (torchmetrics 1.9 pads the rows by the columns' pad "
             "and the other way round), got [" +
                 std::to_string(k[0]) + ", " + std::to_string(k[1]) + "]");
    const auto s = pair_of_sigmas(p, "sigma");
    return UqiWindow(k[0], s[0], s[1]);
  }

  void update(SumState& s, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    const auto [p, t] = read_pair(check_, batch, s.images);
    if (p.n == 0) return;
    const std::int64_t k = window_.size();
    if (p.h < k || p.w < k)
      check_.fail(kPreds, "images of " + std::to_string(p.h) + "x" + std::to_string(p.w) +
                              " are smaller than the " + std::to_string(k) + "x" +
                              std::to_string(k) + " window");
    ExactAccumulators acc(s.total, 1, check_.owner());
    for (std::int64_t i = 0; i < p.n; ++i)
      for (std::int64_t ch = 0; ch < p.c; ++ch) {
        const double* x = p.plane(i, ch, sx_);
        const double* y = t.plane(i, ch, sy_);
        add_counted(acc, 0, window_.map_sum(x, y, p.h, p.w), s.nan, s.pos_inf, s.neg_inf);
      }
    acc.store(s.total);
    s.images += p.n;
    s.count += p.n * p.c * (p.h - k + 1) * (p.w - k + 1);
  }

  Value compute(const SumState& s) const override {
    check_sums(s.total, 1, check_.owner());
    if (s.images == 0) check_.fail("no samples");
    const ExactAccumulators acc(s.total, 1, check_.owner());
    const double total = total_of(acc.value(0), s.nan, s.pos_inf, s.neg_inf);
    Value out = Value::map();
    out.set(kUqiKey, sum_ ? total : total / static_cast<double>(s.count));
    return out;
  }

 private:
  InputChecker check_;
  bool sum_;
  UqiWindow window_;
  std::vector<double> sx_, sy_;
};

}  // namespace

ComponentInfo uqi_info() {
  return metric<Uqi>(
      kUqiType,
      "Universal image quality index with a Gaussian window, over every valid position of every "
      "channel and image. Reference: torchmetrics 1.9.0 "
      "torchmetrics.image.UniversalImageQualityIndex(kernel_size, sigma, reduction)"
      ".set_dtype(torch.float64).",
      {param("kernel_size", ParamType::IntList,
             "Gaussian window size (square: one value, or two equal ones), odd.")
           .def(Value::Array{Value(11), Value(11)}),
       param("sigma", ParamType::FloatList,
             "Standard deviation of the window (rows, columns; one value for both).")
           .def(Value::Array{Value(1.5), Value(1.5)}),
       reduction_param({"elementwise_mean", "sum"}, "pixel")},
      pair_inputs(""), {"UQI"},
      {{kUqiKey, Better::Higher, Plot::None, "in [-1, 1]; mean over every pixel"}});
}
TALLY_COMPONENT(uqi_info)

}  // namespace tally::image
