// Rotated-box IoU as mmeval 0.2.1 computes it without mmcv (mmeval/metrics/utils/
// bbox_overlaps_rotated.py, calculate_overlaps_rotated): boxes cast to float32, le90 angles
// turned to OpenCV's version (le90_to_oc), radians to degrees in float32, then per pair OpenCV's
// cv2.rotatedRectangleIntersection, cv2.convexHull of its points and cv2.contourArea, and
// IoU = inter / (area1 + area2 - inter + 1e-5) in float32 (NumPy 2's rules for float32 scalars
// against Python floats).
//
// And mmeval's qbox_to_rbox for quadrilateral boxes: corners truncated to integers, then
// cv2.minAreaRect.
//
// The OpenCV functions are ports of OpenCV 5.0.0 (the version opencv-python 5.0.0.93 ships):
// modules/imgproc/src/intersection.cpp (rotatedRectangleIntersection, by Nghia Ho: the float
// version, centres shifted to their mean, _isOnPositiveSide), modules/imgproc/src/convhull.cpp
// (convexHull, the Sklansky scan), modules/imgproc/src/shapedescr.cpp (contourArea),
// modules/imgproc/src/rotcalipers.cpp (minAreaRect, rotatingCalipers with firstVecIsRight) and
// modules/core/src/types.cpp (RotatedRect::points). OpenCV is licensed under the Apache License
// 2.0 (https://www.apache.org/licenses/LICENSE-2.0); original notices: Copyright (C) 2000-2008,
// Intel Corporation; Copyright (C) 2008-2011, Willow Garage Inc.; Copyright (C) 2000, Intel
// Corporation (convhull.cpp, rotcalipers.cpp); third-party copyrights are property of their
// respective owners. Where the 5.0.0 binary differs from the sources at hand it was read from the
// shipped cv2 module's machine code and followed: RotatedRect::points computes every corner from
// the centre; the Sklansky scan does not skip equal consecutive points; minAreaRect brings the
// angle into [-90, 0) degrees (in double, w and h swapped at each quarter turn). The ports keep
// OpenCV's operation order and precision (float where OpenCV uses float, double where it uses
// double; OpenCV's x86-64 build has no FMA contraction in these functions, nor has this code), so
// the results are the same bits: tests/unit/test_detection_dota.cpp checks intersection areas,
// IoUs and minAreaRect rectangles against cv2's values recorded by tests/reference/dota.py.
#pragma once

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace tally::detection::rotated {

struct Pt {
  float x, y;
};

struct Pi {  // cv::Point
  int x, y;
};

struct Rect {  // cv::RotatedRect: center, size, angle in degrees
  float cx, cy, w, h, deg;
};

/// RotatedRect::points as OpenCV 5.0.0 computes it (read from the shipped binary: each corner
/// from the center, the last two not mirrored through it as 4.x does).
inline void rect_points(const Rect& r, Pt pt[4]) {
  const double angle = r.deg * 3.1415926535897932384626433832795 / 180.;
  const float b = static_cast<float>(std::cos(angle)) * 0.5f;
  const float a = static_cast<float>(std::sin(angle)) * 0.5f;
  pt[0].x = r.cx - a * r.h - b * r.w;
  pt[0].y = r.cy + b * r.h - a * r.w;
  pt[1].x = r.cx + a * r.h - b * r.w;
  pt[1].y = r.cy - b * r.h - a * r.w;
  pt[2].x = r.cx + a * r.h + b * r.w;  // OpenCV 5: not 2 * center - pt[0] as in 4.x
  pt[2].y = r.cy - b * r.h + a * r.w;
  pt[3].x = r.cx - a * r.h + b * r.w;
  pt[3].y = r.cy + b * r.h + a * r.w;
}

namespace detail {

/// _rotatedRectangleIntersection (float points, _isOnPositiveSide); appends to `out`.
/// Returns false for INTERSECT_NONE.
inline bool on_positive_side(const Pt& line_vec, const Pt& line_pt, const Pt& pt) {
  return line_vec.y * (line_pt.x - pt.x) >= line_vec.x * (line_pt.y - pt.y);
}

inline bool intersect_shifted(const Rect& r1, const Rect& r2, std::vector<Pt>& out) {
  Pt pts1[4], pts2[4], vec1[4], vec2[4];
  rect_points(r1, pts1);
  rect_points(r2, pts2);
  float same_eps = 1e-6f * std::max(r1.w * r1.h, r2.w * r2.h);
  {
    bool same = true;
    for (int i = 0; i < 4; i++)
      if (std::fabs(pts1[i].x - pts2[i].x) > same_eps ||
          std::fabs(pts1[i].y - pts2[i].y) > same_eps) {
        same = false;
        break;
      }
    if (same) {
      out.assign(pts1, pts1 + 4);
      return true;
    }
  }
  for (int i = 0; i < 4; i++) {
    vec1[i] = {pts1[(i + 1) % 4].x - pts1[i].x, pts1[(i + 1) % 4].y - pts1[i].y};
    vec2[i] = {pts2[(i + 1) % 4].x - pts2[i].x, pts2[(i + 1) % 4].y - pts2[i].y};
  }
  for (int i = 0; i < 4; i++) {
    same_eps = std::min(same_eps, std::sqrt(vec1[i].x * vec1[i].x + vec1[i].y * vec1[i].y));
    same_eps = std::min(same_eps, std::sqrt(vec2[i].x * vec2[i].x + vec2[i].y * vec2[i].y));
  }
  same_eps = std::max(1e-16f, same_eps);
  std::vector<Pt>& pts = out;
  for (int i = 0; i < 4; i++) {
    for (int j = 0; j < 4; j++) {
      const float x21 = pts2[j].x - pts1[i].x;
      const float y21 = pts2[j].y - pts1[i].y;
      const float vx1 = vec1[i].x, vy1 = vec1[i].y, vx2 = vec2[j].x, vy2 = vec2[j].y;
      const float det = vx2 * vy1 - vx1 * vy2;
      if (std::abs(static_cast<double>(det)) < 1e-12) continue;
      const float det_inv = 1.f / det;
      const float t1 = (vx2 * y21 - vy2 * x21) * det_inv;
      const float t2 = (vx1 * y21 - vy1 * x21) * det_inv;
      if (!std::isfinite(t1) || !std::isfinite(t2)) continue;
      if (t1 >= 0.0f && t1 <= 1.0f && t2 >= 0.0f && t2 <= 1.0f)
        pts.push_back({pts1[i].x + vec1[i].x * t1, pts1[i].y + vec1[i].y * t1});
    }
  }
  for (int i = 0; i < 4; i++) {  // vertices of rect1 inside rect2
    int pos = 0;
    for (int j = 0; j < 4; j++) pos += on_positive_side(vec2[j], pts2[j], pts1[i]);
    if (pos == 4 || pos == 0) pts.push_back(pts1[i]);
  }
  for (int i = 0; i < 4; i++) {  // vertices of rect2 inside rect1
    int pos = 0;
    for (int j = 0; j < 4; j++) pos += on_positive_side(vec1[j], pts1[j], pts2[i]);
    if (pos == 4 || pos == 0) pts.push_back(pts2[i]);
  }
  int n = static_cast<int>(pts.size());
  if (n == 0) return false;
  // Duplicates: squared distance <= samePointEps (OpenCV compares a square with a length).
  const int stride = n;
  std::array<float, 24 * 24> dist{};  // at most 16 + 4 + 4 points
  std::array<int, 24> remap{};
  const auto d2 = [](const Pt& a, const Pt& b) {
    const float dx = a.x - b.x, dy = a.y - b.y;
    return dx * dx + dy * dy;
  };
  const auto at = [](int k) { return static_cast<std::size_t>(k); };
  for (int i = 0; i < n; ++i) {
    const Pt p0 = pts[at(i)];
    remap[at(i)] = i;
    for (int j = i + 1; j < n;) {
      const float d = d2(pts[at(j)], p0);
      if (d <= same_eps) {
        if (j < n - 1) pts[at(j)] = pts[at(n - 1)];
        n--;
        continue;
      }
      dist[at(i * stride + j)] = d;
      ++j;
    }
  }
  while (n > 8) {  // still too many: drop the closest points
    int min_j = 1;
    float min_d = dist[1];
    for (int i = 0; i < n - 1; ++i) {
      const float* row = dist.data() + stride * remap[at(i)];
      for (int j = i + 1; j < n; ++j) {
        const float d = row[remap[at(j)]];
        if (d < min_d) {
          min_d = d;
          min_j = j;
        }
      }
    }
    if (min_j < n - 1) {
      pts[at(min_j)] = pts[at(n - 1)];
      remap[at(min_j)] = remap[at(n - 1)];
    }
    n--;
  }
  // Order the points (Point2f::cross is computed in double).
  for (int i = 0; i < n - 1; ++i) {
    Pt di{pts[at(i + 1)].x - pts[at(i)].x, pts[at(i + 1)].y - pts[at(i)].y};
    for (int j = i + 2; j < n; ++j) {
      const Pt dj{pts[at(j)].x - pts[at(i)].x, pts[at(j)].y - pts[at(i)].y};
      if (static_cast<double>(di.x) * dj.y - static_cast<double>(di.y) * dj.x < 0) {
        std::swap(pts[at(i + 1)], pts[at(j)]);
        di = dj;
      }
    }
  }
  pts.resize(at(n));
  return true;
}

template <class T>
int sign(T v) {
  return (v > 0) - (v < 0);
}

/// Sklansky_ of convhull.cpp as OpenCV 5.0.0 ships it (read from the binary: no skipping of equal
/// consecutive points in the scan, as later 4.x sources have), over `array` (sorted point
/// pointers): for float points <float, double> with each vector normalized (cv::normalize: the
/// norm in double, each element float(v * (1 / norm))), for int points <int, int64>.
template <class P>
int sklansky(const P* const* array, int start, int end, int* stack, int nsign, int sign2) {
  using T = decltype(P::x);
  const int incr = end > start ? 1 : -1;
  int pprev = start, pcur = pprev + incr, pnext = pcur + incr;
  int stacksize = 3;
  if (start == end || (array[start]->x == array[end]->x && array[start]->y == array[end]->y)) {
    stack[0] = start;
    return 1;
  }
  stack[0] = pprev;
  stack[1] = pcur;
  stack[2] = pnext;
  end += incr;
  while (pnext != end) {
    const T cury = array[pcur]->y;
    const T nexty = array[pnext]->y;
    const T by = nexty - cury;
    if (sign(by) != nsign) {
      T a[2] = {array[pcur]->x - array[pprev]->x, cury - array[pprev]->y};
      T b[2] = {array[pnext]->x - array[pcur]->x, by};
      int convex = 0;
      if constexpr (std::is_floating_point_v<T>) {
        for (float* v : {a, b}) {
          const double nv = std::sqrt(static_cast<double>(v[0]) * static_cast<double>(v[0]) +
                                      static_cast<double>(v[1]) * static_cast<double>(v[1]));
          const double s = nv != 0 ? 1. / nv : 0.;
          v[0] = static_cast<float>(static_cast<double>(v[0]) * s);
          v[1] = static_cast<float>(static_cast<double>(v[1]) * s);
        }
        convex = sign(static_cast<double>(a[1]) * b[0] - static_cast<double>(a[0]) * b[1]);
      } else {
        convex =
            sign(static_cast<std::int64_t>(a[1]) * b[0] - static_cast<std::int64_t>(a[0]) * b[1]);
      }
      if (convex == sign2 && (a[0] != 0 || a[1] != 0)) {
        pprev = pcur;
        pcur = pnext;
        pnext += incr;
        stack[stacksize] = pnext;
        stacksize++;
      } else if (pprev == start) {
        pcur = pnext;
        stack[1] = pcur;
        pnext += incr;
        stack[2] = pnext;
      } else {
        stack[stacksize - 2] = pnext;
        pcur = pprev;
        pprev = stack[stacksize - 4];
        stacksize--;
      }
    } else {
      pnext += incr;
      stack[stacksize - 1] = pnext;
    }
  }
  return --stacksize;
}

}  // namespace detail

/// cv::rotatedRectangleIntersection: the intersection polygon's points (empty: none).
inline void intersection(const Rect& r1, const Rect& r2, std::vector<Pt>& out) {
  out.clear();
  if (!(r1.w > 0 && r1.h > 0) || !(r2.w > 0 && r2.h > 0)) return;  // Size2f::empty()
  const float acx = (r1.cx + r2.cx) / 2.0f, acy = (r1.cy + r2.cy) / 2.0f;
  const Rect s1{r1.cx - acx, r1.cy - acy, r1.w, r1.h, r1.deg};
  const Rect s2{r2.cx - acx, r2.cy - acy, r2.w, r2.h, r2.deg};
  if (!detail::intersect_shifted(s1, s2, out)) {
    out.clear();
    return;
  }
  for (auto& p : out) {
    p.x += acx;
    p.y += acy;
  }
}

/// cv::convexHull(points, clockwise, returnPoints=true) for float or int points.
template <class P>
void convex_hull(const std::vector<P>& data, bool clockwise, std::vector<P>& hull) {
  hull.clear();
  const int total = static_cast<int>(data.size());
  if (total == 0) return;
  // OpenCV's AutoBuffers: on the stack for the (at most 8) points of an intersection.
  constexpr int kSmall = 32;
  std::array<const P*, kSmall> pointer_small;
  std::array<int, kSmall + 2> stack_small;
  std::array<int, kSmall> hull_small;
  std::vector<const P*> pointer_big;
  std::vector<int> stack_big, hull_big;
  const P** pointer_buf = pointer_small.data();
  int* stack = stack_small.data();
  int* hull_idx = hull_small.data();
  if (total > kSmall) {
    pointer_big.resize(static_cast<std::size_t>(total));
    stack_big.resize(static_cast<std::size_t>(total) + 2);
    hull_big.resize(static_cast<std::size_t>(total));
    pointer_buf = pointer_big.data();
    stack = stack_big.data();
    hull_idx = hull_big.data();
  }
  const std::span<const P*> pointer(pointer_buf, static_cast<std::size_t>(total));
  const std::span<int> hullbuf(hull_idx, static_cast<std::size_t>(total));
  for (int i = 0; i < total; i++)
    pointer[static_cast<std::size_t>(i)] = &data[static_cast<std::size_t>(i)];
  std::sort(pointer.begin(), pointer.end(), [](const P* p1, const P* p2) {
    if (p1->x != p2->x) return p1->x < p2->x;
    if (p1->y != p2->y) return p1->y < p2->y;
    return p1 < p2;
  });
  int miny_ind = 0, maxy_ind = 0, nout = 0;
  for (int i = 1; i < total; i++) {
    const auto y = pointer[static_cast<std::size_t>(i)]->y;
    if (pointer[static_cast<std::size_t>(miny_ind)]->y > y) miny_ind = i;
    if (pointer[static_cast<std::size_t>(maxy_ind)]->y < y) maxy_ind = i;
  }
  const P* const* ptr = pointer.data();
  const auto index = [&](int k) { return static_cast<int>(ptr[k] - data.data()); };
  if (ptr[0]->x == ptr[total - 1]->x && ptr[0]->y == ptr[total - 1]->y) {
    hullbuf[static_cast<std::size_t>(nout++)] = 0;
  } else {
    int* tl_stack = stack;
    int tl_count = detail::sklansky(ptr, 0, maxy_ind, tl_stack, -1, 1);
    int* tr_stack = stack + tl_count;
    int tr_count = detail::sklansky(ptr, total - 1, maxy_ind, tr_stack, -1, -1);
    if (!clockwise) {
      std::swap(tl_stack, tr_stack);
      std::swap(tl_count, tr_count);
    }
    for (int i = 0; i < tl_count - 1; i++)
      hullbuf[static_cast<std::size_t>(nout++)] = index(tl_stack[i]);
    for (int i = tr_count - 1; i > 0; i--)
      hullbuf[static_cast<std::size_t>(nout++)] = index(tr_stack[i]);
    const int stop_idx = tr_count > 2 ? tr_stack[1] : tl_count > 2 ? tl_stack[tl_count - 2] : -1;
    int* bl_stack = stack;
    int bl_count = detail::sklansky(ptr, 0, miny_ind, bl_stack, 1, -1);
    int* br_stack = stack + bl_count;
    int br_count = detail::sklansky(ptr, total - 1, miny_ind, br_stack, 1, 1);
    if (clockwise) {
      std::swap(bl_stack, br_stack);
      std::swap(bl_count, br_count);
    }
    if (stop_idx >= 0) {
      const int check_idx = bl_count > 2              ? bl_stack[1]
                            : bl_count + br_count > 2 ? br_stack[2 - bl_count]
                                                      : -1;
      if (check_idx == stop_idx || (check_idx >= 0 && ptr[check_idx]->x == ptr[stop_idx]->x &&
                                    ptr[check_idx]->y == ptr[stop_idx]->y)) {
        bl_count = std::min(bl_count, 2);
        br_count = std::min(br_count, 2);
      }
    }
    for (int i = 0; i < bl_count - 1; i++)
      hullbuf[static_cast<std::size_t>(nout++)] = index(bl_stack[i]);
    for (int i = br_count - 1; i > 0; i--)
      hullbuf[static_cast<std::size_t>(nout++)] = index(br_stack[i]);
    // A cyclic shift that makes the indices ascending or descending, where one does.
    if (nout >= 3) {
      int min_idx = 0, max_idx = 0, lt = 0;
      for (int i = 1; i < nout; i++) {
        const int idx = hullbuf[static_cast<std::size_t>(i)];
        lt += hullbuf[static_cast<std::size_t>(i - 1)] < idx;
        if (lt > 1 && lt <= i - 2) break;
        if (idx < hullbuf[static_cast<std::size_t>(min_idx)]) min_idx = i;
        if (idx > hullbuf[static_cast<std::size_t>(max_idx)]) max_idx = i;
      }
      const int mmdist = std::abs(max_idx - min_idx);
      if ((mmdist == 1 || mmdist == nout - 1) && (lt <= 1 || lt >= nout - 2)) {
        const int ascending = (max_idx + 1) % nout == min_idx;
        const int i0 = ascending ? min_idx : max_idx;
        int j = i0, i = 0;
        if (i0 > 0) {
          for (i = 0; i < nout; i++) {
            const int curr_idx = stack[i] = hullbuf[static_cast<std::size_t>(j)];
            const int next_j = j + 1 < nout ? j + 1 : 0;
            const int next_idx = hullbuf[static_cast<std::size_t>(next_j)];
            if (i < nout - 1 && (ascending != (curr_idx < next_idx))) break;
            j = next_j;
          }
          if (i == nout) std::copy(stack, stack + nout, hullbuf.begin());
        }
      }
    }
  }
  for (int i = 0; i < nout; i++)
    hull.push_back(data[static_cast<std::size_t>(hullbuf[static_cast<std::size_t>(i)])]);
}

/// cv::convexHull(points) of float points (counter-clockwise as OpenCV names it).
inline void convex_hull(const std::vector<Pt>& data, std::vector<Pt>& hull) {
  convex_hull<Pt>(data, false, hull);
}

namespace detail {

/// rotatingCalipers(points, n, CALIPERS_MINAREARECT, out) of rotcalipers.cpp as OpenCV 5.0.0
/// ships it: the caliper to advance chosen by firstVecIsRight (float dot products), the last
/// rectangle of least area kept (area <= minarea).
inline void rotating_calipers(const Pt* points, int n, float out[6]) {
  float minarea = FLT_MAX;
  std::vector<float> inv_vect_length(static_cast<std::size_t>(n));
  std::vector<Pt> vect(static_cast<std::size_t>(n));
  const auto at = [](int k) { return static_cast<std::size_t>(k); };
  int left = 0, bottom = 0, right = 0, top = 0;
  float orientation = 0, base_a = 0, base_b = 0;
  Pt pt0 = points[0];
  float left_x = pt0.x, right_x = pt0.x, top_y = pt0.y, bottom_y = pt0.y;
  for (int i = 0; i < n; i++) {
    if (pt0.x < left_x) left_x = pt0.x, left = i;
    if (pt0.x > right_x) right_x = pt0.x, right = i;
    if (pt0.y > top_y) top_y = pt0.y, top = i;
    if (pt0.y < bottom_y) bottom_y = pt0.y, bottom = i;
    const Pt pt = points[i + 1 < n ? i + 1 : 0];
    const double dx = static_cast<double>(pt.x - pt0.x), dy = static_cast<double>(pt.y - pt0.y);
    vect[at(i)] = {static_cast<float>(dx), static_cast<float>(dy)};
    inv_vect_length[at(i)] = static_cast<float>(1. / std::sqrt(dx * dx + dy * dy));
    pt0 = pt;
  }
  {  // the hull's orientation
    double ax = vect[at(n - 1)].x, ay = vect[at(n - 1)].y;
    for (int i = 0; i < n; i++) {
      const double bx = vect[at(i)].x, by = vect[at(i)].y;
      const double convexity = ax * by - ay * bx;
      if (convexity != 0) {
        orientation = convexity > 0 ? 1.f : -1.f;
        break;
      }
      ax = bx;
      ay = by;
    }
  }
  base_a = orientation;
  int seq[4] = {bottom, right, top, left};
  int best_left = 0, best_bottom = 0;
  float best_a = 0, best_b = 0, best_w = 0, best_h = 0;
  for (int k = 0; k < n; k++) {
    // The caliper whose edge makes the least angle with its side: rotate90CW, rotate180,
    // rotate90CCW, then firstVecIsRight(v1, v2): rotate90CW(v1) . v2 < 0.
    Pt rv[4] = {vect[at(seq[0])],
                {vect[at(seq[1])].y, -vect[at(seq[1])].x},
                {-vect[at(seq[2])].x, -vect[at(seq[2])].y},
                {-vect[at(seq[3])].y, vect[at(seq[3])].x}};
    int main_element = 0;
    for (int i = 1; i < 4; i++) {
      const Pt t{rv[i].y, -rv[i].x};
      if (t.x * rv[main_element].x + t.y * rv[main_element].y < 0) main_element = i;
    }
    const int pindex = seq[main_element];
    const float lead_x = vect[at(pindex)].x * inv_vect_length[at(pindex)];
    const float lead_y = vect[at(pindex)].y * inv_vect_length[at(pindex)];
    switch (main_element) {
      case 0:
        base_a = lead_x;
        base_b = lead_y;
        break;
      case 1:
        base_a = lead_y;
        base_b = -lead_x;
        break;
      case 2:
        base_a = -lead_x;
        base_b = -lead_y;
        break;
      default:
        base_a = -lead_y;
        base_b = lead_x;
        break;
    }
    seq[main_element] += 1;
    seq[main_element] = seq[main_element] == n ? 0 : seq[main_element];
    float dx = points[seq[1]].x - points[seq[3]].x;
    float dy = points[seq[1]].y - points[seq[3]].y;
    const float width = dx * base_a + dy * base_b;
    dx = points[seq[2]].x - points[seq[0]].x;
    dy = points[seq[2]].y - points[seq[0]].y;
    const float height = -dx * base_b + dy * base_a;
    const float area = width * height;
    if (area <= minarea) {
      minarea = area;
      best_left = seq[3];
      best_a = base_a;
      best_w = width;
      best_b = base_b;
      best_h = height;
      best_bottom = seq[0];
    }
  }
  const float A1 = best_a, B1 = best_b, A2 = -best_b, B2 = best_a;
  const float C1 = A1 * points[best_left].x + points[best_left].y * B1;
  const float C2 = A2 * points[best_bottom].x + points[best_bottom].y * B2;
  const float idet = 1.f / (A1 * B2 - A2 * B1);
  out[0] = (C1 * B2 - C2 * B1) * idet;
  out[1] = (A1 * C2 - A2 * C1) * idet;
  out[2] = A1 * best_w;
  out[3] = B1 * best_w;
  out[4] = A2 * best_h;
  out[5] = B2 * best_h;
}

}  // namespace detail

/// cv::minAreaRect of integer points as OpenCV 5.0.0 computes it: the convex hull (clockwise
/// false), rotating calipers, then (read from the shipped binary's results) the angle in degrees
/// brought into [-90, 0) in double, w and h swapped at each quarter turn. Returns cx, cy, w, h
/// (float) and the angle in degrees (float).
struct MinRect {
  float cx, cy, w, h, deg;
};

inline MinRect min_area_rect(const std::vector<Pi>& pts) {
  std::vector<Pi> hull_i;
  convex_hull<Pi>(pts, false, hull_i);
  std::vector<Pt> hull;
  for (const Pi& p : hull_i) hull.push_back({static_cast<float>(p.x), static_cast<float>(p.y)});
  const int n = static_cast<int>(hull.size());
  MinRect box{0, 0, 0, 0, 0};
  double angle = 0;  // radians
  if (n > 2) {
    float out[6];
    detail::rotating_calipers(hull.data(), n, out);
    box.cx = out[0] + (out[2] + out[4]) * 0.5f;
    box.cy = out[1] + (out[3] + out[5]) * 0.5f;
    box.w = static_cast<float>(
        std::sqrt(static_cast<double>(out[2]) * out[2] + static_cast<double>(out[3]) * out[3]));
    box.h = static_cast<float>(
        std::sqrt(static_cast<double>(out[4]) * out[4] + static_cast<double>(out[5]) * out[5]));
    angle = std::atan2(static_cast<double>(out[3]), static_cast<double>(out[2]));
  } else if (n == 2) {
    box.cx = (hull[0].x + hull[1].x) * 0.5f;
    box.cy = (hull[0].y + hull[1].y) * 0.5f;
    const double dx = hull[1].x - hull[0].x, dy = hull[1].y - hull[0].y;
    box.w = static_cast<float>(std::sqrt(dx * dx + dy * dy));
    box.h = 0;
    angle = std::atan2(dy, dx);
  } else if (n == 1) {
    box.cx = hull[0].x;
    box.cy = hull[0].y;
  }
  double deg = angle * 180 / 3.1415926535897932384626433832795;
  while (deg >= 0) {
    deg -= 90;
    std::swap(box.w, box.h);
  }
  while (deg < -90) {
    deg += 90;
    std::swap(box.w, box.h);
  }
  box.deg = static_cast<float>(deg);
  return box;
}

/// cv::contourArea(contour, oriented=false) for float points.
inline double contour_area(const std::vector<Pt>& c) {
  if (c.empty()) return 0.;
  double a00 = 0;
  Pt prev = c.back();
  for (const Pt& p : c) {
    a00 += static_cast<double>(prev.x) * p.y - static_cast<double>(prev.y) * p.x;
    prev = p;
  }
  a00 *= 0.5;
  return std::fabs(a00);
}

/// One box (cx, cy, w, h, angle in radians, le90) as calculate_overlaps_rotated prepares it:
/// float32, le90_to_oc (angle <= 0: + pi/2 in float64, rounded to float32, w and h swapped),
/// degrees = float32(float32(angle * 180) / float32(pi)).
inline Rect mmeval_rect(float cx, float cy, float w, float h, float angle) {
  if (angle <= 0.0f) {
    angle = static_cast<float>(static_cast<double>(angle) + 3.141592653589793 / 2);
    std::swap(w, h);
  }
  const float deg = (angle * 180.0f) / static_cast<float>(3.141592653589793);
  return {cx, cy, w, h, deg};
}

/// Whether two prepared boxes are certainly apart: their centres farther than 1.01 times the sum
/// of their half diagonals. OpenCV finds no intersection then (its corners are within float
/// rounding, about 1e-7 of the coordinates, of the true ones, and the gap is at least 0.0099
/// times the distance), so the IoU is 0 without running it: only a shortcut.
inline bool far_apart(const Rect& a, const Rect& b) {
  const double dx = static_cast<double>(a.cx) - b.cx, dy = static_cast<double>(a.cy) - b.cy;
  const double ra =
      0.5 * std::sqrt(static_cast<double>(a.w) * a.w + static_cast<double>(a.h) * a.h);
  const double rb =
      0.5 * std::sqrt(static_cast<double>(b.w) * b.w + static_cast<double>(b.h) * b.h);
  const double reach = 1.01 * (ra + rb);
  return dx * dx + dy * dy > reach * reach;
}

/// Scratch buffers reused across pairs.
struct Scratch {
  std::vector<Pt> pts, hull;
};

/// The intersection area of two prepared boxes (cv2's int_area; 0 when there is none).
inline double intersection_area(const Rect& a, const Rect& b, Scratch& s) {
  if (far_apart(a, b)) return 0.0;
  intersection(a, b, s.pts);
  if (s.pts.empty()) return 0.0;
  convex_hull(s.pts, s.hull);
  return contour_area(s.hull);
}

/// calculate_overlaps_rotated's IoU of two prepared boxes, float32.
inline float mmeval_iou(const Rect& a, const Rect& b, Scratch& s) {
  if (far_apart(a, b)) return 0.0f;
  intersection(a, b, s.pts);
  if (s.pts.empty()) return 0.0f;
  convex_hull(s.pts, s.hull);
  const auto inter = static_cast<float>(contour_area(s.hull));
  const float area1 = a.w * a.h, area2 = b.w * b.h;
  return inter / (((area1 + area2) - inter) + static_cast<float>(1e-5));
}

}  // namespace tally::detection::rotated
