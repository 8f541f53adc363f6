// hotcoco 1.3's analyses beside COCOeval's AP: the confusion matrix (per image at add time, then
// summed on rank 0), calibration and the F1 curve of every category's detections pooled. See
// coco_stages.hpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <unordered_set>

#include "coco_stages.hpp"
#include "tally/sdk/error.hpp"

namespace tally::detection::coco {

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

/// hotcoco 1.3's COCOeval.calibration(n_bins, iou_threshold): every detection of the evaluated
/// categories at area "all" that is not ignored at the threshold, in pycocotools' order
/// (categories ascending, images ascending, each image's detections by score), goes to bin
/// min(floor(score * n), n - 1) (a negative score to bin 0); per bin the mean score and the
/// fraction of true positives, summed in that order; ECE = sum over the bins of count / total *
/// |accuracy - confidence|, MCE = the largest gap; per category the same over its detections.
void calibrate(const EvalConfig& cfg, const FlatDets& flat, Summary& out) {
  const std::vector<std::size_t>& cat_begin = flat.cat_begin;
  const std::vector<double>& score = flat.score;
  const std::vector<std::uint32_t>& masks = flat.masks;
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

void confusion_totals(const EvalConfig& cfg, const std::vector<ImageRef>& images,
                      const Records& rec, Summary& out) {
  // Summed over the images (each id once, as image_refs keeps them).
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

void f1_curve(const EvalConfig& cfg, const FlatDets& flat, Summary& out) {
  // Every category's detections pooled, against the score.
  const std::size_t T = cfg.iou_thrs.size(), A = cfg.num_areas(), K = flat.cat_begin.size() - 1;
  const std::vector<double>& recs = out.rec_thrs;
  const std::size_t t = out.thr_index(cfg.f1_curve_iou), a = cfg.all_area();
  if (t >= T) throw RuntimeError("f1_curve_iou is not one of the IoU thresholds");
  const auto max_det = static_cast<std::uint64_t>(cfg.max_dets.back());
  std::vector<double> all, tps;
  std::int64_t npig = 0;
  for (std::size_t k = 0; k < K; ++k) {
    npig += flat.npig_all[k * A + a];
    for (std::size_t j = flat.cat_begin[k]; j < flat.cat_begin[k + 1]; ++j) {
      if (flat.rank[j] >= max_det || ((flat.masks[j * 2 * A + 2 * a + 1] >> t) & 1)) continue;
      all.push_back(flat.score[j]);
      if ((flat.masks[j * 2 * A + 2 * a] >> t) & 1) tps.push_back(flat.score[j]);
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

}  // namespace tally::detection::coco
