// The per-signal kernels of the audio metrics, written step by step as torchmetrics 1.9 computes
// them in float64 (torchmetrics/functional/audio/sdr.py), so that the values agree to rounding:
// the same eps, the same order of subtractions and divisions. Where torch uses an FFT (SDR's
// correlations, fast-bss-eval's Toeplitz and circulant products) this computes the same sums
// directly, which is exact math of the same quantities (differences are rounding, 1e-16 relative).
//
// Built with -O2 in every configuration (CMakeLists.txt): SDR's L x L elimination is the hot loop,
// and an -O0 sanitizer build would make the unit tests slow.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <optional>
#include <vector>

#include "common.hpp"

namespace tally::audio {

namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();  // torch.finfo(float64).eps

double mean(const double* x, std::int64_t n) {
  double s = 0.0;
  for (std::int64_t i = 0; i < n; ++i) s += x[i];
  return s / static_cast<double>(n);
}

/// torch.clamp(v, min=lo): NaN stays NaN.
double clamp_min(double v, double lo) { return v < lo ? lo : v; }

/// Gaussian elimination with partial pivoting (LAPACK's getrf + getrs, unblocked): solves
/// A x = b in place (A row-major n x n, destroyed; b becomes x). False when A is singular (a zero
/// pivot), where torch.linalg.solve raises.
bool lu_solve(std::vector<double>& a, std::vector<double>& b, std::size_t n) {
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t piv = k;
    double best = std::abs(a[k * n + k]);
    for (std::size_t i = k + 1; i < n; ++i)
      if (std::abs(a[i * n + k]) > best) best = std::abs(a[i * n + k]), piv = i;
    if (best == 0.0 || std::isnan(best)) return false;
    if (piv != k) {
      std::swap_ranges(a.begin() + static_cast<std::ptrdiff_t>(k * n),
                       a.begin() + static_cast<std::ptrdiff_t>(k * n + n),
                       a.begin() + static_cast<std::ptrdiff_t>(piv * n));
      std::swap(b[k], b[piv]);
    }
    const double inv = 1.0 / a[k * n + k];
    const double* rk = a.data() + k * n;
    for (std::size_t i = k + 1; i < n; ++i) {
      double* ri = a.data() + i * n;
      const double f = ri[k] * inv;
      ri[k] = f;
      if (f == 0.0) continue;
      for (std::size_t j = k + 1; j < n; ++j) ri[j] -= f * rk[j];
      b[i] -= f * b[k];
    }
  }
  for (std::size_t k = n; k-- > 0;) {
    double s = b[k];
    const double* rk = a.data() + k * n;
    for (std::size_t j = k + 1; j < n; ++j) s -= rk[j] * b[j];
    b[k] = s / rk[k];
  }
  return true;
}

/// fast_bss_eval.torch.cgd.toeplitz_conjugate_gradient(acf, xcorr, n_iter): preconditioned
/// conjugate gradient on the symmetric Toeplitz system with first column `col`, preconditioned by
/// the optimal circulant approximation (T. Chan's), with fast-bss-eval's clamps.
std::vector<double> toeplitz_cg(const std::vector<double>& col, const std::vector<double>& b,
                                std::int64_t n_iter) {
  const std::size_t n = col.size();
  // The circulant preconditioner's first column: c_j = col_j (n - j) / n + col_{n-j} j / n.
  std::vector<double> c(n);
  c[0] = col[0];
  {
    std::vector<double> w(n > 0 ? n - 1 : 0);
    for (std::size_t j = 1; j < n; ++j)
      w[j - 1] = col[j] * (static_cast<double>(n - j) / static_cast<double>(n));
    for (std::size_t j = 1; j < n; ++j) c[j] = w[j - 1] + w[n - 1 - j];
  }
  // Its eigenvalues (rfft(c): c is symmetric, so they are real) and the inverse's, as
  // conj(C) / clamp(|C|^2, min=1e-6); then the inverse's first column m = irfft(D, n).
  std::vector<double> cosine(n);
  for (std::size_t k = 0; k < n; ++k)
    cosine[k] = std::cos(2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n));
  const std::size_t half = n / 2 + 1;
  std::vector<double> d(half);
  for (std::size_t k = 0; k < half; ++k) {
    double ck = 0.0;
    for (std::size_t j = 0; j < n; ++j) ck += c[j] * cosine[(j * k) % n];
    d[k] = ck / clamp_min(ck * ck, 1e-6);
  }
  std::vector<double> m(n);
  for (std::size_t j = 0; j < n; ++j) {
    double s = d[0];
    const std::size_t upper = n % 2 == 0 ? n / 2 : half;  // the bins paired with a mirror
    for (std::size_t k = 1; k < upper; ++k) s += 2.0 * d[k] * cosine[(j * k) % n];
    if (n % 2 == 0 && n > 1) s += d[n / 2] * ((j % 2 == 0) ? 1.0 : -1.0);
    m[j] = s / static_cast<double>(n);
  }
  const auto toeplitz = [&](const std::vector<double>& x, std::vector<double>& y) {
    for (std::size_t i = 0; i < n; ++i) {
      double s = 0.0;
      for (std::size_t j = 0; j < n; ++j) s += col[i > j ? i - j : j - i] * x[j];
      y[i] = s;
    }
  };
  const auto precond = [&](const std::vector<double>& x, std::vector<double>& y) {
    for (std::size_t i = 0; i < n; ++i) {
      double s = 0.0;
      for (std::size_t j = 0; j < n; ++j) s += m[(i + n - j) % n] * x[j];
      y[i] = s;
    }
  };
  const auto dot = [&](const std::vector<double>& x, const std::vector<double>& y) {
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i) s += x[i] * y[i];
    return s;
  };
  std::vector<double> x(n, 0.0), r = b, z(n), p, ap(n);
  precond(r, z);
  p = z;
  double rsold = dot(r, z);
  for (std::int64_t it = 0; it < n_iter; ++it) {
    toeplitz(p, ap);
    const double alpha = rsold / clamp_min(dot(p, ap), 1e-6);
    for (std::size_t i = 0; i < n; ++i) x[i] += alpha * p[i];
    // fast-bss-eval's `if epoch + 1 % 5 == 0` never holds: the residual is always updated.
    for (std::size_t i = 0; i < n; ++i) r[i] -= alpha * ap[i];
    precond(r, z);
    const double rsnew = dot(r, z);
    const double beta = rsnew / clamp_min(rsold, 1e-6);
    for (std::size_t i = 0; i < n; ++i) p[i] = z[i] + beta * p[i];
    rsold = rsnew;
  }
  return x;
}

}  // namespace

double si_sdr(const double* preds, const double* target, std::int64_t n, bool zero_mean) {
  std::vector<double> p(preds, preds + n), t(target, target + n);
  if (zero_mean) {
    const double mt = mean(t.data(), n), mp = mean(p.data(), n);
    for (auto& v : t) v -= mt;
    for (auto& v : p) v -= mp;
  }
  double pt = 0.0, tt = 0.0;
  for (std::int64_t i = 0; i < n; ++i) pt += p[i] * t[i], tt += t[i] * t[i];
  const double alpha = (pt + kEps) / (tt + kEps);
  double ss = 0.0, nn = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double scaled = alpha * t[i];
    const double noise = scaled - p[i];
    ss += scaled * scaled;
    nn += noise * noise;
  }
  return 10.0 * std::log10((ss + kEps) / (nn + kEps));
}

std::optional<double> sdr(const double* preds, const double* target, std::int64_t n,
                          const SdrOptions& o) {
  std::vector<double> p(preds, preds + n), t(target, target + n);
  if (o.zero_mean) {
    const double mp = mean(p.data(), n), mt = mean(t.data(), n);
    for (auto& v : p) v -= mp;
    for (auto& v : t) v -= mt;
  }
  // Unit norm (the norm clamped at 1e-6).
  const auto normalize = [n](std::vector<double>& x) {
    double s = 0.0;
    for (std::int64_t i = 0; i < n; ++i) s += x[i] * x[i];
    const double norm = clamp_min(std::sqrt(s), 1e-6);
    for (auto& v : x) v /= norm;
  };
  normalize(t);
  normalize(p);
  // torch's correlations are circular over n_fft = 2^ceil(log2(2n - 1)) points and cut to
  // filter_length: lag k pairs t[i] with x[(i + k) mod n_fft] (zero past n). With n_fft >= 2n - 1
  // no wrapped term is nonzero unless filter_length > n_fft - n + 1 (signals shorter than the
  // filter), where the last lags hold the negative ones: computed here the same way.
  std::int64_t n_fft = 1;
  while (n_fft < 2 * n - 1) n_fft *= 2;
  const auto len = static_cast<std::size_t>(std::min(o.filter_length, n_fft));
  std::vector<double> r(len), b(len);
  for (std::size_t k = 0; k < len; ++k) {
    double rk = 0.0, bk = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t j = i + static_cast<std::int64_t>(k);
      if (j >= n_fft) j -= n_fft;
      if (j >= n) continue;
      rk += t[i] * t[j];
      bk += t[i] * p[j];
    }
    r[k] = rk;
    b[k] = bk;
  }
  if (o.load_diag) r[0] += *o.load_diag;
  std::vector<double> sol;
  if (o.use_cg_iter) {
    sol = toeplitz_cg(r, b, *o.use_cg_iter);
  } else {
    std::vector<double> a(len * len);
    for (std::size_t i = 0; i < len; ++i)
      for (std::size_t j = 0; j < len; ++j) a[i * len + j] = r[i > j ? i - j : j - i];
    sol = b;
    if (!lu_solve(a, sol, len)) return std::nullopt;
  }
  double coh = 0.0;
  for (std::size_t l = 0; l < len; ++l) coh += b[l] * sol[l];
  const double ratio = coh / (1.0 - coh);
  return 10.0 * std::log10(ratio);
}

}  // namespace tally::audio
