// DOTAMeanAP: mean average precision of rotated boxes (DOTA, aerial images) at IoU thresholds and
// box-area ranges, with ignored ground truth, as mmeval's DOTAMeanAP computes it without mmcv.
//
// Formula: VOCMeanAP's (voc_map.cpp), with rotated boxes cx, cy, w, h, angle (radians, le90:
// [-pi/2, pi/2)). Per class c and image: the class's predictions in score order; IoU with the
// image's ground truth of class c (normal, then ignored boxes) as calculate_overlaps_rotated
// computes it (rotated_iou.hpp: float32 boxes, OpenCV 5.0.0's rotatedRectangleIntersection,
// convexHull and contourArea, IoU = inter / (a1 + a2 - inter + 1e-5) in float32). A prediction
// whose best IoU >= t (float32) takes that ground truth: ignored box, or box outside the area
// range -> neither TP nor FP; first taker -> TP; later -> FP. A prediction below t is an FP if its
// own area is in the range. Areas are w * h in the boxes' dtype (float32, or float64 when the
// boxes or scores are float64, as NumPy's concatenation promotes them); a range [s0, s1) holds
// areas s0^2 <= a < s1^2. Then per class, precision / recall over all images' predictions by
// score, AP ('11points' by default, or 'area') kept as float32, AP{t} = float32 mean over classes
// with ground truth (drop_class_ap), mAP = mean over thresholds (voc_common.hpp).
//
// Reference: mmeval 0.2.1 mmeval.metrics.DOTAMeanAP (iou_thrs, scale_ranges, num_classes,
// eval_mode, drop_class_ap, classwise) with opencv-python 5.0.0.93 and NumPy 2, no mmcv;
// tests/reference/dota.py records the calls. Quadrilateral boxes [n, 8] (x1, y1, ..., x4, y4, as
// DOTA annotates) are read as mmeval reads them when the ground truth has 8 columns: corners
// truncated to integers, cv2.minAreaRect (rotated_iou.hpp), and the ground truth of a scale
// range counted by columns 2 and 3 of the quadrilaterals (x2 * y2, as mmeval's
// filter_by_bboxes_area_rotated does with them: an AP above 1 can come of it, as in mmeval).
// With quadrilaterals mmeval matches an image's predictions in the order of their converted
// angles, not their scores (the conversion drops the score column _calculate_image_tpfp sorts
// by); so does this port.
// Differences: predictions with equal scores (equal angles, for quadrilaterals) keep their input
// order (mmeval's np.argsort quicksort leaves it unspecified); a label outside [0, num_classes), a
// non-finite box value, a negative width or height, a quadrilateral corner beyond 2^31, or box
// fields of one image in both formats is an error (mmeval skips the label, and takes the boxes as
// they are); classwise gives "AP{t}_classwise" arrays (per-class AP for the full range) instead of
// mmeval's list of dicts.
//
// Keys: "AP{round(100 t)}" per threshold, then "mAP" (and "mAP@(s0, s1)" per scale range, in the
// order given, "mAP" where mmeval appends the full range).
//
// State: VOCMeanAP's: per prediction its class, score and 2 bits (TP, FP) per (threshold, scale
// range), concatenated across ranks in rank order (dataset order); int64 ground-truth counts per
// (class, range) and the image count, summed across ranks (checked). The same result on any
// number of ranks and threads.
//
// Example: one image, GT [50, 50, 20, 10, 0.3] class 0, prediction [50, 50, 20, 10, 0.3] class 0
// score .9, num_classes 1 -> {AP50: 1.0, mAP: 1.0}.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common.hpp"
#include "rotated_iou.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/parallel.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"
#include "voc_common.hpp"

namespace tally::detection {
namespace {

struct DotaState {
  PackedVector<std::int32_t> cls;      // per prediction
  PackedVector<double> score;          // per prediction
  PackedVector<std::uint64_t> bits;    // per prediction: words(); TP bit k, FP bit I*S + k
  PackedVector<std::int64_t> num_gts;  // [num_classes x scales]
  std::int64_t images = 0;
  TALLY_STATE(concat(cls), concat(score), concat(bits), sum(num_gts), sum(images))
};

/// The boxes of one image side: prepared for the IoU (float32, OpenCV's angle version) and their
/// areas w * h in the array's dtype.
struct Boxes {
  std::vector<rotated::Rect> rect;
  std::vector<float> area32;  // w * h of the rotated boxes (converted ones for quadrilaterals)
  std::vector<double> area64;
  std::vector<float> count32;   // the area mmeval's ground-truth count filters by: columns 2 and 3
  std::vector<double> count64;  // of the boxes as given (x2 * y2 for quadrilaterals)
  std::vector<double> angle;    // quadrilaterals: the converted angle, radians (float64)
  std::vector<std::int64_t> label;
  bool wide = false, count_wide = false;
  int cols = 0;  // 5, 8 (quadrilaterals), 0: no boxes given as `[]`
};

class DOTAMeanAP final : public TypedMetric<DotaState> {
 public:
  explicit DOTAMeanAP(const Params& p) : check_(p.owner()) {
    cfg_.thrs = p.get_fraction_list("iou_thrs");
    num_classes_ = p.get_size("num_classes");
    cfg_.num_classes = static_cast<std::size_t>(num_classes_);
    cfg_.mode_11 = p.get_string("eval_mode") == "11points";
    cfg_.drop_class_ap = p.get_bool("drop_class_ap");
    cfg_.classwise = p.get_bool("classwise");
    cfg_.scales = voc::read_scale_ranges(p);
    cfg_.owner = check_.owner();
    threads_ = static_cast<int>(p.get_size("threads", 1, 256));
    if (2 * cfg_.thrs.size() * cfg_.scales.ranges.size() > 64 * 64)
      p.fail("iou_thrs", "too many thresholds x scale ranges");
  }

 protected:
  DotaState initial_state() const override {
    DotaState s;
    s.num_gts.assign(cfg_.num_classes * cfg_.scales.ranges.size(), 0);
    return s;
  }

  void update(DotaState& s, const Batch& b) override {
    if (b.fields().empty() || b.size() == 0) return;
    const auto pb = required_per_image(b, "pred_bboxes", check_);
    const auto ps = required_per_image(b, "pred_scores", check_);
    const auto pl = required_per_image(b, "pred_labels", check_);
    const auto gb = required_per_image(b, "gt_bboxes", check_);
    const auto gl = required_per_image(b, "gt_labels", check_);
    const auto [ib, il] = ignored_boxes(b, check_);
    const auto n = static_cast<std::size_t>(b.size());
    const std::size_t S = cfg_.scales.ranges.size(), W = cfg_.words();
    // Read and check every image first (errors in image order), then match them on threads.
    std::vector<Img> imgs(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t sample = s.images + static_cast<std::int64_t>(i);
      Img& img = imgs[i];
      const std::int64_t np = read_boxes(pb[i], "pred_bboxes", sample, -1, img.pred);
      read_floats(ps[i], "pred_scores", sample, 0, np, check_, img.score);
      // mmeval concatenates boxes and scores: float64 scores make the prediction areas float64.
      if (is_wide(ps[i]) && !img.pred.wide) widen(img.pred);
      read_ints(pl[i], "pred_labels", sample, np, check_, img.pred.label);
      check_labels(img.pred.label, "pred_labels", sample);
      const std::int64_t ng = read_boxes(gb[i], "gt_bboxes", sample, -1, img.gt);
      read_ints(gl[i], "gt_labels", sample, ng, check_, img.gt.label);
      check_labels(img.gt.label, "gt_labels", sample);
      if (ib) {
        const std::int64_t nk = read_boxes((*ib)[i], "gt_bboxes_ignore", sample, -1, img.ign);
        read_ints((*il)[i], "gt_labels_ignore", sample, nk, check_, img.ign.label);
        check_labels(img.ign.label, "gt_labels_ignore", sample);
      }
      check_formats(img, sample);
      // np.concatenate((gt, ignored)): one dtype for the areas of both.
      if (img.gt.wide != img.ign.wide) widen(img.gt.wide ? img.ign : img.gt);
      // Ground-truth counts per class and range (normal boxes only, in their own dtype:
      // np.vstack of the class's ground truth; columns 2 and 3 of quadrilaterals).
      for (std::size_t j = 0; j < img.gt.label.size(); ++j)
        for (std::size_t sc = 0; sc < S; ++sc)
          if (in_range(img.gt, j, sc, true))
            ++s.num_gts[static_cast<std::size_t>(img.gt.label[j]) * S + sc];
    }
    const std::size_t blocks =
        threads_ == 1 ? 1 : std::min<std::size_t>(static_cast<std::size_t>(threads_) * 8, n);
    parallel_for_dynamic(blocks, threads_, [&](std::size_t k) {
      rotated::Scratch scratch;
      for (std::size_t i = n * k / blocks; i < n * (k + 1) / blocks; ++i) {
        Img& img = imgs[i];
        img.bits.assign(img.score.size() * W, 0);
        std::vector<std::int64_t> classes(img.pred.label.begin(), img.pred.label.end());
        std::sort(classes.begin(), classes.end());
        classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
        for (const std::int64_t c : classes) match_class(img, c, scratch);
      }
    });
    for (const Img& img : imgs) {
      for (std::size_t d = 0; d < img.score.size(); ++d) {
        s.cls.push_back(static_cast<std::int32_t>(img.pred.label[d]));
        s.score.push_back(img.score[d]);
      }
      s.bits.insert(s.bits.end(), img.bits.begin(), img.bits.end());
    }
    s.images += b.size();
  }

  // Each rank's predictions come as three arrays that must have one length between them.
  void check_rank(const DotaState& s, std::size_t) const override {
    if (s.cls.size() != s.score.size() || s.bits.size() != s.score.size() * cfg_.words())
      throw RuntimeError(fmt::format("{} classes, {} scores and {} bit words for {} per prediction",
                                     s.cls.size(), s.score.size(), s.bits.size(), cfg_.words()));
  }

  Value compute(const DotaState& all) const override {
    return voc::compute_map(cfg_, all.cls, all.score, all.bits, all.num_gts);
  }

 private:
  struct Img {
    Boxes pred, gt, ign;
    std::vector<double> score;
    std::vector<std::uint64_t> bits;
  };

  void check_labels(const std::vector<std::int64_t>& labels, std::string_view field,
                    std::int64_t sample) const {
    for (const auto l : labels)
      if (l < 0 || l >= num_classes_)
        check_.fail(field, sample_str(sample) + ": class id " + std::to_string(l) +
                               " is outside [0, " + std::to_string(num_classes_) + ")");
  }

  /// One image's boxes: [n, 5] cx, cy, w, h, angle (finite, w and h >= 0), or [n, 8]
  /// quadrilaterals x1, y1, ..., x4, y4 (finite, below 2^31 in magnitude), which mmeval's
  /// qbox_to_rbox turns into rotated boxes: the corners truncated to integers (astype(int64)),
  /// cv2.minAreaRect, the angle in radians as angle / 180 * pi in float64 (so the areas of the
  /// rotated boxes are float64).
  std::int64_t read_boxes(const Tensor& t, std::string_view field, std::int64_t sample,
                          std::int64_t n, Boxes& out) const {
    std::vector<double> v;
    const bool quad = t.dim() == 2 && t.size(1) == 8;
    const int cols = quad ? 8 : 5;
    const std::int64_t rows = read_floats(t, field, sample, cols, n, check_, v);
    out.cols = t.dim() == 1 && t.numel() == 0 ? 0 : cols;
    out.wide = quad || is_wide(t);
    out.count_wide = is_wide(t);
    std::vector<rotated::Pi> corners(4);
    for (std::size_t j = 0; j < static_cast<std::size_t>(rows); ++j) {
      const double* d = &v[j * static_cast<std::size_t>(cols)];
      const std::string box = sample_str(sample) + ": box " + std::to_string(j);
      for (int c = 0; c < cols; ++c)
        if (!std::isfinite(d[c]) || (quad && std::abs(d[c]) >= 2147483648.0))
          check_.fail(field, box + " value " + std::to_string(c) + " is " +
                                 fmt::format("{}", d[c]) + ", expected a finite number" +
                                 (quad ? " below 2^31 in magnitude" : ""));
      const auto f = [&](int c) { return static_cast<float>(d[c]); };
      out.count32.push_back(f(2) * f(3));
      out.count64.push_back(d[2] * d[3]);
      if (quad) {
        for (std::size_t c = 0; c < 4; ++c)
          corners[c] = {static_cast<int>(d[2 * c]), static_cast<int>(d[2 * c + 1])};
        const rotated::MinRect r = rotated::min_area_rect(corners);
        const double rad = static_cast<double>(r.deg) / 180 * 3.141592653589793;
        out.rect.push_back(rotated::mmeval_rect(r.cx, r.cy, r.w, r.h, static_cast<float>(rad)));
        out.area32.push_back(r.w * r.h);
        out.area64.push_back(static_cast<double>(r.w) * static_cast<double>(r.h));
        out.angle.push_back(rad);
        continue;
      }
      if (d[2] < 0 || d[3] < 0)
        check_.fail(field, box + " has width " + fmt::format("{}", d[2]) + " and height " +
                               fmt::format("{}", d[3]) + ", expected both >= 0");
      out.rect.push_back(rotated::mmeval_rect(f(0), f(1), f(2), f(3), f(4)));
      out.area32.push_back(f(2) * f(3));
      out.area64.push_back(d[2] * d[3]);
    }
    return rows;
  }

  /// Every box field of an image in one format: mmeval converts the predictions and ignored
  /// boxes when the ground truth has 8 columns, and reads them as they are otherwise.
  void check_formats(const Img& img, std::int64_t sample) const {
    int cols = 0;
    const char* first = nullptr;
    for (const auto& [b, name] : {std::pair<const Boxes*, const char*>{&img.gt, "gt_bboxes"},
                                  {&img.pred, "pred_bboxes"},
                                  {&img.ign, "gt_bboxes_ignore"}}) {
      if (b->cols == 0) continue;
      if (cols == 0) {
        cols = b->cols;
        first = name;
      } else if (b->cols != cols) {
        check_.fail(name, sample_str(sample) + ": has " + std::to_string(b->cols) +
                              " columns and '" + first + "' " + std::to_string(cols) +
                              ": every box field of an image must hold rotated boxes [n, 5] or "
                              "every one quadrilaterals [n, 8]");
      }
    }
  }

  /// The areas in float64 (as a float64 array promotes them): area64 already holds w * h of the
  /// values read, exact for float32 values (a product of two floats fits a double).
  static void widen(Boxes& b) { b.wide = true; }

  /// filter_by_bboxes_area_rotated for box j: area >= min and area < max in the boxes' dtype
  /// (`count`: the area mmeval's ground-truth count uses).
  bool in_range(const Boxes& b, std::size_t j, std::size_t sc, bool count = false) const {
    const auto& r = cfg_.scales.ranges[sc];
    const auto lo = r[0].area(), hi = r[1].area();
    if (count ? b.count_wide : b.wide) {
      const double a = count ? b.count64[j] : b.area64[j];
      return (!lo || a >= *lo) && (!hi || a < *hi);
    }
    const float a = count ? b.count32[j] : b.area32[j];
    return (!lo || a >= static_cast<float>(*lo)) && (!hi || a < static_cast<float>(*hi));
  }

  /// DOTAMeanAP._calculate_image_tpfp for class c of one image; sets its predictions' bits.
  void match_class(Img& img, std::int64_t c, rotated::Scratch& scratch) const {
    const std::size_t I = cfg_.thrs.size(), S = cfg_.scales.ranges.size(), W = cfg_.words();
    std::vector<std::size_t> preds;
    for (std::size_t d = 0; d < img.pred.label.size(); ++d)
      if (img.pred.label[d] == c) preds.push_back(d);
    struct Gt {
      const Boxes* boxes;
      std::size_t j;
      bool ignored;
    };
    std::vector<Gt> gts;  // normal boxes, then ignored ones
    for (std::size_t j = 0; j < img.gt.label.size(); ++j)
      if (img.gt.label[j] == c) gts.push_back({&img.gt, j, false});
    for (std::size_t j = 0; j < img.ign.label.size(); ++j)
      if (img.ign.label[j] == c) gts.push_back({&img.ign, j, true});
    std::uint64_t* bits = img.bits.data();
    const auto set = [&](std::size_t d, std::size_t bit) {
      bits[d * W + bit / 64] |= std::uint64_t{1} << (bit % 64);
    };
    if (gts.empty()) {
      for (const std::size_t d : preds)
        for (std::size_t sc = 0; sc < S; ++sc)
          if (in_range(img.pred, d, sc))
            for (std::size_t i = 0; i < I; ++i) set(d, I * S + i * S + sc);
      return;
    }
    std::vector<float> best(preds.size());
    std::vector<std::size_t> arg(preds.size());
    for (std::size_t p = 0; p < preds.size(); ++p) {
      const rotated::Rect& pr = img.pred.rect[preds[p]];
      for (std::size_t j = 0; j < gts.size(); ++j) {
        const float v = rotated::mmeval_iou(pr, gts[j].boxes->rect[gts[j].j], scratch);
        if (j == 0 || v > best[p]) {  // ious.max / argmax: the first largest
          best[p] = v;
          arg[p] = j;
        }
      }
    }
    std::vector<std::size_t> order(preds.size());
    std::iota(order.begin(), order.end(), 0);
    // np.argsort(-pred_bboxes[:, -1]): by score; for quadrilaterals, whose conversion drops the
    // score column, by the converted angle (mmeval's order, ties in input order).
    const bool by_angle = img.pred.cols == 8;
    const auto key = [&](std::size_t p) {
      return by_angle ? img.pred.angle[preds[p]] : img.score[preds[p]];
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return key(a) > key(b); });
    std::vector<std::uint8_t> covered(gts.size()), gt_out(gts.size());
    for (std::size_t i = 0; i < I; ++i) {
      const auto thr = static_cast<float>(cfg_.thrs[i]);  // a Python float against float32
      for (std::size_t sc = 0; sc < S; ++sc) {
        std::fill(covered.begin(), covered.end(), 0);
        for (std::size_t j = 0; j < gts.size(); ++j)
          gt_out[j] = !in_range(*gts[j].boxes, gts[j].j, sc);
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
          } else if (in_range(img.pred, d, sc)) {
            set(d, I * S + k);
          }
        }
      }
    }
  }

  InputChecker check_;
  voc::ApConfig cfg_;
  std::int64_t num_classes_ = 0;
  int threads_ = 1;
};

}  // namespace

ComponentInfo dota_mean_ap_info() {
  auto info = metric<DOTAMeanAP>(
      "DOTAMeanAP",
      "DOTA mAP of rotated boxes (11 points or area) at IoU thresholds and box-area ranges, with "
      "ignored ground truth, as mmeval's DOTAMeanAP without mmcv (OpenCV's rotated-rectangle "
      "intersection, float32 IoU, float32 per-class AP). Keys AP{100 t}, mAP, mAP@(s0, s1).",
      voc::params(
          voc::head_params("w * h of the rotated box", "11points",
                           "'11points' (mmeval's default for DOTA) or 'area'."),
          {param("threads", ParamType::Int,
                 "Threads for the per-image matching (rotated IoU); any number gives the same "
                 "result.")
               .def(1)},
          voc::tail_params()),
      {InputSpec{"pred_bboxes",
                 "Per image [n, 5] float rotated boxes cx, cy, w, h, angle (radians, le90), or "
                 "[n, 8] quadrilaterals x1, y1, ..., x4, y4 (every box field of an image alike).",
                 true},
       InputSpec{"pred_scores", "Per image [n] float scores (NaN is an error).", true},
       InputSpec{"pred_labels", "Per image [n] int class ids in [0, num_classes).", true},
       InputSpec{"gt_bboxes", "Per image [g, 5] float rotated boxes (or [g, 8] quadrilaterals).",
                 true},
       InputSpec{"gt_labels", "Per image [g] int class ids.", true},
       InputSpec{"gt_bboxes_ignore", "Per image [k, 5] (or [k, 8]) float ignored boxes (optional).",
                 false},
       InputSpec{"gt_labels_ignore", "Per image [k] int classes of the ignored boxes.", false}});
  info.results = voc::result_specs();
  return info;
}
TALLY_COMPONENT(dota_mean_ap_info)

}  // namespace tally::detection
