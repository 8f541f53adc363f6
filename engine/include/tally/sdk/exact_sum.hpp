// ExactSum: the exact sum of any number of finite doubles, whatever their order, in a fixed
// 67-word accumulator. Rounded to a double only when read, so a sum split over any shards and
// merged gives the same bits as the sum in one piece (docs/architecture.md, "The sync protocol").
//
// The accumulator is a fixed-point number with 2144 bits: word i holds 32 bits of weight
// 2^(32 i - 1074), so every double (2^-1074 .. 2^1024) and sums up to 2^1070 fit. Words are int64:
// a double's 53-bit significand lands in 3 words without carrying, and 2^30 additions fit before
// normalize() must carry (words back to [0, 2^32), the top word signed).
//
// ExactSums: the words of several normalized accumulators as a state field that ranks merge
// exactly (TALLY_STATE's merge()).
//
// Part of the SDK (header-only) so that any metric can keep float sums that give the same bits on
// any number of ranks; used by the regression, classification, text, segmentation, image, audio
// and clustering plugins.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tally/sdk/error.hpp"
#include "tally/sdk/state.hpp"

namespace tally {

class ExactSum {
 public:
  static constexpr std::size_t kWords = 67;
  using Words = std::array<std::int64_t, kWords>;

  /// Adds a finite double (the caller checks finiteness).
  void add(double x) {
    const auto bits = std::bit_cast<std::uint64_t>(x);
    const auto biased = static_cast<std::int64_t>((bits >> 52) & 0x7ff);
    std::uint64_t m = bits & ((std::uint64_t{1} << 52) - 1);
    std::int64_t p = 0;  // x = m * 2^(p - 1074)
    if (biased != 0) m |= std::uint64_t{1} << 52, p = biased - 1;
    if (m == 0) return;
    const auto i = static_cast<std::size_t>(p / 32);
    const auto s = static_cast<unsigned>(p % 32);
    const std::uint64_t lo = (m & ((std::uint64_t{1} << (32 - s)) - 1)) << s;
    const std::uint64_t rest = m >> (32 - s);
    const auto w0 = static_cast<std::int64_t>(lo);
    const auto w1 = static_cast<std::int64_t>(rest & 0xffffffffu);
    const auto w2 = static_cast<std::int64_t>(rest >> 32);
    if (bits >> 63) {
      w_[i] -= w0, w_[i + 1] -= w1, w_[i + 2] -= w2;
    } else {
      w_[i] += w0, w_[i + 1] += w1, w_[i + 2] += w2;
    }
    if (++pending_ >= (std::int64_t{1} << 30)) normalize();
  }

  /// Adds another accumulator's words, normalized (see normalized()).
  void merge(const std::int64_t* words) {
    for (std::size_t i = 0; i < kWords; ++i) w_[i] += words[i];
    normalize();
  }

  /// Subtracts another accumulator exactly.
  void subtract(const ExactSum& other) {
    ExactSum o = other;
    o.normalize();
    for (std::size_t i = 0; i < kWords; ++i) w_[i] -= o.w_[i];
    normalize();
  }

  /// Carries so that words 0..65 lie in [0, 2^32) and word 66 holds the sign: the one
  /// representation of the exact value (so packing it is deterministic).
  void normalize() {
    std::int64_t carry = 0;
    for (std::size_t i = 0; i + 1 < kWords; ++i) {
      const std::int64_t v = w_[i] + carry;
      carry = v >> 32;  // floor division (arithmetic shift)
      w_[i] = v - carry * (std::int64_t{1} << 32);
    }
    w_[kWords - 1] += carry;
    pending_ = 0;
  }

  /// The sum, rounded to a double (within one unit in the last place; deterministic: a function
  /// of the exact value only). +-inf beyond the double range.
  double value() const {
    ExactSum t = *this;
    t.normalize();
    const bool negative = t.w_[kWords - 1] < 0;
    if (negative) {
      for (auto& w : t.w_) w = -w;
      t.normalize();
    }
    std::size_t h = kWords;
    while (h > 0 && t.w_[h - 1] == 0) --h;
    if (h == 0) return 0.0;
    // The top three words carry at least 65 significant bits; below them at most 2^-64 relative.
    double r = 0.0;
    for (std::size_t i = h >= 3 ? h - 3 : 0; i < h; ++i)
      r += std::ldexp(static_cast<double>(t.w_[i]), static_cast<int>(32 * i) - 1074);
    return negative ? -r : r;
  }

  const Words& words() const { return w_; }

  /// Whether `words` (kWords of them, from a packed state) are what normalize() leaves: words
  /// 0..65 in [0, 2^32) and a top word far from overflowing (|w| < 2^40, a sum of 2^1078: sums
  /// that fit are below 2^1070). merge() and value() rely on it: a corrupt state's words could
  /// overflow int64 there.
  static bool normalized(const std::int64_t* words) {
    for (std::size_t i = 0; i + 1 < kWords; ++i)
      if (words[i] < 0 || words[i] >= (std::int64_t{1} << 32)) return false;
    const std::int64_t top = words[kWords - 1];
    return top > -(std::int64_t{1} << 40) && top < (std::int64_t{1} << 40);
  }

 private:
  Words w_{};
  std::int64_t pending_ = 0;
};

/// The normalized words of some ExactSum accumulators, kWords each, one after another: a state
/// field merged across ranks by adding the accumulators exactly (so any sharding gives the same
/// words). Packs as a PackedVector<std::int64_t> (one msgpack bin).
struct ExactSums : PackedVector<std::int64_t> {
  using PackedVector<std::int64_t>::PackedVector;

  /// Adds a later rank's accumulators to these; an empty side (a rank without samples) takes the
  /// other's. RuntimeError when either side is not normalized accumulators (a corrupt state: its
  /// words could overflow int64 here). When the two hold different numbers of accumulators it
  /// keeps these and records it (mismatched()): the ranks read data of different shapes, which
  /// the state's other fields tell (an InputError), or a state is corrupt.
  void merge(const ExactSums& later) {
    if (later.empty()) return;
    check(later);
    if (empty()) {
      *this = later;
      return;
    }
    check(*this);
    if (size() != later.size()) {
      mismatched_ = true;
      return;
    }
    for (std::size_t at = 0; at < size(); at += ExactSum::kWords) {
      ExactSum acc;
      acc.merge(data() + at);
      acc.merge(later.data() + at);
      std::copy(acc.words().begin(), acc.words().end(), begin() + static_cast<std::ptrdiff_t>(at));
    }
  }

  /// Whether a merge met a rank with another number of accumulators (never packed).
  bool mismatched() const { return mismatched_; }

  /// Whether every accumulator is normalized (ExactSum::normalized), kWords words each.
  bool normalized() const {
    if (size() % ExactSum::kWords != 0) return false;
    for (std::size_t at = 0; at < size(); at += ExactSum::kWords)
      if (!ExactSum::normalized(data() + at)) return false;
    return true;
  }

 private:
  bool mismatched_ = false;

  static void check(const ExactSums& s) {
    if (!s.normalized())
      throw RuntimeError(
          "the state of a rank is corrupt: its exact sums are not normalized accumulators");
  }
};

}  // namespace tally

namespace tally {

/// s += a * b exactly: the rounded product and its rounding error (fma), both added. Exact unless
/// the product overflows (the caller checks) or its error underflows (|a b| below 2^-969).
inline void add_product(ExactSum& s, double a, double b) {
  const double p = a * b;
  s.add(p);
  s.add(std::fma(a, b, -p));
}

/// Sxy - Sx Sy / n from exact totals (Sxy = sum x y, Sx = sum x, Sy = sum y over n samples): the
/// centred sum sum (x - xbar)(y - ybar), rounded once, however large the means are against the
/// spread. With mx = Sx / n rounded and rx = Sx - n mx (computed exactly, then rounded: it is a few
/// ulps of the sum), Sx Sy / n = n mx my + mx ry + my rx + rx ry / n; every term but the last
/// (a relative 2^-106 of mx my) is subtracted from Sxy exactly, as products split by fma.
inline double centered_sum(const ExactSum& sxy, const ExactSum& sx, const ExactSum& sy,
                           std::int64_t n) {
  const auto dn = static_cast<double>(n);
  const auto residual = [dn](const ExactSum& s, double m) {
    ExactSum t = s;
    add_product(t, -dn, m);
    return t.value();
  };
  const double mx = sx.value() / dn, my = sy.value() / dn;
  const double rx = residual(sx, mx), ry = residual(sy, my);
  ExactSum t = sxy;
  const double a = dn * mx, b = std::fma(dn, mx, -a);  // n mx = a + b exactly
  add_product(t, -a, my);
  add_product(t, -b, my);
  add_product(t, -mx, ry);
  add_product(t, -my, rx);
  t.add(-(rx * ry / dn));
  return t.value();
}

/// (Sx - Sy) / n, the difference of two means, from exact totals (rounded twice).
inline double mean_difference(const ExactSum& sx, const ExactSum& sy, std::int64_t n) {
  ExactSum d = sx;
  d.subtract(sy);
  return d.value() / static_cast<double>(n);
}

}  // namespace tally
