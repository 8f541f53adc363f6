// NIQE: the Natural Image Quality Evaluator, a no-reference image quality score (lower is
// better): the distance of an image's natural-scene statistics from a model fitted to pristine
// natural images.
//
// Formula (Mittal, Soundararajan and Bovik, "Making a 'Completely Blind' Image Quality Analyzer",
// IEEE SPL 2012), as mmeval computes it. Each image (each frame of a video) is reordered to HWC,
// cast to float32, converted to one channel (gray: OpenCV's RGB2GRAY, 0.299 R + 0.587 G + 0.114
// B on float32 values / 255, times 255; y: BasicSR's Y channel), cropped by crop_border pixels,
// rounded to integers (half to even) and cut to whole 96x96 blocks (h, w: multiples of 96). At two
// scales (the image, then the image downsampled by 2 with MATLAB's bicubic imresize with
// antialiasing):
//   mu    = G * I,  sigma = sqrt(|G * I^2 - mu^2|)     (G: the model's 7x7 Gaussian window,
//                                                       edges replicated)
//   MSCN  = (I - mu) / (sigma + 1)
// and for each block (96x96 at scale 1, the same block's 48x48 at scale 2) 18 features: the
// asymmetric generalised Gaussian fit (alpha from the grid 0.2:0.001:10 by moment matching;
// left and right scales) of the MSCN values and of the products of each value with its
// neighbour in 4 directions (circular shifts). The blocks' 36 features give a mean mu_d (NaN
// features skipped) and a covariance S_d (blocks without NaN); with the pristine model's
// (mu_p, S_p):
//   NIQE = sqrt((mu_p - mu_d) pinv((S_p + S_d) / 2) (mu_p - mu_d)^T)
// A video's value is the mean over its frames; the result is the mean over samples:
//   niqe = (1/N) sum_i NIQE_i
//
// Reference: mmeval 0.2.1 mmeval.metrics.NaturalImageQualityEvaluator (niqe.py), step by step in
// the same precision: float32 where mmeval computes in float32 (the gray conversion; the resize
// weights and the resize itself, summed in mmeval's order), float64 elsewhere with NumPy's and
// SciPy's summation orders (scipy.ndimage.convolve 'nearest', NumPy's pairwise means, Cephes'
// Gamma as scipy.special.gamma). The pristine model (niqe_pris_params.inc) is mmeval's
// niqe_pris_params.npz, bit for bit: LIVE's NIQE release, see data/NOTICE-niqe_pris_params.txt.
// OpenCV's float32 RGB2GRAY goes through Intel IPP here; its rounding (fused multiply-adds in a
// lane-dependent order, tails of rows of w % 8 >= 4 pixels) is reproduced as the opencv-python
// 5.0.0 wheel computed it where the reference ran (x86-64 with AVX2, FMA and AVX-512; IPP used
// blocks of 8 floats), found by comparing candidate formulas with cv2.cvtColor on every width
// from 1 to 79 and more; the order moves a pixel by one float32 ulp, which can flip its rounding
// to an integer, so another OpenCV build or CPU could give mmeval other NIQE values.
// The covariance products and pinv (BLAS, LAPACK in NumPy) are computed here as plain sums and
// a Cholesky solve: (S_p + S_d) / 2 is positive definite (S_p is, S_d is semi-definite), so pinv
// is its inverse; they differ from NumPy's in the last bits only (1e-12 relative or better).
// Differences, on purpose: input_order defaults to HWC (tally's readers give HWC; mmeval's
// default is CHW); a one-channel image ([H, W] or [H, W, 1]) is taken as the gray image itself
// whatever convert_to says (mmeval's OpenCV call fails on it; this is mmeval's computation with
// convert_to None); an image too small for two 96x96 blocks after the crop, or without two blocks
// of finite features, and NaN pixels are input errors (mmeval raises AxisError or LinAlgError, or
// gives NaN).
//
// Example: tests/data/niqe/coffee_jpeg15.npy (uint8 [1, 230, 290, 3]: a crop of scikit-image's
// coffee, JPEG quality 15), default parameters -> niqe ~11.8055 (mmeval: 11.80550186552265).
//
// State: the exact sum of the per-sample values (ExactSum) and their count, so any number of
// ranks gives the same bits (mmeval's numpy mean of the list differs by an ulp or so).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common.hpp"
#include "niqe_pris_params.inc"
#include "tally/sdk/exact_sum.hpp"

namespace tally::restoration {
namespace niqe {
namespace {

constexpr std::int64_t kBlock = 96;
constexpr int kFeatures = 36;

// ---- scipy.special.gamma ----------------------------------------------------------------------

/// Cephes' Gamma (scipy.special.gamma for real arguments: xsf::cephes::Gamma), for the arguments
/// NIQE uses (0.1 to 15: no Stirling branch, no reflection).
double cephes_gamma(double x) {
  static constexpr double P[] = {1.60119522476751861407E-4, 1.19135147006586384913E-3,
                                 1.04213797561761569935E-2, 4.76367800457137231464E-2,
                                 2.07448227648435975150E-1, 4.94214826801497100753E-1,
                                 9.99999999999999996796E-1};
  static constexpr double Q[] = {-2.31581873324120129819E-5, 5.39605580493303397842E-4,
                                 -4.45641913851797240494E-3, 1.18139785222060435552E-2,
                                 3.58236398605498653373E-2,  -2.34591795718243348568E-1,
                                 7.14304917030273074085E-2,  1.00000000000000000320E0};
  if (!std::isfinite(x) || !(x > 0.0) || x > 33.0) return std::tgamma(x);  // not reached
  double z = 1.0;
  while (x >= 3.0) {
    x -= 1.0;
    z *= x;
  }
  while (x < 2.0) {
    if (x < 1.e-9) return z / ((1.0 + 0.5772156649015329 * x) * x);
    z /= x;
    x += 1.0;
  }
  if (x == 2.0) return z;
  x -= 2.0;
  double p = P[0], q = Q[0];
  for (std::size_t i = 1; i < 7; ++i) p = p * x + P[i];
  for (std::size_t i = 1; i < 8; ++i) q = q * x + Q[i];
  return z * p / q;
}

/// mmeval's grid gam = np.arange(0.2, 10.001, 0.001) (NumPy's fill: start + i * (a[1] - a[0]))
/// and r_gam = gamma(2 / g)^2 / (gamma(1 / g) gamma(3 / g)).
struct GammaGrid {
  std::vector<double> gam, r_gam;
  GammaGrid() {
    const double start = 0.2, stop = 10.001, step = 0.001;
    const auto n = static_cast<std::size_t>(std::ceil((stop - start) / step));
    gam.resize(n);
    r_gam.resize(n);
    gam[0] = start;
    if (n > 1) gam[1] = start + step;
    const double delta = gam[1] - gam[0];
    for (std::size_t i = 2; i < n; ++i) gam[i] = start + static_cast<double>(i) * delta;
    for (std::size_t i = 0; i < n; ++i) {
      const double rec = 1.0 / gam[i];
      const double g2 = cephes_gamma(rec * 2);
      r_gam[i] = (g2 * g2) / (cephes_gamma(rec) * cephes_gamma(rec * 3));
    }
  }
};

const GammaGrid& gamma_grid() {
  static const GammaGrid grid;
  return grid;
}

// ---- features ---------------------------------------------------------------------------------

struct Aggd {
  double alpha, beta_l, beta_r;
};

/// mmeval's estimate_aggd_param on the values x[0, n) (a flattened block), with scratch space.
Aggd estimate_aggd(const std::vector<double>& x, std::vector<double>& a, std::vector<double>& b) {
  a.clear();
  b.clear();
  for (double v : x) {
    if (v < 0) a.push_back(v * v);
    if (v > 0) b.push_back(v * v);
  }
  const double left_std = std::sqrt(numpy::mean(a));
  const double right_std = std::sqrt(numpy::mean(b));
  const double gammahat = left_std / right_std;
  a.resize(x.size());
  b.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) a[i] = std::abs(x[i]), b[i] = x[i] * x[i];
  const double mean_abs = numpy::mean(a);
  const double rhat = (mean_abs * mean_abs) / numpy::mean(b);
  const double g2 = gammahat * gammahat + 1;
  const double rhatnorm = (rhat * (std::pow(gammahat, 3.0) + 1) * (gammahat + 1)) / (g2 * g2);
  // np.argmin((r_gam - rhatnorm)^2): the first minimum; the first NaN when there is one.
  const GammaGrid& grid = gamma_grid();
  std::size_t best = 0;
  if (!std::isnan(rhatnorm)) {
    double min = (grid.r_gam[0] - rhatnorm) * (grid.r_gam[0] - rhatnorm);
    for (std::size_t i = 1; i < grid.r_gam.size(); ++i) {
      const double d = grid.r_gam[i] - rhatnorm;
      if (d * d < min) min = d * d, best = i;
    }
  }
  const double alpha = grid.gam[best];
  const double scale = std::sqrt(cephes_gamma(1 / alpha) / cephes_gamma(3 / alpha));
  return {alpha, left_std * scale, right_std * scale};
}

/// A 2-D float64 image, row-major.
struct Image {
  std::int64_t h = 0, w = 0;
  std::vector<double> px;
  double& at(std::int64_t r, std::int64_t c) { return px[static_cast<std::size_t>(r * w + c)]; }
  double at(std::int64_t r, std::int64_t c) const {
    return px[static_cast<std::size_t>(r * w + c)];
  }
};

/// scipy.ndimage.convolve(img, window, mode='nearest') with mmeval's symmetric 7x7 window: for
/// each pixel the 49 products summed in the window's C order, starting from 0.
void convolve_nearest(const Image& in, const double* (&rows)[7], Image& out,
                      std::vector<std::int64_t>& cols) {
  out.h = in.h, out.w = in.w;
  out.px.resize(in.px.size());
  cols.resize(static_cast<std::size_t>(in.w * 7));
  for (std::int64_t c = 0; c < in.w; ++c)
    for (std::int64_t k = 0; k < 7; ++k)
      cols[static_cast<std::size_t>(c * 7 + k)] = std::clamp<std::int64_t>(c + k - 3, 0, in.w - 1);
  for (std::int64_t r = 0; r < in.h; ++r) {
    for (std::int64_t k = 0; k < 7; ++k)
      rows[k] = in.px.data() + std::clamp<std::int64_t>(r + k - 3, 0, in.h - 1) * in.w;
    for (std::int64_t c = 0; c < in.w; ++c) {
      const std::int64_t* cc = cols.data() + c * 7;
      double acc = 0.0;
      for (int ky = 0; ky < 7; ++ky)
        for (int kx = 0; kx < 7; ++kx) acc += kGaussianWindow[ky * 7 + kx] * rows[ky][cc[kx]];
      out.at(r, c) = acc;
    }
  }
}

/// The MSCN coefficients of mmeval's compute_niqe: (img - mu) / (sigma + 1).
void mscn(const Image& img, Image& out, Image& mu, Image& sq, Image& sq_mu,
          std::vector<std::int64_t>& cols) {
  const double* rows[7];
  convolve_nearest(img, rows, mu, cols);
  sq.h = img.h, sq.w = img.w;
  sq.px.resize(img.px.size());
  for (std::size_t i = 0; i < img.px.size(); ++i) sq.px[i] = img.px[i] * img.px[i];
  convolve_nearest(sq, rows, sq_mu, cols);
  out.h = img.h, out.w = img.w;
  out.px.resize(img.px.size());
  for (std::size_t i = 0; i < img.px.size(); ++i) {
    const double m = mu.px[i];
    const double sigma = std::sqrt(std::abs(sq_mu.px[i] - m * m));
    out.px[i] = (img.px[i] - m) / (sigma + 1);
  }
}

/// mmeval's compute_feature of the block rows [r0, r0 + bh), columns [c0, c0 + bw) of `img`:
/// 18 features appended to `feat`.
void block_features(const Image& img, std::int64_t r0, std::int64_t c0, std::int64_t bh,
                    std::int64_t bw, std::vector<double>& feat, std::vector<double>& block,
                    std::vector<double>& prod, std::vector<double>& s1, std::vector<double>& s2) {
  block.resize(static_cast<std::size_t>(bh * bw));
  for (std::int64_t r = 0; r < bh; ++r)
    for (std::int64_t c = 0; c < bw; ++c)
      block[static_cast<std::size_t>(r * bw + c)] = img.at(r0 + r, c0 + c);
  const Aggd a = estimate_aggd(block, s1, s2);
  feat.push_back(a.alpha);
  feat.push_back((a.beta_l + a.beta_r) / 2);
  static constexpr std::array<std::array<std::int64_t, 2>, 4> kShifts{
      {{0, 1}, {1, 0}, {1, 1}, {1, -1}}};
  prod.resize(block.size());
  for (const auto& s : kShifts) {
    // np.roll(block, s, axis=(0, 1)): rolled[r][c] = block[(r - s0) mod bh][(c - s1) mod bw].
    for (std::int64_t r = 0; r < bh; ++r) {
      const std::int64_t rr = ((r - s[0]) % bh + bh) % bh;
      for (std::int64_t c = 0; c < bw; ++c) {
        const std::int64_t cc = ((c - s[1]) % bw + bw) % bw;
        prod[static_cast<std::size_t>(r * bw + c)] = block[static_cast<std::size_t>(r * bw + c)] *
                                                     block[static_cast<std::size_t>(rr * bw + cc)];
      }
    }
    const Aggd p = estimate_aggd(prod, s1, s2);
    const double mean =
        (p.beta_r - p.beta_l) * (cephes_gamma(2 / p.alpha) / cephes_gamma(1 / p.alpha));
    feat.insert(feat.end(), {p.alpha, mean, p.beta_l, p.beta_r});
  }
}

// ---- MATLAB-like imresize by 0.5 --------------------------------------------------------------

/// mmeval's get_weights_indices for scale 0.5 (kernel width 8, 10 taps of which the last 2 are
/// all-zero columns and dropped): every output pixel i takes input pixels 2i - 3 .. 2i + 4
/// (mirrored at the edges: -1 -> 0, L -> L - 1) with the weights 0.5 cubic(0.5 (3.5 - j)),
/// computed in float32 and divided by their float32 sum, which is exactly 1.
constexpr std::array<float, 8> kResizeWeights{-0.01171875f, -0.03515625f, 0.11328125f,
                                              0.43359375f,  0.43359375f,  0.11328125f,
                                              -0.03515625f, -0.01171875f};

std::int64_t mirror(std::int64_t i, std::int64_t len) {
  i = ((i % (2 * len)) + 2 * len) % (2 * len);
  return i < len ? i : 2 * len - 1 - i;
}

/// mmeval's matlab_resize(img / 255., 0.5) * 255.: the image cast to float32, resized along rows
/// then columns, each output the float32 sum of the 8 weighted inputs in order, times 255 in
/// float64.
void halve(const Image& img, Image& out) {
  const std::int64_t oh = (img.h + 1) / 2, ow = (img.w + 1) / 2;
  std::vector<float> f(img.px.size());
  for (std::size_t i = 0; i < img.px.size(); ++i) f[i] = static_cast<float>(img.px[i] / 255.);
  std::vector<float> tmp(static_cast<std::size_t>(oh * img.w));
  for (std::int64_t i = 0; i < oh; ++i) {
    std::array<const float*, 8> src{};
    for (std::size_t j = 0; j < 8; ++j)
      src[j] = f.data() + mirror(2 * i - 3 + static_cast<std::int64_t>(j), img.h) * img.w;
    for (std::int64_t c = 0; c < img.w; ++c) {
      float acc = src[0][c] * kResizeWeights[0];
      for (std::size_t j = 1; j < 8; ++j) acc += src[j][c] * kResizeWeights[j];
      tmp[static_cast<std::size_t>(i * img.w + c)] = acc;
    }
  }
  out.h = oh, out.w = ow;
  out.px.resize(static_cast<std::size_t>(oh * ow));
  for (std::int64_t i = 0; i < ow; ++i) {
    std::array<std::int64_t, 8> src{};
    for (std::size_t j = 0; j < 8; ++j)
      src[j] = mirror(2 * i - 3 + static_cast<std::int64_t>(j), img.w);
    for (std::int64_t r = 0; r < oh; ++r) {
      const float* row = tmp.data() + r * img.w;
      float acc = row[src[0]] * kResizeWeights[0];
      for (std::size_t j = 1; j < 8; ++j) acc += row[src[j]] * kResizeWeights[j];
      out.at(r, i) = static_cast<double>(acc) * 255.;
    }
  }
}

// ---- the score --------------------------------------------------------------------------------

/// Workspace of one NIQE computation.
struct Work {
  Image scaled, norm, mu, sq, sq_mu;
  std::vector<std::int64_t> cols;
  std::vector<double> block, prod, s1, s2, feat;
};

/// NIQE of a rounded gray image (h, w multiples of 96, at least 2 blocks); NaN when fewer than 2
/// blocks have finite features (the caller reports it).
double score(const Image& img, Work& w) {
  const std::int64_t nh = img.h / kBlock, nw = img.w / kBlock, nb = nh * nw;
  std::vector<double> dist(static_cast<std::size_t>(nb * kFeatures));
  const Image* cur = &img;
  for (std::int64_t scale = 1; scale <= 2; ++scale) {
    mscn(*cur, w.norm, w.mu, w.sq, w.sq_mu, w.cols);
    const std::int64_t bs = kBlock / scale;
    std::int64_t b = 0;
    for (std::int64_t bw = 0; bw < nw; ++bw)
      for (std::int64_t bh = 0; bh < nh; ++bh, ++b) {
        w.feat.clear();
        block_features(w.norm, bh * bs, bw * bs, bs, bs, w.feat, w.block, w.prod, w.s1, w.s2);
        std::copy(w.feat.begin(), w.feat.end(),
                  dist.begin() + b * kFeatures + (scale - 1) * (kFeatures / 2));
      }
    if (scale == 1) {
      halve(img, w.scaled);
      cur = &w.scaled;
    }
  }
  // np.nanmean(axis=0): per feature, the non-NaN values summed block by block, / their count.
  std::array<double, kFeatures> mu_d{}, d{};
  for (int j = 0; j < kFeatures; ++j) {
    double sum = 0.0;
    std::int64_t n = 0;
    for (std::int64_t i = 0; i < nb; ++i) {
      const double v = dist[static_cast<std::size_t>(i * kFeatures + j)];
      if (!std::isnan(v)) sum += v, ++n;
    }
    mu_d[static_cast<std::size_t>(j)] = sum / static_cast<double>(n);
  }
  // np.cov(rows without NaN, rowvar=False): means summed block by block, centred products,
  // times 1 / (n - 1).
  std::vector<std::int64_t> valid;
  for (std::int64_t i = 0; i < nb; ++i) {
    bool ok = true;
    for (int j = 0; j < kFeatures; ++j)
      ok = ok && !std::isnan(dist[static_cast<std::size_t>(i * kFeatures + j)]);
    if (ok) valid.push_back(i);
  }
  const auto nv = static_cast<std::int64_t>(valid.size());
  if (nv < 2) return std::numeric_limits<double>::quiet_NaN();
  std::array<double, kFeatures> avg{};
  for (int j = 0; j < kFeatures; ++j) {
    double sum = 0.0;
    for (auto i : valid) sum += dist[static_cast<std::size_t>(i * kFeatures + j)];
    avg[static_cast<std::size_t>(j)] = sum / static_cast<double>(nv);
  }
  std::vector<double> x(static_cast<std::size_t>(nv * kFeatures));
  for (std::int64_t k = 0; k < nv; ++k)
    for (int j = 0; j < kFeatures; ++j)
      x[static_cast<std::size_t>(k * kFeatures + j)] =
          dist[static_cast<std::size_t>(valid[static_cast<std::size_t>(k)] * kFeatures + j)] -
          avg[static_cast<std::size_t>(j)];
  const double fact = 1.0 / static_cast<double>(nv - 1);
  // M = (S_p + S_d) / 2, then its Cholesky factor L (M = L L^T), in place (lower triangle).
  std::array<double, kFeatures * kFeatures> m{};
  for (int a = 0; a < kFeatures; ++a)
    for (int c = 0; c <= a; ++c) {
      double s = 0.0;
      for (std::int64_t k = 0; k < nv; ++k)
        s += x[static_cast<std::size_t>(k * kFeatures + a)] *
             x[static_cast<std::size_t>(k * kFeatures + c)];
      m[static_cast<std::size_t>(a * kFeatures + c)] =
          (kCovPrisParam[a * kFeatures + c] + s * fact) / 2;
    }
  for (int j = 0; j < kFeatures; ++j) {
    double diag = m[static_cast<std::size_t>(j * kFeatures + j)];
    for (int k = 0; k < j; ++k)
      diag -= m[static_cast<std::size_t>(j * kFeatures + k)] *
              m[static_cast<std::size_t>(j * kFeatures + k)];
    if (!(diag > 0.0)) return std::numeric_limits<double>::quiet_NaN();
    const double ljj = std::sqrt(diag);
    m[static_cast<std::size_t>(j * kFeatures + j)] = ljj;
    for (int i = j + 1; i < kFeatures; ++i) {
      double s = m[static_cast<std::size_t>(i * kFeatures + j)];
      for (int k = 0; k < j; ++k)
        s -= m[static_cast<std::size_t>(i * kFeatures + k)] *
             m[static_cast<std::size_t>(j * kFeatures + k)];
      m[static_cast<std::size_t>(i * kFeatures + j)] = s / ljj;
    }
  }
  // d M^-1 d^T = |L^-1 d|^2.
  for (int j = 0; j < kFeatures; ++j)
    d[static_cast<std::size_t>(j)] = kMuPrisParam[j] - mu_d[static_cast<std::size_t>(j)];
  double quality = 0.0;
  for (int i = 0; i < kFeatures; ++i) {
    double s = d[static_cast<std::size_t>(i)];
    for (int k = 0; k < i; ++k)
      s -= m[static_cast<std::size_t>(i * kFeatures + k)] * d[static_cast<std::size_t>(k)];
    d[static_cast<std::size_t>(i)] = s / m[static_cast<std::size_t>(i * kFeatures + i)];
    quality += d[static_cast<std::size_t>(i)] * d[static_cast<std::size_t>(i)];
  }
  return std::sqrt(quality);
}

// ---- the gray image -----------------------------------------------------------------------------

/// OpenCV's float32 RGB2GRAY / BGR2GRAY of one pixel (a0, a1, a2: channels in memory order, k:
/// their coefficients) at column `col` of a row of `width` pixels, as Intel IPP computed it for
/// the reference (see the top of the file): blocks of 8 pixels fma(a2, k2, fma(a0, k0, a1 k1)); a
/// following block of 4 (when 4 or more pixels are left) the same but lanes 0 and 2
/// fma(a2, k2, fma(a1, k1, a0 k0)); the last pixels as the blocks of 8.
float ipp_gray(float a0, float a1, float a2, const std::array<float, 3>& k, std::int64_t col,
               std::int64_t width) {
  const std::int64_t n8 = width / 8 * 8;
  const bool swapped = width - n8 >= 4 && col >= n8 && col < n8 + 4 && (col - n8) % 2 == 0;
  if (swapped) return std::fma(a2, k[2], std::fma(a1, k[1], a0 * k[0]));
  return std::fma(a2, k[2], std::fma(a0, k[0], a1 * k[1]));
}

/// The geometry of one frame: pixel (r, c, ch) is element r*sh + c*sw + ch*sc of `data`.
struct FrameView {
  const void* data = nullptr;
  DType dtype = DType::U8;
  std::int64_t h = 0, w = 0, c = 1, sh = 0, sw = 0, sc = 0;
};

}  // namespace
}  // namespace niqe

namespace {

struct NiqeState {
  ExactSums total;  // one accumulator: the sum of the samples' NIQE values
  std::int64_t samples = 0;
  TALLY_STATE(merge(total), sum(samples))
};

class Niqe final : public TypedMetric<NiqeState> {
 public:
  explicit Niqe(const Params& p)
      : check_(p.owner_or("NIQE")),
        crop_(p.get_size("crop_border", 0)),
        chw_(p.get_string("input_order") == "CHW"),
        y_(p.get_string("convert_to") == "y" || p.get_string("convert_to") == "Y"),
        bgr_(p.get_string("channel_order") == "bgr") {
    if (crop_ < 0) p.fail("crop_border", "must be >= 0, got " + std::to_string(crop_));
  }

 protected:
  void update(NiqeState& state, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    ExactSum acc;
    if (!state.total.empty()) {
      if (state.total.size() != ExactSum::kWords || !state.total.normalized())
        check_.fail_runtime(std::string("the state is corrupt"));
      acc.merge(state.total.data());
    }
    const FieldReader pred(batch, kPred, check_, state.samples, 2, 4);
    for (std::int64_t i = 0; i < batch.size(); ++i) {
      const std::int64_t sample = state.samples + i;
      const SampleView s = pred.sample(i);
      const double v = sample_value(s, sample);
      acc.add(v);
    }
    acc.normalize();
    state.total.assign(acc.words().begin(), acc.words().end());
    state.samples += batch.size();
  }

  Value compute(const NiqeState& s) const override {
    if (s.samples == 0) check_.fail("no samples");
    if (s.total.mismatched() || s.total.size() != ExactSum::kWords || !s.total.normalized())
      check_.fail_runtime(std::string("the state is corrupt"));
    ExactSum acc;
    acc.merge(s.total.data());
    Value out = Value::map();
    out.set("niqe", acc.value() / static_cast<double>(s.samples));
    return out;
  }

 private:
  /// NIQE of one sample: an image, or the mean over a video's frames (summed in order).
  double sample_value(const SampleView& s, std::int64_t sample) {
    const auto sz = [&](int d) { return s.shape[static_cast<std::size_t>(d)]; };
    std::int64_t frames = 1, fdims = s.ndim;
    if (s.ndim == 4) frames = sz(0), fdims = 3;
    const int o = s.ndim == 4 ? 1 : 0;
    niqe::FrameView f;
    f.dtype = s.dtype;
    if (fdims == 2) {
      f.h = sz(o), f.w = sz(o + 1), f.c = 1, f.sh = f.w, f.sw = 1, f.sc = 0;
    } else if (!chw_) {
      f.h = sz(o), f.w = sz(o + 1), f.c = sz(o + 2), f.sh = f.w * f.c, f.sw = f.c, f.sc = 1;
    } else {
      f.c = sz(o), f.h = sz(o + 1), f.w = sz(o + 2), f.sh = f.w, f.sw = 1, f.sc = f.h * f.w;
    }
    const std::string where = "sample " + std::to_string(sample) + " (" + s.describe() + ", " +
                              (fdims == 2 ? std::string("HW")
                               : chw_     ? "CHW"
                                          : "HWC") +
                              ")";
    if (f.c != 1 && f.c != 3)
      check_.fail(kPred, where + ": convert_to " + std::string(y_ ? "y" : "gray") +
                             " needs 3 channels (or 1: an image already gray), got " +
                             std::to_string(f.c));
    const std::int64_t h = f.h - 2 * crop_, w = f.w - 2 * crop_;
    if (h < niqe::kBlock || w < niqe::kBlock || (h < 2 * niqe::kBlock && w < 2 * niqe::kBlock))
      check_.fail(kPred, where + ": NIQE needs at least two 96x96 blocks after cropping " +
                             std::to_string(crop_) + " pixels from each border, got " +
                             std::to_string(std::max<std::int64_t>(h, 0)) + "x" +
                             std::to_string(std::max<std::int64_t>(w, 0)) +
                             " pixels (mmeval fails on it)");
    const std::int64_t frame_elems = f.h * f.w * f.c;
    double sum = 0.0;  // mmeval: result_sum = 0; result_sum += each frame's value
    for (std::int64_t t = 0; t < frames; ++t) {
      f.data = static_cast<const char*>(s.data) +
               static_cast<std::size_t>(t * frame_elems) * dtype_size(s.dtype);
      gray(f, sample);
      const double v = niqe::score(img_, work_);
      if (!std::isfinite(v))
        check_.fail(kPred, where + (frames > 1 ? ", frame " + std::to_string(t) : "") +
                               ": fewer than two of its 96x96 blocks have finite features "
                               "(flat blocks have none), so NIQE's covariance is undefined "
                               "(mmeval fails on it)");
      sum += v;
    }
    return frames == 1 ? sum : sum / static_cast<double>(frames);
  }

  /// The frame as mmeval's compute_niqe sees it after reorder_and_crop and round(), cut to whole
  /// 96x96 blocks, into img_.
  void gray(const niqe::FrameView& f, std::int64_t sample) {
    const std::int64_t h = f.h - 2 * crop_, w = f.w - 2 * crop_;
    img_.h = h / niqe::kBlock * niqe::kBlock;
    img_.w = w / niqe::kBlock * niqe::kBlock;
    img_.px.resize(static_cast<std::size_t>(img_.h * img_.w));
    std::array<float, 3> k{0.299f, 0.587f, 0.114f};
    if (bgr_) std::swap(k[0], k[2]);
    const bool nan = visit_pixels(f.dtype, f.data, [&](const auto* px) {
      bool found = false;
      for (std::int64_t r = 0; r < img_.h; ++r)
        for (std::int64_t c = 0; c < img_.w; ++c) {
          const std::int64_t col = c + crop_;
          const auto* p = px + (r + crop_) * f.sh + col * f.sw;
          double v;
          if (f.c == 1) {
            v = static_cast<double>(static_cast<float>(p[0]));
          } else if (y_) {
            v = y_of(static_cast<float>(p[0]), static_cast<float>(p[f.sc]),
                     static_cast<float>(p[2 * f.sc]), bgr_);
          } else {
            const float a0 = static_cast<float>(p[0]) / 255.0f;
            const float a1 = static_cast<float>(p[f.sc]) / 255.0f;
            const float a2 = static_cast<float>(p[2 * f.sc]) / 255.0f;
            v = static_cast<double>(niqe::ipp_gray(a0, a1, a2, k, col, f.w) * 255.0f);
          }
          found |= v != v;
          img_.at(r, c) = std::nearbyint(v);
        }
      return found;
    });
    if (nan) check_.fail(kPred, "sample " + std::to_string(sample) + " holds NaN pixels");
  }

  InputChecker check_;
  std::int64_t crop_;
  bool chw_, y_, bgr_;
  niqe::Image img_;
  niqe::Work work_;
};

}  // namespace

ComponentInfo niqe_info() {
  return with_results(
      metric<Niqe>(
          "NIQE",
          "Natural Image Quality Evaluator: a no-reference quality score of each image (lower is "
          "better), the distance of its natural-scene statistics (MSCN coefficients in 96x96 "
          "blocks at 2 scales) from LIVE's pristine-image model, averaged over images (a video: "
          "over "
          "its frames). mmeval's NaturalImageQualityEvaluator, step by step in its float32/float64 "
          "precision; key niqe.",
          {
              param(
                  "crop_border", ParamType::Int,
                  "Pixels cropped from each border of every image (frame) before NIQE is computed; "
                  "0 keeps all (mmeval's crop_border).")
                  .def(0),
              param(
                  "input_order", ParamType::String,
                  "Layout of a 3-D image (or of each frame of a video [T, ...]): HWC or CHW. "
                  "Defaults to HWC, the layout of tally's image readers; mmeval's default is CHW.")
                  .def("HWC")
                  .choices({"HWC", "CHW"}),
              param(
                  "convert_to", ParamType::String,
                  "The one channel NIQE reads from a 3-channel image: gray (OpenCV's RGB2GRAY, "
                  "0.299 R + 0.587 G + 0.114 B, in float32 as mmeval computes it) or y (BasicSR's "
                  "Y channel, ITU-R BT.601). A one-channel image is used as it is.")
                  .def("gray")
                  .choices({"gray", "Gray", "GRAY", "y", "Y"}),
              param("channel_order", ParamType::String,
                    "Order of the 3 channels: rgb or bgr (mmeval's channel_order).")
                  .def("rgb")
                  .choices({"rgb", "bgr"}),
          },
          {InputSpec{kPred,
                     "Images to score: dense [N, H, W, C] / [N, H, W] / videos [N, T, H, W, C], or "
                     "ragged, one [H, W, C] / [H, W] / [T, H, W, C] tensor a sample (C first with "
                     "input_order CHW; C is 3, or 1 for a gray image); uint8, uint16, float32 or "
                     "float64, on the 0..255 scale; at least 96x96 and two 96x96 blocks after the "
                     "crop.",
                     true}},
          {"NaturalImageQualityEvaluator"}),
      {{"niqe", Better::Lower, Plot::None, "no-reference, mean over images"}});
}
TALLY_COMPONENT(niqe_info)

}  // namespace tally::restoration
