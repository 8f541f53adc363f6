// The COCO evaluation core shared by COCODetection's kinds (bbox, segm, proposal): per-image
// matching exactly as pycocotools' COCOeval.evaluateImg, compact per-detection records, and
// accumulate() + summarize() on rank 0. See coco_detection.cpp for the formulas and references.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "tally/state.hpp"
#include "tally_support/mask.hpp"

namespace tally::detection {
namespace mask = tally::support::mask;  // COCO RLE masks (plugins/support)
}  // namespace tally::detection

namespace tally::detection::coco {

/// pycocotools' area ranges: all, small, medium, large (bounds inclusive).
inline constexpr int kAreas = 4;
inline constexpr std::array<std::array<double, 2>, kAreas> kAreaRanges = {
    {{0.0, 1e10}, {0.0, 1024.0}, {1024.0, 9216.0}, {9216.0, 1e10}}};

enum class Kind { Bbox, Segm, Proposal };

struct EvalConfig {
  Kind kind = Kind::Bbox;
  std::vector<double> iou_thrs;        // T, ascending as given
  std::vector<std::int64_t> max_dets;  // ascending (pycocotools sorts them)
  bool use_cats = true;                // false for proposal
  /// Without categories: the categories whose instances take part (sorted; empty: all), as
  /// pycocotools gathers `_gts[imgId, cId] for cId in p.catIds`. With categories the others are
  /// left out at compute.
  std::vector<std::int64_t> cat_filter;
  /// pycocotools' params.imgIds: only these images are evaluated (sorted; empty: every image).
  std::vector<std::int64_t> img_filter;
  /// Words of match/ignore bits per detection: 2 bits per (area range, IoU threshold).
  std::size_t words() const { return (2 * kAreas * iou_thrs.size() + 63) / 64; }
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
  std::vector<std::int64_t> dt_label;
  // ground truth
  std::vector<double> gt_box;
  std::vector<mask::Rle> gt_rle;
  std::vector<double> gt_area;
  std::vector<std::int64_t> gt_label, gt_id;
  std::vector<std::uint8_t> gt_crowd;
};

/// The records of one kind on one rank. Images are kept in the order added; each image holds
/// groups (one per category present, ascending id; a single group -1 without categories), each
/// group its detections sorted as pycocotools sorts them (stable, score descending), truncated to
/// the largest maxDet, so a detection's rank in its group is its position.
struct Records {
  PackedVector<std::int32_t> img_groups;   // per image: number of groups
  PackedVector<std::int32_t> group_cat;    // per group: category id (-1 without categories)
  PackedVector<std::int32_t> group_ndets;  // per group: detections kept
  PackedVector<std::int32_t> group_gts;    // per group: (kAreas + 1) counts: all GTs, then the
                                           // non-ignored GTs per area range
  PackedVector<double> score;              // per detection
  PackedVector<std::uint64_t> bits;        // per detection: words() words; bit a*T+t: true
                                           // positive; bit A*T + a*T+t: ignored
  MSGPACK_DEFINE(img_groups, group_cat, group_ndets, group_gts, score, bits)

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
  template <class Packer>
  void msgpack_pack(Packer& o) const {
    o.pack(static_cast<const std::vector<Records>&>(*this));
  }
  void msgpack_unpack(const msgpack::object& o) {
    o.convert(static_cast<std::vector<Records>&>(*this));
  }
};

/// Matches one image and appends its records (evaluateImg for every category and area range).
void evaluate_image(const EvalConfig& cfg, const ImageData& img, Records& out);

struct Summary {
  std::array<double, 12> stats{};
  std::vector<std::int64_t> cat_ids;  // K, ascending
  /// Per category: mean of precision[:, :, k, area all, last maxDet] over values > -1, NaN if
  /// none (mmeval's classwise AP).
  std::vector<double> classwise_ap;
};

/// accumulate() + summarize() over the records of every rank, merged in rank order (`ids`: their
/// image ids, in the same order); images are taken in ascending id order and an id seen twice
/// counts once (the first occurrence, in rank order). `cat_ids`: the categories to evaluate
/// (empty: every category with ground truth). RuntimeError when the records are inconsistent.
Summary summarize(const EvalConfig& cfg, const std::vector<std::int64_t>& ids, const Records& rec,
                  const std::vector<std::int64_t>& cat_ids, int threads);

}  // namespace tally::detection::coco
