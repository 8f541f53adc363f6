// VOCMeanAP: PASCAL VOC mean average precision (area under the PR curve, or 11 points) at IoU
// thresholds and box-area ranges, with ignored ground truth, as mmeval's VOCMeanAP computes it.
//
// Formula, per class c and image: the class's predictions in score order; IoU with the image's
// ground truth of class c (normal, then ignored boxes) in float32 (mmeval's calculate_overlaps).
// A prediction whose best IoU >= t (compared in float32) takes that ground truth: ignored box, or
// box outside the area range -> neither TP nor FP; first taker -> TP; later -> FP. A prediction
// below t is an FP if its own area is in the range. Areas are w*h in the boxes' dtype (with
// use_legacy_coordinate (w + 1)(h + 1) where the ground truth is counted, as mmeval passes the
// flag there only); a range [s0, s1) holds areas s0^2 <= a < s1^2.
// Then per class, all images' predictions sorted by score: precision = tp / max(tp + fp, eps32),
// recall = tp / max(#gt, eps32), AP = sum over recall steps of the precision envelope ('area', a
// NumPy pairwise sum) or the mean of max precision at recall >= 0, .1, ..., 1 ('11points'), kept
// as float32. AP{t} = float32 mean of the class APs (classes with ground truth, drop_class_ap),
// mAP = mean over thresholds; mAP@(s0, s1) per extra scale range.
//
// Reference: mmeval 0.2.1 mmeval.metrics.VOCMeanAP (iou_thrs, scale_ranges, num_classes,
// eval_mode, use_legacy_coordinate, drop_class_ap); tests/reference/voc.py records the calls.
// Differences: predictions with equal scores keep their input order (mmeval's np.argsort
// quicksort leaves it unspecified); a label outside [0, num_classes) is an error (mmeval skips
// it); classwise gives "AP{t}_classwise" arrays (per-class AP for the full range) instead of
// mmeval's list of dicts.
// Keys: "AP{round(100 t)}" per threshold, then "mAP" (and "mAP@(s0, s1)" per scale range, in the
// order given, "mAP" where mmeval appends the full range).
//
// State: per prediction its class, score and 2 bits (TP, FP) per (threshold, scale range),
// concatenated across ranks in rank order (dataset order); int64 ground-truth counts per (class,
// range) and the image count, summed across ranks (checked). Rank 0 sorts each class's
// predictions (stable, in dataset order): the same result on any number of ranks. Scale ranges,
// AP and results: voc_common.hpp (shared with OIDMeanAP).
//
// Example: one image, GT [0, 0, 10, 10] class 0, prediction [0, 0, 10, 10] class 0 score .9,
// num_classes 1 -> {AP50: 1.0, mAP: 1.0}.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "coco_eval.hpp"
#include "common.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/numpy_math.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"
#include "voc_common.hpp"

namespace tally::detection {
namespace {

struct VocState {
  PackedVector<std::int32_t> cls;      // per prediction
  PackedVector<double> score;          // per prediction
  PackedVector<std::uint64_t> bits;    // per prediction: words(); TP bit k, FP bit I*S + k
  PackedVector<std::int64_t> num_gts;  // [num_classes x scales]
  std::int64_t images = 0;
  TALLY_STATE(concat(cls), concat(score), concat(bits), sum(num_gts), sum(images))
};

class VOCMeanAP final : public TypedMetric<VocState> {
 public:
  explicit VOCMeanAP(const Params& p) : check_(p.owner()) {
    thrs_ = p.get_fraction_list("iou_thrs");
    num_classes_ = p.get_size("num_classes");
    extra_ = p.get_bool("use_legacy_coordinate") ? 1.0 : 0.0;
    cfg_.scales = voc::read_scale_ranges(p);
    cfg_.thrs = thrs_;
    cfg_.num_classes = static_cast<std::size_t>(num_classes_);
    cfg_.mode_11 = p.get_string("eval_mode") == "11points";
    cfg_.drop_class_ap = p.get_bool("drop_class_ap");
    cfg_.classwise = p.get_bool("classwise");
    cfg_.owner = check_.owner();
    if (2 * thrs_.size() * cfg_.scales.ranges.size() > 64 * 64)
      p.fail("iou_thrs", "too many thresholds x scale ranges");
  }

 protected:
  VocState initial_state() const override {
    VocState s;
    s.num_gts.assign(static_cast<std::size_t>(num_classes_) * cfg_.scales.ranges.size(), 0);
    return s;
  }

  void update(VocState& s, const Batch& b) override {
    if (b.fields().empty() || b.size() == 0) return;
    const auto pb = required_per_image(b, "pred_bboxes", check_);
    const auto ps = required_per_image(b, "pred_scores", check_);
    const auto pl = required_per_image(b, "pred_labels", check_);
    const auto gb = required_per_image(b, "gt_bboxes", check_);
    const auto gl = required_per_image(b, "gt_labels", check_);
    const auto [ib, il] = ignored_boxes(b, check_);
    const std::size_t I = thrs_.size(), S = cfg_.scales.ranges.size(), W = words();
    Img img;
    for (std::size_t i = 0; i < static_cast<std::size_t>(b.size()); ++i) {
      const std::int64_t sample = s.images + static_cast<std::int64_t>(i);
      img = Img{};
      const std::int64_t n =
          read_boxes_f32(pb[i], "pred_bboxes", sample, -1, check_, img.pf, img.pd, img.p_wide);
      read_floats(ps[i], "pred_scores", sample, 0, n, check_, img.score);
      img.p_wide = img.p_wide || is_wide(ps[i]);
      read_ints(pl[i], "pred_labels", sample, n, check_, img.plabel);
      check_labels(img.plabel, "pred_labels", sample);
      const std::int64_t g =
          read_boxes_f32(gb[i], "gt_bboxes", sample, -1, check_, img.gf, img.gd, img.g_wide);
      read_ints(gl[i], "gt_labels", sample, g, check_, img.glabel);
      check_labels(img.glabel, "gt_labels", sample);
      std::int64_t k = 0;
      if (ib) {
        bool wide = false;
        k = read_boxes_f32((*ib)[i], "gt_bboxes_ignore", sample, -1, check_, img.if32, img.id64,
                           wide);
        img.g_wide = img.g_wide || wide;
        read_ints((*il)[i], "gt_labels_ignore", sample, k, check_, img.ilabel);
        check_labels(img.ilabel, "gt_labels_ignore", sample);
      }
      // Ground-truth counts per class and range.
      for (std::size_t j = 0; j < static_cast<std::size_t>(g); ++j)
        for (std::size_t sc = 0; sc < S; ++sc)
          if (in_range(&img.gf[j * 4], &img.gd[j * 4], img.g_wide, sc, true))
            ++s.num_gts[static_cast<std::size_t>(img.glabel[j]) * S + sc];
      // Predictions: input order, flags from the per-class matching.
      const std::size_t at = s.bits.size();
      s.bits.resize(at + static_cast<std::size_t>(n) * W, 0);
      std::vector<std::int64_t> classes(img.plabel.begin(), img.plabel.end());
      std::sort(classes.begin(), classes.end());
      classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
      for (const std::int64_t c : classes) match_class(img, c, &s.bits[at], I, S, W);
      for (std::size_t d = 0; d < static_cast<std::size_t>(n); ++d) {
        s.cls.push_back(static_cast<std::int32_t>(img.plabel[d]));
        s.score.push_back(img.score[d]);
      }
    }
    s.images += b.size();
  }

  // Each rank's predictions come as three arrays that must have one length between them.
  void check_rank(const VocState& s, std::size_t) const override {
    if (s.cls.size() != s.score.size() || s.bits.size() != s.score.size() * words())
      throw RuntimeError(fmt::format("{} classes, {} scores and {} bit words for {} per prediction",
                                     s.cls.size(), s.score.size(), s.bits.size(), words()));
  }

  Value compute(const VocState& all) const override {
    return voc::compute_map(cfg_, all.cls, all.score, all.bits, all.num_gts);
  }

 private:
  struct Img {
    std::vector<float> pf, gf, if32;
    std::vector<double> pd, gd, id64, score;
    std::vector<std::int64_t> plabel, glabel, ilabel;
    bool p_wide = false, g_wide = false;
  };

  std::size_t words() const { return cfg_.words(); }

  void check_labels(const std::vector<std::int64_t>& labels, std::string_view field,
                    std::int64_t sample) const {
    for (const auto l : labels)
      if (l < 0 || l >= num_classes_)
        check_.fail(field, sample_str(sample) + ": class id " + std::to_string(l) +
                               " is outside [0, " + std::to_string(num_classes_) + ")");
  }

  /// filter_by_bboxes_area: area >= min and area < max, in the boxes' dtype. mmeval passes
  /// use_legacy_coordinate (`legacy`: the + 1) only where it counts the ground truth
  /// (_filter_by_bboxes_area); _calculate_image_tpfp's filters leave it out.
  bool in_range(const float* f, const double* d, bool wide, std::size_t sc,
                bool legacy = false) const {
    return voc::area_in_range(f, d, wide, legacy ? extra_ : 0.0, cfg_.scales.ranges[sc]);
  }

  /// _calculate_image_tpfp for class c of one image; sets the TP / FP bits of its predictions.
  void match_class(const Img& img, std::int64_t c, std::uint64_t* bits, std::size_t I,
                   std::size_t S, std::size_t W) const {
    std::vector<std::size_t> preds;
    for (std::size_t d = 0; d < img.plabel.size(); ++d)
      if (img.plabel[d] == c) preds.push_back(d);
    // All ground truth of the class: normal boxes, then ignored ones.
    struct Gt {
      const float* f;
      const double* d;
      bool ignored;
    };
    std::vector<Gt> gts;
    for (std::size_t j = 0; j < img.glabel.size(); ++j)
      if (img.glabel[j] == c) gts.push_back({&img.gf[j * 4], &img.gd[j * 4], false});
    for (std::size_t j = 0; j < img.ilabel.size(); ++j)
      if (img.ilabel[j] == c) gts.push_back({&img.if32[j * 4], &img.id64[j * 4], true});
    const auto set = [&](std::size_t d, std::size_t bit) {
      bits[d * W + bit / 64] |= std::uint64_t{1} << (bit % 64);
    };
    if (gts.empty()) {
      for (const std::size_t d : preds)
        for (std::size_t sc = 0; sc < S; ++sc)
          if (in_range(&img.pf[d * 4], &img.pd[d * 4], img.p_wide, sc))
            for (std::size_t i = 0; i < I; ++i) set(d, I * S + i * S + sc);
      return;
    }
    std::vector<float> best(preds.size());
    std::vector<std::size_t> arg(preds.size());
    for (std::size_t p = 0; p < preds.size(); ++p) {
      for (std::size_t j = 0; j < gts.size(); ++j) {
        const float v = mmeval_iou(&img.pf[preds[p] * 4], gts[j].f, static_cast<float>(extra_));
        if (j == 0 || v > best[p]) {
          best[p] = v;
          arg[p] = j;
        }
      }
    }
    std::vector<std::size_t> order(preds.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return img.score[preds[a]] > img.score[preds[b]];
    });
    std::vector<std::uint8_t> covered(gts.size()), gt_out(gts.size());
    for (std::size_t i = 0; i < I; ++i) {
      const auto thr = static_cast<float>(thrs_[i]);  // a Python float against float32: float32
      for (std::size_t sc = 0; sc < S; ++sc) {
        std::fill(covered.begin(), covered.end(), 0);
        for (std::size_t j = 0; j < gts.size(); ++j)
          gt_out[j] = !in_range(gts[j].f, gts[j].d, img.g_wide, sc);
        const std::size_t k = i * S + sc;
        for (const std::size_t p : order) {
          const std::size_t d = preds[p];
          if (best[p] >= thr) {
            const std::size_t m = arg[p];
            if (gts[m].ignored || gt_out[m]) continue;
            if (!covered[m]) {
              set(d, k);
              covered[m] = 1;
            } else {
              set(d, I * S + k);
            }
          } else if (in_range(&img.pf[d * 4], &img.pd[d * 4], img.p_wide, sc)) {
            set(d, I * S + k);
          }
        }
      }
    }
  }

  InputChecker check_;
  std::vector<double> thrs_;
  voc::ApConfig cfg_;
  std::int64_t num_classes_ = 0;
  double extra_ = 0.0;
};

}  // namespace

ComponentInfo voc_mean_ap_info() {
  auto info = metric<VOCMeanAP>(
      "VOCMeanAP",
      "PASCAL VOC mAP (area or 11 points) at IoU thresholds and box-area ranges, with ignored "
      "ground truth, as mmeval's VOCMeanAP (float32 IoU, float32 per-class AP). Keys AP{100 t}, "
      "mAP, mAP@(s0, s1).",
      voc::params(
          voc::head_params("box sides", "area", "'area' (VOC2012) or '11points' (VOC2007)."),
          {voc::legacy_coordinate_param()}, voc::tail_params()),
      {InputSpec{"pred_bboxes", "Per image [n, 4] float boxes x1, y1, x2, y2.", true},
       InputSpec{"pred_scores", "Per image [n] float scores (NaN is an error).", true},
       InputSpec{"pred_labels", "Per image [n] int class ids in [0, num_classes).", true},
       InputSpec{"gt_bboxes", "Per image [g, 4] float boxes x1, y1, x2, y2.", true},
       InputSpec{"gt_labels", "Per image [g] int class ids.", true},
       InputSpec{"gt_bboxes_ignore", "Per image [k, 4] float ignored boxes (optional).", false},
       InputSpec{"gt_labels_ignore", "Per image [k] int classes of the ignored boxes.", false}});
  info.results = voc::result_specs();
  return info;
}
TALLY_COMPONENT(voc_mean_ap_info)

}  // namespace tally::detection
