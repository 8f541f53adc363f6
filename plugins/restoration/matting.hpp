// The alpha-matting metrics (mmeval's SumAbsoluteDifferences, MattingMeanSquaredError,
// GradientError and ConnectivityError): one value per image from the predicted alpha matte, the
// ground-truth matte and (but for SAD) the trimap, averaged over images in dataset order (numpy's
// mean of mmeval's per-image list: PerSampleState). See sad.cpp, matting_mse.cpp,
// gradient_error.cpp and connectivity_error.cpp for the formulas.
//
// Values are taken as given, in float64: mmagic hands mmeval alphas already divided by 255 (floats
// in [0, 1]; ConnectivityError's thresholds assume that scale), and a trimap of 0 (background),
// 128 (unknown) and 255 (foreground). mmeval computes in the inputs' dtype, so on uint8 alphas its
// differences wrap around (|0 - 255| is 1 there); tally computes every dtype in float64, and equals
// mmeval on float64 inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"

namespace tally::restoration {

inline constexpr const char* kPredAlpha = "pred_alpha";
inline constexpr const char* kGtAlpha = "gt_alpha";
inline constexpr const char* kTrimap = "trimap";

/// One image of a matting batch in float64: alphas and (when read) the trimap, C order.
struct MattingImage {
  std::int64_t sample = 0;  // number in the rank's shard, for messages
  std::int64_t h = 0, w = 0, numel = 0;
  const double* pred = nullptr;
  const double* gt = nullptr;
  const double* trimap = nullptr;  // nullptr for SAD
};

/// What makes one matting metric itself, declared once by its class (`static constexpr
/// MattingIdentity kIdentity`) and read by its constructor and its component alike.
struct MattingIdentity {
  const char* name;     // the config type
  const char* key;      // its one result key (lower is better)
  const char* key_doc;  // what the key means
  bool trimap = true;   // reads the trimap: scores the unknown pixels only
  bool two_d = false;   // mattes are [H, W] only (no channels)
};

/// Base of the four: reads each sample's pred_alpha, gt_alpha (and trimap), checks them, and
/// stores value(image) per sample. `two_d`: the metric filters the matte as an image, so a sample
/// must be [H, W] (else 2 to 4 dimensions of any layout: the sums do not care).
class MattingMetric : public TypedMetric<PerSampleState> {
 public:
  MattingMetric(const Params& p, const MattingIdentity& id)
      : check_(p.owner_or(id.name)), key_(id.key), trimap_(id.trimap), two_d_(id.two_d) {}

 protected:
  virtual double value(const MattingImage& img) = 0;

  void update(PerSampleState& state, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    const auto first = static_cast<std::int64_t>(state.values.size());
    const int max_dims = two_d_ ? 2 : 4;
    const FieldReader pred(batch, kPredAlpha, check_, first, 2, max_dims);
    const FieldReader gt(batch, kGtAlpha, check_, first, 2, max_dims);
    const auto tri = trimap_ ? std::optional<FieldReader>(std::in_place, batch, kTrimap, check_,
                                                          first, 2, max_dims, true)
                             : std::nullopt;
    for (std::int64_t i = 0; i < batch.size(); ++i) {
      MattingImage img;
      img.sample = first + i;
      const SampleView p = pred.sample(i), g = gt.sample(i);
      if (!p.same_shape(g))
        check_.fail(kPredAlpha, "sample " + std::to_string(img.sample) + " is " + p.describe() +
                                    " but '" + kGtAlpha + "' is " + g.describe() +
                                    ": the shapes must be equal");
      img.numel = p.numel();
      if (img.numel == 0)
        check_.fail(kPredAlpha,
                    "sample " + std::to_string(img.sample) + " is empty (" + p.describe() + ")");
      img.h = p.shape[0];
      img.w = p.numel() / (p.shape[0] > 0 ? p.shape[0] : 1);
      load(p, kPredAlpha, img.sample, pred_);
      load(g, kGtAlpha, img.sample, gt_);
      img.pred = pred_.data();
      img.gt = gt_.data();
      if (tri) {
        const SampleView t = tri->sample(i);
        if (!t.same_shape(p))
          check_.fail(kTrimap, "sample " + std::to_string(img.sample) + " is " + t.describe() +
                                   " but '" + kPredAlpha + "' is " + p.describe() +
                                   ": the trimap must have the alpha matte's shape");
        load(t, kTrimap, img.sample, trimap_values_);
        img.trimap = trimap_values_.data();
      }
      state.values.push_back(value(img));
    }
  }

  Value compute(const PerSampleState& all) const override {
    return mean_of_samples(all, check_, key_);
  }

  /// The norm_const parameter (mmeval divides each image's sum by it), checked.
  static double norm_const(const Params& p) {
    const double c = p.get_double("norm_const");
    if (!(c > 0.0) || !std::isfinite(c))
      p.fail("norm_const", "must be a finite number > 0, got " + std::to_string(c));
    return c;
  }

  InputChecker check_;

 private:
  void load(const SampleView& s, const char* field, std::int64_t sample,
            std::vector<double>& out) const {
    const std::int64_t n = s.numel();
    out.resize(static_cast<std::size_t>(n));
    bool finite = true;
    visit_any(s.dtype, s.data, [&](const auto* v) {
      for (std::int64_t k = 0; k < n; ++k) {
        const auto x = static_cast<double>(v[k]);
        finite &= std::isfinite(x);
        out[static_cast<std::size_t>(k)] = x;
      }
    });
    if (!finite)
      check_.fail(field, "sample " + std::to_string(sample) + " holds NaN or infinite values");
  }

  std::string key_;
  bool trimap_, two_d_;
  std::vector<double> pred_, gt_, trimap_values_;
};

/// numpy.sum(f(k) for every element k) as mmeval's `(expr).sum()` computes it: the terms into a
/// reused buffer, then NumPy's pairwise sum over the flattened image.
template <class F>
double numpy_sum_of(std::int64_t n, std::vector<double>& buffer, F&& term) {
  buffer.resize(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) buffer[static_cast<std::size_t>(k)] = term(k);
  return numpy::sum(buffer.data(), buffer.size());
}

inline std::vector<InputSpec> matting_inputs(const MattingIdentity& id) {
  const std::string shape = id.two_d ? "[H, W]" : "[H, W] (or more dimensions: [H, W, C], ...)";
  std::vector<InputSpec> in{
      InputSpec{kPredAlpha,
                "Predicted alpha mattes, one a sample " + shape +
                    ", dense [N, ...] or ragged; uint8, uint16, float32 or float64, taken as "
                    "given (mmagic passes alpha / 255, floats in [0, 1]).",
                true},
      InputSpec{kGtAlpha, "Ground-truth alpha mattes, the shape of pred_alpha.", true}};
  if (id.trimap)
    in.push_back(InputSpec{kTrimap,
                           "Trimaps, the shape of the mattes, any numeric dtype: 0 background, "
                           "128 unknown (the pixels scored), 255 foreground.",
                           true});
  return in;
}

inline ParamSpec norm_const_param() {
  return param("norm_const", ParamType::Float,
               "Each image's sum is divided by this (mmeval's norm_const), to keep the numbers "
               "small.")
      .def(1000.0);
}

/// The component of matting metric M (M::kIdentity): its doc, parameters and aliases, the
/// inputs it reads and its result key.
template <class M>
ComponentInfo matting_component(const std::string& doc, std::vector<ParamSpec> params,
                                std::vector<std::string> aliases = {}) {
  constexpr const MattingIdentity& id = M::kIdentity;
  return metric<M>(id.name, doc, std::move(params), matting_inputs(id), std::move(aliases),
                   {{id.key, Better::Lower, Plot::None, id.key_doc}});
}

}  // namespace tally::restoration
