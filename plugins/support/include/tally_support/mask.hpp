// Run-length-encoded masks, ported from pycocotools' common/maskApi.c (Microsoft COCO Toolbox 2.0,
// P. Dollar and T.-Y. Lin, Simplified BSD licence), the C file behind pycocotools 2.0.x's `_mask`
// module. Same semantics, operation for operation, so masks, areas and IoUs are bit-identical:
//
//   rle_encode       rleEncode      binary mask (column-major, as pycocotools) -> RLE
//   rle_decode       rleDecode      RLE -> binary mask (column-major); false on a corrupt RLE
//   rle_merge        rleMerge       union (or intersection) of RLEs of one size
//   rle_area         rleArea        foreground pixels
//   rle_to_bbox      rleToBbox      tight xywh box (the 2.0.x version: per foreground run)
//   rle_from_poly    rleFrPoly      polygon rasterisation (5x upsampled boundary, as pycocotools)
//   rle_from_string  rleFrString    COCO's compressed "counts" string -> RLE
//   rle_to_string    rleToString    RLE -> compressed string
//   bb_iou, rle_iou  bbIou, rleIou  IoU matrices o[g * m + d], crowd ground truth divides by the
//                                   detection's area; rle_iou pre-filters with the boxes as
//                                   pycocotools does and gives -1 for masks of different sizes.
//
// Counts are uint32 and the arithmetic stays in uint32 where maskApi.c's does (the wrap-around
// behaviour is the same). Part of the plugin-support library (plugins/support): the detection
// plugin, the coco_json reader and the tests share it. Header-only, so that bb_iou_one and
// rle_iou_one stay inline in the IoU loops of the COCO evaluation.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace tally::support::mask {

struct Rle {
  std::uint32_t h = 0;
  std::uint32_t w = 0;
  std::vector<std::uint32_t> cnts;
};

/// `m` is h*w bytes in column-major order (pycocotools' Fortran-order masks).
inline Rle rle_encode(const std::uint8_t* m, std::uint32_t h, std::uint32_t w) {
  Rle r{h, w, {}};
  const std::size_t a = static_cast<std::size_t>(h) * w;
  std::uint8_t p = 0;
  std::uint32_t c = 0;
  for (std::size_t j = 0; j < a; ++j) {
    const std::uint8_t v = m[j] != 0 ? 1 : 0;
    if (v != p) {
      r.cnts.push_back(c);
      c = 0;
      p = v;
    }
    ++c;
  }
  r.cnts.push_back(c);
  return r;
}

/// Same as rle_encode for a row-major (C-order) [h, w] mask.
inline Rle rle_encode_row_major(const std::uint8_t* m, std::uint32_t h, std::uint32_t w) {
  Rle r{h, w, {}};
  std::uint8_t p = 0;
  std::uint32_t c = 0;
  for (std::size_t x = 0; x < w; ++x) {
    for (std::size_t y = 0; y < h; ++y) {
      const std::uint8_t v = m[y * w + x] != 0 ? 1 : 0;
      if (v != p) {
        r.cnts.push_back(c);
        c = 0;
        p = v;
      }
      ++c;
    }
  }
  r.cnts.push_back(c);
  return r;
}

/// Writes h*w bytes, column-major. Returns false when the counts run past h*w.
inline bool rle_decode(const Rle& r, std::uint8_t* out) {
  const std::size_t s = static_cast<std::size_t>(r.h) * r.w;
  std::size_t c = 0;
  std::uint8_t v = 0;
  for (const std::uint32_t n : r.cnts) {
    if (c + n > s) return false;
    std::fill(out + c, out + c + n, v);
    c += n;
    v = static_cast<std::uint8_t>(!v);
  }
  return true;
}

/// rleMerge: the union (intersect = false) or intersection of `rs`. Masks of different sizes give
/// an empty RLE of size 0x0, as maskApi.c does.
inline Rle rle_merge(const std::vector<Rle>& rs, bool intersect) {
  if (rs.empty()) return Rle{};
  if (rs.size() == 1) return rs[0];
  std::uint32_t h = rs[0].h, w = rs[0].w;
  std::vector<std::uint32_t> cnts = rs[0].cnts;
  std::vector<std::uint32_t> out;
  for (std::size_t i = 1; i < rs.size(); ++i) {
    const Rle& b = rs[i];
    if (b.h != h || b.w != w) {
      return Rle{0, 0, {}};
    }
    const std::vector<std::uint32_t> a = cnts;
    out.clear();
    // maskApi.c reads cnts[0] of each side unconditionally; an empty RLE (m == 0) has none.
    std::uint32_t ca = a.empty() ? 0 : a[0], cb = b.cnts.empty() ? 0 : b.cnts[0];
    int v = 0, va = 0, vb = 0, vp = 0;
    std::size_t ia = 1, ib = 1;
    std::uint32_t cc = 0, ct = 1;
    while (ct > 0) {
      const std::uint32_t c = std::min(ca, cb);
      cc += c;
      ct = 0;
      ca -= c;
      if (!ca && ia < a.size()) {
        ca = a[ia++];
        va = !va;
      }
      ct += ca;
      cb -= c;
      if (!cb && ib < b.cnts.size()) {
        cb = b.cnts[ib++];
        vb = !vb;
      }
      ct += cb;
      vp = v;
      v = intersect ? (va && vb) : (va || vb);
      if (v != vp || ct == 0) {
        out.push_back(cc);
        cc = 0;
      }
    }
    cnts = out;
  }
  return Rle{h, w, std::move(cnts)};
}

/// rleArea of the counts cnts[0..n).
inline std::uint32_t rle_area(const std::uint32_t* cnts, std::size_t n) {
  std::uint32_t a = 0;
  for (std::size_t j = 1; j < n; j += 2) a += cnts[j];
  return a;
}

inline std::uint32_t rle_area(const Rle& r) { return rle_area(r.cnts.data(), r.cnts.size()); }

/// rleToBbox (pycocotools 2.0.x) of an h x w mask with counts cnts[0..n): xywh as doubles.
inline void rle_to_bbox(std::uint32_t h, std::uint32_t w, const std::uint32_t* cnts, std::size_t n,
                        double* bb) {
  const std::size_t m = (n / 2) * 2;
  std::uint32_t xs = w, ys = h, xe = 0, ye = 0, cc = 0;
  if (m == 0) {
    bb[0] = bb[1] = bb[2] = bb[3] = 0;
    return;
  }
  // The column and row of a position: positions come in increasing order (run starts and ends),
  // so the column is followed from one to the next (most steps stay in the column or go to the
  // next), with a division only for a longer jump; maskApi.c divides at every run end.
  std::uint64_t col = 0, base = 0;  // base = col * h
  const auto locate = [&](std::uint32_t p, std::uint32_t& x, std::uint32_t& y) {
    if (p - base >= h) {
      if (p - base < 2 * std::uint64_t{h}) {
        ++col;
        base += h;
      } else {
        col = p / h;
        base = col * h;
      }
    }
    x = static_cast<std::uint32_t>(col);
    y = static_cast<std::uint32_t>(p - base);
  };
  for (std::size_t j = 0; j < m; ++j) {
    const std::uint32_t start = cc;
    cc += cnts[j];
    if (j % 2 == 0) continue;
    if (cnts[j] == 0) continue;
    std::uint32_t x_start, y_start, x_end, y_end;
    locate(start, x_start, y_start);
    locate(cc - 1, x_end, y_end);
    xs = std::min(xs, x_start);
    xe = std::max(xe, x_end);
    if (x_start < x_end) {
      ys = 0;
      ye = h - 1;
    } else {
      ys = std::min(ys, y_start);
      ye = std::max(ye, y_end);
    }
  }
  bb[0] = xs;
  bb[2] = static_cast<double>(xe - xs + 1);
  bb[1] = ys;
  bb[3] = static_cast<double>(ye - ys + 1);
}

inline void rle_to_bbox(const Rle& r, double* bb) {
  rle_to_bbox(r.h, r.w, r.cnts.data(), r.cnts.size(), bb);
}

/// The bounds a mask's geometry must keep: an image side below 2^31 and h * w below 2^32 (RLE
/// counts, areas and intersections are uint32, as in maskApi.c), and polygon or box coordinates
/// finite and at most 1e8 in magnitude (maskApi.c scales them by 5 into int: 5e8 and the
/// difference of two such values stay inside int). Readers refuse values outside them with a
/// message naming the annotation; the functions below also stay defined on them (clamped).
inline constexpr std::int64_t kMaxSide = std::int64_t{1} << 31;
inline constexpr double kMaxCoordinate = 1e8;
inline bool size_ok(std::int64_t h, std::int64_t w) {
  return h >= 0 && w >= 0 && h < kMaxSide && w < kMaxSide &&
         static_cast<std::uint64_t>(h) * static_cast<std::uint64_t>(w) < (std::uint64_t{1} << 32);
}
inline bool coordinate_ok(double v) { return std::isfinite(v) && std::fabs(v) <= kMaxCoordinate; }

/// rleFrPoly: `xy` holds k (x, y) pairs. The same mask as maskApi.c's, which walks every point of
/// the polygon's edges upsampled 5x (gigabytes for a polygon far outside the image) and keeps the
/// points where an edge crosses a pixel centre's column inside the image: here each edge yields
/// only those crossings, with maskApi.c's arithmetic, so time and memory are bounded by the
/// number of edges times the image width. Coordinates are clamped to +-kMaxCoordinate (NaN: 0).
inline Rle rle_from_poly(const double* xy, std::size_t k, std::uint32_t h, std::uint32_t w) {
  const double scale = 5;
  const auto scaled = [&](double v) {
    if (!(v == v)) v = 0;
    v = std::clamp(v, -kMaxCoordinate, kMaxCoordinate);
    return static_cast<int>(scale * v + .5);
  };
  std::vector<int> x(k + 1), y(k + 1);
  for (std::size_t j = 0; j < k; ++j) x[j] = scaled(xy[j * 2 + 0]);
  for (std::size_t j = 0; j < k; ++j) y[j] = scaled(xy[j * 2 + 1]);
  if (k > 0) {
    x[k] = x[0];
    y[k] = y[0];
  }
  // maskApi.c keeps the pair (previous point, point) of the walk whose upsampled columns differ
  // when the column it records, (col + .5) / 5 - .5, is a whole pixel column X in [0, w): col =
  // 5 X + 2. Pairs that join two edges share their vertex (or lie left of the image), so every
  // kept pair lies inside one edge, and the order of the pairs does not matter (the points are
  // sorted below).
  const std::int64_t lo = 2, hi = 5 * (static_cast<std::int64_t>(w) - 1) + 2;
  const auto first_col = [&](std::int64_t from) {  // the first column >= from that is 5 X + 2
    from = std::max(from, lo);
    return lo + (from - lo + 4) / 5 * 5;
  };
  std::vector<std::uint32_t> a;
  const auto add = [&](std::int64_t col, std::int64_t vmin) {
    double yd = static_cast<double>(vmin);
    yd = (yd + .5) / scale - .5;
    if (yd < 0)
      yd = 0;
    else if (yd > h)
      yd = h;
    yd = std::ceil(yd);
    a.push_back(static_cast<std::uint32_t>((col - 2) / 5) * h + static_cast<std::uint32_t>(yd));
  };
  for (std::size_t j = 0; j < k; ++j) {
    int xs = x[j], xe = x[j + 1], ys = y[j], ye = y[j + 1];
    const int dx = std::abs(xe - xs), dy = std::abs(ys - ye);
    const bool flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
    if (flip) {
      std::swap(xs, xe);
      std::swap(ys, ye);
    }
    if (dx == 0 && dy == 0) continue;  // one point: no pair
    if (dx >= dy) {
      // The walk's points are (t + xs, v(t)), t = 0..dx: pair (t, t + 1) records column xs + t.
      const double s = static_cast<double>(ye - ys) / dx;
      const auto v = [&](std::int64_t t) { return static_cast<int>(ys + s * t + .5); };
      const std::int64_t last = std::min<std::int64_t>(dx - 1, hi - xs);
      for (std::int64_t t = first_col(xs) - xs; t <= last; t += 5)
        add(xs + t, std::min(v(t), v(t + 1)));
      continue;
    }
    // The walk's points are (u(t), t + ys), t = 0..dy, u monotone; walked from t = 0 (or from dy
    // when flipped). A pair (t - 1, t) whose u differ records the lower u, except when the walk
    // steps up by more than one column: then u - 1 of the point it reaches, as maskApi.c does.
    const double s = static_cast<double>(xe - xs) / dy;
    if (s == 0) continue;
    const auto u = [&](std::int64_t t) { return static_cast<int>(xs + s * t + .5); };
    const std::int64_t u0 = u(0), u1 = u(dy);
    // The first t in [1, dy] where pred(t) holds (pred is monotone: false, then true).
    const auto first = [&](auto pred) {
      std::int64_t a0 = 1, b0 = dy;
      while (a0 < b0) {
        const std::int64_t mid = a0 + (b0 - a0) / 2;
        if (pred(mid))
          b0 = mid;
        else
          a0 = mid + 1;
      }
      return a0;
    };
    if (s > 0) {
      for (std::int64_t c = first_col(u0); c <= std::min(hi, u1 - 1); c += 5) {
        const std::int64_t t = first([&](std::int64_t q) { return u(q) > c; });
        if (flip ? u(t - 1) == c : u(t) == c + 1) add(c, ys + t - 1);
      }
    } else {
      for (std::int64_t c = first_col(u1); c <= std::min(hi, u0 - 1); c += 5) {
        const std::int64_t t = first([&](std::int64_t q) { return u(q) <= c; });
        if (flip ? u(t - 1) == c + 1 : u(t) == c) add(c, ys + t - 1);
      }
    }
  }
  // The RLE from the y-boundary points.
  a.push_back(h * w);
  std::sort(a.begin(), a.end());
  std::uint32_t p = 0;
  for (auto& e : a) {
    const std::uint32_t t = e;
    e -= p;
    p = t;
  }
  Rle r{h, w, {}};
  r.cnts.reserve(a.size());
  std::size_t j = 0;
  r.cnts.push_back(a[j++]);
  while (j < a.size()) {
    if (a[j] > 0) {
      r.cnts.push_back(a[j++]);
    } else {
      ++j;
      if (j < a.size()) r.cnts.back() += a[j++];
    }
  }
  return r;
}

/// rleFrBbox: a box (xywh) as the polygon pycocotools rasterises for it.
inline Rle rle_from_bbox(const double* bb, std::uint32_t h, std::uint32_t w) {
  const double xs = bb[0], xe = xs + bb[2], ys = bb[1], ye = ys + bb[3];
  const double xy[8] = {xs, ys, xs, ye, xe, ye, xe, ys};
  return rle_from_poly(xy, 4, h, w);
}

/// rleFrString, the counts appended to `out` (the differences refer to this mask's counts).
/// Returns false for a character outside the encoding's alphabet or a count outside [0, 2^32);
/// `out` then holds some of them.
inline bool rle_from_string_append(std::string_view s, std::vector<std::uint32_t>& out) {
  const std::size_t first = out.size();
  std::size_t p = 0;
  while (p < s.size()) {
    std::int64_t x = 0;
    int k = 0;
    bool more = true;
    while (more) {
      if (p >= s.size()) return false;  // a continuation bit on the last character
      const int c = static_cast<unsigned char>(s[p]) - 48;
      if (c < 0 || c > 63) return false;
      if (k >= 12) return false;  // more than 60 bits: not a count
      x |= static_cast<std::int64_t>(c & 0x1f) << (5 * k);
      more = (c & 0x20) != 0;
      ++p;
      ++k;
      if (!more && (c & 0x10)) x |= static_cast<std::int64_t>(-1) * (std::int64_t{1} << (5 * k));
    }
    const std::size_t m = out.size() - first;
    if (m > 2) x += static_cast<std::int64_t>(out[out.size() - 2]);
    // maskApi.c casts to uint, silently cutting a count outside [0, 2^32): refused here.
    if (x < 0 || x > static_cast<std::int64_t>(UINT32_MAX)) return false;
    out.push_back(static_cast<std::uint32_t>(x));
  }
  return true;
}

/// rleFrString into r (false as rle_from_string_append).
inline bool rle_from_string(std::string_view s, std::uint32_t h, std::uint32_t w, Rle& r) {
  r.h = h;
  r.w = w;
  r.cnts.clear();
  return rle_from_string_append(s, r.cnts);
}

inline std::string rle_to_string(const Rle& r) {
  std::string s;
  for (std::size_t i = 0; i < r.cnts.size(); ++i) {
    std::int64_t x = r.cnts[i];
    if (i > 2) x -= static_cast<std::int64_t>(r.cnts[i - 2]);
    bool more = true;
    while (more) {
      char c = static_cast<char>(x & 0x1f);
      x >>= 5;
      more = (c & 0x10) ? x != -1 : x != 0;
      if (more) c = static_cast<char>(c | 0x20);
      c = static_cast<char>(c + 48);
      s.push_back(c);
    }
  }
  return s;
}

/// bbIou for one pair: boxes xywh, crowd ground truth divides by the detection's area.
inline double bb_iou_one(const double* d, const double* g, bool crowd) {
  const double ga = g[2] * g[3], da = d[2] * d[3];
  const double w = std::fmin(d[2] + d[0], g[2] + g[0]) - std::fmax(d[0], g[0]);
  if (w <= 0) return 0;
  const double h = std::fmin(d[3] + d[1], g[3] + g[1]) - std::fmax(d[1], g[1]);
  if (h <= 0) return 0;
  const double i = w * h;
  const double u = crowd ? da : da + ga - i;
  return i / u;
}

/// rleIou for one pair, given the pair's bbIou of their rle_to_bbox boxes (`box_iou`).
inline double rle_iou_one(const Rle& d, const Rle& g, bool crowd, double box_iou) {
  if (!(box_iou > 0)) return box_iou;
  if (d.h != g.h || d.w != g.w) return -1;
  const std::size_t ka = d.cnts.size(), kb = g.cnts.size();
  std::uint32_t ca = ka ? d.cnts[0] : 0, cb = kb ? g.cnts[0] : 0;
  int va = 0, vb = 0;
  std::size_t a = 1, b = 1;
  std::uint32_t i = 0, u = 0, ct = 1;
  while (ct > 0) {
    const std::uint32_t c = std::min(ca, cb);
    if (va || vb) {
      u += c;
      if (va && vb) i += c;
    }
    ct = 0;
    ca -= c;
    if (!ca && a < ka) {
      ca = d.cnts[a++];
      va = !va;
    }
    ct += ca;
    cb -= c;
    if (!cb && b < kb) {
      cb = g.cnts[b++];
      vb = !vb;
    }
    ct += cb;
  }
  if (i == 0)
    u = 1;
  else if (crowd)
    u = rle_area(d);
  return static_cast<double>(i) / static_cast<double>(u);
}

}  // namespace tally::support::mask
