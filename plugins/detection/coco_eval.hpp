// The COCO evaluation core shared by COCODetection's kinds (bbox, segm, proposal): per-image
// matching exactly as pycocotools' COCOeval.evaluateImg, compact per-detection records, and
// accumulate() + summarize() on rank 0. See coco_detection.cpp for the formulas and references.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tally/sdk/state.hpp"
#include "tally_support/mask.hpp"

namespace tally::detection {
namespace mask = tally::support::mask;  // COCO RLE masks (plugins/support)
}  // namespace tally::detection

namespace tally::detection::coco {

enum class Kind { Bbox, Segm, Proposal, Keypoints };

/// An area range [lo, hi] (bounds inclusive) and its label.
struct AreaRange {
  double lo = 0, hi = 0;
  std::string label;
};

/// pycocotools' areaRng for an iouType: all, small, medium, large ([0, 1e10], [0, 32^2],
/// [32^2, 96^2], [96^2, 1e10]) for boxes and masks (setDetParams), all, medium, large for
/// keypoints (setKpParams). Labels "all", "s", "m", "l": the suffixes of the result keys.
std::vector<AreaRange> default_area_ranges(Kind kind);

/// pycocotools' maxDets: [1, 10, 100] (setDetParams), [20] for keypoints (setKpParams).
std::vector<std::int64_t> default_max_dets(Kind kind);

/// pycocotools' kpt_oks_sigmas, the 17 COCO person keypoints' np.array([.26, ...]) / 10.0.
std::vector<double> coco_kpt_sigmas();

struct EvalConfig {
  Kind kind = Kind::Bbox;
  std::vector<double> iou_thrs;        // T, ascending as given
  std::vector<double> rec_thrs;        // R, as given; empty: np.linspace(.0, 1.00, 101)
  std::vector<std::int64_t> max_dets;  // ascending (pycocotools sorts them)
  std::vector<AreaRange> areas;        // A >= 1, in the given order
  std::vector<double> kpt_sigmas;      // keypoints: one per keypoint
  bool use_cats = true;                // false for proposal
  /// Without categories: the categories whose instances take part (sorted; empty: all), as
  /// pycocotools gathers `_gts[imgId, cId] for cId in p.catIds`. With categories the others are
  /// left out at compute.
  std::vector<std::int64_t> cat_filter;
  /// pycocotools' params.imgIds: only these images are evaluated (sorted; empty: every image).
  std::vector<std::int64_t> img_filter;
  /// LVIS's federated protocol (lvis 0.5.3 LVISEval): each image keeps its `max_dets` best
  /// detections over all categories (LVISResults.limit_dets_per_image), then only those of a
  /// category with ground truth in the image or in its neg_category_ids; an unmatched detection
  /// of a category in its not_exhaustive_category_ids is ignored; crowd flags are not read.
  bool federated = false;
  /// Also keep pycocotools' eval['scores'] (Summary::scores): for the curves.
  bool keep_scores = false;
  /// hotcoco's confusion_matrix(iou_thr, max_det) when >= 0 (Summary::confusion).
  double confusion_iou = -1;
  std::int64_t confusion_max_det = 100;
  std::vector<std::int64_t> conf_filter;  // the categories that take part (sorted; empty: all)
  /// hotcoco's calibration(n_bins, iou_threshold) when > 0 (Summary::ece and the rest).
  std::size_t calibration_bins = 0;
  double calibration_iou = 0.5;
  /// The F1 of every category's detections pooled, against a score threshold (Summary::f1_*),
  /// at this IoU threshold when >= 0.
  double f1_curve_iou = -1;
  /// tidecv 1.0.1's TIDE error breakdown (tide.cpp) at these thresholds, when `tide`.
  bool tide = false;
  double tide_pos = 0.5, tide_bg = 0.1;
  std::int64_t tide_max_dets = 100;       // tidecv's Data.max_dets: per image, all categories
  std::vector<std::int64_t> tide_filter;  // the categories that take part (sorted; empty: all)
  std::size_t num_areas() const { return areas.size(); }
  /// The area range labelled "all" (the first when none is: the plugin requires one).
  std::size_t all_area() const {
    for (std::size_t a = 0; a < areas.size(); ++a)
      if (areas[a].label == "all") return a;
    return 0;
  }
  /// Words of match/ignore bits per detection: 2 bits per (area range, IoU threshold).
  std::size_t words() const { return (2 * areas.size() * iou_thrs.size() + 63) / 64; }
};

/// pycocotools' default IoU thresholds, np.linspace(.5, 0.95, 10) computed as NumPy does.
std::vector<double> default_iou_thrs();

/// One image's instances of one kind (boxes xywh as pycocotools holds them).
struct ImageData {
  std::int64_t img_id = 0;
  // detections
  std::vector<double> dt_box;     // n*4 xywh (bbox, proposal)
  std::vector<mask::Rle> dt_rle;  // n (segm)
  std::vector<double> dt_score;
  std::vector<double> dt_area;       // area for bbox and proposal (pycocotools: w * h)
  std::vector<double> dt_area_segm;  // area for segm (the mask's area)
  std::vector<double> dt_kpt;        // n*K*3 (keypoints: x, y, score)
  std::vector<std::int64_t> dt_label;
  // ground truth
  std::vector<double> gt_box;
  std::vector<mask::Rle> gt_rle;
  std::vector<double> gt_area;
  std::vector<double> gt_kpt;  // g*K*3 (keypoints: x, y, visibility)
  std::vector<std::int64_t> gt_label, gt_id;
  std::vector<std::uint8_t> gt_crowd;    // iscrowd: ignored, may match several detections
  std::vector<std::int64_t> gt_num_kpt;  // keypoints: num_keypoints (0: ignored)
  std::vector<std::int8_t> gt_freq;      // federated: the category's frequency 0 r, 1 c, 2 f (-1
                                         // unknown), per ground truth
  std::vector<std::int64_t> neg_cats, nel_cats;  // federated: sorted category ids
};

/// The records of one kind on one rank. Images are kept in the order added; each image holds
/// groups (one per category present, ascending id; a single group -1 without categories), each
/// group its detections sorted as pycocotools sorts them (stable, score descending), truncated to
/// the largest maxDet, so a detection's rank in its group is its position.
struct Records {
  PackedVector<std::int32_t> img_groups;   // per image: number of groups
  PackedVector<std::int32_t> group_cat;    // per group: category id (-1 without categories)
  PackedVector<std::int32_t> group_ndets;  // per group: detections kept
  PackedVector<std::int32_t> group_gts;    // per group: (A + 1) counts: all GTs, then the
                                           // non-ignored GTs per area range
  PackedVector<double> score;              // per detection
  PackedVector<std::uint64_t> bits;        // per detection: words() words; bit a*T+t: true
                                           // positive; bit A*T + a*T+t: ignored
  PackedVector<std::int8_t> group_freq;    // federated only: per group its category's frequency
                                           // (0 r, 1 c, 2 f, -1 unknown)
  PackedVector<std::int32_t> img_conf;     // confusion only: per image its events
  PackedVector<std::int32_t> conf_pairs;   // confusion only: per event (ground truth's category,
                                           // detection's), -1 for none (a miss, a false alarm)
  PackedVector<std::int32_t> img_tide;     // TIDE only: per image its events (tide.cpp): its
                                           // kept results, then its non-crowd ground truth
  PackedVector<std::int32_t> tide_cls;     // TIDE only, per event: category
  PackedVector<std::int8_t> tide_code;     // state, error and whether fixing it gives a match
  PackedVector<std::int32_t> tide_fix;     // the category a Cls / Loc error is fixed into
  PackedVector<double> tide_score;         // the result's score (0 for ground truth)

  // Packed as the array of the fields above, the optional ones only as far as the last group of
  // them that holds something (LVIS's group_freq and the confusion matrix's: 9 fields; TIDE's:
  // 14): COCODetection's states and checkpoints keep the layout of the six fields they always
  // had, and those written with 9 still read.
  void tally_pack(StateWriter& o) const {
    const bool tide = !img_tide.empty();
    const bool extra = tide || !group_freq.empty() || !img_conf.empty();
    o.array(tide ? 14 : extra ? 9 : 6);
    internal::write(o, img_groups);
    internal::write(o, group_cat);
    internal::write(o, group_ndets);
    internal::write(o, group_gts);
    internal::write(o, score);
    internal::write(o, bits);
    if (extra) {
      internal::write(o, group_freq);
      internal::write(o, img_conf);
      internal::write(o, conf_pairs);
    }
    if (tide) {
      internal::write(o, img_tide);
      internal::write(o, tide_cls);
      internal::write(o, tide_code);
      internal::write(o, tide_fix);
      internal::write(o, tide_score);
    }
  }
  void tally_unpack(StateReader& in) {
    const std::uint32_t n = in.array();
    if (n != 6 && n != 7 && n != 9 && n != 14)
      StateReader::fail("detection records of " + std::to_string(n) + " fields");
    internal::read(in, img_groups);
    internal::read(in, group_cat);
    internal::read(in, group_ndets);
    internal::read(in, group_gts);
    internal::read(in, score);
    internal::read(in, bits);
    group_freq.clear();
    img_conf.clear();
    conf_pairs.clear();
    img_tide.clear();
    tide_cls.clear();
    tide_code.clear();
    tide_fix.clear();
    tide_score.clear();
    if (n >= 7) internal::read(in, group_freq);
    if (n >= 9) {
      internal::read(in, img_conf);
      internal::read(in, conf_pairs);
    }
    if (n == 14) {
      internal::read(in, img_tide);
      internal::read(in, tide_cls);
      internal::read(in, tide_code);
      internal::read(in, tide_fix);
      internal::read(in, tide_score);
    }
  }

  void append(const Records& o);
};

/// The records of every kind (one per entry of COCODetection's `metric`), a state field: the
/// ranks' records are merged kind by kind, in rank order (merge). Packed as a msgpack array of
/// Records, as the std::vector it is.
struct KindRecords : std::vector<Records> {
  using std::vector<Records>::vector;
  /// Appends the records of a later rank, kind by kind; RuntimeError when it holds another
  /// number of kinds.
  void merge(const KindRecords& later);
};

/// Matches one image and appends its records (evaluateImg for every category and area range).
void evaluate_image(const EvalConfig& cfg, const ImageData& img, Records& out);

/// accumulate()'s arrays, laid out as pycocotools' eval['precision'] [T, R, K, A, M] and
/// eval['recall'] [T, K, A, M], -1 where undefined; and summarize()'s reductions.
struct Summary {
  std::size_t T = 0, R = 0, K = 0, A = 0, M = 0;
  std::vector<std::int64_t> cat_ids;       // K, ascending
  std::vector<std::int64_t> seen_cat_ids;  // with a detection or ground truth, ascending
  std::vector<double> precision, recall;
  std::vector<double> scores;  // eval['scores'] [T, R, K, A, M] when EvalConfig::keep_scores
  std::vector<double> iou_thrs;
  std::vector<double> rec_thrs;  // R: np.linspace(.0, 1.00, 101)
  std::vector<std::int64_t> max_dets;
  std::vector<int> cat_freq;  // federated: per category 0 r, 1 c, 2 f, -1 unknown
  // Calibration (EvalConfig::calibration_bins): the non-ignored detections at area "all" and
  // calibration_iou, binned by score; per bin the mean score and the fraction of true positives.
  double ece = 0, mce = 0;
  std::vector<double> bin_confidence, bin_accuracy;
  std::vector<std::size_t> bin_count;
  std::vector<double> ece_per_cat;  // K; NaN for a category without detections
  // Confusion (EvalConfig::confusion_iou): rows the ground truth's category, columns the
  // detection's, over confusion_cats and then none (misses in the last column, false alarms in
  // the last row), row-major.
  std::vector<std::int64_t> confusion_cats;
  std::vector<std::int64_t> confusion;
  /// EvalConfig::f1_curve_iou: at score thresholds f1_thr (np.linspace(0, 1, 101)), F1 =
  /// 2 tp / (detections + npig) of the non-ignored detections scoring >= the threshold (area
  /// "all", the last maxDet, every evaluated category pooled).
  std::vector<double> f1_thr, f1;
  /// TIDE (EvalConfig::tide): tidecv's run AP and dAP, on COCODetection's scale (tidecv's / 100).
  struct Tide {
    double ap = 0;
    std::array<double, 6> main{};  // dAP of Cls, Loc, Both, Dupe, Bkg, Miss
    double false_pos = 0, false_neg = 0;
    std::array<std::int64_t, 6> counts{};  // errors of each type
  } tide;

  /// The index of (t, r, k, a, m) in precision and scores.
  std::size_t pidx(std::size_t t, std::size_t r, std::size_t k, std::size_t a,
                   std::size_t m) const {
    return (((t * R + r) * K + k) * A + a) * M + m;
  }
  /// The index of an IoU threshold (exact, as np.where(iouThr == p.iouThrs)); T when absent.
  std::size_t thr_index(double thr) const {
    return static_cast<std::size_t>(std::find(iou_thrs.begin(), iou_thrs.end(), thr) -
                                    iou_thrs.begin());
  }
  double& prec(std::size_t t, std::size_t r, std::size_t k, std::size_t a, std::size_t m) {
    return precision[pidx(t, r, k, a, m)];
  }
  double& score_at(std::size_t t, std::size_t r, std::size_t k, std::size_t a, std::size_t m) {
    return scores[pidx(t, r, k, a, m)];
  }
  double& rec(std::size_t t, std::size_t k, std::size_t a, std::size_t m) {
    return recall[((t * K + k) * A + a) * M + m];
  }
  /// summarize()'s _summarize(ap, iouThr, areaRng, maxDets) over the categories `k` (every one
  /// when k < 0): the mean (NumPy's) of the selected entries > -1, -1 when there are none or
  /// `iou_thr` / `max_det` is not among the parameters. iou_thr < 0: every threshold.
  double stat(bool ap, double iou_thr, std::size_t area, std::int64_t max_det,
              std::ptrdiff_t k = -1) const;
  /// The same over the categories `ks` (indices, in that order): LVIS's frequency groups.
  double stat(bool ap, double iou_thr, std::size_t area, std::int64_t max_det,
              const std::vector<std::size_t>& ks) const;

 private:
  /// The thresholds [t0, t1) and maxDet index m a stat reads; false when there are none.
  bool select(double iou_thr, std::size_t area, std::int64_t max_det, std::size_t& t0,
              std::size_t& t1, std::size_t& m) const;
};

namespace tide {
/// One image's TIDE events (tide.cpp), appended to `out`.
void image(const EvalConfig& cfg, const ImageData& img, Records& out);
/// The TIDE breakdown over the images whose events are `ranges` of the records (id order).
void summarize(const Records& rec, const std::vector<std::pair<std::size_t, std::size_t>>& ranges,
               int threads, Summary::Tide& out);
/// tidecv's error types in its order (TIDE._error_types' short names).
inline constexpr std::array<const char*, 6> kErrorNames = {"Cls",  "Loc", "Both",
                                                           "Dupe", "Bkg", "Miss"};
}  // namespace tide

/// accumulate() + summarize() over the records of every rank, merged in rank order (`ids`: their
/// image ids, in the same order); images are taken in ascending id order and an id seen twice
/// counts once (the first occurrence, in rank order). `cat_ids`: the categories to evaluate
/// (empty: every category with ground truth). RuntimeError when the records are inconsistent.
Summary summarize(const EvalConfig& cfg, const std::vector<std::int64_t>& ids, const Records& rec,
                  const std::vector<std::int64_t>& cat_ids, int threads);

}  // namespace tally::detection::coco
