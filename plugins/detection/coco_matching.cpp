// COCO evaluation, per group (matching): pycocotools 2.0.11's COCOeval.evaluateImg for every area
// range and IoU threshold, each detection in score order taking the best unmatched ground truth,
// stored as a detection's true-positive and ignore bits (Records::bits). See coco_stages.hpp.
#include <algorithm>
#include <cmath>

#include "coco_stages.hpp"

namespace tally::detection::coco {

namespace {

/// The group's ground-truth ignore flags at area range [lo, hi] (gig_a, per ground truth in
/// input order); returns the number not ignored.
std::int32_t area_ignore_flags(const EvalConfig& cfg, const ImageData& img,
                               const std::vector<std::size_t>& gts, double lo, double hi,
                               std::uint8_t* gig_a) {
  const bool kpts = cfg.kind == Kind::Keypoints;
  const std::size_t G = gts.size();
  std::int32_t npig = 0;
  for (std::size_t g = 0; g < G; ++g) {
    const double area = img.gt_area[gts[g]];
    // pycocotools' _prepare: ignore = iscrowd, or for keypoints num_keypoints == 0 too.
    const bool ignore = img.gt_crowd[gts[g]] != 0 || (kpts && img.gt_num_kpt[gts[g]] == 0);
    gig_a[g] = (ignore || area < lo || area > hi) ? 1 : 0;
    npig += gig_a[g] == 0;
  }
  return npig;
}

/// A group without ground truth at area range a: nothing to match, a detection is ignored when
/// its area is out of range (or, LVIS, its category not exhaustively annotated).
void ignore_unmatchable(const EvalConfig& cfg, const ImageData& img,
                        const std::vector<std::size_t>& dts, std::size_t a, std::uint64_t* bits) {
  const bool segm = cfg.kind == Kind::Segm;
  const std::size_t T = cfg.iou_thrs.size(), W = cfg.words(), A = cfg.num_areas();
  const double lo = cfg.areas[a].lo, hi = cfg.areas[a].hi;
  const std::size_t D = dts.size();
  for (std::size_t d = 0; d < D; ++d) {
    const double area = segm ? img.dt_area_segm[dts[d]] : img.dt_area[dts[d]];
    if (!(area < lo || area > hi) && !not_exhaustive(cfg, img, dts[d])) continue;
    // The T ignore bits of this area range at once (they may straddle two words).
    std::uint64_t* w = &bits[d * W];
    const std::size_t first = A * T + a * T;
    const std::uint64_t ones = T >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << T) - 1;
    w[first / 64] |= ones << (first % 64);
    if (first % 64 + T > 64) w[first / 64 + 1] |= ones >> (64 - first % 64);
  }
}

/// evaluateImg's matching at one area range, every threshold: match[t * D + d] the index into
/// gsorted (non-ignored ground truth first) of detection d's match, -1 for none.
void greedy_match(const EvalConfig& cfg, const ImageData& img, Scratch& sc,
                  const std::uint8_t* gig_a, std::int32_t* match) {
  const std::size_t T = cfg.iou_thrs.size();
  const auto &gts = sc.gts, &gsorted = sc.gsorted;
  const auto& ious = sc.ious;
  const std::vector<double>& best = sc.best;
  auto& gtm = sc.gtm;
  const std::size_t D = sc.dts.size(), G = gts.size();
  for (std::size_t t = 0; t < T; ++t) {
    gtm.assign(G, 0);
    const double thr = std::min(cfg.iou_thrs[t], 1 - 1e-10);
    for (std::size_t d = 0; d < D; ++d) {
      std::ptrdiff_t m = -1;
      if (!(best[d] < thr)) {
        double iou = thr;
        for (std::size_t s = 0; s < G; ++s) {
          const std::size_t g = gsorted[s];
          if (gtm[s] && !img.gt_crowd[gts[g]]) continue;
          if (m > -1 && gig_a[gsorted[static_cast<std::size_t>(m)]] == 0 && gig_a[g] == 1) break;
          const double v = ious[d * G + g];
          if (v < iou) continue;
          iou = v;
          m = static_cast<std::ptrdiff_t>(s);
        }
        if (m > -1) gtm[static_cast<std::size_t>(m)] = 1;
      }
      match[t * D + d] = static_cast<std::int32_t>(m);
    }
  }
}

/// The detections' true-positive and ignore bits at area range a from their matches.
void write_match_bits(const EvalConfig& cfg, const ImageData& img, const Scratch& sc, std::size_t a,
                      const std::uint8_t* gig_a, const std::int32_t* match, std::uint64_t* bits) {
  const bool segm = cfg.kind == Kind::Segm;
  const std::size_t T = cfg.iou_thrs.size(), W = cfg.words(), A = cfg.num_areas();
  const double lo = cfg.areas[a].lo, hi = cfg.areas[a].hi;
  const auto &dts = sc.dts, &gts = sc.gts, &gsorted = sc.gsorted;
  const std::size_t D = dts.size();
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t d = 0; d < D; ++d) {
      const std::int32_t m = match[t * D + d];
      bool matched_id = false, ignored = false;
      if (m > -1) {
        const std::size_t g = gsorted[static_cast<std::size_t>(m)];
        ignored = gig_a[g] != 0;
        // dtm holds the GT's id: a GT id of 0 reads as "no match" downstream.
        matched_id = img.gt_id[gts[g]] != 0;
      }
      if (!matched_id) {
        const double area = segm ? img.dt_area_segm[dts[d]] : img.dt_area[dts[d]];
        if (area < lo || area > hi || not_exhaustive(cfg, img, dts[d])) ignored = true;
      }
      std::uint64_t* w = &bits[d * W];
      const std::size_t tp_bit = a * T + t;
      const std::size_t ig_bit = A * T + tp_bit;
      if (matched_id && !ignored) w[tp_bit / 64] |= std::uint64_t{1} << (tp_bit % 64);
      if (ignored) w[ig_bit / 64] |= std::uint64_t{1} << (ig_bit % 64);
    }
  }
}

}  // namespace

void match_group(const EvalConfig& cfg, const ImageData& img, Scratch& sc, Records& out) {
  const std::size_t T = cfg.iou_thrs.size(), W = cfg.words(), A = cfg.num_areas();
  const std::size_t D = sc.dts.size(), G = sc.gts.size();
  const auto& ious = sc.ious;
  auto& gig = sc.gig;
  auto& gsorted = sc.gsorted;

  // Each detection's best IoU: where it is below a threshold, nothing can match it there (a
  // NaN IoU, which the matching would take, counts as +inf here).
  std::vector<double>& best = sc.best;
  best.assign(D, 0.0);
  for (std::size_t d = 0; d < D; ++d)
    for (std::size_t g = 0; g < G; ++g) {
      const double v = ious[d * G + g];
      best[d] = std::isnan(v) ? HUGE_VAL : std::max(best[d], v);
    }
  sc.match.resize(A * T * D);
  gig.resize(A * G);

  const std::size_t bits_at = out.bits.size();
  out.bits.resize(bits_at + D * W, 0);
  out.group_gts.push_back(static_cast<std::int32_t>(G));
  for (std::size_t a = 0; a < A; ++a) {
    std::uint8_t* gig_a = gig.data() + a * G;
    out.group_gts.push_back(
        area_ignore_flags(cfg, img, sc.gts, cfg.areas[a].lo, cfg.areas[a].hi, gig_a));
    if (G == 0) {
      ignore_unmatchable(cfg, img, sc.dts, a, out.bits.data() + bits_at);
      continue;
    }
    // gtind = np.argsort(_ignore, kind='mergesort'): non-ignored first, stable.
    gsorted.clear();
    for (std::size_t g = 0; g < G; ++g)
      if (gig_a[g] == 0) gsorted.push_back(g);
    for (std::size_t g = 0; g < G; ++g)
      if (gig_a[g] != 0) gsorted.push_back(g);
    // The matching depends on the area range only through its ignore flags: a range whose
    // flags equal an earlier one's has the same matches (area "all" and the range holding
    // every ground truth, often).
    std::int32_t* match = sc.match.data() + a * T * D;
    std::size_t same = a;
    for (std::size_t b = 0; b < a && same == a; ++b)
      if (std::equal(gig_a, gig_a + G, gig.data() + b * G)) same = b;
    if (same < a) {
      std::copy_n(sc.match.data() + same * T * D, T * D, match);
    } else {
      greedy_match(cfg, img, sc, gig_a, match);
    }
    write_match_bits(cfg, img, sc, a, gig_a, match, out.bits.data() + bits_at);
  }
}

}  // namespace tally::detection::coco
