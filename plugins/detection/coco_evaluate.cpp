// COCO evaluation, per image (evaluate): the instances that take part, their groups (one per
// category, or one without categories) and the IoUs within a group, as pycocotools 2.0.11's
// COCOeval.evaluateImg and computeIoU / computeOks take them; each group is then matched by
// match_group (coco_matching.cpp). See coco_stages.hpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "coco_stages.hpp"
#include "tally/sdk/numpy_math.hpp"

namespace tally::detection::coco {

namespace {

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

/// The detections and ground truth that take part, in sc.dord and sc.gord: every one, or for
/// LVIS its per-image limit and lists, or without categories those of cfg.cat_filter; then
/// stably sorted by category id. Groups are runs of a category in that order: without
/// categories one group holding everything ordered by category id, then input order (the order
/// of pycocotools' `[_ for cId in p.catIds for _ in self._gts[imgId, cId]]`).
void take_part(const EvalConfig& cfg, const ImageData& img, Scratch& sc) {
  // ImageData is filled by read_image (common.hpp): every vector has its instance count.
  const std::size_t nd = img.dt_score.size(), ng = img.gt_area.size();
  const bool segm = cfg.kind == Kind::Segm;
  const auto max_det = static_cast<std::size_t>(cfg.max_dets.back());
  auto &dord = sc.dord, &gord = sc.gord;
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
}

/// computeIoU / computeOks of a group: sc.ious[d * G + g], g in input order.
void compute_ious(const EvalConfig& cfg, const ImageData& img, Scratch& sc) {
  const bool segm = cfg.kind == Kind::Segm;
  const auto &dts = sc.dts, &gts = sc.gts;
  auto &ious = sc.ious, &dbox = sc.dbox, &gbox = sc.gbox;
  const std::size_t D = dts.size(), G = gts.size();
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
      compute_oks(cfg, img, dts, gts, ious, sc.oks_terms, sc.oks_vars);
    } else {
      for (std::size_t d = 0; d < D; ++d)
        for (std::size_t g = 0; g < G; ++g)
          ious[d * G + g] = mask::bb_iou_one(&img.dt_box[dts[d] * 4], &img.gt_box[gts[g] * 4],
                                             img.gt_crowd[gts[g]] != 0);
    }
  }
}

}  // namespace

void evaluate_image(const EvalConfig& cfg, const ImageData& img, Records& out) {
  const auto max_det = static_cast<std::size_t>(cfg.max_dets.back());
  // Scratch buffers kept per thread: no allocation per image once they have grown.
  Scratch& sc = thread_scratch();
  take_part(cfg, img, sc);
  const auto &dord = sc.dord, &gord = sc.gord;
  auto &dts = sc.dts, &gts = sc.gts;

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

    compute_ious(cfg, img, sc);
    match_group(cfg, img, sc, out);
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

}  // namespace tally::detection::coco
