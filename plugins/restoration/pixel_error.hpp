// The pixel-error metrics MAE and MSE (mmeval's MeanAbsoluteError and MeanSquaredError): the
// same walk over samples and masks, differing in the error term and in how a mask normalises.
// See mae.cpp and mse.cpp for the formulas.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"

namespace tally::restoration {

class PixelError : public TypedMetric<PerSampleState> {
 public:
  /// squared: MSE (term d^2, masked sum / mask sum); else MAE (term |d|, masked sum /
  /// (mask sum * scale + 1e-12)).
  PixelError(const Params& p, const char* type, std::string key, bool squared)
      : check_(p.owner_or(type)), key_(std::move(key)), squared_(squared) {}

 protected:
  void update(PerSampleState& state, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    const auto first = static_cast<std::int64_t>(state.values.size());
    const FieldReader pred(batch, kPred, check_, first, 2, 4);
    const FieldReader gt(batch, kGt, check_, first, 2, 4);
    const bool masked = batch.has(kMask);
    const auto mask =
        masked ? std::optional<FieldReader>(std::in_place, batch, kMask, check_, first, 1, 4, true)
               : std::nullopt;
    for (std::int64_t i = 0; i < batch.size(); ++i) {
      const std::int64_t sample = first + i;
      const SampleView p = pred.sample(i), g = gt.sample(i);
      if (!p.same_shape(g))
        check_.fail(kPred, "sample " + std::to_string(sample) + " is " + p.describe() + " but '" +
                               kGt + "' is " + g.describe() + ": the shapes must be equal");
      const std::int64_t n = p.numel();
      load_scaled(p, kPred, sample, pred_);
      load_scaled(g, kGt, sample, gt_);
      // mmeval: diff = gt / 255. - pred / 255.; abs(diff) or diff * diff.
      for (std::int64_t k = 0; k < n; ++k) {
        const double d = gt_[static_cast<std::size_t>(k)] - pred_[static_cast<std::size_t>(k)];
        gt_[static_cast<std::size_t>(k)] = squared_ ? d * d : std::abs(d);
      }
      const double* err = gt_.data();
      if (!mask) {
        CompensatedSum s;
        for (std::int64_t k = 0; k < n; ++k) s.add(err[k]);
        state.values.push_back(s.value() / static_cast<double>(n));
        continue;
      }
      const SampleView m = mask->sample(i);
      load_mask(m, sample);
      if (p.ndim <= 3) {
        state.values.push_back(masked_error(err, p, 0, mask_.data(), m, 0, sample));
        continue;
      }
      // A video: mmeval averages the frames' masked errors, frame j with mask[j].
      const std::int64_t frames = p.shape[0];
      if (m.ndim < 1 || m.shape[0] != frames)
        check_.fail(kMask, "sample " + std::to_string(sample) + " is " + m.describe() +
                               ": a video's mask needs one mask a frame, [" +
                               std::to_string(frames) + ", ...]");
      double sum = 0.0;
      const std::int64_t fel = n / frames, mel = m.numel() / frames;
      for (std::int64_t f = 0; f < frames; ++f)
        sum += masked_error(err + f * fel, p, 1, mask_.data() + f * mel, m, 1, sample);
      state.values.push_back(sum / static_cast<double>(frames));
    }
  }

  Value compute(const PerSampleState& all) const override {
    return mean_of_samples(all, check_, key_);
  }

 private:
  /// value / 255 in float64 for every element of a sample, into `out`; InputError on NaN.
  void load_scaled(const SampleView& s, const char* field, std::int64_t sample,
                   std::vector<double>& out) const {
    const std::int64_t n = s.numel();
    out.resize(static_cast<std::size_t>(n));
    bool nan = false;
    visit_pixels(s.dtype, s.data, [&](const auto* px) {
      for (std::int64_t k = 0; k < n; ++k) {
        const double v = static_cast<double>(px[k]) / 255.0;
        nan |= v != v;
        out[static_cast<std::size_t>(k)] = v;
      }
    });
    if (nan) check_.fail(field, "sample " + std::to_string(sample) + " holds NaN pixels");
  }

  void load_mask(const SampleView& m, std::int64_t sample) {
    const std::int64_t n = m.numel();
    mask_.resize(static_cast<std::size_t>(n));
    bool nan = false;
    visit_any(m.dtype, m.data, [&](const auto* v) {
      for (std::int64_t k = 0; k < n; ++k) {
        const auto x = static_cast<double>(v[k]);
        nan |= x != x;
        mask_[static_cast<std::size_t>(k)] = x;
      }
    });
    if (nan) check_.fail(kMask, "sample " + std::to_string(sample) + " holds NaN");
  }

  /// The masked error of one image: err has the shape of img's dimensions [from, ndim), the mask
  /// those of m [mfrom, m.ndim), broadcast against the image as numpy does (trailing dimensions
  /// aligned; each 1 or equal).
  double masked_error(const double* err, const SampleView& img, int from, const double* mask,
                      const SampleView& m, int mfrom, std::int64_t sample) const {
    const int nd = img.ndim - from, md = m.ndim - mfrom;
    std::array<std::int64_t, 3> shape{1, 1, 1}, mshape{1, 1, 1};
    for (int d = 0; d < nd; ++d)
      shape[static_cast<std::size_t>(3 - nd + d)] = img.shape[static_cast<std::size_t>(from + d)];
    bool ok = md <= nd;
    for (int d = 0; ok && d < md; ++d) {
      const std::int64_t ms = m.shape[static_cast<std::size_t>(mfrom + d)];
      const auto at = static_cast<std::size_t>(3 - md + d);
      ok = ms == 1 || ms == shape[at];
      mshape[at] = ms;
    }
    if (!ok)
      check_.fail(kMask, "sample " + std::to_string(sample) + " is " + m.describe() +
                             ": it does not broadcast to the image " + img.describe() +
                             (from ? " (per frame)" : ""));
    // Element strides of the mask, 0 along broadcast dimensions.
    const std::int64_t m2 = mshape[2] == 1 ? 0 : 1;
    const std::int64_t m1 = mshape[1] == 1 ? 0 : mshape[2];
    const std::int64_t m0 = mshape[0] == 1 ? 0 : mshape[1] * mshape[2];
    CompensatedSum num, den;
    for (std::int64_t a = 0; a < shape[0]; ++a)
      for (std::int64_t b = 0; b < shape[1]; ++b) {
        const double* e = err + (a * shape[1] + b) * shape[2];
        const double* mk = mask + a * m0 + b * m1;
        double row = 0.0;
        for (std::int64_t c = 0; c < shape[2]; ++c) row += e[c] * mk[c * m2];
        num.add(row);
      }
    const std::int64_t mn = mshape[0] * mshape[1] * mshape[2];
    for (std::int64_t k = 0; k < mn; ++k) den.add(mask[k]);
    if (squared_) {
      if (den.value() == 0.0)
        check_.fail(kMask, "sample " + std::to_string(sample) +
                               " is all zero: MSE divides by the mask's sum (mmeval gives NaN)");
      return num.value() / den.value();
    }
    const double scale =
        static_cast<double>(shape[0] * shape[1] * shape[2]) / static_cast<double>(mn);
    return num.value() / (den.value() * scale + 1e-12);
  }

  InputChecker check_;
  std::string key_;
  bool squared_;
  std::vector<double> pred_, gt_, mask_;
};

inline std::vector<InputSpec> pixel_error_inputs() {
  return {
      InputSpec{kPred,
                "Predicted images, one a sample: dense [N, ...] or ragged, 2 to 4 dimensions "
                "([H, W], [H, W, C], a video [T, H, W, C]); uint8, uint16, float32 or float64, on "
                "the 0..255 scale (divided by 255).",
                true},
      InputSpec{kGt, "Ground-truth images, the same shape as pred_img.", true},
      InputSpec{kMask,
                "Optional weights/mask per sample (any numeric dtype or bool), broadcast against "
                "the image as numpy does (e.g. [H, W, 1] for [H, W, C]); for a video, one mask a "
                "frame [T, ...].",
                false}};
}

}  // namespace tally::restoration
