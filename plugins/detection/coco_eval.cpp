// The COCO evaluation core: pycocotools 2.0.11's COCOeval.evaluateImg / accumulate / summarize,
// operation for operation where the floating-point result depends on it (IoU, recall and precision
// divisions, NumPy's pairwise mean). See coco_eval.hpp and coco_detection.cpp.
#include "coco_eval.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "common.hpp"
#include "tally/error.hpp"
#include "tally/numpy_math.hpp"

namespace tally::detection::coco {

std::vector<double> default_iou_thrs() {
  // np.linspace(.5, 0.95, int(np.round((0.95 - .5) / .05)) + 1): y = i * step + start, the last
  // value set to stop.
  const int num = 10;
  const double start = .5, stop = 0.95;
  const double step = (stop - start) / (num - 1);
  std::vector<double> t(num);
  for (int i = 0; i < num; ++i) t[i] = static_cast<double>(i) * step + start;
  t[num - 1] = stop;
  return t;
}

std::vector<AreaRange> default_area_ranges(Kind kind) {
  // [0 ** 2, 1e5 ** 2], [0 ** 2, 32 ** 2], [32 ** 2, 96 ** 2], [96 ** 2, 1e5 ** 2]: exact doubles.
  if (kind == Kind::Keypoints)
    return {{0.0, 1e10, "all"}, {1024.0, 9216.0, "m"}, {9216.0, 1e10, "l"}};
  return {{0.0, 1e10, "all"}, {0.0, 1024.0, "s"}, {1024.0, 9216.0, "m"}, {9216.0, 1e10, "l"}};
}

std::vector<std::int64_t> default_max_dets(Kind kind) {
  if (kind == Kind::Keypoints) return {20};
  return {1, 10, 100};
}

std::vector<double> coco_kpt_sigmas() {
  // np.array([...]) / 10.0, element by element.
  const double s[] = {.26, .25, .25,  .35,  .35, .79, .79, .72, .72,
                      .62, .62, 1.07, 1.07, .87, .87, .89, .89};
  std::vector<double> out;
  for (const double v : s) out.push_back(v / 10.0);
  return out;
}

namespace {

/// np.linspace(.0, 1.00, 101): i * 0.01 (step = 1.0 / 100), the last value 1.0.
std::vector<double> rec_thrs() {
  std::vector<double> r(101);
  const double step = (1.0 - 0.0) / 100;
  for (int i = 0; i < 101; ++i) r[i] = static_cast<double>(i) * step + 0.0;
  r[100] = 1.0;
  return r;
}

}  // namespace

void Records::append(const Records& o) {
  img_groups.insert(img_groups.end(), o.img_groups.begin(), o.img_groups.end());
  group_cat.insert(group_cat.end(), o.group_cat.begin(), o.group_cat.end());
  group_ndets.insert(group_ndets.end(), o.group_ndets.begin(), o.group_ndets.end());
  group_gts.insert(group_gts.end(), o.group_gts.begin(), o.group_gts.end());
  score.insert(score.end(), o.score.begin(), o.score.end());
  bits.insert(bits.end(), o.bits.begin(), o.bits.end());
  group_freq.insert(group_freq.end(), o.group_freq.begin(), o.group_freq.end());
  img_conf.insert(img_conf.end(), o.img_conf.begin(), o.img_conf.end());
  conf_pairs.insert(conf_pairs.end(), o.conf_pairs.begin(), o.conf_pairs.end());
  img_tide.insert(img_tide.end(), o.img_tide.begin(), o.img_tide.end());
  tide_cls.insert(tide_cls.end(), o.tide_cls.begin(), o.tide_cls.end());
  tide_code.insert(tide_code.end(), o.tide_code.begin(), o.tide_code.end());
  tide_fix.insert(tide_fix.end(), o.tide_fix.begin(), o.tide_fix.end());
  tide_score.insert(tide_score.end(), o.tide_score.begin(), o.tide_score.end());
}

void KindRecords::merge(const KindRecords& later) {
  if (later.size() != size())
    throw RuntimeError("COCO records: a rank holds " + std::to_string(later.size()) +
                       " kinds, an earlier one " + std::to_string(size()));
  for (std::size_t j = 0; j < size(); ++j) (*this)[j].append(later[j]);
}

namespace {

struct Scratch {
  std::vector<std::size_t> dord, gord, dts, gts, gsorted;
  std::vector<double> ious, dbox, gbox, oks_terms, oks_vars, best;
  std::vector<std::uint8_t> gig, gtm;
  std::vector<std::int32_t> match;  // per (area range, threshold, detection): the index into
                                    // gsorted of its match, -1 for none
};

/// This thread's scratch. Not inlined: in a shared library a thread_local's address is a call,
/// which the compiler would otherwise repeat at every use rather than keep in a register.
[[gnu::noinline]] Scratch& thread_scratch() {
  thread_local Scratch s;
  return s;
}

/// computeOks: ious[d * G + g] = OKS of detection dts[d] with ground truth gts[g], operation for
/// operation as pycocotools 2.0.11 (vars = (sigmas * 2)**2; e = (dx**2 + dy**2) / vars /
/// (area + np.spacing(1)) / 2 over the visible keypoints, or over all of them measured to the box
/// doubled around the ground truth when none is visible; np.sum(np.exp(-e)) / len(e)).
void compute_oks(const EvalConfig& cfg, const ImageData& img, const std::vector<std::size_t>& dts,
                 const std::vector<std::size_t>& gts, std::vector<double>& ious,
                 std::vector<double>& terms, std::vector<double>& vars) {
  const std::size_t K = cfg.kpt_sigmas.size(), D = dts.size(), G = gts.size();
  const double eps = std::nextafter(1.0, 2.0) - 1.0;
  vars.resize(K);
  for (std::size_t k = 0; k < K; ++k) {
    const double s2 = cfg.kpt_sigmas[k] * 2;
    vars[k] = s2 * s2;
  }
  terms.resize(K);
  for (std::size_t j = 0; j < G; ++j) {
    const double* g = &img.gt_kpt[gts[j] * K * 3];
    std::size_t k1 = 0;
    for (std::size_t k = 0; k < K; ++k) k1 += g[k * 3 + 2] > 0;
    const double* bb = &img.gt_box[gts[j] * 4];
    const double x0 = bb[0] - bb[2], x1 = bb[0] + bb[2] * 2;
    const double y0 = bb[1] - bb[3], y1 = bb[1] + bb[3] * 2;
    const double area = img.gt_area[gts[j]] + eps;
    for (std::size_t i = 0; i < D; ++i) {
      const double* d = &img.dt_kpt[dts[i] * K * 3];
      std::size_t n = 0;
      for (std::size_t k = 0; k < K; ++k) {
        const double xd = d[k * 3], yd = d[k * 3 + 1];
        double dx, dy;
        if (k1 > 0) {
          if (!(g[k * 3 + 2] > 0)) continue;
          dx = xd - g[k * 3];
          dy = yd - g[k * 3 + 1];
        } else {
          dx = std::max(0.0, x0 - xd) + std::max(0.0, xd - x1);
          dy = std::max(0.0, y0 - yd) + std::max(0.0, yd - y1);
        }
        const double e = (dx * dx + dy * dy) / vars[k] / area / 2;
        // exp(-e) is 0 in double past e = 745.2 (the least subnormal is exp(-744.4)); libm takes
        // a slow path for it, and far-off keypoints (a false detection) are most of the pairs.
        terms[n++] = e > 746.0 ? 0.0 : std::exp(-e);
      }
      ious[i * G + j] = numpy::sum(terms.data(), n) / static_cast<double>(n);
    }
  }
}

}  // namespace

/// hotcoco 1.3's COCOeval.confusion_matrix, one image: every detection against every non-crowd
/// ground truth whatever their categories (of cat_filter, when given). Detections by category
/// (ascending), then input order, stably sorted by score (descending) and cut to max_det over
/// the image; ground truth likewise by category. Each detection in turn takes the unmatched
/// ground truth with the largest IoU >= iou_thr (the last of equals); box or mask IoU without
/// crowds. Events: (its category, the detection's), (-1, detection's) for a false alarm, and
/// (category, -1) for each ground truth left.
void confuse(const EvalConfig& cfg, const ImageData& img, Records& out) {
  const bool segm = cfg.kind == Kind::Segm;
  const auto known = [&](std::int64_t c) {
    return cfg.conf_filter.empty() ||
           std::binary_search(cfg.conf_filter.begin(), cfg.conf_filter.end(), c);
  };
  std::vector<std::size_t> dts, gts;
  for (std::size_t d = 0; d < img.dt_score.size(); ++d)
    if (known(img.dt_label[d])) dts.push_back(d);
  for (std::size_t g = 0; g < img.gt_label.size(); ++g)
    if (known(img.gt_label[g]) && img.gt_crowd[g] == 0) gts.push_back(g);
  std::stable_sort(dts.begin(), dts.end(),
                   [&](std::size_t a, std::size_t b) { return img.dt_label[a] < img.dt_label[b]; });
  std::stable_sort(gts.begin(), gts.end(),
                   [&](std::size_t a, std::size_t b) { return img.gt_label[a] < img.gt_label[b]; });
  std::stable_sort(dts.begin(), dts.end(),
                   [&](std::size_t a, std::size_t b) { return img.dt_score[a] > img.dt_score[b]; });
  if (dts.size() > static_cast<std::size_t>(cfg.confusion_max_det))
    dts.resize(static_cast<std::size_t>(cfg.confusion_max_det));
  std::int32_t events = 0;
  std::vector<std::uint8_t> matched(gts.size(), 0);
  const auto event = [&](std::int64_t g, std::int64_t d) {
    out.conf_pairs.push_back(static_cast<std::int32_t>(g));
    out.conf_pairs.push_back(static_cast<std::int32_t>(d));
    ++events;
  };
  // Masks: their boxes once each (rle_iou_one takes the boxes' IoU as a first test).
  std::vector<double> gbox(segm ? gts.size() * 4 : 0);
  for (std::size_t j = 0; segm && j < gts.size(); ++j)
    mask::rle_to_bbox(img.gt_rle[gts[j]], &gbox[j * 4]);
  double dbox[4];
  for (const std::size_t d : dts) {
    double best = cfg.confusion_iou;
    std::ptrdiff_t m = -1;
    if (segm) mask::rle_to_bbox(img.dt_rle[d], dbox);
    for (std::size_t j = 0; j < gts.size(); ++j) {
      if (matched[j]) continue;
      const std::size_t g = gts[j];
      double iou;
      if (segm) {
        iou = mask::rle_iou_one(img.dt_rle[d], img.gt_rle[g], false,
                                mask::bb_iou_one(dbox, &gbox[j * 4], false));
      } else {
        iou = mask::bb_iou_one(&img.dt_box[d * 4], &img.gt_box[g * 4], false);
      }
      if (iou >= best) {
        best = iou;
        m = static_cast<std::ptrdiff_t>(j);
      }
    }
    if (m >= 0) {
      matched[static_cast<std::size_t>(m)] = 1;
      event(img.gt_label[gts[static_cast<std::size_t>(m)]], img.dt_label[d]);
    } else {
      event(-1, img.dt_label[d]);
    }
  }
  for (std::size_t j = 0; j < gts.size(); ++j)
    if (!matched[j]) event(img.gt_label[gts[j]], -1);
  out.img_conf.push_back(events);
}

void evaluate_image(const EvalConfig& cfg, const ImageData& img, Records& out) {
  // ImageData is filled by read_image (common.hpp): every vector has its instance count.
  const std::size_t nd = img.dt_score.size(), ng = img.gt_area.size();
  const bool segm = cfg.kind == Kind::Segm, kpts = cfg.kind == Kind::Keypoints;
  const std::size_t T = cfg.iou_thrs.size(), W = cfg.words(), A = cfg.num_areas();
  const auto max_det = static_cast<std::size_t>(cfg.max_dets.back());

  // LVIS: an unmatched detection of a category not exhaustively annotated in the image is
  // ignored (LVISEval.evaluate_img's dt_ig_mask).
  const auto not_exhaustive = [&](std::size_t d) {
    return cfg.federated &&
           std::binary_search(img.nel_cats.begin(), img.nel_cats.end(), img.dt_label[d]);
  };

  // Groups: per category (ascending id) the GTs and detections in input order; without
  // categories one group holding everything ordered by category id, then input order (the order
  // of pycocotools' `[_ for cId in p.catIds for _ in self._gts[imgId, cId]]`).
  // Scratch buffers kept per thread: no allocation per image once they have grown.
  Scratch& sc = thread_scratch();
  auto &dord = sc.dord, &gord = sc.gord, &dts = sc.dts, &gts = sc.gts, &gsorted = sc.gsorted;
  auto &ious = sc.ious, &dbox = sc.dbox, &gbox = sc.gbox, &oks_terms = sc.oks_terms;
  auto &gig = sc.gig, &gtm = sc.gtm;
  dord.resize(nd);
  gord.resize(ng);
  std::iota(dord.begin(), dord.end(), 0);
  std::iota(gord.begin(), gord.end(), 0);
  if (cfg.federated) {
    // LVISResults.limit_dets_per_image: sorted(anns, key=score, reverse=True)[:max_dets], a
    // stable sort, so among equal scores the earlier result is kept.
    if (nd > max_det) {
      std::vector<std::size_t> by_score(dord);
      std::stable_sort(by_score.begin(), by_score.end(), [&](std::size_t a, std::size_t b) {
        return img.dt_score[a] > img.dt_score[b];
      });
      by_score.resize(max_det);
      std::sort(by_score.begin(), by_score.end());
      dord = std::move(by_score);
    }
    // _prepare reads ground truth and detections through get_ann_ids(img_ids, cat_ids), which
    // keeps only areas in the open range (0, inf): an instance of area 0 takes no part.
    const auto zero_area = [](double a) { return !(a > 0 && a < HUGE_VAL); };
    std::erase_if(gord, [&](std::size_t g) { return zero_area(img.gt_area[g]); });
    std::erase_if(dord, [&](std::size_t d) {
      return zero_area(segm ? img.dt_area_segm[d] : img.dt_area[d]);
    });
    // A detection counts when its category has ground truth in the image or is in the image's
    // neg_category_ids.
    std::erase_if(dord, [&](std::size_t d) {
      const std::int64_t c = img.dt_label[d];
      return !std::binary_search(img.neg_cats.begin(), img.neg_cats.end(), c) &&
             std::none_of(gord.begin(), gord.end(),
                          [&](std::size_t g) { return img.gt_label[g] == c; });
    });
  }
  if (!cfg.use_cats && !cfg.cat_filter.empty()) {
    const auto known = [&](std::int64_t c) {
      return std::binary_search(cfg.cat_filter.begin(), cfg.cat_filter.end(), c);
    };
    std::erase_if(dord, [&](std::size_t d) { return !known(img.dt_label[d]); });
    std::erase_if(gord, [&](std::size_t g) { return !known(img.gt_label[g]); });
  }
  std::stable_sort(dord.begin(), dord.end(),
                   [&](std::size_t a, std::size_t b) { return img.dt_label[a] < img.dt_label[b]; });
  std::stable_sort(gord.begin(), gord.end(),
                   [&](std::size_t a, std::size_t b) { return img.gt_label[a] < img.gt_label[b]; });

  std::int32_t groups = 0;
  std::size_t di = 0, gi = 0;
  const std::size_t dn = dord.size(), gn = gord.size();  // those that take part
  while (di < dn || gi < gn) {
    std::int64_t cat = -1;
    if (cfg.use_cats) {
      cat = std::numeric_limits<std::int64_t>::max();
      if (di < dn) cat = img.dt_label[dord[di]];
      if (gi < gn) cat = std::min(cat, img.gt_label[gord[gi]]);
      dts.clear();
      gts.clear();
      while (di < dn && img.dt_label[dord[di]] == cat) dts.push_back(dord[di++]);
      while (gi < gn && img.gt_label[gord[gi]] == cat) gts.push_back(gord[gi++]);
    } else {
      dts.assign(dord.begin(), dord.end());
      gts.assign(gord.begin(), gord.end());
      di = dn;
      gi = gn;
    }
    // np.argsort(-score, kind='mergesort'): stable, descending; then the first maxDets[-1].
    std::stable_sort(dts.begin(), dts.end(), [&](std::size_t a, std::size_t b) {
      return img.dt_score[a] > img.dt_score[b];
    });
    if (dts.size() > max_det) dts.resize(max_det);  // federated: never (limited per image)
    const std::size_t D = dts.size(), G = gts.size();

    // ious[d * G + g], g in input order (computeIoU).
    ious.assign(D * G, 0.0);
    if (D > 0 && G > 0) {
      if (segm) {
        dbox.resize(D * 4);
        gbox.resize(G * 4);
        for (std::size_t d = 0; d < D; ++d) mask::rle_to_bbox(img.dt_rle[dts[d]], &dbox[d * 4]);
        for (std::size_t g = 0; g < G; ++g) mask::rle_to_bbox(img.gt_rle[gts[g]], &gbox[g * 4]);
        for (std::size_t d = 0; d < D; ++d)
          for (std::size_t g = 0; g < G; ++g) {
            const bool crowd = img.gt_crowd[gts[g]] != 0;
            const double b = mask::bb_iou_one(&dbox[d * 4], &gbox[g * 4], crowd);
            ious[d * G + g] = mask::rle_iou_one(img.dt_rle[dts[d]], img.gt_rle[gts[g]], crowd, b);
          }
      } else if (cfg.kind == Kind::Keypoints) {
        compute_oks(cfg, img, dts, gts, ious, oks_terms, sc.oks_vars);
      } else {
        for (std::size_t d = 0; d < D; ++d)
          for (std::size_t g = 0; g < G; ++g)
            ious[d * G + g] = mask::bb_iou_one(&img.dt_box[dts[d] * 4], &img.gt_box[gts[g] * 4],
                                               img.gt_crowd[gts[g]] != 0);
      }
    }

    // Each detection's best IoU: where it is below a threshold, nothing can match it there (a
    // NaN IoU, which the loop below would take, counts as +inf here).
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
      const double lo = cfg.areas[a].lo, hi = cfg.areas[a].hi;
      std::uint8_t* gig_a = gig.data() + a * G;
      std::int32_t npig = 0;
      for (std::size_t g = 0; g < G; ++g) {
        const double area = img.gt_area[gts[g]];
        // pycocotools' _prepare: ignore = iscrowd, or for keypoints num_keypoints == 0 too.
        const bool ignore = img.gt_crowd[gts[g]] != 0 || (kpts && img.gt_num_kpt[gts[g]] == 0);
        gig_a[g] = (ignore || area < lo || area > hi) ? 1 : 0;
        npig += gig_a[g] == 0;
      }
      out.group_gts.push_back(npig);
      if (G == 0) {  // nothing to match: a detection is ignored when its area is out of range
        for (std::size_t d = 0; d < D; ++d) {
          const double area = segm ? img.dt_area_segm[dts[d]] : img.dt_area[dts[d]];
          if (!(area < lo || area > hi) && !not_exhaustive(dts[d])) continue;
          // The T ignore bits of this area range at once (they may straddle two words).
          std::uint64_t* w = &out.bits[bits_at + d * W];
          const std::size_t first = A * T + a * T;
          const std::uint64_t ones = T >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << T) - 1;
          w[first / 64] |= ones << (first % 64);
          if (first % 64 + T > 64) w[first / 64 + 1] |= ones >> (64 - first % 64);
        }
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
                if (m > -1 && gig_a[gsorted[static_cast<std::size_t>(m)]] == 0 && gig_a[g] == 1)
                  break;
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
            if (area < lo || area > hi || not_exhaustive(dts[d])) ignored = true;
          }
          std::uint64_t* w = &out.bits[bits_at + d * W];
          const std::size_t tp_bit = a * T + t;
          const std::size_t ig_bit = A * T + tp_bit;
          if (matched_id && !ignored) w[tp_bit / 64] |= std::uint64_t{1} << (tp_bit % 64);
          if (ignored) w[ig_bit / 64] |= std::uint64_t{1} << (ig_bit % 64);
        }
      }
    }
    for (std::size_t d = 0; d < D; ++d) out.score.push_back(img.dt_score[dts[d]]);
    out.group_cat.push_back(static_cast<std::int32_t>(cat));
    out.group_ndets.push_back(static_cast<std::int32_t>(D));
    if (cfg.federated) out.group_freq.push_back(G > 0 ? img.gt_freq[gts[0]] : std::int8_t{-1});
    ++groups;
    if (!cfg.use_cats) break;
  }
  out.img_groups.push_back(groups);
  if (cfg.confusion_iou >= 0) confuse(cfg, img, out);
  if (cfg.tide) tide::image(cfg, img, out);
}

namespace {

/// hotcoco 1.3's COCOeval.calibration(n_bins, iou_threshold): every detection of the evaluated
/// categories at area "all" that is not ignored at the threshold, in pycocotools' order
/// (categories ascending, images ascending, each image's detections by score), goes to bin
/// min(floor(score * n), n - 1) (a negative score to bin 0); per bin the mean score and the
/// fraction of true positives, summed in that order; ECE = sum over the bins of count / total *
/// |accuracy - confidence|, MCE = the largest gap; per category the same over its detections.
void calibrate(const EvalConfig& cfg, const std::vector<std::size_t>& cat_begin,
               const std::vector<double>& score, const std::vector<std::uint32_t>& masks,
               Summary& out) {
  const std::size_t nb = cfg.calibration_bins, A = cfg.num_areas(), K = cat_begin.size() - 1;
  const std::size_t a_all = cfg.all_area();
  const auto t = static_cast<std::size_t>(
      std::find(cfg.iou_thrs.begin(), cfg.iou_thrs.end(), cfg.calibration_iou) -
      cfg.iou_thrs.begin());
  struct Bins {
    std::vector<double> conf, acc;
    std::vector<std::size_t> count;
    std::size_t total = 0;
    explicit Bins(std::size_t n) : conf(n, 0.0), acc(n, 0.0), count(n, 0) {}
    void add(double c, bool correct) {
      const double x = c * static_cast<double>(conf.size());
      // Rust's `as usize`: toward zero, a negative value 0.
      const std::size_t i = x <= 0 ? 0
                            : x >= static_cast<double>(conf.size() - 1)
                                ? conf.size() - 1
                                : static_cast<std::size_t>(x);
      conf[i] += c;
      acc[i] += correct ? 1.0 : 0.0;
      ++count[i];
      ++total;
    }
    /// Means per bin, then ECE and MCE.
    std::pair<double, double> finish() {
      double ece = 0, mce = 0;
      for (std::size_t i = 0; i < conf.size(); ++i) {
        if (count[i] == 0) continue;
        const auto n = static_cast<double>(count[i]);
        conf[i] /= n;
        acc[i] /= n;
        const double gap = std::abs(acc[i] - conf[i]);
        ece += (n / static_cast<double>(total)) * gap;
        mce = std::max(mce, gap);
      }
      return {ece, mce};
    }
  };
  Bins all(nb);
  out.ece_per_cat.assign(K, std::numeric_limits<double>::quiet_NaN());
  for (std::size_t k = 0; k < K; ++k) {
    Bins cat(nb);
    for (std::size_t j = cat_begin[k]; j < cat_begin[k + 1]; ++j) {
      const std::uint32_t tp = masks[j * 2 * A + 2 * a_all], ig = masks[j * 2 * A + 2 * a_all + 1];
      if ((ig >> t) & 1U) continue;
      const bool correct = ((tp >> t) & 1U) != 0;
      all.add(score[j], correct);
      cat.add(score[j], correct);
    }
    if (cat.total > 0) out.ece_per_cat[k] = cat.finish().first;
  }
  std::tie(out.ece, out.mce) = all.finish();
  out.bin_confidence = all.conf;
  out.bin_accuracy = all.acc;
  out.bin_count = all.count;
}

}  // namespace

Summary summarize(const EvalConfig& cfg, const std::vector<std::int64_t>& ids, const Records& rec,
                  const std::vector<std::int64_t>& cat_ids_param, int threads) {
  const std::size_t T = cfg.iou_thrs.size(), W = cfg.words(), M = cfg.max_dets.size();
  const std::size_t A = cfg.num_areas();
  const std::vector<double> recs = rec_thrs();
  const std::size_t R = recs.size();

  // Images in ascending id order, the first occurrence of an id kept.
  struct ImageRef {
    std::int64_t id;
    std::size_t group_begin, group_end;
    std::size_t conf_begin = 0, conf_end = 0;  // its confusion events
    std::size_t tide_begin = 0, tide_end = 0;  // its TIDE events
  };
  // The records arrive from other ranks: every count and size is checked before it is used.
  if (rec.img_groups.size() != ids.size())
    throw RuntimeError("COCO records hold " + std::to_string(rec.img_groups.size()) +
                       " images, expected " + std::to_string(ids.size()));
  if (rec.group_cat.size() != rec.group_ndets.size() ||
      rec.group_gts.size() != rec.group_ndets.size() * (A + 1) ||
      rec.group_freq.size() != (cfg.federated ? rec.group_ndets.size() : 0))
    throw RuntimeError("COCO records are inconsistent");
  std::vector<std::size_t> det_offsets(rec.group_ndets.size() + 1, 0);
  for (std::size_t g = 0; g < rec.group_ndets.size(); ++g) {
    if (rec.group_ndets[g] < 0) throw RuntimeError("COCO records are inconsistent");
    det_offsets[g + 1] = det_offsets[g] + static_cast<std::size_t>(rec.group_ndets[g]);
  }
  if (det_offsets.back() != rec.score.size() || rec.bits.size() != rec.score.size() * W)
    throw RuntimeError("COCO records are inconsistent");
  const bool confusion = cfg.confusion_iou >= 0;
  if (rec.img_conf.size() != (confusion ? ids.size() : 0) || rec.conf_pairs.size() % 2 != 0)
    throw RuntimeError("COCO records are inconsistent");
  const std::size_t n_tide = rec.tide_cls.size();
  if (rec.img_tide.size() != (cfg.tide ? ids.size() : 0) || rec.tide_code.size() != n_tide ||
      rec.tide_fix.size() != n_tide || rec.tide_score.size() != n_tide)
    throw RuntimeError("COCO records are inconsistent");
  std::vector<ImageRef> images;
  images.reserve(ids.size());
  std::size_t groups = 0, events = 0, tide_events = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (rec.img_groups[i] < 0 ||
        static_cast<std::size_t>(rec.img_groups[i]) > rec.group_ndets.size() - groups)
      throw RuntimeError("COCO records are inconsistent");
    const auto n = static_cast<std::size_t>(rec.img_groups[i]);
    images.push_back({ids[i], groups, groups + n});
    groups += n;
    if (confusion) {
      if (rec.img_conf[i] < 0 ||
          static_cast<std::size_t>(rec.img_conf[i]) > rec.conf_pairs.size() / 2 - events)
        throw RuntimeError("COCO records are inconsistent");
      images.back().conf_begin = events;
      events += static_cast<std::size_t>(rec.img_conf[i]);
      images.back().conf_end = events;
    }
    if (cfg.tide) {
      if (rec.img_tide[i] < 0 || static_cast<std::size_t>(rec.img_tide[i]) > n_tide - tide_events)
        throw RuntimeError("COCO records are inconsistent");
      images.back().tide_begin = tide_events;
      tide_events += static_cast<std::size_t>(rec.img_tide[i]);
      images.back().tide_end = tide_events;
    }
  }
  if (groups != rec.group_ndets.size() || events != rec.conf_pairs.size() / 2 ||
      tide_events != n_tide)
    throw RuntimeError("COCO records are inconsistent");
  std::stable_sort(images.begin(), images.end(),
                   [](const ImageRef& a, const ImageRef& b) { return a.id < b.id; });
  images.erase(std::unique(images.begin(), images.end(),
                           [](const ImageRef& a, const ImageRef& b) { return a.id == b.id; }),
               images.end());
  if (!cfg.img_filter.empty())
    std::erase_if(images, [&](const ImageRef& im) {
      return !std::binary_search(cfg.img_filter.begin(), cfg.img_filter.end(), im.id);
    });

  // Categories.
  Summary out;
  if (!cfg.use_cats) {
    out.cat_ids = {-1};
  } else if (!cat_ids_param.empty()) {
    out.cat_ids = cat_ids_param;
    std::sort(out.cat_ids.begin(), out.cat_ids.end());
    out.cat_ids.erase(std::unique(out.cat_ids.begin(), out.cat_ids.end()), out.cat_ids.end());
  } else {
    // The distinct categories first (a group per category and image: sorting them all would
    // sort a million entries at Objects365's size), then sorted.
    std::unordered_set<std::int64_t> seen;
    for (const auto& im : images) {
      for (std::size_t g = im.group_begin; g < im.group_end; ++g)
        if (rec.group_gts[g * (A + 1)] > 0 && seen.insert(rec.group_cat[g]).second)
          out.cat_ids.push_back(rec.group_cat[g]);
    }
    std::sort(out.cat_ids.begin(), out.cat_ids.end());
    out.cat_ids.erase(std::unique(out.cat_ids.begin(), out.cat_ids.end()), out.cat_ids.end());
  }
  const std::size_t K = out.cat_ids.size();
  std::unordered_map<std::int64_t, std::size_t> cat_index;
  for (std::size_t k = 0; k < K; ++k) cat_index.emplace(out.cat_ids[k], k);
  if (cfg.federated) {  // each category's frequency, as its ground truth gives it
    out.cat_freq.assign(K, -1);
    for (const auto& im : images)
      for (std::size_t g = im.group_begin; g < im.group_end; ++g) {
        const auto it = cat_index.find(rec.group_cat[g]);
        const int f = rec.group_freq[g];
        if (it == cat_index.end() || f < 0) continue;
        int& have = out.cat_freq[it->second];
        if (have >= 0 && have != f)
          throw InputError("gt_frequency: category " + std::to_string(rec.group_cat[g]) +
                           " is given two frequencies (" + std::string(1, "rcf"[have]) + " and " +
                           std::string(1, "rcf"[f > 2 ? 2 : f]) + ")");
        have = f;
      }
  }

  // Each category's detections, gathered in image order into one flat array: its score, its
  // rank in its group, and per area range a T-bit true-positive mask and a T-bit ignore mask. Two
  // passes over the records front to back (count, then fill); reading each category's groups
  // where they lie would jump through all the records once per category.
  const std::uint32_t tmask = T >= 32 ? ~std::uint32_t{0} : ((std::uint32_t{1} << T) - 1);
  const auto field = [&](const std::uint64_t* w, std::size_t bit) {
    std::uint64_t v = w[bit / 64] >> (bit % 64);
    if (bit % 64 != 0 && bit / 64 + 1 < W) v |= w[bit / 64 + 1] << (64 - bit % 64);
    return static_cast<std::uint32_t>(v) & tmask;
  };
  std::vector<std::int32_t> group_k;  // per group of `images`, in order: its category index
  std::vector<std::size_t> cat_begin(K + 1, 0);
  std::vector<std::int64_t> npig_all(K * A, 0);
  for (const auto& im : images) {
    for (std::size_t g = im.group_begin; g < im.group_end; ++g) {
      const auto it = cat_index.find(cfg.use_cats ? rec.group_cat[g] : -1);
      group_k.push_back(it == cat_index.end() ? -1 : static_cast<std::int32_t>(it->second));
      if (it == cat_index.end()) continue;
      cat_begin[it->second + 1] += static_cast<std::size_t>(rec.group_ndets[g]);
      for (std::size_t a = 0; a < A; ++a)
        npig_all[it->second * A + a] += rec.group_gts[g * (A + 1) + 1 + a];
    }
  }
  for (std::size_t k = 0; k < K; ++k) cat_begin[k + 1] += cat_begin[k];
  const std::size_t n_dets = cat_begin[K];
  std::vector<double> flat_score(n_dets);
  std::vector<std::uint32_t> flat_rank(n_dets), flat_masks(n_dets * 2 * A);
  {
    std::vector<std::size_t> at(cat_begin.begin(), cat_begin.end() - 1);
    std::size_t gi = 0;
    for (const auto& im : images) {
      for (std::size_t g = im.group_begin; g < im.group_end; ++g, ++gi) {
        if (group_k[gi] < 0) continue;
        std::size_t& j = at[static_cast<std::size_t>(group_k[gi])];
        const auto n = static_cast<std::size_t>(rec.group_ndets[g]);
        for (std::size_t i = 0; i < n; ++i, ++j) {
          const std::size_t d = det_offsets[g] + i;
          const std::uint64_t* w = &rec.bits[d * W];
          flat_score[j] = rec.score[d];
          flat_rank[j] = static_cast<std::uint32_t>(i);
          for (std::size_t a = 0; a < A; ++a) {
            flat_masks[j * 2 * A + 2 * a] = field(w, a * T);
            flat_masks[j * 2 * A + 2 * a + 1] = field(w, A * T + a * T);
          }
        }
      }
    }
  }

  // precision[t][r][k][a][m], recall[t][k][a][m] as pycocotools lays them out.
  out.T = T;
  out.R = R;
  out.K = K;
  out.A = A;
  out.M = M;
  out.iou_thrs = cfg.iou_thrs;
  out.rec_thrs = recs;
  out.max_dets = cfg.max_dets;
  out.precision.assign(T * R * K * A * M, -1.0);
  if (cfg.keep_scores) out.scores.assign(T * R * K * A * M, -1.0);
  out.recall.assign(T * K * A * M, -1.0);
  const double eps = std::nextafter(1.0, 2.0) - 1.0;  // np.spacing(1)

  if (cfg.calibration_bins > 0) calibrate(cfg, cat_begin, flat_score, flat_masks, out);
  if (confusion) {  // summed over the images (each id once, as above)
    out.confusion_cats = cfg.conf_filter;
    if (out.confusion_cats.empty()) {
      std::unordered_set<std::int64_t> seen;
      for (const auto& im : images)
        for (std::size_t e = im.conf_begin; e < im.conf_end; ++e)
          for (const std::int32_t c : {rec.conf_pairs[2 * e], rec.conf_pairs[2 * e + 1]})
            if (c >= 0 && seen.insert(c).second) out.confusion_cats.push_back(c);
      std::sort(out.confusion_cats.begin(), out.confusion_cats.end());
    }
    const std::size_t C = out.confusion_cats.size() + 1;
    out.confusion.assign(C * C, 0);
    const auto index = [&](std::int32_t c) {
      if (c < 0) return C - 1;
      const auto it =
          std::lower_bound(out.confusion_cats.begin(), out.confusion_cats.end(), std::int64_t{c});
      if (it == out.confusion_cats.end() || *it != c)
        throw RuntimeError("COCO records: a confusion event of a category left out");
      return static_cast<std::size_t>(it - out.confusion_cats.begin());
    };
    for (const auto& im : images)
      for (std::size_t e = im.conf_begin; e < im.conf_end; ++e)
        ++out.confusion[index(rec.conf_pairs[2 * e]) * C + index(rec.conf_pairs[2 * e + 1])];
  }

  if (cfg.f1_curve_iou >= 0) {  // every category's detections pooled, against the score
    const std::size_t t = out.thr_index(cfg.f1_curve_iou), a = cfg.all_area();
    if (t >= T) throw RuntimeError("f1_curve_iou is not one of the IoU thresholds");
    const auto max_det = static_cast<std::uint64_t>(cfg.max_dets.back());
    std::vector<double> all, tps;
    std::int64_t npig = 0;
    for (std::size_t k = 0; k < K; ++k) {
      npig += npig_all[k * A + a];
      for (std::size_t j = cat_begin[k]; j < cat_begin[k + 1]; ++j) {
        if (flat_rank[j] >= max_det || ((flat_masks[j * 2 * A + 2 * a + 1] >> t) & 1)) continue;
        all.push_back(flat_score[j]);
        if ((flat_masks[j * 2 * A + 2 * a] >> t) & 1) tps.push_back(flat_score[j]);
      }
    }
    std::sort(all.begin(), all.end());
    std::sort(tps.begin(), tps.end());
    const auto at_least = [](const std::vector<double>& v, double s) {
      return static_cast<std::int64_t>(v.end() - std::lower_bound(v.begin(), v.end(), s));
    };
    out.f1_thr = recs;
    for (const double s : recs) {
      const std::int64_t n = at_least(all, s), tp = at_least(tps, s);
      out.f1.push_back(n + npig > 0 ? static_cast<double>(2 * tp) / static_cast<double>(n + npig)
                                    : 0.0);
    }
  }
  if (cfg.tide) {
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    ranges.reserve(images.size());
    for (const auto& im : images) ranges.emplace_back(im.tide_begin, im.tide_end);
    tide::summarize(rec, ranges, threads, out.tide);
  }

  parallel_for_dynamic(K, threads, [&](std::size_t k) {  // categories cost unevenly
    // The category's detections in image order (reading the records front to back): score,
    // rank in its image, and per area range a T-bit true-positive mask and a T-bit ignore mask.
    const std::size_t base = cat_begin[k], n_all = cat_begin[k + 1] - base;
    const std::int64_t* npig = npig_all.data() + k * A;
    struct Key {
      double score;
      std::uint32_t index;
    };
    std::vector<Key> keys(n_all);
    for (std::size_t j = 0; j < n_all; ++j)
      keys[j] = {flat_score[base + j], static_cast<std::uint32_t>(j)};
    // np.argsort(-dtScores, kind='mergesort') over the detections concatenated in image order:
    // stable, so equal scores keep that order.
    std::stable_sort(keys.begin(), keys.end(),
                     [](const Key& x, const Key& y) { return x.score > y.score; });
    std::vector<std::uint32_t> det_rank(n_all), tpm(A * n_all), igm(A * n_all);
    for (std::size_t i = 0; i < n_all; ++i) {
      const std::size_t src = base + keys[i].index;
      det_rank[i] = flat_rank[src];
      for (std::size_t a = 0; a < A; ++a) {
        tpm[a * n_all + i] = flat_masks[src * 2 * A + 2 * a];
        igm[a * n_all + i] = flat_masks[src * 2 * A + 2 * a + 1];
      }
    }
    // pycocotools builds rc and pr at every detection, makes pr monotone from the right and reads
    // it at the first index where rc >= each recall threshold. That index is always a true
    // positive (the m-th, for the least m with m / npig >= threshold; the first detection for
    // threshold 0 holds pr 0 or is the first true positive), and between true positives pr only
    // falls, so the monotone pr there is the running maximum over later true positives. The same
    // doubles, computed at the true positives alone.
    // Per (maxDet, area range) one pass over the detections, every threshold at once: the false
    // positives before a detection at threshold t are the detections before it less its true
    // positives and ignored ones at t, so only true positives and ignored detections are counted
    // (a detection ignored at every threshold, the common case outside the area range, once).
    std::vector<std::vector<std::int64_t>> ev(T);
    std::vector<std::vector<double>> ev_score(cfg.keep_scores ? T : 0);  // each event's score
    std::vector<double> ev_pr;
    // Every maxDet above the category's largest rank in a group keeps every detection: those
    // give the same values, computed once (maxDets ascend).
    std::uint64_t ranks = 0;
    for (const std::uint32_t r : det_rank) ranks = std::max<std::uint64_t>(ranks, r + 1ULL);
    std::size_t m_all = M;  // the first maxDet that keeps every detection
    for (std::size_t m = 0; m < M; ++m) {
      const auto max_det = static_cast<std::uint64_t>(cfg.max_dets[m]);
      if (max_det >= ranks && m_all < m) {
        for (std::size_t a = 0; a < A; ++a)
          for (std::size_t t = 0; t < T; ++t) {
            out.rec(t, k, a, m) = out.rec(t, k, a, m_all);
            for (std::size_t r = 0; r < R; ++r)
              out.prec(t, r, k, a, m) = out.prec(t, r, k, a, m_all);
            if (cfg.keep_scores)
              for (std::size_t r = 0; r < R; ++r)
                out.score_at(t, r, k, a, m) = out.score_at(t, r, k, a, m_all);
          }
        continue;
      }
      if (max_det >= ranks) m_all = m;
      for (std::size_t a = 0; a < A; ++a) {
        if (npig[a] == 0) continue;
        const auto np = static_cast<double>(npig[a]);
        // data() + offset, not &v[offset]: v is empty when the category has no detections.
        const std::uint32_t* tps = tpm.data() + a * n_all;
        const std::uint32_t* igs = igm.data() + a * n_all;
        std::array<std::int64_t, 32> tp_cnt{}, ig_cnt{};
        std::int64_t pos = 0, full_ig = 0;
        double first_score = 0;  // the first detection's (true positive, false or ignored)
        for (auto& e : ev) e.clear();
        for (auto& e : ev_score) e.clear();
        for (std::size_t i = 0; i < n_all; ++i) {
          if (det_rank[i] >= max_det) continue;
          if (pos == 0) first_score = keys[i].score;
          const std::uint32_t tm = tps[i], im = igs[i];
          if ((tm | im) != 0) {
            if (tm == 0 && im == tmask) {
              ++full_ig;
            } else {
              for (std::uint32_t b = im & ~tm; b != 0; b &= b - 1) ++ig_cnt[std::countr_zero(b)];
              for (std::uint32_t b = tm; b != 0; b &= b - 1) {
                const int t = std::countr_zero(b);
                ev[static_cast<std::size_t>(t)].push_back(pos - tp_cnt[t] - ig_cnt[t] - full_ig);
                if (cfg.keep_scores) ev_score[static_cast<std::size_t>(t)].push_back(keys[i].score);
                ++tp_cnt[t];
              }
            }
          }
          ++pos;
        }
        const auto nd = static_cast<std::size_t>(pos);
        for (std::size_t t = 0; t < T; ++t) {
          const std::vector<std::int64_t>& ev_fp = ev[t];
          const std::size_t ntp_count = ev_fp.size();
          const std::size_t ntp = ntp_count;
          out.rec(t, k, a, m) = nd ? static_cast<double>(ntp) / np : 0.0;
          ev_pr.resize(ntp);
          for (std::size_t e = 0; e < ntp; ++e) {
            const auto tpf = static_cast<double>(e + 1), fpf = static_cast<double>(ev_fp[e]);
            ev_pr[e] = tpf / (fpf + tpf + eps);
          }
          for (std::size_t e = ntp; e > 1; --e)
            if (ev_pr[e - 1] > ev_pr[e - 2]) ev_pr[e - 2] = ev_pr[e - 1];
          std::size_t e = 0;  // events before the first with (e + 1) / np >= threshold
          for (std::size_t r = 0; r < R; ++r) {
            while (e < ntp && static_cast<double>(e + 1) / np < recs[r]) ++e;
            out.prec(t, r, k, a, m) = e < ntp ? ev_pr[e] : 0.0;
            // eval['scores']: the score of the detection the precision is read at, 0 past the
            // last true positive (pycocotools leaves its zeros there).
            // Recall 0 is read at the first detection whatever it is (searchsorted finds rc >= 0
            // there), the others at a true positive.
            if (cfg.keep_scores)
              out.score_at(t, r, k, a, m) = recs[r] <= 0 && nd > 0 ? first_score
                                            : e < ntp              ? ev_score[t][e]
                                                                   : 0.0;
          }
        }
      }
    }
  });

  return out;
}

bool Summary::select(double iou_thr, std::size_t area, std::int64_t max_det, std::size_t& t0,
                     std::size_t& t1, std::size_t& m) const {
  // _summarize's mind (maxDets == max_det) and np.where(iouThr == p.iouThrs): exact equality.
  m = M;
  for (std::size_t i = 0; i < M; ++i)
    if (max_dets[i] == max_det) m = i;
  if (m == M || area >= A) return false;
  t0 = 0;
  t1 = T;
  if (iou_thr >= 0) {
    t0 = thr_index(iou_thr);
    if (t0 == T) return false;
    t1 = t0 + 1;
  }
  return true;
}

double Summary::stat(bool ap, double iou_thr, std::size_t area, std::int64_t max_det,
                     std::ptrdiff_t k) const {
  // summarize()'s _summarize: the entries > -1 of precision[t, :, k, a, m] (T x R x K, C order)
  // or recall[t, k, a, m], their mean as np.mean takes it (pairwise), -1 when there are none.
  std::vector<std::size_t> ks;
  if (k >= 0) {
    ks.push_back(static_cast<std::size_t>(k));
  } else {
    ks.resize(K);
    std::iota(ks.begin(), ks.end(), 0);
  }
  return stat(ap, iou_thr, area, max_det, ks);
}

double Summary::stat(bool ap, double iou_thr, std::size_t area, std::int64_t max_det,
                     const std::vector<std::size_t>& ks) const {
  std::size_t t0 = 0, t1 = 0, m = 0;
  if (!select(iou_thr, area, max_det, t0, t1, m)) return -1.0;
  std::vector<double> sel;
  for (std::size_t t = t0; t < t1; ++t) {
    if (ap) {
      for (std::size_t r = 0; r < R; ++r)
        for (const std::size_t k : ks) {
          const double v = precision[pidx(t, r, k, area, m)];
          if (v > -1) sel.push_back(v);
        }
    } else {
      for (const std::size_t k : ks) {
        const double v = recall[((t * K + k) * A + area) * M + m];
        if (v > -1) sel.push_back(v);
      }
    }
  }
  return sel.empty() ? -1.0 : numpy::mean(sel);
}

}  // namespace tally::detection::coco
