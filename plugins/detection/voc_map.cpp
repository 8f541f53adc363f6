// VOCMeanAP: PASCAL VOC mean average precision (area under the PR curve, or 11 points) at IoU
// thresholds and box-area ranges, with ignored ground truth, as mmeval's VOCMeanAP computes it.
//
// Formula, per class c and image: the class's predictions in score order; IoU with the image's
// ground truth of class c (normal, then ignored boxes) in float32 (mmeval's calculate_overlaps).
// A prediction whose best IoU >= t (compared in float32) takes that ground truth: ignored box, or
// box outside the area range -> neither TP nor FP; first taker -> TP; later -> FP. A prediction
// below t is an FP if its own area is in the range. Areas are w*h (+1 with
// use_legacy_coordinate) in the boxes' dtype; a range [s0, s1) holds areas s0^2 <= a < s1^2.
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
// predictions (stable, in dataset order): the same result on any number of ranks.
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
#include "detection.hpp"
#include "tally/metric.hpp"
#include "tally/numpy_math.hpp"
#include "tally/plugin.hpp"
#include "tally/state.hpp"

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

/// One end of a scale range: null (no bound) or a number; `is_int` keeps Python's repr.
struct Bound {
  std::optional<double> v;
  bool is_int = false;
  std::string repr() const {
    if (!v) return "None";
    if (is_int) return std::to_string(static_cast<std::int64_t>(*v));
    std::string s = fmt::format("{}", *v);
    if (s.find_first_of(".en") == std::string::npos) s += ".0";
    return s;
  }
  /// min_scale ** 2 (Python int or float), or nothing.
  std::optional<double> area() const {
    if (!v) return std::nullopt;
    return *v * *v;
  }
};

class VOCMeanAP final : public TypedMetric<VocState> {
 public:
  explicit VOCMeanAP(const Params& p) : check_(p.owner()) {
    thrs_ = p.get_double_list("iou_thrs");
    if (thrs_.empty()) p.fail("iou_thrs", "must hold at least one threshold");
    num_classes_ = p.get_size("num_classes");
    mode_11_ = p.get_string("eval_mode") == "11points";
    extra_ = p.get_bool("use_legacy_coordinate") ? 1.0 : 0.0;
    drop_class_ap_ = p.get_bool("drop_class_ap");
    classwise_ = p.get_bool("classwise");
    if (p.has("scale_ranges")) {
      const Value& v = p.get("scale_ranges");
      if (!v.is_array()) p.fail("scale_ranges", "must be a list of [min, max] pairs");
      for (const auto& r : v.as_array()) {
        if (!r.is_array() || r.size() != 2)
          p.fail("scale_ranges", "must be a list of [min, max] pairs (null: no bound)");
        std::array<Bound, 2> b;
        for (std::size_t i = 0; i < 2; ++i) {
          const Value& e = r.as_array()[i];
          if (e.is_null()) continue;
          if (!e.is_number()) p.fail("scale_ranges", "bounds must be numbers or null");
          b[i] = Bound{e.as_double(), e.is_int()};
        }
        scales_.push_back(b);
      }
    }
    // mmeval appends (None, None) when it is missing.
    const auto is_full = [](const std::array<Bound, 2>& b) { return !b[0].v && !b[1].v; };
    if (std::none_of(scales_.begin(), scales_.end(), is_full)) scales_.push_back({});
    full_ = static_cast<std::size_t>(std::find_if(scales_.begin(), scales_.end(), is_full) -
                                     scales_.begin());
    if (2 * thrs_.size() * scales_.size() > 64 * 64)
      p.fail("iou_thrs", "too many thresholds x scale ranges");
  }

 protected:
  VocState initial_state() const override {
    VocState s;
    s.num_gts.assign(static_cast<std::size_t>(num_classes_) * scales_.size(), 0);
    return s;
  }

  void update(VocState& s, const Batch& b) override {
    if (b.fields().empty() || b.size() == 0) return;
    const auto pb = required(b, "pred_bboxes");
    const auto ps = required(b, "pred_scores");
    const auto pl = required(b, "pred_labels");
    const auto gb = required(b, "gt_bboxes");
    const auto gl = required(b, "gt_labels");
    const auto ib = per_image(b, "gt_bboxes_ignore", check_);
    const auto il = per_image(b, "gt_labels_ignore", check_);
    if (ib.has_value() != il.has_value())
      check_.fail(ib ? "gt_labels_ignore" : "gt_bboxes_ignore",
                  "is missing: ignored boxes need gt_bboxes_ignore and gt_labels_ignore");
    const std::size_t I = thrs_.size(), S = scales_.size(), W = words();
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
          if (in_range(&img.gf[j * 4], &img.gd[j * 4], img.g_wide, sc))
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
    const std::size_t I = thrs_.size(), S = scales_.size(), W = words();
    const auto C = static_cast<std::size_t>(num_classes_);
    const auto& num_gts = all.num_gts;
    if (num_gts.size() != C * S || all.cls.size() != all.score.size() ||
        all.bits.size() != all.score.size() * W)
      throw RuntimeError(check_.owner() + ": the state is inconsistent");
    for (const auto c : all.cls)
      if (c < 0 || static_cast<std::size_t>(c) >= C)
        throw RuntimeError(check_.owner() + ": the state is corrupt: class " + std::to_string(c) +
                           " outside [0, " + std::to_string(C) + ")");
    struct Det {
      double score;
      const std::uint64_t* bits;
    };
    std::vector<std::vector<Det>> by_class(C);
    for (std::size_t d = 0; d < all.cls.size(); ++d)
      by_class[static_cast<std::size_t>(all.cls[d])].push_back({all.score[d], &all.bits[d * W]});
    // ap[c][i][s] as float32, as mmeval stores it.
    std::vector<float> ap(C * I * S, 0.0f);
    const double eps = std::numeric_limits<float>::epsilon();
    std::vector<double> prec, rec;
    for (std::size_t c = 0; c < C; ++c) {
      auto& dets = by_class[c];
      std::stable_sort(dets.begin(), dets.end(),
                       [](const Det& a, const Det& b) { return a.score > b.score; });
      const std::size_t nd = dets.size();
      for (std::size_t i = 0; i < I; ++i)
        for (std::size_t sc = 0; sc < S; ++sc) {
          const std::size_t k = i * S + sc, fk = I * S + k;
          prec.resize(nd);
          rec.resize(nd);
          double tp = 0, fp = 0;
          const double ngt = std::max(static_cast<double>(num_gts[c * S + sc]), eps);
          for (std::size_t d = 0; d < nd; ++d) {
            tp += static_cast<double>((dets[d].bits[k / 64] >> (k % 64)) & 1);
            fp += static_cast<double>((dets[d].bits[fk / 64] >> (fk % 64)) & 1);
            prec[d] = tp / std::max(tp + fp, eps);
            rec[d] = tp / ngt;
          }
          ap[(c * I + i) * S + sc] = static_cast<float>(average_precision(rec, prec));
        }
    }
    Value out = Value::map();
    const auto class_mean = [&](std::size_t i, std::size_t sc) {
      std::vector<float> aps;
      for (std::size_t c = 0; c < C; ++c)
        if (num_gts[c * S + sc] > 0 || !drop_class_ap_) aps.push_back(ap[(c * I + i) * S + sc]);
      if (aps.empty()) return std::numeric_limits<double>::quiet_NaN();
      return static_cast<double>(numpy::mean(aps));
    };
    for (std::size_t i = 0; i < I; ++i) {
      const auto pct = static_cast<std::int64_t>(std::nearbyint(thrs_[i] * 100));
      out.set("AP" + std::to_string(pct), class_mean(i, full_));
    }
    for (std::size_t sc = 0; sc < S; ++sc) {
      std::vector<double> per_iou(I);
      for (std::size_t i = 0; i < I; ++i) per_iou[i] = class_mean(i, sc);
      const double m = numpy::mean(per_iou);
      out.set(sc == full_ ? std::string("mAP")
                          : "mAP@(" + scales_[sc][0].repr() + ", " + scales_[sc][1].repr() + ")",
              m);
    }
    if (classwise_) {
      for (std::size_t i = 0; i < I; ++i) {
        Value::Array per_class;
        for (std::size_t c = 0; c < C; ++c)
          per_class.emplace_back(static_cast<double>(ap[(c * I + i) * S + full_]));
        const auto pct = static_cast<std::int64_t>(std::nearbyint(thrs_[i] * 100));
        out.set("AP" + std::to_string(pct) + "_classwise", Value(std::move(per_class)));
      }
    }
    return out;
  }

 private:
  struct Img {
    std::vector<float> pf, gf, if32;
    std::vector<double> pd, gd, id64, score;
    std::vector<std::int64_t> plabel, glabel, ilabel;
    bool p_wide = false, g_wide = false;
  };

  std::size_t words() const { return (2 * thrs_.size() * scales_.size() + 63) / 64; }

  PerSample required(const Batch& b, std::string_view name) const {
    auto r = per_image(b, name, check_);
    if (!r) check_.fail(name, "is missing from the batch");
    return std::move(*r);
  }

  void check_labels(const std::vector<std::int64_t>& labels, std::string_view field,
                    std::int64_t sample) const {
    for (const auto l : labels)
      if (l < 0 || l >= num_classes_)
        check_.fail(field, sample_str(sample) + ": class id " + std::to_string(l) +
                               " is outside [0, " + std::to_string(num_classes_) + ")");
  }

  /// filter_by_bboxes_area: area >= min and area < max, in the boxes' dtype.
  bool in_range(const float* f, const double* d, bool wide, std::size_t sc) const {
    const auto lo = scales_[sc][0].area(), hi = scales_[sc][1].area();
    if (wide) {
      const double a = (d[2] - d[0] + extra_) * (d[3] - d[1] + extra_);
      return (!lo || a >= *lo) && (!hi || a < *hi);
    }
    const auto e = static_cast<float>(extra_);
    const float a = (f[2] - f[0] + e) * (f[3] - f[1] + e);
    return (!lo || a >= static_cast<float>(*lo)) && (!hi || a < static_cast<float>(*hi));
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

  /// calculate_average_precision(recalls, precisions, mode).
  double average_precision(const std::vector<double>& rec, const std::vector<double>& prec) const {
    const std::size_t n = rec.size();
    if (!mode_11_) {
      std::vector<double> mrec(n + 2), mpre(n + 2);
      mrec[0] = 0;
      mpre[0] = 0;
      for (std::size_t i = 0; i < n; ++i) mrec[i + 1] = rec[i], mpre[i + 1] = prec[i];
      mrec[n + 1] = 1;
      mpre[n + 1] = 0;
      for (std::size_t i = n + 1; i > 0; --i) mpre[i - 1] = std::max(mpre[i - 1], mpre[i]);
      std::vector<double> terms;
      for (std::size_t i = 0; i + 1 < n + 2; ++i)
        if (mrec[i + 1] != mrec[i]) terms.push_back((mrec[i + 1] - mrec[i]) * mpre[i + 1]);
      return numpy::sum(terms);
    }
    double ap = 0.0;
    for (int t = 0; t < 11; ++t) {
      const double thr = static_cast<double>(t) * 0.1;  // np.arange(0, 1 + 1e-3, 0.1)
      double best = 0;
      bool any = false;
      for (std::size_t i = 0; i < n; ++i)
        if (rec[i] >= thr) {
          best = any ? std::max(best, prec[i]) : prec[i];
          any = true;
        }
      ap += best;
    }
    return ap / 11.0;
  }

  InputChecker check_;
  std::vector<double> thrs_;
  std::vector<std::array<Bound, 2>> scales_;
  std::size_t full_ = 0;
  std::int64_t num_classes_ = 0;
  bool mode_11_ = false, drop_class_ap_ = true, classwise_ = false;
  double extra_ = 0.0;
};

}  // namespace

ComponentInfo voc_mean_ap_info() {
  auto info = metric<VOCMeanAP>(
      "VOCMeanAP",
      "PASCAL VOC mAP (area or 11 points) at IoU thresholds and box-area ranges, with ignored "
      "ground truth, as mmeval's VOCMeanAP (float32 IoU, float32 per-class AP). Keys AP{100 t}, "
      "mAP, mAP@(s0, s1).",
      {param("iou_thrs", ParamType::FloatList, "IoU thresholds.").def(Value::Array{Value(0.5)}),
       param("scale_ranges", ParamType::Any,
             "Extra [min, max] scale ranges (box sides; area in [min^2, max^2)); null bounds are "
             "open. The full range is always evaluated (key mAP).")
           .optional(),
       param("num_classes", ParamType::Int, "Number of classes: labels lie in [0, num_classes)."),
       param("eval_mode", ParamType::String, "'area' (VOC2012) or '11points' (VOC2007).")
           .def("area")
           .choices({"area", "11points"}),
       param("use_legacy_coordinate", ParamType::Bool,
             "mmdet v1 boxes: width = x2 - x1 + 1, height = y2 - y1 + 1.")
           .def(false),
       param("drop_class_ap", ParamType::Bool,
             "Leave classes without ground truth out of the mean (mmeval's default).")
           .def(true),
       param("classwise", ParamType::Bool, "Also return AP{t}_classwise: the AP of each class.")
           .def(false)},
      {InputSpec{"pred_bboxes", "Per image [n, 4] float boxes x1, y1, x2, y2.", true},
       InputSpec{"pred_scores", "Per image [n] float scores (NaN is an error).", true},
       InputSpec{"pred_labels", "Per image [n] int class ids in [0, num_classes).", true},
       InputSpec{"gt_bboxes", "Per image [g, 4] float boxes x1, y1, x2, y2.", true},
       InputSpec{"gt_labels", "Per image [g] int class ids.", true},
       InputSpec{"gt_bboxes_ignore", "Per image [k, 4] float ignored boxes (optional).", false},
       InputSpec{"gt_labels_ignore", "Per image [k] int classes of the ignored boxes.", false}});
  info.results = {{"*_classwise", Better::Higher, Plot::Bars, "AP per class, index = class id"},
                  {"*", Better::Higher, Plot::None, "mean average precision (fraction)"}};
  return info;
}

}  // namespace tally::detection
