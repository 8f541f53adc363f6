// COCODetection: COCO mAP and mAR for boxes (bbox), masks (segm) and class-agnostic proposals
// (proposal), exactly as pycocotools 2.0.11 computes them.
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
// ../shared/fixtures/coco_val2014_100 (faster_coco_eval's test data) to 1e-12 (in fact bit for
// bit) and pycocotools on generated data (tests/reference/coco.py).
// Keys: "{m}_mAP", "{m}_mAP_50", "{m}_mAP_75", "{m}_mAP_s", "{m}_mAP_m", "{m}_mAP_l",
// "{m}_AR@{n0}", "{m}_AR@{n1}", "{m}_AR@{n2}", "{m}_AR_s@{n2}", "{m}_AR_m@{n2}", "{m}_AR_l@{n2}"
// for m in bbox, segm (mmeval returns the first six; the AR keys are pycocotools' other six
// stats), "AR@{n}", "AR_s@{n2}", ... for proposal (mmeval's keys), and with classwise
// "{m}_{class}_precision" (mmeval's; NaN for a category without ground truth). A stat with no
// data is -1, as in pycocotools.
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
// Example: one image, a GT box [0, 0, 10, 10] (xywh) of category 1, a detection [0, 0, 10, 10]
// with score 0.9 -> bbox_mAP 1 / (1 + 2^-52) (pycocotools' eps in the precision), bbox_AR@100
// 1.0, bbox_mAP_s as bbox_mAP, bbox_mAP_m and bbox_mAP_l -1.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include "coco_eval.hpp"
#include "common.hpp"
#include "detection.hpp"

#include "tally/metric.hpp"
#include "tally/plugin.hpp"
#include "tally/state.hpp"

namespace tally::detection {
namespace {

struct CocoState {
  PackedVector<std::int64_t> img_ids;
  coco::KindRecords kinds;  // one per entry of `metric`
  TALLY_STATE(concat(img_ids), merge(kinds))
};

class COCODetection final : public TypedMetric<CocoState> {
 public:
  explicit COCODetection(const Params& p) : check_(p.owner()) {
    for (const auto& m : p.get_string_list("metric")) {
      if (std::find(metrics_.begin(), metrics_.end(), m) != metrics_.end())
        p.fail("metric", "lists '" + m + "' twice");
      metrics_.push_back(m);
    }
    if (metrics_.empty()) p.fail("metric", "must name at least one of bbox, segm, proposal");
    std::vector<double> thrs = coco::default_iou_thrs();
    if (p.has("iou_thrs")) {
      thrs = p.get_double_list("iou_thrs");
      if (thrs.empty()) p.fail("iou_thrs", "must hold at least one threshold");
      for (const double t : thrs)
        if (!(t >= 0 && t <= 1)) p.fail("iou_thrs", "values must lie in [0, 1]");
    }
    proposal_nums_ = p.get_size_list("proposal_nums");
    if (proposal_nums_.size() != 3)
      p.fail("proposal_nums", "must hold 3 numbers (pycocotools' summary reads maxDets[0..2])");
    for (std::size_t i = 0; i < 3; ++i) {
      if (proposal_nums_[i] < 1) p.fail("proposal_nums", "values must be >= 1");
      if (i > 0 && proposal_nums_[i] <= proposal_nums_[i - 1])
        p.fail("proposal_nums", "must be strictly increasing (pycocotools sorts them)");
    }
    classwise_ = p.get_bool("classwise");
    use_cats_ = p.get_bool("use_cats");
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
    for (const auto& m : metrics_) {
      coco::EvalConfig c;
      c.kind =
          m == "bbox" ? coco::Kind::Bbox : (m == "segm" ? coco::Kind::Segm : coco::Kind::Proposal);
      c.iou_thrs = thrs;
      c.max_dets = proposal_nums_;
      c.use_cats = use_cats_ && c.kind != coco::Kind::Proposal;
      c.img_filter = img_ids;
      if (!c.use_cats) {
        c.cat_filter = cat_ids_;
        std::sort(c.cat_filter.begin(), c.cat_filter.end());
      }
      if (thrs.size() > 32) p.fail("iou_thrs", "holds more than 32 thresholds");
      need_boxes_ |= c.kind != coco::Kind::Segm;
      need_masks_ |= c.kind == coco::Kind::Segm;
      configs_.push_back(c);
    }
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
    const std::size_t blocks = std::min<std::size_t>(static_cast<std::size_t>(threads_), n);
    // Block 0 appends to the state itself, the others to their own records, appended in block
    // order afterwards: the state is the same for any number of threads.
    std::vector<std::vector<coco::Records>> out(blocks - 1,
                                                std::vector<coco::Records>(configs_.size()));
    parallel_for(blocks, threads_, [&](std::size_t k) {
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
  // detection count and (kAreas + 1) GT counts per group, one score and words() bit words per
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
          std::cmp_equal(r.group_gts.size(), groups * (coco::kAreas + 1)) &&
          std::cmp_equal(r.score.size(), dets) &&
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
      throw RuntimeError(check_.owner() + ": the state holds " + std::to_string(all.kinds.size()) +
                         " kinds, expected " + std::to_string(configs_.size()));
    for (std::size_t j = 0; j < configs_.size(); ++j) {
      const coco::Summary sum =
          coco::summarize(configs_[j], all.img_ids, all.kinds[j], cat_ids_, threads_);
      const std::string& m = metrics_[j];
      const std::string n0 = std::to_string(proposal_nums_[0]),
                        n1 = std::to_string(proposal_nums_[1]),
                        n2 = std::to_string(proposal_nums_[2]);
      const std::vector<std::string> names = {"mAP",      "mAP_50",     "mAP_75",     "mAP_s",
                                              "mAP_m",    "mAP_l",      "AR@" + n0,   "AR@" + n1,
                                              "AR@" + n2, "AR_s@" + n2, "AR_m@" + n2, "AR_l@" + n2};
      if (configs_[j].kind == coco::Kind::Proposal) {
        for (std::size_t i = 6; i < 12; ++i) out.set(names[i], sum.stats[i]);
        continue;
      }
      for (std::size_t i = 0; i < 12; ++i) out.set(m + "_" + names[i], sum.stats[i]);
      if (classwise_) {
        for (std::size_t k = 0; k < sum.cat_ids.size(); ++k) {
          std::string name = std::to_string(sum.cat_ids[k]);
          for (std::size_t c = 0; c < cat_ids_.size() && c < classes_.size(); ++c)
            if (cat_ids_[c] == sum.cat_ids[k]) name = classes_[c];
          out.set(m + "_" + name + "_precision", sum.classwise_ap[k]);
        }
      }
    }
    return out;
  }

 private:
  void read_image(const Batch& b, std::size_t i, std::int64_t sample, std::int64_t id,
                  std::int64_t height, std::int64_t width, coco::ImageData& img) const {
    const auto ii = static_cast<std::int64_t>(i);
    // Cleared, not replaced: the vectors keep their capacity from image to image.
    for (auto* v :
         {&img.dt_box, &img.dt_score, &img.dt_area, &img.dt_area_segm, &img.gt_box, &img.gt_area})
      v->clear();
    img.dt_rle.clear();
    img.gt_rle.clear();
    img.dt_label.clear();
    img.gt_label.clear();
    img.gt_id.clear();
    img.gt_crowd.clear();
    img.img_id = id;
    // Detections.
    const auto scores = per_image(b, "pred_scores", check_);
    const auto labels = per_image(b, "pred_labels", check_);
    if (!scores) check_.fail("pred_scores", "is missing from the batch");
    if (!labels) check_.fail("pred_labels", "is missing from the batch");
    const std::int64_t nd =
        read_floats((*scores)[i], "pred_scores", sample, 0, -1, check_, img.dt_score);
    read_ints((*labels)[i], "pred_labels", sample, nd, check_, img.dt_label);
    check_labels(img.dt_label, "pred_labels", sample);
    if (need_boxes_ && !read_boxes(b, "pred", ii, sample, nd, check_, img.dt_box))
      check_.fail("pred_bboxes",
                  "is missing: bbox and proposal need pred_bboxes (x1, y1, x2, y2) "
                  "or pred_bboxes_xywh");
    if (need_masks_ && !read_masks(b, "pred", ii, sample, nd, height, width, check_, img.dt_rle))
      check_.fail("pred_masks",
                  "is missing: segm needs pred_masks or pred_rle_counts with "
                  "pred_rle_lengths");
    if (const auto areas = per_image(b, "pred_areas", check_)) {
      read_floats((*areas)[i], "pred_areas", sample, 0, nd, check_, img.dt_area);
      img.dt_area_segm = img.dt_area;
    } else {
      if (need_boxes_)
        for (std::size_t d = 0; d < static_cast<std::size_t>(nd); ++d)
          img.dt_area.push_back(img.dt_box[d * 4 + 2] * img.dt_box[d * 4 + 3]);
      for (const auto& r : img.dt_rle) img.dt_area_segm.push_back(mask::rle_area(r));
    }
    // Ground truth.
    const auto glabels = per_image(b, "gt_labels", check_);
    if (!glabels) check_.fail("gt_labels", "is missing from the batch");
    const std::int64_t ng = read_ints((*glabels)[i], "gt_labels", sample, -1, check_, img.gt_label);
    check_labels(img.gt_label, "gt_labels", sample);
    const bool have_boxes = read_boxes(b, "gt", ii, sample, ng, check_, img.gt_box);
    if (need_boxes_ && !have_boxes)
      check_.fail("gt_bboxes",
                  "is missing: bbox and proposal need gt_bboxes (x1, y1, x2, y2) or "
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
    if (const auto crowd = per_image(b, "gt_iscrowd", check_)) {
      std::vector<std::int64_t> c;
      read_ints((*crowd)[i], "gt_iscrowd", sample, ng, check_, c);
      for (std::size_t g = 0; g < c.size(); ++g) img.gt_crowd[g] = c[g] != 0;
    }
    if (need_masks_) {
      for (std::size_t d = 0; d < img.dt_rle.size(); ++d)
        for (const auto& g : img.gt_rle)
          if (g.h != img.dt_rle[d].h || g.w != img.dt_rle[d].w)
            check_.fail("pred_masks", sample_str(sample) + ": mask " + std::to_string(d) + " is " +
                                          std::to_string(img.dt_rle[d].h) + "x" +
                                          std::to_string(img.dt_rle[d].w) +
                                          ", the ground truth masks are " + std::to_string(g.h) +
                                          "x" + std::to_string(g.w));
    }
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
  std::vector<std::int64_t> proposal_nums_;
  bool use_cats_ = true;
  std::vector<std::int64_t> cat_ids_;
  std::vector<std::string> classes_;
  bool classwise_ = false;
  bool need_boxes_ = false, need_masks_ = false;
  int threads_ = 1;
};

}  // namespace

ComponentInfo coco_detection_info() {
  auto info = metric<COCODetection>(
      "COCODetection",
      "COCO mAP / mAR for boxes (bbox), masks (segm, RLE or binary masks, polygons rasterised as "
      "pycocotools) and proposals (AR), exactly as pycocotools 2.0.11's COCOeval computes them "
      "(mmeval's COCODetection keys). Per-image inputs; boxes xyxy (pred_bboxes) or xywh "
      "(pred_bboxes_xywh). Distributed: compact per-detection records, repeated image ids "
      "counted once.",
      {param("metric", ParamType::StringList, "Kinds to evaluate: bbox, segm, proposal.")
           .def(Value::Array{Value("bbox")})
           .choices({"bbox", "segm", "proposal"}),
       param("iou_thrs", ParamType::FloatList,
             "IoU thresholds; null: pycocotools' np.linspace(.5, 0.95, 10).")
           .def(Value())
           .optional()
           .nullable(),
       param("proposal_nums", ParamType::IntList,
             "maxDets: 3 increasing detection counts per image (pycocotools' [1, 10, 100]).")
           .def(Value::Array{Value(1), Value(10), Value(100)}),
       param("classwise", ParamType::Bool, "Also return the AP of each category.").def(false),
       param("use_cats", ParamType::Bool,
             "pycocotools' params.useCats: false matches every detection with every ground truth "
             "of its image whatever their categories (bbox and segm; proposal never uses them). "
             "The categories of cat_ids (default: all) still choose the ground truth and "
             "detections that take part.")
           .def(true),
       param("cat_ids", ParamType::IntList,
             "Categories to evaluate (pycocotools' params.catIds); default: every category with "
             "ground truth.")
           .optional(),
       param("img_ids", ParamType::IntList,
             "Images to evaluate (pycocotools' params.imgIds); the others are read and left out. "
             "Default: every image.")
           .optional(),
       param("classes", ParamType::StringList,
             "Names of cat_ids, in the same order, for the classwise keys (default: the ids).")
           .optional(),
       param("threads", ParamType::Int,
             "Threads for the per-image matching and the accumulation; any number gives the same "
             "result.")
           .def(1)},
      {InputSpec{"img_id", "Image ids [N], any integer dtype.", true},
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
       InputSpec{"gt_iscrowd", "Per image [g] int/bool crowd flags (ignored ground truth).", false},
       InputSpec{"gt_masks", "Per image [g, H, W] bool/uint8 masks (segm).", false},
       InputSpec{"gt_rle_counts", "Per image uint32 RLE counts, concatenated (segm).", false},
       InputSpec{"gt_rle_lengths", "Per image [g] int: counts per mask.", false},
       InputSpec{"height", "Image heights [N] (masks given as RLE counts).", false},
       InputSpec{"width", "Image widths [N] (masks given as RLE counts).", false}});
  info.results = {{"*_precision", Better::Higher, Plot::None, "AP of one category (classwise)"},
                  {"*", Better::Higher, Plot::None, "COCO AP / AR (fraction; -1 when undefined)"}};
  return info;
}

}  // namespace tally::detection
