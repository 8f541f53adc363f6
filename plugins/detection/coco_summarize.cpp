// COCO evaluation on rank 0 (summarize): accumulate() over the merged records (coco_accumulate.cpp)
// with hotcoco's analyses and TIDE beside it, and summarize()'s _summarize reductions
// (Summary::stat), the mean as NumPy takes it (pairwise). See coco_stages.hpp.
#include <algorithm>
#include <numeric>

#include "coco_stages.hpp"
#include "common.hpp"
#include "tally/sdk/numpy_math.hpp"

namespace tally::detection::coco {

Summary summarize(const EvalConfig& cfg, const std::vector<std::int64_t>& ids, const Records& rec,
                  const std::vector<std::int64_t>& cat_ids_param, int threads) {
  std::vector<std::size_t> det_offsets;
  const std::vector<ImageRef> images = image_refs(cfg, ids, rec, det_offsets);
  Summary out;
  choose_categories(cfg, images, rec, cat_ids_param, out);
  const FlatDets flat = flatten(cfg, images, rec, det_offsets, out);
  init_arrays(cfg, cfg.rec_thrs.empty() ? rec_thrs() : cfg.rec_thrs, out);

  if (cfg.calibration_bins > 0) calibrate(cfg, flat, out);
  if (cfg.confusion_iou >= 0) confusion_totals(cfg, images, rec, out);
  if (cfg.f1_curve_iou >= 0) f1_curve(cfg, flat, out);
  if (cfg.tide) {
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    ranges.reserve(images.size());
    for (const auto& im : images) ranges.emplace_back(im.tide_begin, im.tide_end);
    tide::summarize(rec, ranges, threads, out.tide);
  }
  // Categories cost unevenly.
  parallel_for_dynamic(out.K, threads,
                       [&](std::size_t k) { accumulate_category(cfg, flat, k, out); });
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
