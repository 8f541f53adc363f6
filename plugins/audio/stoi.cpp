// ShortTimeObjectiveIntelligibility (STOI): how intelligible a processed (denoised, separated)
// speech signal is, from its short-time band envelopes' correlation with the clean speech's
// (Taal et al., ICASSP 2010 / IEEE TASLP 2011); extended: ESTOI (Jensen & Taal, IEEE TASLP 2016).
//
// Algorithm, pystoi 0.4.1's stoi(x = target, y = preds, fs, extended), step by step in float64:
//  1. fs != 10000: both signals resampled to 10 kHz by utils.resample_oct: a Kaiser-windowed sinc
//     (Octave's resample design: 60 dB rejection, roll-off a tenth of the cutoff 1 / (2 max(p, q))
//     for the reduced ratio p / q = 10000 / fs; normalised to unit sum) applied by
//     scipy.signal.resample_poly(x, 10000, fs, window=h) (upfirdn, zero padding).
//  2. Silent frames removed: 256-sample frames, hop 128, times the MATLAB hanning(256) window
//     (numpy's hanning(258)[1:-1]); frames whose energy 20 log10(|frame| + eps) is more than 40 dB
//     under the loudest frame of the target are dropped from both signals, the kept windowed
//     frames overlap-added.
//  3. STFT of the result: the same framing and window, 512-point FFT; the power of each bin summed
//     over 15 third-octave bands (centres 150 Hz * 2^(k/3)), square-rooted.
//  4. Fewer than 30 frames left: the value is 1e-5 (pystoi warns and returns that).
//  5. Segments of 30 frames (every start): per band, preds' envelope scaled to the target's norm,
//     clipped at (1 + 10^(15/20)) times the target's, both mean-removed and normalised; the value
//     is the mean of the band correlations over bands and segments. extended: each segment's
//     15 x 30 matrix normalised by rows (bands, over time) then by columns (frames, over bands),
//     the value the mean over segments of the sum of the products / 30.
// The result is the mean over every signal ([N, T]: N values; [N, S, T]: N S values).
//
// Reference: torchmetrics 1.9.0 torchmetrics.audio.ShortTimeObjectiveIntelligibility(fs,
// extended).set_dtype(torch.float64), update(preds.double(), target.double()), compute(), which
// calls pystoi 0.4.1's stoi(target_i, preds_i, fs, extended) per signal (numpy 2.4, scipy 1.17).
// The sums are numpy's (pairwise summation where numpy reduces along a contiguous axis), the
// window and filter design numpy's formulas (np.i0's Chebyshev series): the differences left are
// rounding (the FFT, BLAS's band sums, libm), measured at most 7e-15 relative on
// tests/reference/expected_stoi.json. Two things pystoi does that are not replicated:
// extended=True dithers each segment with EPS * np.random.standard_normal (EPS = 2^-52) before
// each normalisation, so pystoi's own value moves with numpy's random state (1e-14 relative on
// speech; tally computes the dither-free value); where a band or a frame of a segment is exactly
// constant (digital silence in a band), that dither is all there is and pystoi's value is random,
// tally's NaN. A signal of at most 256 samples once at 10 kHz has no frame: pystoi raises, tally
// gives an InputError. Float32 inputs are computed in float64, as pystoi does (its window and
// filter are float64 arrays). A too-short signal's 1e-5 is float64's 1e-5, as torchmetrics gives
// it for [N, T] batches; for a single 1-D signal torchmetrics wraps pystoi's Python float 1e-5 in
// a float32 tensor (9.99999974737875e-06), which tally does not copy.
// fs: 1 .. 2^20 Hz, and 10000 / fs must reduce to terms of at most 65536 (the resampling filter
// has about 72 times the larger term taps): every common rate qualifies.
//
// Example: fs 8000, 8000 samples i; target 0.5 sin(2 pi 0.0375 i) + 0.25 sin(2 pi 0.1 i) (300 and
// 800 Hz), both tones on for 800 samples and off for the next 800; preds the same plus
// 0.1 sin(2 pi 0.2 i) (1600 Hz, always on) (tests/data/audio/stoi_doc_*.npy) -> 0.989025
// (extended: 0.859504) (pystoi 0.4.1: stoi(target, preds, 8000) = 0.9890252472778004;
// extended=True: 0.8595037602820043).
//
// State: the exact sum of the per-signal values (ExactSum) and their count (MeanState in
// common.hpp): shard-independent bits.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <complex>
#include <cstdint>
#include <numbers>
#include <numeric>
#include <vector>

#include "common.hpp"

namespace tally::audio {
namespace {

constexpr std::int64_t kFs = 10000;   // pystoi's FS
constexpr std::size_t kFrame = 256;   // N_FRAME
constexpr std::size_t kHop = 128;     // N_FRAME / 2
constexpr std::size_t kNfft = 512;    // NFFT
constexpr std::size_t kBins = 257;    // NFFT / 2 + 1
constexpr std::size_t kBands = 15;    // NUMBAND
constexpr std::size_t kSeg = 30;      // N: frames a segment
constexpr double kMinFreq = 150.0;    // MINFREQ
constexpr double kDynRange = 40.0;    // DYN_RANGE
constexpr double kEps = DBL_EPSILON;  // utils.EPS = np.finfo(float).eps
/// The largest reduced max(p, q) of the resampling ratio 10000 / fs: the filter has about
/// 72 max(p, q) taps (2^16: 4.7 M taps, 38 MB).
constexpr std::int64_t kMaxRatioTerm = std::int64_t{1} << 16;

// ---- numpy's arithmetic ---------------------------------------------------------------------

/// numpy's add.reduce over n contiguous float64 values (pairwise_sum: blocks of at most 128 summed
/// with 8 accumulators, larger ranges split in halves rounded to multiples of 8).
double np_sum(const double* a, std::size_t n) {
  if (n < 8) {
    double r = 0.0;
    for (std::size_t i = 0; i < n; ++i) r += a[i];
    return r;
  }
  if (n <= 128) {
    double r[8];
    for (std::size_t j = 0; j < 8; ++j) r[j] = a[j];
    std::size_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (std::size_t j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  std::size_t n2 = n / 2;
  n2 -= n2 % 8;
  return np_sum(a, n2) + np_sum(a + n2, n - n2);
}

/// np.linalg.norm of n contiguous values: sqrt(add.reduce(x * x)).
double np_norm(const double* a, std::size_t n, std::vector<double>& scratch) {
  scratch.resize(n);
  for (std::size_t i = 0; i < n; ++i) scratch[i] = a[i] * a[i];
  return std::sqrt(np_sum(scratch.data(), n));
}

/// numpy's i0 (Cephes' Chebyshev expansions) for x >= 0.
double np_i0(double x) {
  static constexpr double kA[] = {
      -4.4153416464793395e-18, 3.3307945188222384e-17,  -2.431279846547955e-16,
      1.715391285555133e-15,   -1.1685332877993451e-14, 7.676185498604936e-14,
      -4.856446783111929e-13,  2.95505266312964e-12,    -1.726826291441556e-11,
      9.675809035373237e-11,   -5.189795601635263e-10,  2.6598237246823866e-09,
      -1.300025009986248e-08,  6.046995022541919e-08,   -2.670793853940612e-07,
      1.1173875391201037e-06,  -4.4167383584587505e-06, 1.6448448070728896e-05,
      -5.754195010082104e-05,  0.00018850288509584165,  -0.0005763755745385824,
      0.0016394756169413357,   -0.004324309995050576,   0.010546460394594998,
      -0.02373741480589947,    0.04930528423967071,     -0.09490109704804764,
      0.17162090152220877,     -0.3046826723431984,     0.6767952744094761};
  static constexpr double kB[] = {
      -7.233180487874754e-18,  -4.830504485944182e-18,  4.46562142029676e-17,
      3.461222867697461e-17,   -2.8276239805165836e-16, -3.425485619677219e-16,
      1.7725601330565263e-15,  3.8116806693526224e-15,  -9.554846698828307e-15,
      -4.150569347287222e-14,  1.54008621752141e-14,    3.8527783827421426e-13,
      7.180124451383666e-13,   -1.7941785315068062e-12, -1.3215811840447713e-11,
      -3.1499165279632416e-11, 1.1889147107846439e-11,  4.94060238822497e-10,
      3.3962320257083865e-09,  2.266668990498178e-08,   2.0489185894690638e-07,
      2.8913705208347567e-06,  6.889758346916825e-05,   0.0033691164782556943,
      0.8044904110141088};
  const auto chbevl = [](double t, const double* v, std::size_t n) {
    double b0 = v[0], b1 = 0.0, b2 = 0.0;
    for (std::size_t i = 1; i < n; ++i) {
      b2 = b1;
      b1 = b0;
      b0 = t * b1 - b2 + v[i];
    }
    return 0.5 * (b0 - b2);
  };
  if (x <= 8.0) return std::exp(x) * chbevl(x / 2.0 - 2, kA, std::size(kA));
  return std::exp(x) * chbevl(32.0 / x - 2.0, kB, std::size(kB)) / std::sqrt(x);
}

/// MATLAB's hanning(256): numpy's hanning(258)[1:-1], hanning(M) = 0.5 + 0.5 cos(pi n / (M - 1))
/// for n = 1 - M, 3 - M, ..., M - 1.
const std::vector<double>& hann_window() {
  static const std::vector<double> w = [] {
    const double m = static_cast<double>(kFrame + 2);
    std::vector<double> out(kFrame);
    for (std::size_t i = 0; i < kFrame; ++i) {
      const double n = 1.0 - m + 2.0 * static_cast<double>(i + 1);
      out[i] = 0.5 + 0.5 * std::cos(std::numbers::pi * n / (m - 1));
    }
    return out;
  }();
  return w;
}

/// utils.thirdoct(10000, 512, 15, 150): each band's FFT bins [lo, hi).
struct Band {
  std::size_t lo = 0, hi = 0;
};
const std::vector<Band>& third_octave_bands() {
  static const std::vector<Band> bands = [] {
    std::vector<double> f(kBins);
    const double step = static_cast<double>(kFs) / static_cast<double>(kNfft);
    for (std::size_t k = 0; k < kBins; ++k) f[k] = static_cast<double>(k) * step;
    const auto nearest = [&](double v) {  // np.argmin(np.square(f - v)): the first minimum
      std::size_t best = 0;
      double bd = (f[0] - v) * (f[0] - v);
      for (std::size_t k = 1; k < kBins; ++k)
        if (const double d = (f[k] - v) * (f[k] - v); d < bd) bd = d, best = k;
      return best;
    };
    std::vector<Band> out(kBands);
    for (std::size_t i = 0; i < kBands; ++i) {
      const double k = static_cast<double>(i);
      out[i].lo = nearest(kMinFreq * std::pow(2.0, (2 * k - 1) / 6));
      out[i].hi = nearest(kMinFreq * std::pow(2.0, (2 * k + 1) / 6));
    }
    return out;
  }();
  return bands;
}

// ---- resampling to 10 kHz -------------------------------------------------------------------

/// utils.resample_oct(x, 10000, fs) = scipy.signal.resample_poly(x, 10000, fs, window=h / sum h)
/// with h utils._resample_window_oct(10000, fs).
class Resampler {
 public:
  explicit Resampler(std::int64_t fs) {
    const std::int64_t g = std::gcd(kFs, fs);
    up_ = kFs / g;
    down_ = fs / g;
    // _resample_window_oct (p, q divided by their gcd, as floats when it is > 1: the same
    // values).
    const double sc = 1.0 / (2 * static_cast<double>(std::max(up_, down_)));
    const double roll_off = sc / 10;
    const double rejection_db = -20 * -3.0;
    const double len = std::ceil((rejection_db - 8) / (28.714 * roll_off));
    const double beta = 0.1102 * (rejection_db - 8.7);  // rejection_db > 50
    const auto half = static_cast<std::size_t>(len);
    const std::size_t taps = 2 * half + 1;
    std::vector<double> h(taps);
    const double gain = 2 * static_cast<double>(up_) * sc;
    const double m = static_cast<double>(taps);
    const double alpha = (m - 1) / 2.0;
    const double i0_beta = np_i0(beta);
    for (std::size_t i = 0; i < taps; ++i) {
      const double t = -len + static_cast<double>(i);
      double x = std::numbers::pi * (2 * sc * t);  // np.sinc
      if (x == 0) x = kEps;
      const double ideal = gain * (std::sin(x) / x);
      const double r = (static_cast<double>(i) - alpha) / alpha;
      const double kaiser = np_i0(beta * std::sqrt(1 - r * r)) / i0_beta;
      h[i] = kaiser * ideal;
    }
    const double total = np_sum(h.data(), taps);
    // resample_poly: h = window * up, zero-padded in front so that outputs land on the centre.
    const auto down = static_cast<std::size_t>(down_);
    pre_pad_ = down - half % down;
    pre_remove_ = (half + pre_pad_) / down;
    h_.assign(pre_pad_, 0.0);
    for (const double v : h) h_.push_back(v / total * static_cast<double>(up_));
  }

  bool identity() const { return up_ == down_; }

  /// The resampled length of n samples: ceil(n up / down).
  std::int64_t out_len(std::int64_t n) const { return (n * up_ + down_ - 1) / down_; }

  void apply(const double* x, std::int64_t n_in, std::vector<double>& y) const {
    const std::int64_t n_out = out_len(n_in);
    const auto up = up_, len = static_cast<std::int64_t>(h_.size());
    y.assign(static_cast<std::size_t>(n_out), 0.0);
    for (std::int64_t k = 0; k < n_out; ++k) {
      // upfirdn's output k + pre_remove: sum over x[i] h[t + up m], i = xi - m, ascending i.
      const std::int64_t n = (k + static_cast<std::int64_t>(pre_remove_)) * down_;
      const std::int64_t t = n % up, xi = n / up;
      const std::int64_t m_hi = std::min((len - 1 - t) / up, xi);
      const std::int64_t m_lo = std::max<std::int64_t>(0, xi - (n_in - 1));
      double acc = 0.0;
      for (std::int64_t mm = m_hi; mm >= m_lo; --mm)
        acc = acc + x[xi - mm] * h_[static_cast<std::size_t>(t + up * mm)];
      y[static_cast<std::size_t>(k)] = acc;
    }
  }

 private:
  std::int64_t up_ = 1, down_ = 1;
  std::size_t pre_pad_ = 0, pre_remove_ = 0;
  std::vector<double> h_;
};

// ---- FFT ----------------------------------------------------------------------------------

/// np.fft.rfft(frame, n=512) of a 256-sample frame: an iterative radix-2 FFT in float64 (the same
/// transform as numpy's pocketfft, to rounding); `power[k]` = np.square(np.abs(X[k])).
class Fft512 {
 public:
  Fft512() : tw_(kNfft / 2), rev_(kNfft) {
    for (std::size_t k = 0; k < kNfft / 2; ++k) {
      const double a = -2.0 * std::numbers::pi * static_cast<double>(k) / kNfft;
      tw_[k] = {std::cos(a), std::sin(a)};
    }
    for (std::size_t i = 0; i < kNfft; ++i) {
      std::size_t r = 0;
      for (std::size_t b = 1, j = i; b < kNfft; b <<= 1, j >>= 1) r = (r << 1) | (j & 1);
      rev_[i] = r;
    }
  }

  void power(const double* frame, double* out) {
    for (std::size_t i = 0; i < kNfft; ++i) {
      const std::size_t r = rev_[i];
      buf_[i] = {r < kFrame ? frame[r] : 0.0, 0.0};
    }
    for (std::size_t len = 2; len <= kNfft; len <<= 1) {
      const std::size_t half = len / 2, step = kNfft / len;
      for (std::size_t s = 0; s < kNfft; s += len)
        for (std::size_t j = 0; j < half; ++j) {
          const std::complex<double> w = tw_[j * step];
          const std::complex<double> a = buf_[s + j];
          const std::complex<double> b = buf_[s + j + half];
          const std::complex<double> wb{w.real() * b.real() - w.imag() * b.imag(),
                                        w.real() * b.imag() + w.imag() * b.real()};
          buf_[s + j] = a + wb;
          buf_[s + j + half] = a - wb;
        }
    }
    for (std::size_t k = 0; k < kBins; ++k) {
      const double mag = std::hypot(buf_[k].real(), buf_[k].imag());
      out[k] = mag * mag;
    }
  }

 private:
  std::vector<std::complex<double>> tw_;
  std::vector<std::size_t> rev_;
  std::complex<double> buf_[kNfft];
};

// ---- pystoi.stoi ----------------------------------------------------------------------------

/// The windowed frames of x at 0, 128, ... (while start < len - 256).
std::size_t frame_count(std::size_t len) {
  return len > kFrame ? (len - kFrame + kHop - 1) / kHop : 0;
}

class Stoi {
 public:
  Stoi(std::int64_t fs, bool extended) : resampler_(fs), extended_(extended) {}

  bool resamples() const { return !resampler_.identity(); }
  std::int64_t length_at_10k(std::int64_t n) const {
    return resampler_.identity() ? n : resampler_.out_len(n);
  }

  /// pystoi.stoi(x = clean, y = processed, fs, extended); the length at 10 kHz > 256.
  double operator()(const double* clean, const double* processed, std::int64_t n) {
    const double *x = clean, *y = processed;
    std::size_t len = static_cast<std::size_t>(n);
    if (!resampler_.identity()) {
      resampler_.apply(clean, n, xr_);
      resampler_.apply(processed, n, yr_);
      x = xr_.data(), y = yr_.data(), len = xr_.size();
    }
    remove_silent_frames(x, y, len);
    // STFT band envelopes: [band][frame].
    const std::size_t frames = frame_count(xs_.size());
    if (frames < kSeg) return 1e-5;
    envelopes(xs_, frames, xt_);
    envelopes(ys_, frames, yt_);
    return extended_ ? extended_value(frames) : standard_value(frames);
  }

 private:
  /// utils.remove_silent_frames(x, y, 40, 256, 128) into xs_, ys_.
  void remove_silent_frames(const double* x, const double* y, std::size_t len) {
    const auto& w = hann_window();
    const std::size_t count = frame_count(len);
    energy_.resize(count);
    frame_.resize(kFrame);
    for (std::size_t f = 0; f < count; ++f) {
      const double* xf = x + f * kHop;
      for (std::size_t k = 0; k < kFrame; ++k) frame_[k] = w[k] * xf[k];
      energy_[f] = 20 * std::log10(np_norm(frame_.data(), kFrame, scratch_) + kEps);
    }
    const double top = *std::max_element(energy_.begin(), energy_.end());
    std::size_t kept = 0;
    for (std::size_t f = 0; f < count; ++f) kept += (top - kDynRange - energy_[f]) < 0;
    const std::size_t out_len = (kept - 1) * kHop + kFrame;
    xs_.assign(out_len, 0.0);
    ys_.assign(out_len, 0.0);
    std::size_t j = 0;
    for (std::size_t f = 0; f < count; ++f) {
      if (!((top - kDynRange - energy_[f]) < 0)) continue;
      for (std::size_t k = 0; k < kFrame; ++k) {
        xs_[j * kHop + k] += w[k] * x[f * kHop + k];
        ys_[j * kHop + k] += w[k] * y[f * kHop + k];
      }
      ++j;
    }
  }

  /// sqrt(OBM @ |STFT|^2): env[b * frames + m].
  void envelopes(const std::vector<double>& s, std::size_t frames, std::vector<double>& env) {
    const auto& w = hann_window();
    const auto& bands = third_octave_bands();
    env.assign(kBands * frames, 0.0);
    frame_.resize(kFrame);
    double power[kBins];
    for (std::size_t m = 0; m < frames; ++m) {
      for (std::size_t k = 0; k < kFrame; ++k) frame_[k] = w[k] * s[m * kHop + k];
      fft_.power(frame_.data(), power);
      for (std::size_t b = 0; b < kBands; ++b) {
        double acc = 0.0;
        for (std::size_t k = bands[b].lo; k < bands[b].hi; ++k) acc += power[k];
        env[b * frames + m] = std::sqrt(acc);
      }
    }
  }

  double standard_value(std::size_t frames) {
    const std::size_t segs = frames - kSeg + 1;
    const double clip = 1 + std::pow(10.0, 15.0 / 20);  // 1 + 10 ** (-BETA / 20)
    corr_.resize(segs * kBands * kSeg);
    double xv[kSeg], yv[kSeg];
    for (std::size_t j = 0; j < segs; ++j)
      for (std::size_t b = 0; b < kBands; ++b) {
        const double* xb = xt_.data() + b * frames + j;
        const double* yb = yt_.data() + b * frames + j;
        const double c = np_norm(xb, kSeg, scratch_) / (np_norm(yb, kSeg, scratch_) + kEps);
        for (std::size_t k = 0; k < kSeg; ++k) {
          const double yn = yb[k] * c, lim = xb[k] * clip;
          yv[k] = (std::isnan(yn) || yn < lim) ? yn : lim;  // np.minimum (NaN wins)
          xv[k] = xb[k];
        }
        const double ym = np_sum(yv, kSeg) / static_cast<double>(kSeg);
        const double xm = np_sum(xv, kSeg) / static_cast<double>(kSeg);
        for (std::size_t k = 0; k < kSeg; ++k) yv[k] -= ym, xv[k] -= xm;
        const double yn = np_norm(yv, kSeg, scratch_) + kEps;
        const double xn = np_norm(xv, kSeg, scratch_) + kEps;
        double* out = corr_.data() + (j * kBands + b) * kSeg;
        for (std::size_t k = 0; k < kSeg; ++k) out[k] = (yv[k] / yn) * (xv[k] / xn);
      }
    return np_sum(corr_.data(), corr_.size()) / static_cast<double>(segs * kBands);
  }

  /// utils.row_col_normalize of one segment (without its EPS * standard_normal dither): rows
  /// (bands) mean-removed and scaled to unit norm over time, then columns (frames) over bands.
  void row_col_normalize(const std::vector<double>& env, std::size_t frames, std::size_t j,
                         double* out) {
    for (std::size_t b = 0; b < kBands; ++b) {
      double* row = out + b * kSeg;
      std::copy_n(env.data() + b * frames + j, kSeg, row);
      const double mean = np_sum(row, kSeg) / static_cast<double>(kSeg);
      for (std::size_t k = 0; k < kSeg; ++k) row[k] -= mean;
      scratch_.resize(kSeg);
      for (std::size_t k = 0; k < kSeg; ++k) scratch_[k] = row[k] * row[k];
      const double inv = 1. / std::sqrt(np_sum(scratch_.data(), kSeg));
      for (std::size_t k = 0; k < kSeg; ++k) row[k] = inv * row[k];
    }
    for (std::size_t k = 0; k < kSeg; ++k) {
      double sum = out[k];  // np.mean(axis=1): the bands summed in order
      for (std::size_t b = 1; b < kBands; ++b) sum += out[b * kSeg + k];
      const double mean = sum / static_cast<double>(kBands);
      for (std::size_t b = 0; b < kBands; ++b) out[b * kSeg + k] -= mean;
      double sq = out[k] * out[k];
      for (std::size_t b = 1; b < kBands; ++b) sq += out[b * kSeg + k] * out[b * kSeg + k];
      const double inv = 1. / std::sqrt(sq);
      for (std::size_t b = 0; b < kBands; ++b) out[b * kSeg + k] = out[b * kSeg + k] * inv;
    }
  }

  double extended_value(std::size_t frames) {
    const std::size_t segs = frames - kSeg + 1;
    corr_.resize(segs * kBands * kSeg);
    double xn[kBands * kSeg], yn[kBands * kSeg];
    for (std::size_t j = 0; j < segs; ++j) {
      row_col_normalize(xt_, frames, j, xn);
      row_col_normalize(yt_, frames, j, yn);
      double* out = corr_.data() + j * kBands * kSeg;
      for (std::size_t i = 0; i < kBands * kSeg; ++i)
        out[i] = xn[i] * yn[i] / static_cast<double>(kSeg);
    }
    return np_sum(corr_.data(), corr_.size()) / static_cast<double>(segs);
  }

  Resampler resampler_;
  bool extended_;
  Fft512 fft_;
  std::vector<double> xr_, yr_, xs_, ys_, xt_, yt_, energy_, frame_, scratch_, corr_;
};

std::int64_t read_fs(const Params& p) {
  const std::int64_t fs = p.get_int("fs");
  if (fs <= 0)
    p.fail("fs", "must be the signals' sample rate in Hz (> 0), got " + std::to_string(fs));
  if (fs > kMaxSize)
    p.fail("fs", "must be at most " + std::to_string(kMaxSize) + " Hz, got " + std::to_string(fs));
  const std::int64_t g = std::gcd(kFs, fs);
  if (std::max(kFs, fs) / g > kMaxRatioTerm)
    p.fail("fs", std::to_string(fs) + " Hz: resampling to 10 kHz by " + std::to_string(kFs / g) +
                     " / " + std::to_string(fs / g) + " needs a filter of about 72 * " +
                     std::to_string(std::max(kFs, fs) / g) +
                     " taps; tally allows ratios whose reduced terms are at most " +
                     std::to_string(kMaxRatioTerm));
  return fs;
}

class ShortTimeObjectiveIntelligibility final : public SignalMeanMetric {
 public:
  explicit ShortTimeObjectiveIntelligibility(const Params& p)
      : SignalMeanMetric(p, "ShortTimeObjectiveIntelligibility",
                         "short_time_objective_intelligibility", 1),
        fs_(read_fs(p)),
        stoi_(fs_, p.get_bool("extended")) {}

 protected:
  void signal_values(const Signals& s, const std::string& where,
                     std::vector<double>& out) const override {
    const std::int64_t at10k = stoi_.length_at_10k(s.length);
    if (at10k <= static_cast<std::int64_t>(kFrame))
      check_.fail(kPreds, where + ": " + std::to_string(s.length) + " time steps" +
                              (stoi_.resamples()
                                   ? " (" + std::to_string(at10k) + " once resampled to 10 kHz)"
                                   : std::string()) +
                              ": STOI needs more than 256 at 10 kHz (one 256-sample frame; "
                              "pystoi raises on shorter signals)");
    for (std::int64_t r = 0; r < s.rows; ++r)
      out.push_back(stoi_(s.target_row(r), s.pred_row(r), s.length));
  }

 private:
  std::int64_t fs_;
  mutable Stoi stoi_;  // scratch buffers and the FFT tables; the filter is fixed by fs
};

}  // namespace

ComponentInfo stoi_info() {
  return with_results(
      metric<ShortTimeObjectiveIntelligibility>(
          "ShortTimeObjectiveIntelligibility",
          "Short-time objective intelligibility (STOI; extended: ESTOI), the mean over signals; "
          "key "
          "short_time_objective_intelligibility. Reference: torchmetrics 1.9.0 "
          "torchmetrics.audio.ShortTimeObjectiveIntelligibility(fs, extended) in float64, i.e. "
          "pystoi 0.4.1 stoi(target, preds, fs, extended) per signal (resampled to 10 kHz, silent "
          "frames removed; 1e-5 for fewer than 30 frames left).",
          {param("fs", ParamType::Int,
                 "The signals' sample rate in Hz (resampled to 10 kHz unless "
                 "10000)."),
           param("extended", ParamType::Bool, "Compute extended STOI (ESTOI, Jensen & Taal 2016).")
               .def(false)},
          signal_inputs(), {"STOI"}),
      {{"short_time_objective_intelligibility", Better::Higher, Plot::None,
        "mean STOI (extended: ESTOI) over signals, about 0..1"}});
}
TALLY_COMPONENT(stoi_info)

}  // namespace tally::audio
