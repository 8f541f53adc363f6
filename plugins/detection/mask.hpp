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
// behaviour is the same). Header-only: the detection plugin, the coco_json reader and the tests
// share it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace tally::detection::mask {

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

inline std::uint32_t rle_area(const Rle& r) {
  std::uint32_t a = 0;
  for (std::size_t j = 1; j < r.cnts.size(); j += 2) a += r.cnts[j];
  return a;
}

/// rleToBbox (pycocotools 2.0.x): xywh as doubles.
inline void rle_to_bbox(const Rle& r, double* bb) {
  const std::uint32_t h = r.h, w = r.w;
  const std::size_t m = (r.cnts.size() / 2) * 2;
  std::uint32_t xs = w, ys = h, xe = 0, ye = 0, cc = 0;
  if (m == 0) {
    bb[0] = bb[1] = bb[2] = bb[3] = 0;
    return;
  }
  for (std::size_t j = 0; j < m; ++j) {
    const std::uint32_t start = cc;
    cc += r.cnts[j];
    if (j % 2 == 0) continue;
    if (r.cnts[j] == 0) continue;
    const std::uint32_t y_start = start % h, x_start = (start - y_start) / h;
    const std::uint32_t y_end = (cc - 1) % h, x_end = (cc - 1 - y_end) / h;
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

/// rleFrPoly: `xy` holds k (x, y) pairs.
inline Rle rle_from_poly(const double* xy, std::size_t k, std::uint32_t h, std::uint32_t w) {
  const double scale = 5;
  std::vector<int> x(k + 1), y(k + 1);
  for (std::size_t j = 0; j < k; ++j) x[j] = static_cast<int>(scale * xy[j * 2 + 0] + .5);
  for (std::size_t j = 0; j < k; ++j) y[j] = static_cast<int>(scale * xy[j * 2 + 1] + .5);
  if (k > 0) {
    x[k] = x[0];
    y[k] = y[0];
  }
  std::size_t m = 0;
  for (std::size_t j = 0; j < k; ++j)
    m += std::max(static_cast<std::uint32_t>(std::abs(x[j] - x[j + 1])),
                  static_cast<std::uint32_t>(std::abs(y[j] - y[j + 1]))) +
         1;
  std::vector<int> u(m), v(m);
  m = 0;
  for (std::size_t j = 0; j < k; ++j) {
    int xs = x[j], xe = x[j + 1], ys = y[j], ye = y[j + 1];
    const int dx = std::abs(xe - xs), dy = std::abs(ys - ye);
    const bool flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
    if (flip) {
      std::swap(xs, xe);
      std::swap(ys, ye);
    }
    // A repeated point (dx = dy = 0): maskApi.c divides 0 by 0 and casts the NaN to int (UB; x86
    // gives INT_MIN). Its one point lies between two points of the same u, so the boundary
    // pass below skips it whatever its v: 0 gives the same mask without the UB.
    const double s = dx == 0 && dy == 0 ? 0.0
                     : dx >= dy         ? static_cast<double>(ye - ys) / dx
                                        : static_cast<double>(xe - xs) / dy;
    if (dx >= dy) {
      for (int d = 0; d <= dx; ++d) {
        const int t = flip ? dx - d : d;
        u[m] = t + xs;
        v[m] = static_cast<int>(ys + s * t + .5);
        ++m;
      }
    } else {
      for (int d = 0; d <= dy; ++d) {
        const int t = flip ? dy - d : d;
        v[m] = t + ys;
        u[m] = static_cast<int>(xs + s * t + .5);
        ++m;
      }
    }
  }
  // Points along the y-boundary, downsampled.
  const std::size_t kk = m;
  std::vector<int> bx, by;
  bx.reserve(kk);
  by.reserve(kk);
  for (std::size_t j = 1; j < kk; ++j) {
    if (u[j] == u[j - 1]) continue;
    double xd = static_cast<double>(u[j] < u[j - 1] ? u[j] : u[j] - 1);
    xd = (xd + .5) / scale - .5;
    if (std::floor(xd) != xd || xd < 0 || xd > w - 1.0) continue;
    double yd = static_cast<double>(v[j] < v[j - 1] ? v[j] : v[j - 1]);
    yd = (yd + .5) / scale - .5;
    if (yd < 0)
      yd = 0;
    else if (yd > h)
      yd = h;
    yd = std::ceil(yd);
    bx.push_back(static_cast<int>(xd));
    by.push_back(static_cast<int>(yd));
  }
  // The RLE from the y-boundary points.
  std::vector<std::uint32_t> a(bx.size() + 1);
  for (std::size_t j = 0; j < bx.size(); ++j)
    a[j] = static_cast<std::uint32_t>(bx[j] * static_cast<int>(h) + by[j]);
  a[bx.size()] = h * w;
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

/// rleFrString. Returns false for a character outside the encoding's alphabet.
inline bool rle_from_string(std::string_view s, std::uint32_t h, std::uint32_t w, Rle& r) {
  r.h = h;
  r.w = w;
  r.cnts.clear();
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
    const std::size_t m = r.cnts.size();
    if (m > 2) x += static_cast<std::int64_t>(r.cnts[m - 2]);
    r.cnts.push_back(static_cast<std::uint32_t>(x));
  }
  return true;
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

}  // namespace tally::detection::mask
