// TIDE (Bolya et al., ECCV 2020): COCODetection's `tide` error breakdown, as tidecv 1.0.1's
// TIDE().evaluate(gt, results, pos_threshold, background_threshold, mode) followed by
// fix_main_errors(), fix_special_errors() and count_errors() computes it.
//
// Per image (tide_image, at add time): the image's results sorted by score (stable), the first
// tide_max_dets (tidecv: Data.max_dets, 100) kept, whatever their category. Each in turn takes the
// unmatched ground truth of its category with the largest IoU (the first of equals) when that IoU
// >= pos; then an unmatched result whose crowd-IoU (intersection / its area) with a crowd of its
// category is > pos is ignored. Every result not matched (ignored ones too) gets one error, tested
// in this order: Loc (best IoU with its own category in [bg, pos]), Cls (best IoU with another
// category >= pos), Dupe (best IoU with a matched ground truth of its category >= pos), Bkg
// (best IoU with any ground truth <= bg; every result of an image without ground truth), else
// Both. A Loc or Cls error on an unmatched ground truth can be fixed, for the best-scored error
// on it only (BestGTMatch; the first of equal scores); ground truth that is not matched and that
// no fixable error points at is a Miss.
//
// Then, over the images (id order; each id once): AP per category is tidecv's (precision made
// monotone, read at 101 recall points by searchsorted, their mean * 100), mAP the mean over the
// categories with results or ground truth, summed in tidecv's order of categories. dAP of an
// error type = max(mAP with those errors fixed - mAP, 0): a fixed Cls or Loc error becomes a true
// positive (Cls in the ground truth's category) or drops out when it cannot be fixed, Dupe, Bkg
// and Both errors drop out, a fixed Miss drops its ground truth; FalsePos = mAP with every true
// positive scored 1 and every false positive 0, less mAP; FalseNeg = mAP with the missed ground
// truth not counted, less mAP. The points of a fixed run are in tidecv's order (the errors' points
// first, then the true positives), which decides the order of equal scores.
//
// Reference: tidecv 1.0.1 (tests/reference/tide.py, the values divided by 100). Differences:
// images are taken in id order (tidecv: the annotation file's), which only matters where scores
// tie across images of a category; an evaluation with nothing to evaluate gives NaN where tidecv
// divides by zero. hotcoco 1.3.0's tide_errors counts the same errors on COCO's data (the
// fixture) but not always on data with crowds and more than 100 results per image, and its dAP
// integrate COCOeval's precision instead.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

#include "coco_eval.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/parallel.hpp"

namespace tally::detection::coco {
namespace tide {

namespace {

// A result's code: bits 0-1 its state, bits 2-4 its error, bit 5 set when fixing that error
// makes it a true positive. A ground truth's code: bit 7 set, bits 0-1 its state.
constexpr std::uint8_t kFalse = 0, kTrue = 1, kIgnored = 2;     // results
constexpr std::uint8_t kMatched = 0, kUsable = 1, kMissed = 2;  // ground truth
constexpr std::uint8_t kFixable = 1 << 5, kGt = 1 << 7;
constexpr int kCls = 1, kLoc = 2, kBoth = 3, kDupe = 4, kBkg = 5, kMiss = 6;  // 1 + ERRORS index

double box_or_mask_iou(const EvalConfig& cfg, const ImageData& img, std::size_t d, std::size_t g,
                       bool crowd, const double* dbox, const double* gbox) {
  if (cfg.kind == Kind::Segm)
    return mask::rle_iou_one(img.dt_rle[d], img.gt_rle[g], crowd,
                             mask::bb_iou_one(dbox, gbox, crowd));
  return mask::bb_iou_one(&img.dt_box[d * 4], &img.gt_box[g * 4], crowd);
}

/// np.argmax of f(0..n-1): the first index of the largest value.
template <class F>
std::size_t argmax(std::size_t n, F&& f) {
  std::size_t best = 0;
  double v = f(0);
  for (std::size_t j = 1; j < n; ++j) {
    const double x = f(j);
    if (x > v) {
      v = x;
      best = j;
    }
  }
  return best;
}

/// Whether result i and ground truth j share a category, as tidecv's 1.0 / 0.0 factor.
double same_class(const ImageData& img, const std::vector<std::size_t>& dts,
                  const std::vector<std::size_t>& gts, std::size_t i, std::size_t j) {
  return img.dt_label[dts[i]] == img.gt_label[gts[j]] ? 1.0 : 0.0;
}

/// The image's errors, in result order (err, and for a Loc or Cls error the ground truth it
/// points at, target); BestGTMatch's best-scored result per ground truth (best_pred) and whether
/// a fixable error points at it (usable).
void classify_errors(const EvalConfig& cfg, const ImageData& img,
                     const std::vector<std::size_t>& dts, const std::vector<std::size_t>& gts,
                     const std::vector<double>& iou, const std::vector<std::uint8_t>& state,
                     const std::vector<std::uint8_t>& gt_used, std::vector<int>& err,
                     std::vector<std::ptrdiff_t>& target, std::vector<std::ptrdiff_t>& best_pred,
                     std::vector<std::uint8_t>& usable) {
  const std::size_t D = dts.size(), G = gts.size();
  const auto same = [&](std::size_t i, std::size_t j) { return same_class(img, dts, gts, i, j); };
  std::vector<double> best_score(G, -1.0);
  for (std::size_t i = 0; i < D; ++i) {
    if (state[i] == kTrue) continue;
    if (G == 0) {
      err[i] = kBkg;
      continue;
    }
    const double* row = &iou[i * G];
    const auto cls_iou = [&](std::size_t j) { return row[j] * same(i, j); };
    const auto noncls_iou = [&](std::size_t j) { return row[j] * (1.0 - same(i, j)); };
    const auto used_cls_iou = [&](std::size_t j) {
      return (gt_used[j] ? 1.0 : 0.0) * row[j] * same(i, j);
    };
    std::size_t j = argmax(G, cls_iou);
    if (cfg.tide_bg <= cls_iou(j) && cls_iou(j) <= cfg.tide_pos) {
      err[i] = kLoc;
    } else if (j = argmax(G, noncls_iou); noncls_iou(j) >= cfg.tide_pos) {
      err[i] = kCls;
    } else if (j = argmax(G, used_cls_iou); used_cls_iou(j) >= cfg.tide_pos) {
      err[i] = kDupe;
      continue;
    } else {
      j = argmax(G, [&](std::size_t k) { return row[k]; });
      err[i] = row[j] <= cfg.tide_bg ? kBkg : kBoth;
      continue;
    }
    target[i] = static_cast<std::ptrdiff_t>(j);
    if (gt_used[j]) continue;  // suppressed: fixing it would take a ground truth already used
    usable[j] = 1;
    const double s = img.dt_score[dts[i]];
    if (best_score[j] < s) {
      best_score[j] = s;
      best_pred[j] = static_cast<std::ptrdiff_t>(i);
    }
  }
}

}  // namespace

void image(const EvalConfig& cfg, const ImageData& img, Records& out) {
  const bool segm = cfg.kind == Kind::Segm;
  const auto known = [&](std::int64_t c) {
    return cfg.tide_filter.empty() ||
           std::binary_search(cfg.tide_filter.begin(), cfg.tide_filter.end(), c);
  };
  std::vector<std::size_t> dts, gts, crowds;
  for (std::size_t d = 0; d < img.dt_score.size(); ++d)
    if (known(img.dt_label[d])) dts.push_back(d);
  for (std::size_t g = 0; g < img.gt_label.size(); ++g)
    if (known(img.gt_label[g])) (img.gt_crowd[g] ? crowds : gts).push_back(g);
  std::stable_sort(dts.begin(), dts.end(),
                   [&](std::size_t a, std::size_t b) { return img.dt_score[a] > img.dt_score[b]; });
  if (dts.size() > static_cast<std::size_t>(cfg.tide_max_dets))
    dts.resize(static_cast<std::size_t>(cfg.tide_max_dets));
  const std::size_t D = dts.size(), G = gts.size();
  const auto emit = [&](std::int64_t cls, std::uint8_t code, std::int64_t fix, double score) {
    out.tide_cls.push_back(static_cast<std::int32_t>(cls));
    out.tide_code.push_back(static_cast<std::int8_t>(code));
    out.tide_fix.push_back(static_cast<std::int32_t>(fix));
    out.tide_score.push_back(score);
  };
  out.img_tide.push_back(static_cast<std::int32_t>(D + G));
  if (D == 0) {  // every object missed
    for (const std::size_t g : gts) emit(img.gt_label[g], kGt | kMissed, 0, 0.0);
    return;
  }

  // Mask boxes once each (rleIou's first test).
  std::vector<double> dbox(segm ? D * 4 : 0), gbox(segm ? (G + crowds.size()) * 4 : 0);
  for (std::size_t i = 0; segm && i < D; ++i) mask::rle_to_bbox(img.dt_rle[dts[i]], &dbox[i * 4]);
  for (std::size_t j = 0; segm && j < G + crowds.size(); ++j)
    mask::rle_to_bbox(img.gt_rle[j < G ? gts[j] : crowds[j - G]], &gbox[j * 4]);
  const auto dptr = [&](std::size_t i) { return segm ? &dbox[i * 4] : nullptr; };
  const auto gptr = [&](std::size_t j) { return segm ? &gbox[j * 4] : nullptr; };

  // gt_iou [D x G]; the matching works on a copy zeroed by column as ground truth is taken.
  std::vector<double> iou(D * G);
  for (std::size_t i = 0; i < D; ++i)
    for (std::size_t j = 0; j < G; ++j)
      iou[i * G + j] = box_or_mask_iou(cfg, img, dts[i], gts[j], false, dptr(i), gptr(j));
  const auto same = [&](std::size_t i, std::size_t j) { return same_class(img, dts, gts, i, j); };
  std::vector<std::uint8_t> state(D, kFalse), gt_used(G, 0);
  if (G > 0) {
    std::vector<double> buf(D * G);
    for (std::size_t i = 0; i < D; ++i)
      for (std::size_t j = 0; j < G; ++j) buf[i * G + j] = iou[i * G + j] * same(i, j);
    for (std::size_t i = 0; i < D; ++i) {
      const double* row = &buf[i * G];
      const std::size_t j = argmax(G, [&](std::size_t k) { return row[k]; });
      if (row[j] >= cfg.tide_pos) {
        state[i] = kTrue;
        gt_used[j] = 1;
        for (std::size_t r = 0; r < D; ++r) buf[r * G + j] = 0;
      }
    }
  }
  // Crowds: an unmatched result inside a crowd of its category is ignored.
  for (std::size_t c = 0; c < crowds.size(); ++c)
    for (std::size_t i = 0; i < D; ++i)
      if (state[i] == kFalse && img.gt_label[crowds[c]] == img.dt_label[dts[i]] &&
          box_or_mask_iou(cfg, img, dts[i], crowds[c], true, dptr(i), gptr(G + c)) > cfg.tide_pos)
        state[i] = kIgnored;

  // Errors, in result order; BestGTMatch's best result per ground truth.
  std::vector<int> err(D, 0);
  std::vector<std::ptrdiff_t> target(D, -1), best_pred(G, -1);
  std::vector<std::uint8_t> usable(G, 0);
  classify_errors(cfg, img, dts, gts, iou, state, gt_used, err, target, best_pred, usable);
  for (std::size_t i = 0; i < D; ++i) {
    std::uint8_t code = static_cast<std::uint8_t>(state[i] | (err[i] << 2));
    std::int64_t fix = 0;
    if (target[i] >= 0) {
      const auto j = static_cast<std::size_t>(target[i]);
      if (!gt_used[j] && best_pred[j] == static_cast<std::ptrdiff_t>(i)) code |= kFixable;
      fix = err[i] == kCls ? img.gt_label[gts[j]] : img.dt_label[dts[i]];
    }
    emit(img.dt_label[dts[i]], code, fix, img.dt_score[dts[i]]);
  }
  for (std::size_t j = 0; j < G; ++j)
    emit(img.gt_label[gts[j]],
         kGt | (gt_used[j]  ? kMatched
                : usable[j] ? kUsable
                            : kMissed),
         0, 0.0);
}

namespace {

/// APDataObject.get_ap() of a category's points, given in tidecv's order (stably sorted by score,
/// descending) as their true-positive flags: 0 without ground truth; else precision made
/// monotone from the right, read at recall x / 100 for x in 0..100 (np.searchsorted, side left;
/// 0 past the last point), summed in order, / 101 * 100.
double class_ap(const std::vector<std::uint8_t>& tps, std::int64_t num_gt) {
  if (num_gt == 0) return 0;
  std::vector<double> precision(tps.size()), recall(tps.size());
  std::int64_t tp = 0, fp = 0;
  for (std::size_t i = 0; i < tps.size(); ++i) {
    (tps[i] ? tp : fp) += 1;
    precision[i] = static_cast<double>(tp) / static_cast<double>(tp + fp);
    recall[i] = static_cast<double>(tp) / static_cast<double>(num_gt);
  }
  for (std::size_t i = tps.size(); i-- > 1;)
    if (precision[i] > precision[i - 1]) precision[i - 1] = precision[i];
  double sum = 0;
  for (int x = 0; x <= 100; ++x) {
    const double at = static_cast<double>(x) / 100;
    const auto idx = static_cast<std::size_t>(std::lower_bound(recall.begin(), recall.end(), at) -
                                              recall.begin());
    sum += idx < precision.size() ? precision[idx] : 0.0;
  }
  return sum / 101 * 100;
}

/// One evaluation's points per category (dense index) in tidecv's order, as true-positive flags;
/// its ground-truth counts; and the order in which tidecv's ClassedAPDataObject met the
/// categories (the order of its mean).
struct ApData {
  std::vector<std::vector<std::uint8_t>> tps;
  std::vector<std::int64_t> num_gt;
  std::vector<std::size_t> order;
  std::vector<std::uint8_t> seen;
  explicit ApData(std::size_t n) : tps(n), num_gt(n, 0), seen(n, 0) {}
  void touch(std::size_t k) {
    if (!seen[k]) {
      seen[k] = 1;
      order.push_back(k);
    }
  }
  /// ClassedAPDataObject.get_mAP(): the mean of the categories that are not empty (NaN with
  /// none, where tidecv divides by zero).
  double map() const {
    double sum = 0;
    std::size_t n = 0;
    for (const std::size_t k : order) {
      if (tps[k].empty() && num_gt[k] == 0) continue;
      sum += class_ap(tps[k], num_gt[k]);
      ++n;
    }
    return n > 0 ? sum / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
  }
};

}  // namespace

namespace {

/// A TIDE event of the records: its category and fix category (dense indices), code and score.
struct Ev {
  std::size_t k, fix;
  std::uint8_t code;
  double score;
};

/// The events of the images `ranges` of the records, in order (their spans in `evs`), checked;
/// `index` the dense index of each category, in the order met.
std::vector<Ev> gather_events(const Records& rec,
                              const std::vector<std::pair<std::size_t, std::size_t>>& ranges,
                              std::unordered_map<std::int32_t, std::size_t>& index,
                              std::vector<std::pair<std::size_t, std::size_t>>& spans) {
  const auto dense = [&](std::int32_t c) { return index.emplace(c, index.size()).first->second; };
  std::vector<Ev> evs;  // results and ground truth of the images, in order
  for (const auto& [b, e] : ranges) {
    spans.emplace_back(evs.size(), evs.size() + (e - b));
    for (std::size_t i = b; i < e; ++i) {
      const auto code = static_cast<std::uint8_t>(rec.tide_code[i]);
      const bool gt = (code & kGt) != 0;
      const int err = (code >> 2) & 7;
      if ((gt && (code & 0x7f) > kMissed) || (!gt && ((code & 3) > kIgnored || err > kBkg)))
        throw RuntimeError("COCO records: a TIDE event with code " + std::to_string(code));
      const bool fixable_err = !gt && (err == kCls || err == kLoc);
      evs.push_back({dense(rec.tide_cls[i]), fixable_err ? dense(rec.tide_fix[i]) : 0, code,
                     rec.tide_score[i]});
    }
  }
  return evs;
}

/// A fixed run's point for error event v (not a true positive) with errors of type `fix` fixed:
/// a fixable Cls or Loc error becomes a true positive (in its fix's category), other fixed
/// errors drop out; an unfixed error is a false positive, unless its result was ignored.
struct Pt {
  bool any;
  std::size_t k;
  bool tp;
};
Pt error_point(const Ev& v, int fix) {
  const int err = (v.code >> 2) & 7;
  if (err == fix) {
    if ((err == kCls || err == kLoc) && (v.code & kFixable)) return {true, v.fix, true};
    return {false, 0, false};
  }
  if ((v.code & 3) != kIgnored) return {true, v.k, false};
  return {false, 0, false};
}

/// The run: its events, its own points (base), misses per category (FalseNeg) and its results
/// in the order of one sort (by_score).
struct Run {
  std::size_t C;
  const std::vector<Ev>& evs;
  const ApData& base;
  const std::vector<std::int64_t>& false_neg;
  const std::vector<std::size_t>& by_score;

  /// TIDERun.fix_errors(condition, transform, false_neg_dict): fixing the errors of type `fix`
  /// (0: none); `perfect_scores`: FalsePositiveError.fix as the transform (every true positive
  /// scored 1, every false positive 0); `drop_misses`: the ground truth counts less the false
  /// negatives.
  double fixed_map(int fix, bool perfect_scores, bool drop_misses) const {
    ApData d(C);
    std::vector<std::int64_t> num_gt = base.num_gt;
    for (const Ev& v : evs) {  // the categories the errors' points meet, in error order
      if (v.code & kGt) {
        if (fix == kMiss && (v.code & 3) == kMissed) --num_gt[v.k];
        continue;
      }
      if ((v.code & 3) == kTrue) continue;
      const Pt p = error_point(v, fix);
      if (p.any) d.touch(p.k);
    }
    for (const std::size_t k : base.order) {  // then the true positives', then every category
      d.touch(k);
      d.num_gt[k] = num_gt[k] - (drop_misses ? false_neg[k] : 0);
    }
    if (perfect_scores) return perfect_map(fix, d);
    for (std::size_t b = 0; b < by_score.size();) {  // a block of equal scores at a time
      std::size_t e = b + 1;
      while (e < by_score.size() && evs[by_score[e]].score == evs[by_score[b]].score) ++e;
      for (std::size_t j = b; j < e; ++j) {  // the errors' points
        const Ev& v = evs[by_score[j]];
        if ((v.code & 3) == kTrue) continue;
        if (const Pt p = error_point(v, fix); p.any) d.tps[p.k].push_back(p.tp);
      }
      for (std::size_t j = b; j < e; ++j) {  // then the true positives
        const Ev& v = evs[by_score[j]];
        if ((v.code & 3) == kTrue) d.tps[v.k].push_back(1);
      }
      b = e;
    }
    return d.map();
  }

  /// Scores 1 and 0: per category its true positives, then the rest.
  double perfect_map(int fix, ApData& d) const {
    std::vector<std::size_t> n_tp(C, 0), n_fp(C, 0);
    for (const Ev& v : evs) {
      if (v.code & kGt) continue;
      if ((v.code & 3) == kTrue) {
        ++n_tp[v.k];
      } else if (const Pt p = error_point(v, fix); p.any) {
        ++(p.tp ? n_tp : n_fp)[p.k];
      }
    }
    for (std::size_t k = 0; k < C; ++k) {
      d.tps[k].assign(n_tp[k], 1);
      d.tps[k].resize(n_tp[k] + n_fp[k], 0);
    }
    return d.map();
  }
};

}  // namespace

void summarize(const Records& rec, const std::vector<std::pair<std::size_t, std::size_t>>& ranges,
               int threads, Summary::Tide& out) {
  // Dense category indices; each image's events in order.
  std::unordered_map<std::int32_t, std::size_t> index;
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  const std::vector<Ev> evs = gather_events(rec, ranges, index, spans);
  const std::size_t C = index.size();

  // The run's categories, in the order it meets them (TIDERun._eval_image: per image its ground
  // truth counted first, then its results pushed, ignored ones not); misses per category
  // (FalseNeg); the errors of each type.
  ApData base(C);
  std::vector<std::int64_t> false_neg(C, 0);
  std::array<std::int64_t, 6> counts{};
  for (const auto& [b, e] : spans) {
    for (std::size_t i = b; i < e; ++i) {
      const Ev& v = evs[i];
      if (!(v.code & kGt)) continue;
      base.touch(v.k);
      ++base.num_gt[v.k];
      if ((v.code & 3) != kMatched) ++false_neg[v.k];
      if ((v.code & 3) == kMissed) ++counts[kMiss - 1];
    }
    for (std::size_t i = b; i < e; ++i) {
      const Ev& v = evs[i];
      if (v.code & kGt) continue;
      const std::uint8_t st = v.code & 3;
      if (st != kIgnored) base.touch(v.k);
      if (st != kTrue) ++counts[static_cast<std::size_t>((v.code >> 2) & 7) - 1];
    }
  }

  // Every run's points come in the order of one sort: the results by score (descending), ties
  // in event order (the order tidecv pushes them). tidecv sorts each run's points stably by
  // score: the run's own points, then within a score the order they were pushed in, which is
  // event order for the run's data, and for a fixed run (fix_errors) its error points in error
  // (event) order before its true positives.
  std::vector<std::size_t> by_score;
  for (std::size_t i = 0; i < evs.size(); ++i)
    if (!(evs[i].code & kGt)) by_score.push_back(i);
  std::stable_sort(by_score.begin(), by_score.end(),
                   [&](std::size_t a, std::size_t b) { return evs[a].score > evs[b].score; });
  for (const std::size_t i : by_score) {
    const std::uint8_t st = evs[i].code & 3;
    if (st != kIgnored) base.tps[evs[i].k].push_back(st == kTrue);
  }

  const Run run{C, evs, base, false_neg, by_score};

  // The run's mAP, the six main fixes, FalsePos and FalseNeg: nine evaluations, side by side.
  std::array<double, 9> maps{};
  parallel_for_dynamic(maps.size(), threads, [&](std::size_t i) {
    if (i == 0) {
      maps[0] = base.map();
    } else if (i <= 6) {
      maps[i] = run.fixed_map(static_cast<int>(i), false, false);
    } else {
      maps[i] = run.fixed_map(0, i == 7, i == 8);
    }
  });
  out.ap = maps[0] / 100;
  for (std::size_t e = 0; e < 6; ++e) {
    const double d = maps[e + 1] - maps[0];
    out.main[e] = std::isnan(d) ? d : std::max(d, 0.0) / 100;
  }
  out.false_pos = (maps[7] - maps[0]) / 100;
  out.false_neg = (maps[8] - maps[0]) / 100;
  out.counts = counts;
}

}  // namespace tide
}  // namespace tally::detection::coco
