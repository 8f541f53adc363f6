// Pieces the image-quality metrics share: reading `preds` / `target` ([N, C, H, W] float32 or
// float64 batches) image by image as float64 planes, torchmetrics' kernels (_gaussian, the uniform
// window), a separable filter of two planes' local moments with torch's reflect padding, the 2x2
// average pool, exact sums, and the per-image state and base class of the metrics torchmetrics
// reduces over images (elementwise_mean / sum / none).
//
// Every per-image value depends on that image only, and the ranks' values are combined exactly
// (ExactSum, or concatenated in rank order = dataset order), so a result has the same bits on any
// number of ranks and batch sizes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/exact_sum.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/simd.hpp"
#include "tally/sdk/state.hpp"

namespace tally::image {

inline constexpr const char* kPreds = "preds";
inline constexpr const char* kTarget = "target";
inline constexpr const char* kImg = "img";

// ---- sums -----------------------------------------------------------------------------------

/// Neumaier's compensated sum: per-image sums over pixels, accurate to about one rounding in any
/// order (torch sums in its own order, so bit equality is not the aim; 1e-15 is).
struct CompensatedSum {
  double sum = 0.0, comp = 0.0;
  void add(double x) {
    const double t = sum + x;
    comp += std::abs(sum) >= std::abs(x) ? (sum - t) + x : (x - t) + sum;
    sum = t;
  }
  double value() const { return sum + comp; }
};

/// The sum of xs[0, n) in four interleaved lanes, combined (s0 + s1) + (s2 + s3): a fixed order
/// that baseline and AVX2 code both follow (so the bits do not depend on the CPU), and that GCC
/// vectorises as one 4-lane vector.
TALLY_SIMD_CLONES inline double lane_sum(const double* xs, std::int64_t n) {
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  std::int64_t c = 0;
  for (; c + 4 <= n; c += 4)
    for (int k = 0; k < 4; ++k) s[k] += xs[c + k];
  for (int k = 0; c < n; ++c, ++k) s[k] += xs[c];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

/// Several exact accumulators loaded from (and stored back to) a state's ExactSums words.
class ExactAccumulators {
 public:
  /// `k` accumulators with the words of `words` (empty: zeros). RuntimeError naming `owner` for
  /// words that are not k normalized accumulators (a corrupt restored state).
  ExactAccumulators(const ExactSums& words, std::size_t k, const std::string& owner) : acc_(k) {
    if (words.empty()) return;
    if (words.size() != k * ExactSum::kWords || !words.normalized())
      tally::throw_owned<RuntimeError>(
          owner, std::string("the state is corrupt: its sums are not ") + std::to_string(k) +
                     " normalized exact accumulators");
    for (std::size_t i = 0; i < k; ++i) acc_[i].merge(words.data() + i * ExactSum::kWords);
  }
  void add(std::size_t i, double x) { acc_[i].add(x); }
  double value(std::size_t i) const { return acc_[i].value(); }
  void store(ExactSums& words) {
    words.resize(acc_.size() * ExactSum::kWords);
    for (std::size_t i = 0; i < acc_.size(); ++i) {
      acc_[i].normalize();
      std::copy(acc_[i].words().begin(), acc_[i].words().end(),
                words.begin() + static_cast<std::ptrdiff_t>(i * ExactSum::kWords));
    }
  }

 private:
  std::vector<ExactSum> acc_;
};

// ---- images ---------------------------------------------------------------------------------

/// A dense [N, C, H, W] float32 or float64 field of a batch.
struct ImageField {
  const Tensor* t = nullptr;
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  std::int64_t plane_size() const { return h * w; }

  /// Plane (image i, channel ch) as float64: a pointer into the tensor for float64 data, else
  /// converted into `scratch`.
  const double* plane(std::int64_t i, std::int64_t ch, std::vector<double>& scratch) const {
    const std::int64_t at = (i * c + ch) * plane_size();
    if (t->dtype() == DType::F64) return t->data_as<double>() + at;
    scratch.resize(static_cast<std::size_t>(plane_size()));
    const float* p = t->data_as<float>() + at;
    for (std::int64_t k = 0; k < plane_size(); ++k)
      scratch[static_cast<std::size_t>(k)] = static_cast<double>(p[k]);
    return scratch.data();
  }
  /// Pixel k of image i (all channels: k in [0, C*H*W)) as float64.
  double at(std::int64_t i, std::int64_t k) const {
    const std::int64_t o = i * c * plane_size() + k;
    return t->dtype() == DType::F64 ? t->data_as<double>()[o]
                                    : static_cast<double>(t->data_as<float>()[o]);
  }
};

/// The field `name` of `batch` as [N, C, H, W] float images: InputError (naming the owner and the
/// field) for a missing, ragged, non-float or other-rank field, and for a NaN or infinite pixel
/// (naming its sample; `first` = samples this rank has seen before the batch).
inline ImageField read_images(const InputChecker& check, const Batch& batch, const char* name,
                              std::int64_t first) {
  const Tensor& t = check.tensor(batch, name);
  if (!is_floating(t.dtype()))
    check.fail(name, "must hold float32 or float64 pixels, got " + t.describe());
  check.dims(t, name, 4, "[N, C, H, W]");
  ImageField f{&t, t.size(0), t.size(1), t.size(2), t.size(3)};
  if (f.n > 0 && (f.c < 1 || f.h < 1 || f.w < 1))
    check.fail(name, "has an empty image dimension: " + t.describe());
  const std::int64_t per = f.c * f.h * f.w;
  visit_floating(t, [&](const auto* px) {
    bool bad = false;
    for (std::int64_t k = 0; k < t.numel(); ++k) bad |= !std::isfinite(px[k]);
    if (!bad) return;
    for (std::int64_t k = 0; k < t.numel(); ++k)
      if (!std::isfinite(px[k]))
        check.fail(name, "sample " + std::to_string(first + k / per) + " holds a " +
                             (std::isnan(px[k]) ? "NaN" : "infinite") + " pixel (channel " +
                             std::to_string(k % per / (f.h * f.w)) + ", row " +
                             std::to_string(k % (f.h * f.w) / f.w) + ", column " +
                             std::to_string(k % f.w) + ")");
  });
  return f;
}

/// preds and target of one batch, the same shape.
inline std::pair<ImageField, ImageField> read_pair(const InputChecker& check, const Batch& batch,
                                                   std::int64_t first) {
  ImageField p = read_images(check, batch, kPreds, first);
  ImageField t = read_images(check, batch, kTarget, first);
  if (p.t->shape() != t.t->shape())
    check.fail(kPreds, "is " + p.t->describe() + " but '" + kTarget + "' is " + t.t->describe() +
                           ": the shapes must be equal");
  return {p, t};
}

// ---- kernels and filters --------------------------------------------------------------------

/// torchmetrics' _gaussian(kernel_size, sigma) in float64: exp(-((x / sigma)^2) / 2) at
/// x = (1 - k) / 2 + i, normalised by its sum.
inline std::vector<double> gaussian_taps(std::int64_t k, double sigma) {
  std::vector<double> g(static_cast<std::size_t>(k));
  double sum = 0.0;
  for (std::int64_t i = 0; i < k; ++i) {
    const double x = static_cast<double>(1 - k) / 2.0 + static_cast<double>(i);
    const double z = x / sigma;
    g[static_cast<std::size_t>(i)] = std::exp(-(z * z) / 2.0);
    sum += g[static_cast<std::size_t>(i)];
  }
  for (auto& v : g) v /= sum;
  return g;
}

/// torch's reflect padding: index i of a padded axis of n values (|i| < n or i < 2n - 1).
inline std::int64_t reflect(std::int64_t i, std::int64_t n) {
  if (i < 0) return -i;
  if (i >= n) return 2 * (n - 1) - i;
  return i;
}

/// out[c] = sum_j k[j] in[c + j], j in [0, nk), c in [0, n): a 1-D valid correlation, in blocks of
/// columns that stay in L1, each tap a vectorised pass (the same additions in the same order in
/// every clone).
TALLY_SIMD_CLONES inline void correlate_row(const double* in, const double* k, std::int64_t nk,
                                            double* out, std::int64_t n) {
  constexpr std::int64_t kBlock = 512;
  for (std::int64_t b = 0; b < n; b += kBlock) {
    const std::int64_t e = std::min(n, b + kBlock);
    const double k0 = k[0];
#pragma omp simd
    for (std::int64_t c = b; c < e; ++c) out[c] = k0 * in[c];
    for (std::int64_t j = 1; j < nk; ++j) {
      const double kj = k[j];
      const double* s = in + j;
#pragma omp simd
      for (std::int64_t c = b; c < e; ++c) out[c] += kj * s[c];
    }
  }
}

/// out[c] = sum_j k[j] rows[j][c]: the vertical pass over nk rows.
TALLY_SIMD_CLONES inline void correlate_rows(const double* const* rows, const double* k,
                                             std::int64_t nk, double* out, std::int64_t n) {
  constexpr std::int64_t kBlock = 512;
  for (std::int64_t b = 0; b < n; b += kBlock) {
    const std::int64_t e = std::min(n, b + kBlock);
    const double k0 = k[0];
    const double* r0 = rows[0];
#pragma omp simd
    for (std::int64_t c = b; c < e; ++c) out[c] = k0 * r0[c];
    for (std::int64_t j = 1; j < nk; ++j) {
      const double kj = k[j];
      const double* s = rows[j];
#pragma omp simd
      for (std::int64_t c = b; c < e; ++c) out[c] += kj * s[c];
    }
  }
}

/// The local moments of two planes x, y (h x w, row-major float64) under a separable window:
/// kv the taps along rows (H), kh along columns (W). The planes are reflect-padded by pad_top
/// rows and pad_left columns (torch's reflect mode; the caller checks pad < size) and the window
/// runs over output rows [0, ho) and columns [0, wo): output (r, c) sees padded rows
/// r .. r + kv - 1 and columns c .. c + kh - 1. For each output row r, row_fn(r, m) gets
/// m[0..4] = the filtered x, y, x^2, y^2, x*y (wo values each). Without padding and with windows
/// inside the plane, rows are read in place; scratch buffers are reused across calls.
class MomentFilter {
 public:
  template <class RowFn>
  void run(const double* x, const double* y, std::int64_t h, std::int64_t w,
           const std::vector<double>& kv, const std::vector<double>& kh, std::int64_t pad_top,
           std::int64_t pad_left, std::int64_t ho, std::int64_t wo, RowFn&& row_fn) {
    if (ho <= 0 || wo <= 0) return;
    const auto nv = static_cast<std::int64_t>(kv.size());
    const auto nh = static_cast<std::int64_t>(kh.size());
    const std::int64_t wp = wo + nh - 1;  // padded columns one output row reads
    const bool in_place = pad_left == 0 && wp <= w;
    grow(px_, 5 * wp);
    grow(ring_, nv * 5 * wo);
    grow(out_, 5 * wo);
    if (!in_place) {
      cols_.resize(static_cast<std::size_t>(wp));
      for (std::int64_t j = 0; j < wp; ++j)
        cols_[static_cast<std::size_t>(j)] = reflect(j - pad_left, w);
    }
    for (std::int64_t pr = 0; pr < ho + nv - 1; ++pr) {
      const std::int64_t src = reflect(pr - pad_top, h);
      const double* xr = x + src * w;
      const double* yr = y + src * w;
      double* bx = px_.data();
      double* by = bx + wp;
      if (!in_place) {
        for (std::int64_t j = 0; j < wp; ++j) {
          const std::int64_t s = cols_[static_cast<std::size_t>(j)];
          bx[j] = xr[s];
          by[j] = yr[s];
        }
        xr = bx;
        yr = by;
      }
      double* xx = by + wp;
      double* yy = xx + wp;
      double* xy = yy + wp;
      products(xr, yr, xx, yy, xy, wp);
      double* slot = ring_.data() + (pr % nv) * 5 * wo;
      correlate_row(xr, kh.data(), nh, slot, wo);
      correlate_row(yr, kh.data(), nh, slot + wo, wo);
      correlate_row(xx, kh.data(), nh, slot + 2 * wo, wo);
      correlate_row(yy, kh.data(), nh, slot + 3 * wo, wo);
      correlate_row(xy, kh.data(), nh, slot + 4 * wo, wo);
      if (pr < nv - 1) continue;
      const std::int64_t r = pr - (nv - 1);
      rows_.resize(static_cast<std::size_t>(nv));
      const double* m[5];
      for (std::int64_t q = 0; q < 5; ++q) {
        for (std::int64_t i = 0; i < nv; ++i)
          rows_[static_cast<std::size_t>(i)] = ring_.data() + ((r + i) % nv) * 5 * wo + q * wo;
        correlate_rows(rows_.data(), kv.data(), nv, out_.data() + q * wo, wo);
        m[q] = out_.data() + q * wo;
      }
      row_fn(r, m);
    }
  }

 private:
  TALLY_SIMD_CLONES static void products(const double* x, const double* y, double* xx, double* yy,
                                         double* xy, std::int64_t n) {
#pragma omp simd
    for (std::int64_t c = 0; c < n; ++c) {
      xx[c] = x[c] * x[c];
      yy[c] = y[c] * y[c];
      xy[c] = x[c] * y[c];
    }
  }
  static void grow(std::vector<double>& v, std::int64_t n) {
    if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
  }

  std::vector<double> px_, ring_, out_;
  std::vector<std::int64_t> cols_;
  std::vector<const double*> rows_;
};

/// How a plane is padded: torch's reflect (no edge repeat: -1 -> 1), symmetric (edge repeated:
/// -1 -> 0, torchmetrics' _reflection_pad_2d and _symmetric_reflect_pad_2d), zero.
enum class Pad { Reflect, Symmetric, Zero };

/// Source index of padded position i (-1: a zero) on an axis of n values.
inline std::int64_t padded_index(std::int64_t i, std::int64_t n, Pad mode) {
  if (i >= 0 && i < n) return i;
  if (mode == Pad::Zero) return -1;
  if (mode == Pad::Reflect) return reflect(i, n);
  return i < 0 ? -i - 1 : 2 * n - 1 - i;
}

/// The separable correlation of one plane x (h x w) padded by (pad_top, pad_left) in `mode`:
/// out (ho x wo), out(r, c) = sum_i sum_j kv[i] kh[j] xpad(r + i, c + j). Builds the padded rows
/// it needs; for the small metrics (not the MS-SSIM hot path).
inline void filter_plane(const double* x, std::int64_t h, std::int64_t w,
                         const std::vector<double>& kv, const std::vector<double>& kh, Pad mode,
                         std::int64_t pad_top, std::int64_t pad_left, std::int64_t ho,
                         std::int64_t wo, std::vector<double>& out) {
  const auto nv = static_cast<std::int64_t>(kv.size());
  const auto nh = static_cast<std::int64_t>(kh.size());
  const std::int64_t wp = wo + nh - 1, hp = ho + nv - 1;
  out.assign(static_cast<std::size_t>(std::max<std::int64_t>(ho * wo, 0)), 0.0);
  if (ho <= 0 || wo <= 0) return;
  std::vector<double> row(static_cast<std::size_t>(wp)), hor(static_cast<std::size_t>(hp * wo));
  for (std::int64_t q = 0; q < hp; ++q) {
    const std::int64_t src = padded_index(q - pad_top, h, mode);
    for (std::int64_t j = 0; j < wp; ++j) {
      const std::int64_t c = padded_index(j - pad_left, w, mode);
      row[static_cast<std::size_t>(j)] = src < 0 || c < 0 ? 0.0 : x[src * w + c];
    }
    correlate_row(row.data(), kh.data(), nh, hor.data() + q * wo, wo);
  }
  std::vector<const double*> rows(static_cast<std::size_t>(nv));
  for (std::int64_t r = 0; r < ho; ++r) {
    for (std::int64_t i = 0; i < nv; ++i)
      rows[static_cast<std::size_t>(i)] = hor.data() + (r + i) * wo;
    correlate_rows(rows.data(), kv.data(), nv, out.data() + r * wo, wo);
  }
}

/// torch's avg_pool2d(x, (2, 2)) of one plane: out (h/2) x (w/2) (odd last row / column dropped),
/// each (((x00 + x01) + x10) + x11) / 4 as torch's CPU kernel adds them.
inline void avg_pool2(const double* x, std::int64_t h, std::int64_t w, std::vector<double>& out) {
  const std::int64_t ho = h / 2, wo = w / 2;
  out.resize(static_cast<std::size_t>(ho * wo));
  for (std::int64_t r = 0; r < ho; ++r) {
    const double* a = x + 2 * r * w;
    const double* b = a + w;
    double* o = out.data() + r * wo;
    for (std::int64_t c = 0; c < wo; ++c)
      o[c] = (((a[2 * c] + a[2 * c + 1]) + b[2 * c]) + b[2 * c + 1]) / 4.0;
  }
}

// ---- UQI ------------------------------------------------------------------------------------

/// The row sum of torchmetrics' UQI map from the five moments:
/// (2 mu_xy)(2 s_xy) / ((mu_x^2 + mu_y^2)(s_xx + s_yy) + eps), s_xx, s_yy clamped at 0.
TALLY_SIMD_CLONES inline double uqi_row(const double* const* m, double* tmp, std::int64_t n) {
  constexpr double kEps = std::numeric_limits<double>::epsilon();  // torch.finfo(float64).eps
  const double *mx = m[0], *my = m[1], *fxx = m[2], *fyy = m[3], *fxy = m[4];
#pragma omp simd
  for (std::int64_t c = 0; c < n; ++c) {
    const double mxx = mx[c] * mx[c], myy = my[c] * my[c], mxy = mx[c] * my[c];
    const double sxx = std::max(fxx[c] - mxx, 0.0);
    const double syy = std::max(fyy[c] - myy, 0.0);
    const double sxy = fxy[c] - mxy;
    tmp[c] = ((2 * mxy) * (2 * sxy)) / ((mxx + myy) * (sxx + syy) + kEps);
  }
  return lane_sum(tmp, n);
}

/// torchmetrics' UQI over one pair of planes with a square Gaussian window (k x k, sigma per
/// axis): the sum of the map over the valid positions (torch reflect-pads by (k - 1) / 2 and
/// crops as much off the map: the valid positions). k = 1 (a pad of 0): torch's crop [0:-0] is
/// empty, so the sum is 0.
class UqiWindow {
 public:
  UqiWindow(std::int64_t k, double sigma_rows, double sigma_cols)
      : k_(k), rows_(gaussian_taps(k, sigma_rows)), cols_(gaussian_taps(k, sigma_cols)) {}
  std::int64_t size() const { return k_; }
  /// (sum of the map, its number of positions as torchmetrics counts them: (h-k+1)(w-k+1)).
  double map_sum(const double* x, const double* y, std::int64_t h, std::int64_t w) {
    if (k_ == 1) return 0.0;
    const std::int64_t ho = h - k_ + 1, wo = w - k_ + 1;
    if (static_cast<std::int64_t>(tmp_.size()) < wo) tmp_.resize(static_cast<std::size_t>(wo));
    CompensatedSum total;
    filter_.run(x, y, h, w, rows_, cols_, 0, 0, ho, wo, [&](std::int64_t, const double* const* m) {
      total.add(uqi_row(m, tmp_.data(), wo));
    });
    return total.value();
  }

 private:
  std::int64_t k_;
  std::vector<double> rows_, cols_, tmp_;
  MomentFilter filter_;
};

// ---- parameters -----------------------------------------------------------------------------

enum class Reduce { Mean, Sum, None };

/// torchmetrics' `reduction`: elementwise_mean (or mean), sum, none (a metric without the
/// parameter: mean).
inline Reduce reduction_of(const Params& p) {
  if (!p.has("reduction")) return Reduce::Mean;
  const std::string r = p.get_string("reduction");
  if (r == "sum") return Reduce::Sum;
  if (r == "none") return Reduce::None;
  return Reduce::Mean;
}

/// torchmetrics' reduction parameter; `choices` in the metric's own spelling, the first the
/// default.
inline ParamSpec reduction_param(std::vector<std::string> choices, const std::string& what) {
  const std::string def = choices.front();
  std::string doc = "How the values combine (torchmetrics' reduction): ";
  for (const auto& c : choices)
    doc += c + (c == "sum"    ? " (their sum), "
                : c == "none" ? " (an array, one value per " + what + "), "
                              : " (their mean), ");
  doc.resize(doc.size() - 2);
  return param("reduction", ParamType::String, doc + ".").def(def).choices(std::move(choices));
}

/// An int list parameter of one or two odd positive values (torchmetrics' kernel_size), as
/// [rows, columns].
inline std::vector<std::int64_t> pair_of_sizes(const Params& p, const char* name, bool odd) {
  std::vector<std::int64_t> v = p.get_size_list(name, 1, 1 << 12);
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2)
    p.fail(name, "must be one value or two (rows, columns), got " + std::to_string(v.size()));
  for (const auto k : v)
    if (odd && k % 2 == 0)
      p.fail(name,
             "must hold odd positive numbers (torchmetrics' check), got " + std::to_string(k));
  return v;
}

/// A float list parameter of one or two positive values (torchmetrics' sigma).
inline std::vector<double> pair_of_sigmas(const Params& p, const char* name) {
  std::vector<double> v = p.get_double_list(name);
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2)
    p.fail(name, "must be one value or two (rows, columns), got " + std::to_string(v.size()));
  for (const double s : v)
    if (!(s > 0) || !std::isfinite(s) || s > 1000)
      p.fail(name, "must hold positive numbers up to 1000, got " + std::to_string(s));
  return v;
}

inline std::vector<InputSpec> pair_inputs(const std::string& what) {
  return {InputSpec{kPreds,
                    "Predicted images [N, C, H, W], float32 or float64 (computed in float64)" +
                        what + ".",
                    true},
          InputSpec{kTarget, "Ground-truth images, the shape of preds.", true}};
}

// ---- per-image metrics ----------------------------------------------------------------------

/// One value per image: exactly summed (reduction mean / sum) or kept in dataset order
/// (reduction none); `n` counts the images. Non-finite values (a NaN torch would give, say) are
/// counted instead of summed, so that the sum of the rest stays exact: the total is NaN when any is
/// NaN or +inf meets -inf, else the infinity.
struct PerImageState {
  ExactSums total;
  std::int64_t n = 0;
  std::int64_t nan = 0, pos_inf = 0, neg_inf = 0;
  PackedVector<double> values;
  TALLY_STATE(merge(total), sum(n), sum(nan), sum(pos_inf), sum(neg_inf), concat(values))
};

/// The exact total of a sum with its non-finite terms counted apart.
inline double total_of(double finite, std::int64_t nan, std::int64_t pos_inf,
                       std::int64_t neg_inf) {
  if (nan > 0 || (pos_inf > 0 && neg_inf > 0)) return std::numeric_limits<double>::quiet_NaN();
  if (pos_inf > 0) return std::numeric_limits<double>::infinity();
  if (neg_inf > 0) return -std::numeric_limits<double>::infinity();
  return finite;
}

/// Adds x to accumulator i, or counts it when it is not finite.
inline void add_counted(ExactAccumulators& acc, std::size_t i, double x, std::int64_t& nan,
                        std::int64_t& pos_inf, std::int64_t& neg_inf) {
  if (std::isfinite(x))
    acc.add(i, x);
  else if (std::isnan(x))
    ++nan;
  else if (x > 0)
    ++pos_inf;
  else
    ++neg_inf;
}

/// Exact sums of k accumulators (pixel values summed over the dataset), the images seen and the
/// pixels summed, with non-finite terms counted apart (total_of).
struct SumState {
  ExactSums total;
  std::int64_t images = 0, count = 0;
  std::int64_t nan = 0, pos_inf = 0, neg_inf = 0;
  TALLY_STATE(merge(total), sum(images), sum(count), sum(nan), sum(pos_inf), sum(neg_inf))
};

/// InputError unless the state's sums are `k` normalized accumulators (or none, with no images).
inline void check_sums(const ExactSums& total, std::size_t k, const std::string& owner) {
  if (total.mismatched() ||
      (!total.empty() && (total.size() != k * ExactSum::kWords || !total.normalized())))
    tally::throw_owned<RuntimeError>(owner, std::string("the state is corrupt"));
}

/// What a per-image metric reads: a (preds, target) pair, or only the images in `preds`.
struct ImageInputs {
  bool pair = true;
};

/// Base of the metrics whose result reduces one value per image (torchmetrics: a per-image score,
/// then reduce(scores, reduction)). Subclasses give image_value().
class PerImageMetric : public TypedMetric<PerImageState> {
 public:
  PerImageMetric(const Params& p, const char* type, std::string key, ImageInputs in = {})
      : check_(p.owner_or(type)), key_(std::move(key)), reduce_(reduction_of(p)), pair_(in.pair) {}

 protected:
  /// The value of image i of the batch (preds / target, or img in `preds` when not a pair);
  /// `sample` is its number on this rank, for messages.
  virtual double image_value(const ImageField& preds, const ImageField& target, std::int64_t i,
                             std::int64_t sample) = 0;
  /// Called once per batch before image_value (checks of image sizes, say).
  virtual void check_batch(const ImageField& preds, std::int64_t first) {
    (void)preds;
    (void)first;
  }

  void update(PerImageState& s, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    ImageField p, t;
    if (pair_) {
      std::tie(p, t) = read_pair(check_, batch, s.n);
    } else {
      p = read_images(check_, batch, kImg, s.n);
      t = p;
    }
    if (p.n == 0) return;
    check_batch(p, s.n);
    ExactAccumulators acc(s.total, 1, check_.owner());
    for (std::int64_t i = 0; i < p.n; ++i) {
      const double v = image_value(p, t, i, s.n + i);
      if (reduce_ == Reduce::None)
        s.values.push_back(v);
      else
        add_counted(acc, 0, v, s.nan, s.pos_inf, s.neg_inf);
    }
    if (reduce_ != Reduce::None) acc.store(s.total);
    s.n += p.n;
  }

  Value compute(const PerImageState& s) const override {
    if (s.total.mismatched() ||
        (!s.total.empty() && (s.total.size() != ExactSum::kWords || !s.total.normalized())))
      check_.fail_runtime(std::string("the state is corrupt"));
    if (s.n == 0) check_.fail("no samples");
    Value out = Value::map();
    if (reduce_ == Reduce::None) {
      if (static_cast<std::int64_t>(s.values.size()) != s.n)
        check_.fail_runtime(std::string("the state is corrupt"));
      out.set(key_, Value(std::vector<double>(s.values.begin(), s.values.end())));
      return out;
    }
    const ExactAccumulators acc(s.total, 1, check_.owner());
    const double total = total_of(acc.value(0), s.nan, s.pos_inf, s.neg_inf);
    out.set(key_, reduce_ == Reduce::Sum ? total : total / static_cast<double>(s.n));
    return out;
  }

  InputChecker check_;
  std::string key_;
  Reduce reduce_;
  bool pair_;
};

}  // namespace tally::image
