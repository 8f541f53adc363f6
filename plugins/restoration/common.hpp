// Pieces the image-restoration metrics share: per-sample access to the image fields (dense or
// ragged), mmeval's image transforms (reorder to HWC, the float32 cast, BasicSR's Y channel, the
// border crop) as row loaders that copy nothing else, and the state and base class of PSNR, SNR and
// SSIM (one value per sample, averaged in dataset order at compute with numpy's mean:
// tally/sdk/numpy_math.hpp).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/numpy_math.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"

namespace tally::restoration {

inline constexpr const char* kPred = "pred_img";
inline constexpr const char* kGt = "gt_img";
inline constexpr const char* kMask = "mask";

// ---- sums -----------------------------------------------------------------------------------

/// Neumaier's compensated sum: for sums over pixels, whose order differs from numpy's anyway;
/// accurate to about one rounding whatever the order.
struct CompensatedSum {
  double sum = 0.0, comp = 0.0;
  void add(double x) {
    const double t = sum + x;
    comp += std::abs(sum) >= std::abs(x) ? (sum - t) + x : (x - t) + sum;
    sum = t;
  }
  double value() const { return sum + comp; }
};

// ---- samples -------------------------------------------------------------------------------

/// One sample of an image field: C-order data with 1 to 4 dimensions.
struct SampleView {
  const void* data = nullptr;
  DType dtype = DType::U8;
  int ndim = 0;
  std::array<std::int64_t, 4> shape{};
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[static_cast<std::size_t>(d)];
    return n;
  }
  std::string describe() const {
    std::string s = std::string(dtype_name(dtype)) + "[";
    for (int d = 0; d < ndim; ++d)
      s += (d ? ", " : "") + std::to_string(shape[static_cast<std::size_t>(d)]);
    return s + "]";
  }
  bool same_shape(const SampleView& o) const {
    if (ndim != o.ndim) return false;
    for (int d = 0; d < ndim; ++d)
      if (shape[static_cast<std::size_t>(d)] != o.shape[static_cast<std::size_t>(d)]) return false;
    return true;
  }
};

inline bool is_pixel_dtype(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::F32 || t == DType::F64;
}

/// A field of a batch read sample by sample, dense ([N, ...]) or ragged (one tensor a sample).
/// `min_dims`/`max_dims` bound the dimensions of one sample; `mask` accepts every numeric dtype
/// (masks may be bool or integers), otherwise u8, u16, f32 or f64.
class FieldReader {
 public:
  FieldReader(const Batch& batch, const char* field, const InputChecker& check,
              std::int64_t first_sample, int min_dims, int max_dims, bool mask = false)
      : field_(field),
        check_(check),
        first_(first_sample),
        min_(min_dims),
        max_(max_dims),
        mask_(mask) {
    if (batch.has(field) && batch.is_ragged(field)) {
      ragged_ = &batch.ragged(field);
      return;
    }
    if (batch.has(field) && batch.is_text(field))
      check.fail(field, "must hold images (tensors), got a text field");
    dense_ = &check.tensor(batch, field);
    if (dense_->dim() < min_dims + 1 || dense_->dim() > max_dims + 1)
      check.fail(field, "must be " + std::to_string(min_dims + 1) + "-D to " +
                            std::to_string(max_dims + 1) + "-D [N, ...] (" + layouts() +
                            " a sample), got " + dense_->describe());
    check_dtype(dense_->dtype(), dense_->describe(), -1);
  }

  const char* field() const { return field_; }

  /// Sample i of the batch, checked (dimensions, dtype, device).
  SampleView sample(std::int64_t i) const {
    SampleView v;
    if (dense_ != nullptr) {
      v.dtype = dense_->dtype();
      v.ndim = static_cast<int>(dense_->dim()) - 1;
      std::int64_t per = 1;
      for (int d = 0; d < v.ndim; ++d) {
        v.shape[static_cast<std::size_t>(d)] = dense_->size(d + 1);
        per *= v.shape[static_cast<std::size_t>(d)];
      }
      v.data = static_cast<const char*>(dense_->data()) +
               static_cast<std::size_t>(i * per) * dtype_size(v.dtype);
      return v;
    }
    const Tensor& t = (*ragged_)[static_cast<std::size_t>(i)];
    const std::string where = "sample " + std::to_string(first_ + i) + " ";
    if (t.is_cuda()) check_.fail(field_, where + "is a CUDA tensor (" + t.describe() + ")");
    if (t.dim() < min_ || t.dim() > max_)
      check_.fail(field_, where + "must be " + layouts() + ", got " + t.describe());
    check_dtype(t.dtype(), t.describe(), i);
    v.dtype = t.dtype();
    v.ndim = static_cast<int>(t.dim());
    for (int d = 0; d < v.ndim; ++d) v.shape[static_cast<std::size_t>(d)] = t.size(d);
    v.data = t.data();
    return v;
  }

 private:
  std::string layouts() const {
    if (mask_) return std::to_string(min_) + " to " + std::to_string(max_) + " dimensions";
    std::string s;
    if (min_ <= 2) s += "[H, W]";
    if (min_ <= 3 && max_ >= 3) s += std::string(s.empty() ? "" : ", ") + "[H, W, C] or [C, H, W]";
    if (max_ >= 4) s += std::string(s.empty() ? "" : " or ") + "a video [T, ...]";
    return s;
  }
  void check_dtype(DType t, const std::string& what, std::int64_t i) const {
    if (mask_ ? t != DType::Bool && !is_integral(t) && !is_floating(t) : !is_pixel_dtype(t))
      check_.fail(field_, (i >= 0 ? "sample " + std::to_string(first_ + i) + " " : std::string()) +
                              "must hold " +
                              (mask_ ? std::string("numbers or booleans")
                                     : std::string("uint8, uint16, float32 or float64 pixels")) +
                              ", got " + what);
  }

  const char* field_;
  const InputChecker& check_;
  std::int64_t first_;
  int min_, max_;
  bool mask_;
  const Tensor* dense_ = nullptr;
  const Batch::Ragged* ragged_ = nullptr;
};

/// Calls f(const T* data) with T the element type of a pixel dtype (u8, u16, f32, f64).
template <class F>
decltype(auto) visit_pixels(DType t, const void* data, F&& f) {
  switch (t) {
    case DType::U8:
      return f(static_cast<const std::uint8_t*>(data));
    case DType::U16:
      return f(static_cast<const std::uint16_t*>(data));
    case DType::F32:
      return f(static_cast<const float*>(data));
    default:
      return f(static_cast<const double*>(data));
  }
}

/// Calls f(const T* data) for any dtype (masks).
template <class F>
decltype(auto) visit_any(DType t, const void* data, F&& f) {
  switch (t) {
    case DType::Bool:
      return f(static_cast<const bool*>(data));
    case DType::U8:
      return f(static_cast<const std::uint8_t*>(data));
    case DType::I8:
      return f(static_cast<const std::int8_t*>(data));
    case DType::U16:
      return f(static_cast<const std::uint16_t*>(data));
    case DType::I16:
      return f(static_cast<const std::int16_t*>(data));
    case DType::I32:
      return f(static_cast<const std::int32_t*>(data));
    case DType::U32:
      return f(static_cast<const std::uint32_t*>(data));
    case DType::I64:
      return f(static_cast<const std::int64_t*>(data));
    case DType::F32:
      return f(static_cast<const float*>(data));
    case DType::F64:
      break;
  }
  return f(static_cast<const double*>(data));
}

// ---- mmeval's reorder_and_crop -------------------------------------------------------------

/// The transform parameters of PSNR, SNR and SSIM (mmeval's reorder_and_crop).
struct Transform {
  std::int64_t crop_border = 0;
  bool chw = false;   // input_order CHW
  bool to_y = false;  // convert_to Y
  bool bgr = false;   // channel_order bgr (for Y)

  explicit Transform(const Params& p)
      : crop_border(p.get_size("crop_border", 0)),
        chw(p.get_string("input_order") == "CHW"),
        to_y(p.has("convert_to")),
        bgr(p.get_string("channel_order") == "bgr") {
    if (crop_border < 0) p.fail("crop_border", "must be >= 0, got " + std::to_string(crop_border));
  }
};

/// One frame after reorder and crop: pixel (r, c, ch) is element r*sh + c*sw + ch*sc of data.
struct Frame {
  const void* data = nullptr;
  DType dtype = DType::U8;
  std::int64_t h = 0, w = 0, c = 1;
  std::int64_t sh = 0, sw = 0, sc = 0;
  /// Channels after the transform: 1 for Y, else c.
  std::int64_t planes = 1;
};

/// The frames of a sample: [H, W] is one frame of one channel; [H, W, C] / [C, H, W] (by
/// input_order) one frame; [T, ...] T frames of 3 dimensions each. The crop is applied.
/// InputError when nothing is left after the crop or Y needs 3 channels.
inline std::vector<Frame>& frames_of(const SampleView& s, const Transform& t,
                                     const InputChecker& check, const char* field,
                                     std::int64_t sample, std::vector<Frame>& out) {
  out.clear();
  const auto sz = [&](int d) { return s.shape[static_cast<std::size_t>(d)]; };
  std::int64_t frames = 1, fdims = s.ndim;
  if (s.ndim == 4) frames = sz(0), fdims = 3;
  const int o = s.ndim == 4 ? 1 : 0;
  Frame f;
  f.dtype = s.dtype;
  if (fdims == 2) {
    f.h = sz(o), f.w = sz(o + 1), f.c = 1, f.sh = f.w, f.sw = 1, f.sc = 0;
  } else if (!t.chw) {
    f.h = sz(o), f.w = sz(o + 1), f.c = sz(o + 2), f.sh = f.w * f.c, f.sw = f.c, f.sc = 1;
  } else {
    f.c = sz(o), f.h = sz(o + 1), f.w = sz(o + 2), f.sh = f.w, f.sw = 1, f.sc = f.h * f.w;
  }
  const std::string where = "sample " + std::to_string(sample) + " (" + s.describe() + ", " +
                            (fdims == 2 ? std::string("HW")
                             : t.chw    ? "CHW"
                                        : "HWC") +
                            ")";
  if (t.to_y && f.c != 3)
    check.fail(field, where + ": convert_to Y needs 3 channels, got " + std::to_string(f.c));
  if (f.c < 1) check.fail(field, where + " has no channels");
  if (f.h - 2 * t.crop_border < 1 || f.w - 2 * t.crop_border < 1)
    check.fail(field, where + ": nothing is left after cropping " + std::to_string(t.crop_border) +
                          " pixels from each border of a " + std::to_string(f.h) + "x" +
                          std::to_string(f.w) + " image");
  const std::int64_t frame_elems = f.h * f.w * f.c;
  const std::int64_t skip = t.crop_border * (f.sh + f.sw);
  f.h -= 2 * t.crop_border;
  f.w -= 2 * t.crop_border;
  f.planes = t.to_y ? 1 : f.c;
  for (std::int64_t i = 0; i < frames; ++i) {
    Frame g = f;
    g.data = static_cast<const char*>(s.data) +
             static_cast<std::size_t>(i * frame_elems + skip) * dtype_size(s.dtype);
    out.push_back(g);
  }
  return out;
}

/// BasicSR's Y channel exactly as mmeval computes it (reorder_and_crop, rgb2ycbcr with
/// y_only=True on a float32 image): a = float32(x) / 255 in float32; the ITU-R BT.601 dot
/// product + 16 in float64; /255 in float64, cast to float32; * 255 in float32. No rounding to
/// integers (the image is float32, so _convert_output_type_range does not round).
inline double y_of(float r, float g, float b, bool bgr) {
  // The weights in channel order: rgb2ycbcr [65.481, 128.553, 24.966], bgr2ycbcr reversed.
  const double w0 = bgr ? 24.966 : 65.481, w2 = bgr ? 65.481 : 24.966;
  const float a0 = r / 255.0f, a1 = g / 255.0f, a2 = b / 255.0f;
  const double d = static_cast<double>(a0) * w0 + static_cast<double>(a1) * 128.553 +
                   static_cast<double>(a2) * w2 + 16.0;
  const auto e = static_cast<float>(d / 255.0);
  return static_cast<double>(e * 255.0f);
}

/// Row r of plane `plane` of a frame, as mmeval's float64 values (the pixel cast to float32, then
/// to float64; or its Y value). Returns whether the row holds a NaN.
inline bool load_row(const Frame& f, std::int64_t r, std::int64_t plane, bool to_y, bool bgr,
                     double* out) {
  return visit_pixels(f.dtype, f.data, [&](const auto* px) {
    const auto* row = px + r * f.sh;
    bool nan = false;
    if (to_y) {
      for (std::int64_t c = 0; c < f.w; ++c) {
        const auto* p = row + c * f.sw;
        const double y = y_of(static_cast<float>(p[0]), static_cast<float>(p[f.sc]),
                              static_cast<float>(p[2 * f.sc]), bgr);
        nan |= y != y;
        out[c] = y;
      }
    } else {
      const auto* p = row + plane * f.sc;
      for (std::int64_t c = 0; c < f.w; ++c) {
        const auto v = static_cast<double>(static_cast<float>(p[c * f.sw]));
        nan |= v != v;
        out[c] = v;
      }
    }
    return nan;
  });
}

// ---- PSNR, SNR, SSIM -----------------------------------------------------------------------

/// One float64 value per sample, in the rank's order; the ranks' values are concatenated in rank
/// order (dataset order).
struct PerSampleState {
  PackedVector<double> values;
  TALLY_STATE(concat(values))
};

/// The result of the per-sample metrics (PSNR, SNR, SSIM, MAE, MSE): {key: numpy.mean of every
/// sample's value}, in dataset order, so any number of ranks gives the same bits. InputError
/// without samples.
inline Value mean_of_samples(const PerSampleState& all, const InputChecker& check,
                             const std::string& key) {
  if (all.values.empty()) check.fail("no samples");
  Value out = Value::map();
  out.set(key, numpy::mean(all.values));
  return out;
}

/// The common parameters of PSNR, SNR and SSIM (mmeval's, with input_order defaulting to HWC).
inline std::vector<ParamSpec> transform_params(const char* metric) {
  return {
      param("crop_border", ParamType::Int,
            std::string("Pixels cropped from each border of every image (frame) before ") + metric +
                " is computed; 0 keeps all (mmeval's crop_border).")
          .def(0),
      param("input_order", ParamType::String,
            "Layout of a 3-D image (or of each frame of a video [T, ...]): HWC or CHW. [H, W] "
            "images have one channel either way. Defaults to HWC, the layout of tally's image "
            "readers; mmeval's default is CHW.")
          .def("HWC")
          .choices({"HWC", "CHW"}),
      param("convert_to", ParamType::String,
            "Y: compare only BasicSR's Y channel (ITU-R BT.601, Matlab's rgb2ycbcr: 16 + "
            "(65.481 R + 128.553 G + 24.966 B) / 255 on 0..255 values, computed in float32 as "
            "mmeval does, not rounded); null: every channel as it is.")
          .optional()
          .nullable()
          .choices({"Y", "y"}),
      param("channel_order", ParamType::String,
            "Order of the 3 channels for convert_to Y: rgb or bgr (mmeval's channel_order).")
          .def("rgb")
          .choices({"rgb", "bgr"}),
  };
}

inline std::vector<InputSpec> image_inputs() {
  return {
      InputSpec{kPred,
                "Predicted images: dense [N, H, W, C] / [N, H, W] / videos [N, T, H, W, C], or "
                "ragged, one [H, W, C] / [H, W] / [T, H, W, C] tensor a sample (C first with "
                "input_order CHW); uint8, uint16, float32 or float64, on the 0..255 scale.",
                true},
      InputSpec{kGt, "Ground-truth images, the same shape as pred_img (any of its dtypes).", true}};
}

/// Base of PSNR, SNR and SSIM: walks the samples of a batch, reorders and crops them as mmeval
/// does, and stores one value per sample: the mean of the values frame_values() appends for it
/// (numpy's mean of mmeval's per-sample list). compute() averages them in dataset order.
class PerSampleMetric : public TypedMetric<PerSampleState> {
 public:
  PerSampleMetric(const Params& p, const char* type, std::string key)
      : t_(p), check_(p.owner_or(type)), key_(std::move(key)) {}

 protected:
  /// Appends this frame's values (one, or one per channel) to `out`.
  virtual void frame_values(const Frame& pred, const Frame& gt, std::int64_t sample,
                            std::vector<double>& out) = 0;

  void update(PerSampleState& state, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    const auto first = static_cast<std::int64_t>(state.values.size());
    const FieldReader pred(batch, kPred, check_, first, 2, 4);
    const FieldReader gt(batch, kGt, check_, first, 2, 4);
    for (std::int64_t i = 0; i < batch.size(); ++i) {
      const SampleView p = pred.sample(i), g = gt.sample(i);
      if (!p.same_shape(g))
        check_.fail(kPred, "sample " + std::to_string(first + i) + " is " + p.describe() +
                               " but '" + kGt + "' is " + g.describe() +
                               ": the shapes must be equal");
      frames_of(p, t_, check_, kPred, first + i, pred_frames_);
      frames_of(g, t_, check_, kGt, first + i, gt_frames_);
      values_.clear();
      for (std::size_t f = 0; f < pred_frames_.size(); ++f)
        frame_values(pred_frames_[f], gt_frames_[f], first + i, values_);
      state.values.push_back(numpy::mean(values_));
    }
  }

  Value compute(const PerSampleState& all) const override {
    return mean_of_samples(all, check_, key_);
  }

  /// Loads row r of a plane of both frames into row_p_/row_g_; InputError on a NaN.
  void load_rows(const Frame& pred, const Frame& gt, std::int64_t r, std::int64_t plane,
                 std::int64_t sample) {
    if (static_cast<std::int64_t>(row_p_.size()) < pred.w) {
      row_p_.resize(static_cast<std::size_t>(pred.w));
      row_g_.resize(static_cast<std::size_t>(pred.w));
    }
    if (load_row(pred, r, plane, t_.to_y, t_.bgr, row_p_.data()))
      check_.fail(kPred, "sample " + std::to_string(sample) + " holds NaN pixels");
    if (load_row(gt, r, plane, t_.to_y, t_.bgr, row_g_.data()))
      check_.fail(kGt, "sample " + std::to_string(sample) + " holds NaN pixels");
  }

  Transform t_;
  InputChecker check_;
  std::string key_;
  std::vector<double> row_p_, row_g_;

 private:
  std::vector<Frame> pred_frames_, gt_frames_;
  std::vector<double> values_;
};

}  // namespace tally::restoration
