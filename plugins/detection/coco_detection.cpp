// COCODetection: COCO mAP and mAR for boxes (bbox), masks (segm), class-agnostic proposals
// (proposal) and keypoints (keypoints, OKS), exactly as pycocotools 2.0.11 computes them; and
// LVISDetection, LVIS's federated protocol as lvis 0.5.3 computes it, on the same records.
//
// Formula (pycocotools' COCOeval). Per image and category (all categories as one for proposal),
// detections sorted by score (stable: ties keep their input order), the first maxDets[-1] kept;
// ground truth with iscrowd, or an `area` outside the range, is ignored (areas all [0, 1e10],
// small [0, 32^2], medium [32^2, 96^2], large [96^2, 1e10], bounds inclusive). For each IoU
// threshold t each detection in turn takes the unmatched (or crowd) ground truth with the highest
// IoU >= min(t, 1 - 1e-10), preferring non-ignored ground truth; IoU is box IoU (bbIou) or mask
// IoU (rleIou, masks rasterised as maskApi.c does: plugins/support); a crowd's IoU divides by the
// detection's area. A detection matched to an ignored ground truth, or unmatched with an area
// outside the range, is ignored. Then per category, area range and maxDet, the detections of all
// images are concatenated in image-id order and stable-sorted by score; with tp/fp their
// cumulative counts, recall = tp / npig, precision = tp / (tp + fp + eps), made monotone from the
// right and read at recall thresholds i * 0.01 (searchsorted left). AP = mean of the precisions
// > -1 over thresholds, recall points and categories (NumPy's pairwise mean); AR likewise over
// the final recalls. The 12 stats in pycocotools' order; AP uses maxDet 100 as pycocotools does.
//
// Reference: pycocotools 2.0.11 COCOeval (evaluate, accumulate, summarize) on COCO JSON, and
// mmeval 0.2.1's COCODetection for the parameters and keys; it reproduces the gold stats of
// tests/data/coco_val2014_100 (faster_coco_eval's test data) to 1e-12 (in fact bit for bit) and
// pycocotools on generated data (tests/reference/coco.py).
// Keys: "{m}_mAP", "{m}_mAP_50", "{m}_mAP_75", "{m}_mAP_s", "{m}_mAP_m", "{m}_mAP_l",
// "{m}_AR@{n0}", "{m}_AR@{n1}", "{m}_AR@{n2}", "{m}_AR_s@{n2}", "{m}_AR_m@{n2}", "{m}_AR_l@{n2}"
// for m in bbox, segm (mmeval returns the first six; the AR keys are pycocotools' other six
// stats), "AR@{n}", "AR_s@{n2}", ... for proposal (mmeval's keys), and with classwise
// "{m}_{class}_precision" (mmeval's; NaN for a category without ground truth) and
// "{m}_{class}_recall" (the same mean over recall[:, k, all, last]). keypoints: "keypoints_mAP",
// ..._mAP_50, _mAP_75, _mAP_m, _mAP_l, _AR@20, _AR_50@20, _AR_75@20, _AR_m@20, _AR_l@20. LVIS:
// mmdet's LVISMetric keys "{m}_AP", "{m}_AP50", ..., "{m}_APr", "{m}_APc", "{m}_APf",
// "{m}_AR@300", "{m}_ARs@300", ... A stat with no data is -1, as in pycocotools.
// Differences from mmeval, on purpose: mmeval drops the detections' boxes for segm before
// loadRes, so a segm detection's area is its mask area; here too unless pred_areas is given
// (the coco_json reader gives the area pycocotools' loadRes computes from the results file).
//
// State (compact, no boxes or masks): per image its id and, per category present, the ground
// truth counts per area range; per kept detection its score and 2 bits per (area range, IoU
// threshold): true positive, ignored (coco_eval.hpp). The image ids are concatenated across ranks
// and the records appended kind by kind, both in rank order (dataset order); rank 0 orders images
// by id, drops repeated ids (sampler padding) and accumulates: the same result, bit for bit, on
// any number of ranks.
//
// Keypoints (pycocotools' iouType 'keypoints', setKpParams): the IoU is OKS (computeOks: per
// labelled keypoint exp(-(dx^2 + dy^2) / (2 sigma)^2 / (area + eps) / 2), averaged; with no
// labelled keypoint the distance to the ground truth's box doubled, over every keypoint), ground
// truth with num_keypoints 0 is ignored, areas all / medium / large and maxDets [20] by default;
// the 10 stats of _summarizeKps. A result without a box takes its keypoints' extent as loadRes.
// Parameters: area_ranges (any labelled ranges, one 'all'), maxDets of any length, IoU
// thresholds, useCats, catIds, imgIds; the keys generalise _summarizeDets (set_stats).
//
// LVIS (LVISEval): per image the max_dets (300) best detections over all categories, then those
// whose category has ground truth in the image or is in its neg_category_ids; instances of area 0
// are dropped (get_ann_ids keeps the open range (0, inf)); no crowds; an unmatched detection of a
// not_exhaustive_category_ids category is ignored; no per-category maxDet. APr / APc / APf
// average the categories of each frequency (gt_frequency). Reference: lvis 0.5.3 on generated
// data (tests/reference/lvis_detection.py), bit for bit.
//
// Analysis (each documented where it is computed): curves (pycocotools' precision and scores;
// the pooled F1 against a score threshold, coco_analysis.cpp), calibration, confusion and f_beta
// (hotcoco 1.3.0's), and tide (tidecv 1.0.1's error breakdown, tide.cpp).
//
// Example: one image, a GT box [0, 0, 10, 10] (xywh) of category 1, a detection [0, 0, 10, 10]
// with score 0.9 -> bbox_mAP 1 / (1 + 2^-52) (pycocotools' eps in the precision), bbox_AR@100
// 1.0, bbox_mAP_s as bbox_mAP, bbox_mAP_m and bbox_mAP_l -1.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include "coco_eval.hpp"
#include "common.hpp"
#include "tally/sdk/plugin.hpp"

#include "tally/sdk/metric.hpp"
#include "tally/sdk/numpy_math.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"

namespace tally::detection {
namespace {

struct CocoState {
  PackedVector<std::int64_t> img_ids;
  coco::KindRecords kinds;  // one per entry of `metric`
  TALLY_STATE(concat(img_ids), merge(kinds))
};

class COCODetection : public TypedMetric<CocoState> {
 public:
  explicit COCODetection(const Params& p) : COCODetection(p, false) {}

 protected:
  /// lvis: LVISDetection, LVIS's federated protocol (coco::EvalConfig::federated).
  COCODetection(const Params& p, bool lvis) : check_(p.owner()), lvis_(lvis) {
    for (const auto& m : p.get_string_list("metric")) {
      if (std::find(metrics_.begin(), metrics_.end(), m) != metrics_.end())
        p.fail("metric", "lists '" + m + "' twice");
      metrics_.push_back(m);
    }
    if (metrics_.empty())
      p.fail("metric", "must name at least one of bbox, segm, proposal, keypoints");
    std::vector<double> thrs = coco::default_iou_thrs();
    if (p.has("iou_thrs")) {
      thrs = p.get_number_list("iou_thrs", kUnitInterval, ListOrder::Any, 1, 32);
    }
    if (p.has("rec_thrs"))
      rec_thrs_ = p.get_number_list("rec_thrs", kUnitInterval, ListOrder::Any, 1, 1001);
    std::optional<std::vector<std::int64_t>> max_dets;
    if (p.has("proposal_nums") && p.has("max_dets"))
      p.fail("max_dets", "and proposal_nums are the same parameter: give one");
    for (const char* name : {"proposal_nums", "max_dets"}) {
      if (!p.has(name)) continue;
      max_dets = p.get_size_list(name);
      if (max_dets->empty()) p.fail(name, "must hold at least one number");
      for (std::size_t i = 1; i < max_dets->size(); ++i)
        if ((*max_dets)[i] <= (*max_dets)[i - 1])
          p.fail(name, "must be strictly increasing (pycocotools sorts them)");
    }
    std::optional<std::vector<coco::AreaRange>> areas;
    if (p.has("area_ranges")) areas = read_area_ranges(p);
    std::vector<double> sigmas = coco::coco_kpt_sigmas();
    if (p.has("kpt_oks_sigmas")) {
      sigmas = p.get_number_list("kpt_oks_sigmas", kPositive);  // one sigma per keypoint
    }
    classwise_ = p.get_bool("classwise");
    curves_ = p.get_bool("curves");
    eval_arrays_ = p.get_bool("eval_arrays");
    curve_iou_ = p.get_fraction("curve_iou");
    if (curves_ && std::find(thrs.begin(), thrs.end(), curve_iou_) == thrs.end())
      p.fail("curve_iou", fmt::format("must be one of iou_thrs, got {}", curve_iou_));
    calibration_bins_ =
        static_cast<std::size_t>(p.get_size("calibration_bins", 0, std::int64_t{1} << 20));
    calibration_iou_ = p.get_fraction("calibration_iou");
    if (calibration_bins_ > 0 &&
        std::find(thrs.begin(), thrs.end(), calibration_iou_) == thrs.end())
      p.fail("calibration_iou", fmt::format("must be one of iou_thrs, got {}", calibration_iou_));
    if (p.has("f_beta")) {
      f_beta_ = p.get_number("f_beta", kPositive);
    }
    if (p.get_bool("confusion")) {
      confusion_iou_ = p.get_fraction("confusion_iou");
    }
    use_cats_ = lvis_ || p.get_bool("use_cats");
    if (!lvis_ && p.get_bool("tide")) {
      tide_ = true;
      tide_pos_ = p.get_number("tide_pos_thresh", kPositiveFraction);
      tide_bg_ = p.get_number("tide_bg_thresh", NumberBounds{0.0, tide_pos_, false, false});
      tide_max_dets_ = p.get_size("tide_max_dets", 1, std::int64_t{1} << 30);
      if (!use_cats_) p.fail("tide", "needs use_cats: true (TIDE's errors are about categories)");
      if (std::none_of(metrics_.begin(), metrics_.end(),
                       [](const std::string& m) { return m == "bbox" || m == "segm"; }))
        p.fail("tide", "needs bbox or segm in metric (tidecv's modes box and mask)");
    }
    if (classwise_ && !use_cats_)
      p.fail("classwise",
             "needs use_cats: true (without categories there is one AP, no AP per "
             "category)");
    threads_ = static_cast<int>(p.get_size("threads", 1, 256));
    if (p.has("cat_ids")) cat_ids_ = p.get_int_list("cat_ids");
    std::vector<std::int64_t> img_ids;
    if (p.has("img_ids")) {
      img_ids = p.get_int_list("img_ids");
      if (img_ids.empty()) p.fail("img_ids", "must hold at least one image id");
      std::sort(img_ids.begin(), img_ids.end());
      img_ids.erase(std::unique(img_ids.begin(), img_ids.end()), img_ids.end());
    }
    if (p.has("classes")) {
      classes_ = p.get_string_list("classes");
      if (cat_ids_.size() != classes_.size())
        p.fail("classes", "needs cat_ids of the same length (class name i is category cat_ids[i])");
    }
    for (const auto& m : metrics_) add_config(p, m, thrs, max_dets, areas, sigmas, img_ids);
  }

  /// The evaluation of one entry of `metric`: the parameters read above, with pycocotools'
  /// Params(iouType) defaults where not given.
  void add_config(const Params& p, const std::string& m, const std::vector<double>& thrs,
                  const std::optional<std::vector<std::int64_t>>& max_dets,
                  const std::optional<std::vector<coco::AreaRange>>& areas,
                  const std::vector<double>& sigmas, const std::vector<std::int64_t>& img_ids) {
    coco::EvalConfig c;
    c.kind = m == "bbox"        ? coco::Kind::Bbox
             : m == "segm"      ? coco::Kind::Segm
             : m == "keypoints" ? coco::Kind::Keypoints
                                : coco::Kind::Proposal;
    c.iou_thrs = thrs;
    c.rec_thrs = rec_thrs_;
    // pycocotools' Params(iouType) defaults, unless given.
    // LVISDetection's max_dets (one number, default 300) reads as a list of one above.
    c.max_dets = max_dets ? *max_dets : coco::default_max_dets(c.kind);
    c.federated = lvis_;
    c.areas = areas ? *areas : coco::default_area_ranges(c.kind);
    if (c.kind == coco::Kind::Keypoints) c.kpt_sigmas = kpt_sigmas_ = sigmas;
    c.keep_scores = (curves_ && classwise_) || eval_arrays_;
    if (curves_ && c.kind != coco::Kind::Proposal) c.f1_curve_iou = curve_iou_;
    c.calibration_bins = calibration_bins_;
    if (confusion_iou_ >= 0 && c.kind != coco::Kind::Keypoints) {
      c.confusion_iou = confusion_iou_;
      c.confusion_max_det = c.max_dets.back();
      c.conf_filter = cat_ids_;
      std::sort(c.conf_filter.begin(), c.conf_filter.end());
    }
    c.calibration_iou = calibration_iou_;
    if (tide_ && (c.kind == coco::Kind::Bbox || c.kind == coco::Kind::Segm)) {
      c.tide = true;
      c.tide_pos = tide_pos_;
      c.tide_bg = tide_bg_;
      c.tide_max_dets = tide_max_dets_;
      c.tide_filter = cat_ids_;
      std::sort(c.tide_filter.begin(), c.tide_filter.end());
    }
    if (2 * c.areas.size() * thrs.size() > 1024)
      p.fail("area_ranges", "times iou_thrs is above 512 (area range, threshold) pairs");
    c.use_cats = use_cats_ && c.kind != coco::Kind::Proposal;
    c.img_filter = img_ids;
    if (!c.use_cats) {
      c.cat_filter = cat_ids_;
      std::sort(c.cat_filter.begin(), c.cat_filter.end());
    }
    need_boxes_ |= c.kind == coco::Kind::Bbox || c.kind == coco::Kind::Proposal;
    need_masks_ |= c.kind == coco::Kind::Segm;
    need_kpts_ |= c.kind == coco::Kind::Keypoints;
    configs_.push_back(c);
  }

 protected:
  CocoState initial_state() const override {
    CocoState s;
    s.kinds.resize(configs_.size());
    return s;
  }

  void update(CocoState& s, const Batch& b) override {
    if (b.fields().empty() || b.size() == 0) return;
    const std::vector<std::int64_t> ids = dense_ints(b, "img_id", check_);
    std::vector<std::int64_t> heights, widths;
    if (b.has("height")) heights = dense_ints(b, "height", check_);
    if (b.has("width")) widths = dense_ints(b, "width", check_);
    const auto n = static_cast<std::size_t>(b.size());
    const std::int64_t first = static_cast<std::int64_t>(s.img_ids.size());
    // Several blocks per thread, taken as threads get free (images cost unevenly). Block 0
    // appends to the state itself, the others to their own records, appended in block order
    // afterwards: the state is the same for any number of threads.
    const std::size_t blocks =
        threads_ == 1 ? 1 : std::min<std::size_t>(static_cast<std::size_t>(threads_) * 8, n);
    std::vector<std::vector<coco::Records>> out(blocks - 1,
                                                std::vector<coco::Records>(configs_.size()));
    parallel_for_dynamic(blocks, threads_, [&](std::size_t k) {
      coco::ImageData img;
      std::vector<coco::Records>& dst = k == 0 ? s.kinds : out[k - 1];
      for (std::size_t i = n * k / blocks; i < n * (k + 1) / blocks; ++i) {
        read_image(b, i, first + static_cast<std::int64_t>(i), ids[i],
                   heights.empty() ? -1 : heights[i], widths.empty() ? -1 : widths[i], img);
        for (std::size_t j = 0; j < configs_.size(); ++j)
          coco::evaluate_image(configs_[j], img, dst[j]);
      }
    });
    s.img_ids.insert(s.img_ids.end(), ids.begin(), ids.end());
    for (std::size_t k = 1; k < blocks; ++k)
      for (std::size_t j = 0; j < configs_.size(); ++j) s.kinds[j].append(out[k - 1][j]);
  }

  // Each rank's records describe its own images: one group count per image, one category,
  // detection count and (A + 1) GT counts per group, one score and words() bit words per
  // detection. Merged, a rank with too many and one with too few could look whole.
  void check_rank(const CocoState& s, std::size_t) const override {
    if (s.kinds.size() != configs_.size())
      throw RuntimeError(
          fmt::format("{} kinds of records, expected {}", s.kinds.size(), configs_.size()));
    for (std::size_t j = 0; j < configs_.size(); ++j) {
      const coco::Records& r = s.kinds[j];
      // Counts are int32 and at most a few billion in all: an int64 sum cannot overflow.
      const auto total = [](const auto& v) {
        std::int64_t t = 0;
        for (const auto x : v) t += x < 0 ? std::int64_t{-1} << 40 : x;
        return t;
      };
      const std::int64_t groups = total(r.img_groups), dets = total(r.group_ndets);
      const bool sizes_fit =
          groups >= 0 && dets >= 0 && r.img_groups.size() == s.img_ids.size() &&
          std::cmp_equal(r.group_cat.size(), groups) &&
          std::cmp_equal(r.group_ndets.size(), groups) &&
          std::cmp_equal(r.group_gts.size(),
                         groups * static_cast<std::int64_t>(configs_[j].num_areas() + 1)) &&
          std::cmp_equal(r.score.size(), dets) &&
          std::cmp_equal(r.group_freq.size(), configs_[j].federated ? groups : 0) &&
          r.img_conf.size() == (configs_[j].confusion_iou >= 0 ? s.img_ids.size() : 0) &&
          std::cmp_equal(r.conf_pairs.size(), 2 * total(r.img_conf)) &&
          r.img_tide.size() == (configs_[j].tide ? s.img_ids.size() : 0) &&
          std::cmp_equal(r.tide_cls.size(), total(r.img_tide)) &&
          r.tide_code.size() == r.tide_cls.size() && r.tide_fix.size() == r.tide_cls.size() &&
          r.tide_score.size() == r.tide_cls.size() &&
          std::cmp_equal(r.bits.size(), dets * static_cast<std::int64_t>(configs_[j].words()));
      if (!sizes_fit)
        throw RuntimeError(fmt::format(
            "the records of kind {} do not fit together ({} images, {} group counts, {} groups, "
            "{} detections)",
            j, s.img_ids.size(), r.img_groups.size(), r.group_cat.size(), r.score.size()));
    }
  }

  Value compute(const CocoState& all) const override {
    Value out = Value::map();
    if (all.img_ids.empty()) check_.fail("no images");
    if (all.kinds.size() != configs_.size())
      check_.fail_runtime(std::string("the state holds ") + std::to_string(all.kinds.size()) +
                          " kinds, expected " + std::to_string(configs_.size()));
    for (std::size_t j = 0; j < configs_.size(); ++j) {
      const coco::EvalConfig& cfg = configs_[j];
      const coco::Summary sum = coco::summarize(cfg, all.img_ids, all.kinds[j], cat_ids_, threads_);
      if (lvis_)
        set_lvis_stats(out, metrics_[j], cfg, sum);
      else
        set_stats(out, metrics_[j], cfg, sum);
      const std::string pre = cfg.kind == coco::Kind::Proposal ? "" : metrics_[j] + "_";
      if (eval_arrays_) out.set(metrics_[j] + "_eval", eval_arrays(cfg, sum));
      if (curves_) out.set(pre + "PR_curve", pr_curve(cfg, sum, -1));
      if (!sum.f1.empty()) {  // the first best threshold
        const auto best = static_cast<std::size_t>(std::max_element(sum.f1.begin(), sum.f1.end()) -
                                                   sum.f1.begin());
        out.set(pre + "F1_curve",
                curve(Value::Array(sum.f1_thr.begin(), sum.f1_thr.end()),
                      Value::Array(sum.f1.begin(), sum.f1.end()), "score threshold", "F1"));
        out.set(pre + "best_F1", sum.f1[best]);
        out.set(pre + "best_F1_score", sum.f1_thr[best]);
      }
      if (f_beta_ > 0 && cfg.kind != coco::Kind::Proposal) set_f_scores(out, pre, cfg, sum);
      if (cfg.confusion_iou >= 0) {
        const std::size_t C = sum.confusion_cats.size() + 1;
        Value::Array rows, names;
        for (std::size_t r = 0; r < C; ++r) {
          Value::Array row;
          for (std::size_t c = 0; c < C; ++c) row.emplace_back(sum.confusion[r * C + c]);
          rows.emplace_back(std::move(row));
          names.emplace_back(r + 1 < C ? class_name(sum.confusion_cats[r]) : "background");
        }
        out.set(pre + "confusion_matrix", Value(std::move(rows)));
        out.set(pre + "confusion_classes", Value(std::move(names)));
      }
      if (calibration_bins_ > 0) {
        out.set(pre + "ECE", sum.ece);
        out.set(pre + "MCE", sum.mce);
        Value::Array x, y;
        for (std::size_t i = 0; i < sum.bin_count.size(); ++i)
          if (sum.bin_count[i] > 0) {
            x.emplace_back(sum.bin_confidence[i]);
            y.emplace_back(sum.bin_accuracy[i]);
          }
        out.set(pre + "reliability_curve",
                curve(std::move(x), std::move(y), "mean score", "fraction correct"));
      }
      if (cfg.tide) {
        const std::string t = pre + "tide_";
        out.set(t + fmt::format("AP{}", std::lround(cfg.tide_pos * 100)), sum.tide.ap);
        for (std::size_t e = 0; e < 6; ++e)
          out.set(t + coco::tide::kErrorNames[e], sum.tide.main[e]);
        out.set(t + "FalsePos", sum.tide.false_pos);
        out.set(t + "FalseNeg", sum.tide.false_neg);
        for (std::size_t e = 0; e < 6; ++e)
          out.set(t + coco::tide::kErrorNames[e] + "_count", sum.tide.counts[e]);
      }
      if (!classwise_ || cfg.kind == coco::Kind::Proposal) continue;
      const std::size_t a_all = cfg.all_area();
      const std::int64_t last = cfg.max_dets.back();
      const double nan = std::numeric_limits<double>::quiet_NaN();
      for (std::size_t k = 0; k < sum.cat_ids.size(); ++k) {
        const std::string name = class_name(sum.cat_ids[k]);
        const auto kk = static_cast<std::ptrdiff_t>(k);
        // mmeval's classwise AP: precision[:, :, k, 0, -1] > -1, np.mean; NaN when none.
        const double ap = sum.stat(true, -1, a_all, last, kk);
        const double ar = sum.stat(false, -1, a_all, last, kk);
        out.set(metrics_[j] + "_" + name + "_precision", ap > -1 ? ap : nan);
        out.set(metrics_[j] + "_" + name + "_recall", ar > -1 ? ar : nan);
        if (calibration_bins_ > 0 && !std::isnan(sum.ece_per_cat[k]))
          out.set(metrics_[j] + "_" + name + "_ECE", sum.ece_per_cat[k]);
        if (curves_ && ap > -1) {
          out.set(metrics_[j] + "_" + name + "_PR_curve", pr_curve(cfg, sum, kk));
          out.set(metrics_[j] + "_" + name + "_F1_curve", f1_curve(cfg, sum, k));
        }
      }
    }
    return out;
  }

 private:
  /// A category's name in the keys: its `classes` entry, else its id.
  std::string class_name(std::int64_t cat) const {
    for (std::size_t c = 0; c < cat_ids_.size() && c < classes_.size(); ++c)
      if (cat_ids_[c] == cat) return classes_[c];
    return std::to_string(cat);
  }

  /// accumulate()'s arrays and their layout (eval_arrays): pycocotools' eval['precision'],
  /// eval['recall'], eval['scores'], flattened in C order, and what indexes each axis.
  static Value eval_arrays(const coco::EvalConfig& cfg, const coco::Summary& sum) {
    const auto ints = [](const auto& v) {
      Value::Array a;
      for (const auto x : v) a.emplace_back(static_cast<std::int64_t>(x));
      return Value(std::move(a));
    };
    Value::Array labels;
    for (const auto& area : cfg.areas) labels.emplace_back(area.label);
    Value out = Value::map();
    out.set("precision", Value(sum.precision));
    out.set("recall", Value(sum.recall));
    out.set("scores", Value(sum.scores));
    out.set("shape", ints(std::vector<std::size_t>{sum.T, sum.R, sum.K, sum.A, sum.M}));
    out.set("cat_ids", ints(sum.cat_ids));
    out.set("seen_cat_ids", ints(sum.seen_cat_ids));
    out.set("iou_thrs", Value(sum.iou_thrs));
    out.set("rec_thrs", Value(sum.rec_thrs));
    out.set("max_dets", ints(sum.max_dets));
    out.set("area_labels", Value(std::move(labels)));
    return out;
  }

  /// The precision-recall curve at curve_iou (area "all", the last maxDet) as pycocotools'
  /// eval['precision'] holds it: x the 101 recall thresholds, y the precision of category k, or
  /// with k < 0 the mean over the categories of the entries > -1 (-1 where none has data).
  Value pr_curve(const coco::EvalConfig& cfg, const coco::Summary& sum, std::ptrdiff_t k) const {
    const std::size_t a = cfg.all_area(), m = sum.M - 1;
    const std::size_t t = sum.thr_index(curve_iou_);
    Value::Array x, y;
    std::vector<double> sel;
    for (std::size_t r = 0; r < sum.R; ++r) {
      x.emplace_back(sum.rec_thrs[r]);
      sel.clear();
      for (std::size_t kk = 0; kk < sum.K; ++kk) {
        if (k >= 0 && kk != static_cast<std::size_t>(k)) continue;
        const double v = sum.precision[sum.pidx(t, r, kk, a, m)];
        if (v > -1) sel.push_back(v);
      }
      y.emplace_back(sel.empty() ? -1.0 : numpy::mean(sel));
    }
    return curve(std::move(x), std::move(y), "recall", "precision");
  }

  /// F1 against score for category k at curve_iou (area "all", the last maxDet): at each recall
  /// threshold r, F1 = 2 p r / (p + r) (0 where p + r is 0) with p pycocotools' precision there,
  /// against eval['scores'] there (the score of the detection it is read at; 0 past the last true
  /// positive), in ascending score.
  Value f1_curve(const coco::EvalConfig& cfg, const coco::Summary& sum, std::size_t k) const {
    const std::size_t a = cfg.all_area(), m = sum.M - 1;
    const std::size_t t = sum.thr_index(curve_iou_);
    Value::Array x, y;
    for (std::size_t r = sum.R; r-- > 0;) {
      const std::size_t at = sum.pidx(t, r, k, a, m);
      const double p = sum.precision[at], rc = sum.rec_thrs[r];
      x.emplace_back(sum.scores[at]);
      y.emplace_back(p + rc > 0 ? 2 * p * rc / (p + rc) : 0.0);
    }
    return curve(std::move(x), std::move(y), "score", "F1");
  }

  static Value curve(Value::Array x, Value::Array y, const char* x_label, const char* y_label) {
    Value c = Value::map();
    c.set("x", Value(std::move(x)));
    c.set("y", Value(std::move(y)));
    c.set("x_label", Value(x_label));
    c.set("y_label", Value(y_label));
    return c;
  }

  /// hotcoco 1.3.0's COCOeval.f_scores(beta): per IoU threshold and category, the largest
  /// (1 + b^2) p r / (b^2 p + r) over the recall thresholds r whose precision p (area "all", the
  /// last maxDet) is defined (0 where the denominator is 0); "F{b}" the mean over every threshold
  /// and category with one, "_50" and "_75" over those of IoU 0.5 and 0.75 (-1 with none).
  void set_f_scores(Value& out, const std::string& pre, const coco::EvalConfig& cfg,
                    const coco::Summary& sum) const {
    const std::size_t a = cfg.all_area(), m = sum.M - 1;
    const double b2 = f_beta_ * f_beta_;
    double total[3] = {0, 0, 0};
    std::size_t count[3] = {0, 0, 0};
    for (std::size_t t = 0; t < sum.T; ++t)
      for (std::size_t k = 0; k < sum.K; ++k) {
        bool any = false;
        double best = 0;
        for (std::size_t r = 0; r < sum.R; ++r) {
          const double p = sum.precision[sum.pidx(t, r, k, a, m)];
          if (p < 0) continue;
          const double rc = sum.rec_thrs[r], den = b2 * p + rc;
          const double v = den > 0 ? (1 + b2) * p * rc / den : 0.0;
          if (!any || v > best) best = v;
          any = true;
        }
        if (!any) continue;
        const bool hit[3] = {true, std::abs(sum.iou_thrs[t] - 0.5) < 1e-9,
                             std::abs(sum.iou_thrs[t] - 0.75) < 1e-9};
        for (int i = 0; i < 3; ++i)
          if (hit[i]) {
            total[i] += best;
            ++count[i];
          }
      }
    const std::string name =
        std::abs(f_beta_ - 1.0) < 1e-9 ? "F1" : fmt::format("F{:.1f}", f_beta_);
    const char* suffix[3] = {"", "_50", "_75"};
    for (int i = 0; i < 3; ++i)
      out.set(pre + name + suffix[i],
              count[i] > 0 ? total[i] / static_cast<double>(count[i]) : -1.0);
  }

  /// LVISEval.summarize()'s 13 results as mmdet's LVISMetric names them ("{m}_AP", "{m}_AP50",
  /// "{m}_AP75", "{m}_APs", "{m}_APm", "{m}_APl", "{m}_APr", "{m}_APc", "{m}_APf",
  /// "{m}_AR@{n}", "{m}_ARs@{n}", ...), with any area ranges ("{m}_AP{label}").
  void set_lvis_stats(Value& out, const std::string& m, const coco::EvalConfig& cfg,
                      const coco::Summary& sum) const {
    const std::size_t a_all = cfg.all_area();
    const std::int64_t n = cfg.max_dets.back();
    const std::string pre = m + "_", at = "@" + std::to_string(n);
    out.set(pre + "AP", sum.stat(true, -1, a_all, n));
    out.set(pre + "AP50", sum.stat(true, .5, a_all, n));
    out.set(pre + "AP75", sum.stat(true, .75, a_all, n));
    for (std::size_t a = 0; a < cfg.areas.size(); ++a)
      if (a != a_all) out.set(pre + "AP" + cfg.areas[a].label, sum.stat(true, -1, a, n));
    // freq_groups: the category indices of each frequency, ascending.
    for (int f = 0; f < 3; ++f) {
      std::vector<std::size_t> ks;
      for (std::size_t k = 0; k < sum.cat_freq.size(); ++k)
        if (sum.cat_freq[k] == f) ks.push_back(k);
      out.set(pre + "AP" + std::string(1, "rcf"[f]), sum.stat(true, -1, a_all, n, ks));
    }
    out.set(pre + "AR" + at, sum.stat(false, -1, a_all, n));
    for (std::size_t a = 0; a < cfg.areas.size(); ++a)
      if (a != a_all) out.set(pre + "AR" + cfg.areas[a].label + at, sum.stat(false, -1, a, n));
  }

  /// summarize()'s stats as result keys. bbox and segm: pycocotools' 12 (_summarizeDets) as
  /// mmeval names them, generalised to any area ranges and maxDets: "{m}_mAP" (every IoU
  /// threshold, area "all"; at maxDets 100 when there are 3 maxDets, as _summarizeDets reads it,
  /// else the last), "{m}_mAP_50", "{m}_mAP_75", "{m}_mAP_{area}" for the other area ranges,
  /// "{m}_AR@{n}" for each maxDet n, "{m}_AR_{area}@{last}". proposal: the AR keys without the
  /// prefix (mmeval's). keypoints: _summarizeKps' 10 at the last maxDet (pycocotools' 20):
  /// mAP, mAP_50, mAP_75, mAP_{area}, AR@{last}, AR_50@{last}, AR_75@{last}, AR_{area}@{last}.
  void set_stats(Value& out, const std::string& m, const coco::EvalConfig& cfg,
                 const coco::Summary& sum) const {
    const std::size_t a_all = cfg.all_area();
    const std::int64_t last = cfg.max_dets.back();
    const std::string at = "@" + std::to_string(last);
    const bool kpts = cfg.kind == coco::Kind::Keypoints;
    const bool proposal = cfg.kind == coco::Kind::Proposal;
    const std::string pre = proposal ? "" : m + "_";
    if (!proposal) {
      const std::int64_t first_md = !kpts && cfg.max_dets.size() == 3 ? 100 : last;
      out.set(pre + "mAP", sum.stat(true, -1, a_all, first_md));
      out.set(pre + "mAP_50", sum.stat(true, .5, a_all, last));
      out.set(pre + "mAP_75", sum.stat(true, .75, a_all, last));
      for (std::size_t a = 0; a < cfg.areas.size(); ++a)
        if (a != a_all) out.set(pre + "mAP_" + cfg.areas[a].label, sum.stat(true, -1, a, last));
    }
    if (kpts) {
      out.set(pre + "AR" + at, sum.stat(false, -1, a_all, last));
      out.set(pre + "AR_50" + at, sum.stat(false, .5, a_all, last));
      out.set(pre + "AR_75" + at, sum.stat(false, .75, a_all, last));
    } else {
      for (const std::int64_t n : cfg.max_dets)
        out.set(pre + "AR@" + std::to_string(n), sum.stat(false, -1, a_all, n));
    }
    for (std::size_t a = 0; a < cfg.areas.size(); ++a)
      if (a != a_all) out.set(pre + "AR_" + cfg.areas[a].label + at, sum.stat(false, -1, a, last));
  }

  /// area_ranges: {label: [lo, hi], ...} in order, one labelled "all".
  static std::vector<coco::AreaRange> read_area_ranges(const Params& p) {
    const Value& v = p.get("area_ranges");
    if (!v.is_map() || v.as_map().empty())
      p.fail("area_ranges",
             "must be a map {label: [lo, hi], ...} (e.g. {all: [0, 1e10], small: [0, 1024]})");
    std::vector<coco::AreaRange> out;
    for (const auto& [label, r] : v.as_map()) {
      const bool ok = r.is_array() && r.as_array().size() == 2 && r.as_array()[0].is_number() &&
                      r.as_array()[1].is_number();
      if (!ok) p.fail("area_ranges", "'" + label + "' must be [lo, hi] (two numbers)");
      const double lo = r.as_array()[0].as_double(), hi = r.as_array()[1].as_double();
      p.check_range("area_ranges", lo, hi, kNonNegativeOrInf, "'" + label + "'", true);
      const bool key_safe = !label.empty() && std::all_of(label.begin(), label.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      });
      if (!key_safe)
        p.fail("area_ranges", "label '" + label + "' must be letters, digits, '_' or '-'");
      if (label == "50" || label == "75")
        p.fail("area_ranges", "label '" + label + "' would read as the key of an IoU threshold");
      for (const auto& a : out)
        if (a.label == label) p.fail("area_ranges", "labels '" + label + "' twice");
      out.push_back({lo, hi, label});
    }
    if (std::none_of(out.begin(), out.end(), [](const auto& a) { return a.label == "all"; }))
      p.fail("area_ranges",
             "must label one range 'all' (the range of the keys without an area suffix, as "
             "pycocotools' summarize reads areaRng 'all')");
    return out;
  }

  void read_image(const Batch& b, std::size_t i, std::int64_t sample, std::int64_t id,
                  std::int64_t height, std::int64_t width, coco::ImageData& img) const {
    // Cleared, not replaced: the vectors keep their capacity from image to image.
    for (auto* v : {&img.dt_box, &img.dt_score, &img.dt_area, &img.dt_area_segm, &img.dt_kpt,
                    &img.gt_box, &img.gt_area, &img.gt_kpt})
      v->clear();
    img.gt_num_kpt.clear();
    img.dt_rle.clear();
    img.gt_rle.clear();
    img.dt_label.clear();
    img.gt_label.clear();
    img.gt_id.clear();
    img.gt_crowd.clear();
    img.img_id = id;
    read_detections(b, i, sample, height, width, img);
    read_ground_truth(b, i, sample, height, width, img);
    if (need_masks_) check_mask_sizes(sample, img);
  }

  /// The image's detections: scores, labels, boxes, keypoints, masks and areas.
  void read_detections(const Batch& b, std::size_t i, std::int64_t sample, std::int64_t height,
                       std::int64_t width, coco::ImageData& img) const {
    const auto ii = static_cast<std::int64_t>(i);
    const auto scores = per_image(b, "pred_scores", check_);
    const auto labels = per_image(b, "pred_labels", check_);
    if (!scores) check_.fail("pred_scores", "is missing from the batch");
    if (!labels) check_.fail("pred_labels", "is missing from the batch");
    const std::int64_t nd =
        read_floats((*scores)[i], "pred_scores", sample, 0, -1, check_, img.dt_score);
    read_ints((*labels)[i], "pred_labels", sample, nd, check_, img.dt_label);
    check_labels(img.dt_label, "pred_labels", sample);
    // Keypoints take the detection's box when there is one (pycocotools' loadRes gives a result
    // with a bbox the area w * h), else the keypoints' extent.
    const bool dt_boxes =
        (need_boxes_ || need_kpts_) && read_boxes(b, "pred", ii, sample, nd, check_, img.dt_box);
    if (need_boxes_ && !dt_boxes)
      check_.fail("pred_bboxes",
                  "is missing: bbox and proposal need pred_bboxes (x1, y1, x2, y2) "
                  "or pred_bboxes_xywh");
    if (need_kpts_) read_keypoints(b, "pred_keypoints", i, sample, nd, img.dt_kpt);
    if (need_masks_ && !read_masks(b, "pred", ii, sample, nd, height, width, check_, img.dt_rle))
      check_.fail("pred_masks",
                  "is missing: segm needs pred_masks or pred_rle_counts with "
                  "pred_rle_lengths");
    if (const auto areas = per_image(b, "pred_areas", check_)) {
      read_floats((*areas)[i], "pred_areas", sample, 0, nd, check_, img.dt_area);
      img.dt_area_segm = img.dt_area;
    } else {
      if (dt_boxes) {
        for (std::size_t d = 0; d < static_cast<std::size_t>(nd); ++d)
          img.dt_area.push_back(img.dt_box[d * 4 + 2] * img.dt_box[d * 4 + 3]);
      } else if (need_kpts_) {
        // loadRes: x0, x1, y0, y1 = np.min(x), np.max(x), np.min(y), np.max(y);
        // area = (x1 - x0) * (y1 - y0).
        const std::size_t K3 = kpt_sigmas_.size() * 3;
        for (std::size_t d = 0; d < static_cast<std::size_t>(nd); ++d) {
          const double* k = &img.dt_kpt[d * K3];
          double x0 = k[0], x1 = k[0], y0 = k[1], y1 = k[1];
          for (std::size_t j = 3; j < K3; j += 3) {
            x0 = std::min(x0, k[j]);
            x1 = std::max(x1, k[j]);
            y0 = std::min(y0, k[j + 1]);
            y1 = std::max(y1, k[j + 1]);
          }
          img.dt_area.push_back((x1 - x0) * (y1 - y0));
        }
      }
      for (const auto& r : img.dt_rle) img.dt_area_segm.push_back(mask::rle_area(r));
    }
  }

  /// The image's ground truth: labels, boxes, masks, areas, ids, crowd flags (or LVIS's lists)
  /// and keypoints.
  void read_ground_truth(const Batch& b, std::size_t i, std::int64_t sample, std::int64_t height,
                         std::int64_t width, coco::ImageData& img) const {
    const auto ii = static_cast<std::int64_t>(i);
    const auto glabels = per_image(b, "gt_labels", check_);
    if (!glabels) check_.fail("gt_labels", "is missing from the batch");
    const std::int64_t ng = read_ints((*glabels)[i], "gt_labels", sample, -1, check_, img.gt_label);
    check_labels(img.gt_label, "gt_labels", sample);
    const bool have_boxes = read_boxes(b, "gt", ii, sample, ng, check_, img.gt_box);
    if ((need_boxes_ || need_kpts_) && !have_boxes)
      check_.fail("gt_bboxes",
                  "is missing: bbox, proposal and keypoints need gt_bboxes (x1, y1, x2, y2) or "
                  "gt_bboxes_xywh");
    const auto gareas = per_image(b, "gt_areas", check_);
    const bool masks_in_batch = b.has("gt_masks") || b.has("gt_rle_counts");
    if (need_masks_ || (!gareas && masks_in_batch)) {
      if (!read_masks(b, "gt", ii, sample, ng, height, width, check_, img.gt_rle))
        check_.fail("gt_masks",
                    "is missing: segm needs gt_masks or gt_rle_counts with "
                    "gt_rle_lengths");
    }
    if (gareas) {
      read_floats((*gareas)[i], "gt_areas", sample, 0, ng, check_, img.gt_area);
    } else if (!img.gt_rle.empty() || (ng > 0 && masks_in_batch)) {
      for (const auto& r : img.gt_rle) img.gt_area.push_back(mask::rle_area(r));
    } else {
      for (std::size_t g = 0; g < static_cast<std::size_t>(ng); ++g)
        img.gt_area.push_back(have_boxes ? img.gt_box[g * 4 + 2] * img.gt_box[g * 4 + 3] : 0.0);
    }
    if (const auto gid = per_image(b, "gt_ids", check_)) {
      read_ints((*gid)[i], "gt_ids", sample, ng, check_, img.gt_id);
    } else {
      for (std::int64_t g = 0; g < ng; ++g) img.gt_id.push_back(g + 1);
    }
    img.gt_crowd.assign(static_cast<std::size_t>(ng), 0);
    if (lvis_) {
      read_federated(b, i, sample, ng, img);
    } else if (const auto crowd = per_image(b, "gt_iscrowd", check_)) {
      std::vector<std::int64_t> c;
      read_ints((*crowd)[i], "gt_iscrowd", sample, ng, check_, c);
      for (std::size_t g = 0; g < c.size(); ++g) img.gt_crowd[g] = c[g] != 0;
    }
    if (need_kpts_) {
      read_keypoints(b, "gt_keypoints", i, sample, ng, img.gt_kpt);
      if (const auto nk = per_image(b, "gt_num_keypoints", check_)) {
        read_ints((*nk)[i], "gt_num_keypoints", sample, ng, check_, img.gt_num_kpt);
      } else {  // COCO's num_keypoints: the keypoints with v > 0
        const std::size_t K = kpt_sigmas_.size();
        for (std::size_t g = 0; g < static_cast<std::size_t>(ng); ++g) {
          std::int64_t n = 0;
          for (std::size_t k = 0; k < K; ++k) n += img.gt_kpt[(g * K + k) * 3 + 2] > 0;
          img.gt_num_kpt.push_back(n);
        }
      }
    }
  }

  /// Every detection's mask has the size of the ground truth's.
  void check_mask_sizes(std::int64_t sample, const coco::ImageData& img) const {
    for (std::size_t d = 0; d < img.dt_rle.size(); ++d)
      for (const auto& g : img.gt_rle)
        if (g.h != img.dt_rle[d].h || g.w != img.dt_rle[d].w)
          check_.fail("pred_masks", sample_str(sample) + ": mask " + std::to_string(d) + " is " +
                                        std::to_string(img.dt_rle[d].h) + "x" +
                                        std::to_string(img.dt_rle[d].w) +
                                        ", the ground truth masks are " + std::to_string(g.h) +
                                        "x" + std::to_string(g.w));
  }

  /// LVIS's per-image lists and the ground truth's category frequencies (crowd flags are not
  /// read: LVISEval gives every ground truth iscrowd 0).
  void read_federated(const Batch& b, std::size_t i, std::int64_t sample, std::int64_t ng,
                      coco::ImageData& img) const {
    img.neg_cats.clear();
    img.nel_cats.clear();
    img.gt_freq.assign(static_cast<std::size_t>(ng), -1);
    for (auto [name, dst] : {std::pair{"neg_category_ids", &img.neg_cats},
                             std::pair{"not_exhaustive_category_ids", &img.nel_cats}}) {
      if (const auto f = per_image(b, name, check_)) {
        read_ints((*f)[i], name, sample, -1, check_, *dst);
        std::sort(dst->begin(), dst->end());
      }
    }
    if (const auto f = per_image(b, "gt_frequency", check_)) {
      std::vector<std::int64_t> v;
      read_ints((*f)[i], "gt_frequency", sample, ng, check_, v);
      for (std::size_t g = 0; g < v.size(); ++g) {
        if (v[g] < -1 || v[g] > 2)
          check_.fail("gt_frequency", sample_str(sample) + ": value " + std::to_string(v[g]) +
                                          " is not 0 (rare), 1 (common), 2 (frequent) or -1");
        img.gt_freq[g] = static_cast<std::int8_t>(v[g]);
      }
    }
  }

  /// One image's keypoints, [n, K, 3] or [n, 3K] (x, y, v or score per keypoint), as n*3K
  /// doubles; K is the number of kpt_oks_sigmas.
  void read_keypoints(const Batch& b, std::string_view name, std::size_t i, std::int64_t sample,
                      std::int64_t n, std::vector<double>& out) const {
    const auto f = per_image(b, name, check_);
    if (!f)
      check_.fail(name, "is missing: keypoints need pred_keypoints and gt_keypoints ([n, K, 3])");
    Tensor t = (*f)[i];
    const auto K = static_cast<std::int64_t>(kpt_sigmas_.size());
    if (t.dim() == 3) {
      if (t.size(1) != K || t.size(2) != 3)
        check_.fail(name, sample_str(sample) + ": must be [n, " + std::to_string(K) +
                              ", 3] (one row of x, y, v per keypoint; K = the number of "
                              "kpt_oks_sigmas) or [n, " +
                              std::to_string(3 * K) + "], got " + t.describe());
      t = Tensor::view(t.data(), t.dtype(), {t.size(0), 3 * K}, t.device());
    } else if (t.dim() == 2 && t.size(1) != 3 * K) {
      check_.fail(name, sample_str(sample) + ": must be [n, " + std::to_string(K) + ", 3] or [n, " +
                            std::to_string(3 * K) + "] (K = " + std::to_string(K) +
                            ", the number of kpt_oks_sigmas), got " + t.describe());
    }
    read_floats(t, name, sample, 3 * K, n, check_, out);
  }

  void check_labels(const std::vector<std::int64_t>& labels, std::string_view field,
                    std::int64_t sample) const {
    for (const auto l : labels)
      if (l < 0 || l > INT32_MAX)
        check_.fail(field, sample_str(sample) + ": category id " + std::to_string(l) +
                               " is outside [0, 2^31)");
  }

  InputChecker check_;
  std::vector<std::string> metrics_;
  std::vector<coco::EvalConfig> configs_;
  bool lvis_ = false;
  bool use_cats_ = true;
  std::vector<std::int64_t> cat_ids_;
  std::vector<std::string> classes_;
  bool classwise_ = false;
  bool curves_ = false;
  bool eval_arrays_ = false;
  std::size_t calibration_bins_ = 0;
  double confusion_iou_ = -1;
  double f_beta_ = 0;  // 0: no F-scores
  double calibration_iou_ = 0.5;
  double curve_iou_ = 0.5;
  bool tide_ = false;
  double tide_pos_ = 0.5, tide_bg_ = 0.1;
  std::int64_t tide_max_dets_ = 100;
  bool need_boxes_ = false, need_masks_ = false, need_kpts_ = false;
  std::vector<double> kpt_sigmas_;
  std::vector<double> rec_thrs_;  // empty: pycocotools' np.linspace(.0, 1.00, 101)
  int threads_ = 1;
};

/// LVIS's federated evaluation (lvis 0.5.3's LVISEval), on the same per-image records.
class LVISDetection final : public COCODetection {
 public:
  explicit LVISDetection(const Params& p) : COCODetection(p, true) {}
};

}  // namespace

namespace {

/// The parameters COCODetection and LVISDetection share (after their own).
std::vector<ParamSpec> subset_params() {
  return {param("rec_thrs", ParamType::FloatList,
                "Recall thresholds at which precision is read (pycocotools' params.recThrs, "
                "LVIS's rec_thrs), 1 to 1001 in [0, 1]. Default: np.linspace(.0, 1.00, 101).")
              .optional(),
          param("eval_arrays", ParamType::Bool,
                "Also return accumulate()'s arrays as \"{kind}_eval\": precision [T, R, K, A, "
                "M], recall [T, K, A, M] and scores [T, R, K, A, M] flattened in that (C) order, "
                "-1 where undefined, with shape [T, R, K, A, M] and the parameters they are laid "
                "out by (cat_ids, iou_thrs, rec_thrs, max_dets, area_labels): pycocotools' "
                "eval['precision'], eval['recall'] and eval['scores'] (tally.coco reads them).")
              .def(false),
          param("classwise", ParamType::Bool,
                "Also return the AP (\"{kind}_{class}_precision\", mmeval's name) and AR "
                "(\"{kind}_{class}_recall\") of each category.")
              .def(false),
          param("curves", ParamType::Bool,
                "Also return the precision-recall curve at curve_iou (\"{kind}_PR_curve\": "
                "pycocotools' precision at its 101 recall thresholds, averaged over the "
                "categories); F1 against a score threshold (\"{kind}_F1_curve\": 2 TP / "
                "(detections + ground truth) of every category's detections scoring at least "
                "0, 0.01, ..., 1, area all, the last maxDet) with its best (\"{kind}_best_F1\", "
                "at \"{kind}_best_F1_score\"); and with classwise each category's PR curve "
                "(\"{kind}_{class}_PR_curve\") and its F1 against score "
                "(\"{kind}_{class}_F1_curve\", from eval['scores']).")
              .def(false),
          param("curve_iou", ParamType::Float, "The IoU threshold of the curves (one of iou_thrs).")
              .def(0.5),
          param("f_beta", ParamType::Float,
                "F-scores as hotcoco's f_scores(beta): \"{kind}_F1\", \"{kind}_F1_50\", "
                "\"{kind}_F1_75\" for beta 1 (\"F0.5\"... for others), the best F-beta over "
                "the recall thresholds averaged over categories and IoU thresholds.")
              .optional(),
          param("confusion", ParamType::Bool,
                "A cross-category confusion matrix as hotcoco's confusion_matrix(iou_thr, "
                "max_det): \"{kind}_confusion_matrix\" (rows the ground truth's category, "
                "columns the detection's, the last of each 'background': misses and false "
                "alarms) and \"{kind}_confusion_classes\"; every detection against every "
                "non-crowd ground truth of its image, the best first by score, max_det the last "
                "maxDet. Categories: cat_ids, else those seen (hotcoco: every category of the "
                "file). bbox and segm.")
              .def(false),
          param("confusion_iou", ParamType::Float, "The IoU a confusion match needs.").def(0.5),
          param("calibration_bins", ParamType::Int,
                "Score calibration as hotcoco's calibration(n_bins): with n > 0 bins, "
                "\"{kind}_ECE\", \"{kind}_MCE\", a reliability curve, and with classwise each "
                "category's ECE (the non-ignored detections at area 'all' and calibration_iou; "
                "hotcoco counts every category of the ground truth file: give cat_ids for the "
                "same). 0: off.")
              .def(0),
          param("calibration_iou", ParamType::Float,
                "The IoU threshold that makes a detection correct for the calibration.")
              .def(0.5),
          param("cat_ids", ParamType::IntList,
                "Categories to evaluate (pycocotools' params.catIds); default: every category "
                "with ground truth (the others would be -1 and left out of the means).")
              .optional(),
          param("img_ids", ParamType::IntList,
                "Images to evaluate (params.imgIds); the others are read and left out. Default: "
                "every image.")
              .optional(),
          param("classes", ParamType::StringList,
                "Names of cat_ids, in the same order, for the classwise keys (default: the ids).")
              .optional(),
          param("threads", ParamType::Int,
                "Threads for the per-image matching and the accumulation; any number gives the "
                "same result.")
              .def(1)};
}

/// The inputs COCODetection and LVISDetection share.
std::vector<InputSpec> detection_inputs() {
  return {InputSpec{"img_id", "Image ids [N], any integer dtype.", true},
          InputSpec{"pred_bboxes", "Per image [n, 4] float boxes x1, y1, x2, y2.", false},
          InputSpec{"pred_bboxes_xywh", "Per image [n, 4] float boxes x, y, w, h (COCO).", false},
          InputSpec{"pred_scores", "Per image [n] float scores (NaN is an error).", true},
          InputSpec{"pred_labels", "Per image [n] int category ids.", true},
          InputSpec{"pred_areas",
                    "Per image [n] float areas (default w*h, or the mask area for segm).", false},
          InputSpec{"pred_masks", "Per image [n, H, W] bool/uint8 masks (segm).", false},
          InputSpec{"pred_rle_counts", "Per image uint32 RLE counts, concatenated (segm).", false},
          InputSpec{"pred_rle_lengths", "Per image [n] int: counts per mask.", false},
          InputSpec{"gt_bboxes", "Per image [g, 4] float boxes x1, y1, x2, y2.", false},
          InputSpec{"gt_bboxes_xywh", "Per image [g, 4] float boxes x, y, w, h (COCO).", false},
          InputSpec{"gt_labels", "Per image [g] int category ids.", true},
          InputSpec{"gt_ids", "Per image [g] int annotation ids (default 1..g).", false},
          InputSpec{"gt_areas", "Per image [g] float areas (COCO's `area`).", false},
          InputSpec{"gt_masks", "Per image [g, H, W] bool/uint8 masks (segm).", false},
          InputSpec{"gt_rle_counts", "Per image uint32 RLE counts, concatenated (segm).", false},
          InputSpec{"gt_rle_lengths", "Per image [g] int: counts per mask.", false},
          InputSpec{"height", "Image heights [N] (masks given as RLE counts).", false},
          InputSpec{"width", "Image widths [N] (masks given as RLE counts).", false}};
}

std::vector<ResultSpec> detection_results(const std::string& what) {
  return {{"*_PR_curve", Better::Neither, Plot::Curve, "precision against recall (curves)"},
          {"*_reliability_curve", Better::Neither, Plot::Curve,
           "fraction of true positives against mean score per score bin (calibration)"},
          {"*_ECE", Better::Lower, Plot::None, "expected calibration error (calibration)"},
          {"*_confusion_matrix", Better::Neither, Plot::Heatmap,
           "detections by category against ground truth by category (confusion)"},
          {"*_confusion_classes", Better::Neither, Plot::None, "the confusion matrix's rows"},
          {"*_MCE", Better::Lower, Plot::None, "largest calibration error of a bin (calibration)"},
          {"*_F1_curve", Better::Neither, Plot::Curve, "F1 against score (curves)"},
          {"*_best_F1_score", Better::Neither, Plot::None,
           "the score threshold of the best F1 (curves)"},
          {"*_tide_*_count", Better::Lower, Plot::None, "TIDE: errors of one type"},
          {"*_tide_AP*", Better::Higher, Plot::None, "TIDE's AP at its foreground IoU"},
          {"*_tide_*", Better::Lower, Plot::None,
           "TIDE: AP gained by fixing one error type (fraction)"},
          {"*_eval", Better::Neither, Plot::None,
           "accumulate()'s precision, recall and scores arrays (eval_arrays)"},
          {"*_precision", Better::Higher, Plot::None, "AP of one category (classwise)"},
          {"*_recall", Better::Higher, Plot::None, "AR of one category (classwise)"},
          {"*", Better::Higher, Plot::None, what + " AP / AR (fraction; -1 when undefined)"}};
}

template <class T>
std::vector<T> joined(std::vector<T> a, std::vector<T> b) {
  a.insert(a.end(), std::make_move_iterator(b.begin()), std::make_move_iterator(b.end()));
  return a;
}

}  // namespace

ComponentInfo lvis_detection_info() {
  auto info = metric<LVISDetection>(
      "LVISDetection",
      "LVIS AP / AR (federated: APr, APc, APf by category frequency), exactly as lvis 0.5.3's "
      "LVISEval computes them, for boxes (bbox) and masks (segm); mmdet's LVISMetric keys. Each "
      "image keeps its max_dets best detections over all categories, then those of categories "
      "with ground truth in it or in its neg_category_ids; an unmatched detection of a category "
      "in its not_exhaustive_category_ids is ignored; instances of area 0 take no part. The "
      "coco_json reader gives the LVIS fields from an LVIS annotation file.",
      joined({param("metric", ParamType::StringList, "Kinds to evaluate: bbox, segm.")
                  .def(Value::Array{Value("bbox")})
                  .choices({"bbox", "segm"}),
              param("iou_thrs", ParamType::FloatList,
                    "IoU thresholds; null: np.linspace(0.5, 0.95, 10) as LVIS's Params.")
                  .def(Value())
                  .optional()
                  .nullable(),
              param("max_dets", ParamType::Int,
                    "Detections kept per image over all categories (LVISResults' max_dets).")
                  .def(300),
              param("area_ranges", ParamType::Any,
                    "Area ranges {label: [lo, hi]}, one labelled 'all': keys AP{label} and "
                    "AR{label}@{max_dets}. Default: {all: [0, 1e10], s: [0, 1024], m: [1024, "
                    "9216], l: [9216, 1e10]}.")
                  .optional()},
             subset_params()),
      joined(detection_inputs(),
             {InputSpec{"neg_category_ids",
                        "Per image [k] int: categories verified absent (LVIS images' "
                        "neg_category_ids).",
                        false},
              InputSpec{"not_exhaustive_category_ids",
                        "Per image [k] int: categories not exhaustively annotated.", false},
              InputSpec{"gt_frequency",
                        "Per image [g] int: each ground truth's category frequency, 0 r, 1 c, "
                        "2 f (LVIS categories' `frequency`; -1 unknown).",
                        false}}));
  info.results = detection_results("LVIS");
  return info;
}

ComponentInfo coco_detection_info() {
  auto info = metric<COCODetection>(
      "COCODetection",
      "COCO mAP / mAR for boxes (bbox), masks (segm, RLE or binary masks, polygons rasterised as "
      "pycocotools), proposals (AR) and keypoints (OKS), exactly as pycocotools 2.0.11's "
      "COCOeval computes them (mmeval's COCODetection keys), with any area ranges, maxDets, IoU "
      "thresholds, image and category subsets, and per-category AP and AR. Per-image inputs; "
      "boxes xyxy (pred_bboxes) or xywh (pred_bboxes_xywh). Distributed: compact per-detection "
      "records, repeated image ids counted once.",
      joined(
          {param("metric", ParamType::StringList,
                 "Kinds to evaluate: bbox, segm, proposal, keypoints.")
               .def(Value::Array{Value("bbox")})
               .choices({"bbox", "segm", "proposal", "keypoints"}),
           param("iou_thrs", ParamType::FloatList,
                 "IoU thresholds; null: pycocotools' np.linspace(.5, 0.95, 10).")
               .def(Value())
               .optional()
               .nullable(),
           param("proposal_nums", ParamType::IntList,
                 "pycocotools' maxDets: increasing detection counts per image (mmeval's "
                 "name). Default: [1, 10, 100], [20] for keypoints. With 3, mAP reads maxDets "
                 "100 as pycocotools' summarize does (-1 without it); otherwise every AP key "
                 "reads the last.")
               .optional(),
           param("max_dets", ParamType::IntList, "The same as proposal_nums (pycocotools' name).")
               .optional(),
           param("area_ranges", ParamType::Any,
                 "pycocotools' areaRng and areaRngLbl as a map {label: [lo, hi]} (bounds "
                 "inclusive), one labelled 'all': keys mAP_{label} and AR_{label}@{maxDet} "
                 "for the others. Default: {all: [0, 1e10], s: [0, 1024], m: [1024, 9216], "
                 "l: [9216, 1e10]}, without s for keypoints.")
               .optional(),
           param("kpt_oks_sigmas", ParamType::FloatList,
                 "keypoints: the OKS sigma of each keypoint (pycocotools' kpt_oks_sigmas); "
                 "default the 17 COCO person keypoints' [.26, .25, ...] / 10.")
               .optional(),
           param("use_cats", ParamType::Bool,
                 "pycocotools' params.useCats: false matches every detection with every "
                 "ground truth of its image whatever their categories (proposal never uses "
                 "them; for keypoints pycocotools' own useCats = 0 matches nothing, tally "
                 "matches as for boxes). The categories of cat_ids (default: all) still "
                 "choose the ground truth and detections that take part.")
               .def(true),
           param("tide", ParamType::Bool,
                 "TIDE's error breakdown as tidecv 1.0.1 computes it (bbox and segm): "
                 "\"{kind}_tide_AP{50}\" (TIDE's AP at tide_pos_thresh), the AP gained by "
                 "fixing each error type \"{kind}_tide_Cls\", _Loc, _Both, _Dupe, _Bkg, _Miss, "
                 "and by perfect precision or recall (_FalsePos, _FalseNeg), as fractions "
                 "(tidecv's points / 100), and each type's count (\"{kind}_tide_Cls_count\", "
                 "...). Categories: cat_ids, else all.")
               .def(false),
           param("tide_pos_thresh", ParamType::Float,
                 "TIDE's foreground IoU (pos_threshold): a match needs IoU >= it.")
               .def(0.5),
           param("tide_bg_thresh", ParamType::Float,
                 "TIDE's background IoU (background_threshold): below it a false positive is "
                 "background, between it and tide_pos_thresh a localisation error.")
               .def(0.1),
           param("tide_max_dets", ParamType::Int,
                 "TIDE's detections kept per image over all categories (tidecv's max_dets).")
               .def(100)},
          subset_params()),
      joined(detection_inputs(),
             {InputSpec{"gt_iscrowd", "Per image [g] int/bool crowd flags (ignored ground truth).",
                        false},
              InputSpec{"pred_keypoints",
                        "Per image [n, K, 3] or [n, 3K] float keypoints x, y, score (keypoints).",
                        false},
              InputSpec{"gt_keypoints",
                        "Per image [g, K, 3] or [g, 3K] float keypoints x, y, v (keypoints; "
                        "v > 0: labelled).",
                        false},
              InputSpec{"gt_num_keypoints",
                        "Per image [g] int (COCO's num_keypoints; 0: ignored; default: the count "
                        "of v > 0).",
                        false}}));
  info.results = detection_results("COCO");
  return info;
}
TALLY_COMPONENT(coco_detection_info)
TALLY_COMPONENT(lvis_detection_info)

}  // namespace tally::detection
