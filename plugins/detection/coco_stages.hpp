// The stages of the COCO evaluation core (coco_eval.hpp), one file each as hotcoco splits its
// COCOeval: per image, the instances that take part, their groups and IoUs (coco_evaluate.cpp)
// and the greedy matching into records (coco_matching.cpp); on rank 0 the records checked,
// ordered and gathered per category, and precision and recall per category (coco_accumulate.cpp),
// then summarize()'s reductions (coco_summarize.cpp); hotcoco's analyses, the confusion matrix,
// calibration and the F1 curve, beside them (coco_analysis.cpp). Private to the plugin.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "coco_eval.hpp"

namespace tally::detection::coco {

/// np.linspace(.0, 1.00, 101): i * 0.01 (step = 1.0 / 100), the last value 1.0.
std::vector<double> rec_thrs();

// ---- evaluate (per image, at add time) ----

/// Per-thread buffers of evaluate_image: no allocation per image once they have grown.
struct Scratch {
  std::vector<std::size_t> dord, gord, dts, gts, gsorted;
  std::vector<double> ious, dbox, gbox, oks_terms, oks_vars, best;
  std::vector<std::uint8_t> gig, gtm;
  std::vector<std::int32_t> match;  // per (area range, threshold, detection): the index into
                                    // gsorted of its match, -1 for none
};

/// LVIS: an unmatched detection of a category not exhaustively annotated in the image is
/// ignored (LVISEval.evaluate_img's dt_ig_mask).
inline bool not_exhaustive(const EvalConfig& cfg, const ImageData& img, std::size_t d) {
  return cfg.federated &&
         std::binary_search(img.nel_cats.begin(), img.nel_cats.end(), img.dt_label[d]);
}

/// Matches one group (its detections sc.dts, sorted and cut, against its ground truth sc.gts,
/// with their IoUs sc.ious) at every area range and IoU threshold as evaluateImg does, and
/// appends its per-detection bits and its ground-truth counts to `out` (coco_matching.cpp).
void match_group(const EvalConfig& cfg, const ImageData& img, Scratch& sc, Records& out);

// ---- accumulate (rank 0, over every rank's records) ----

/// An image of the merged records: its groups, confusion events and TIDE events.
struct ImageRef {
  std::int64_t id;
  std::size_t group_begin, group_end;
  std::size_t conf_begin = 0, conf_end = 0;  // its confusion events
  std::size_t tide_begin = 0, tide_end = 0;  // its TIDE events
};

/// The records' images in ascending id order, the first occurrence of an id kept and only those
/// of cfg.img_filter; `det_offsets`: per group the index of its first detection (and the total
/// last). RuntimeError when a count or size of the records is inconsistent.
std::vector<ImageRef> image_refs(const EvalConfig& cfg, const std::vector<std::int64_t>& ids,
                                 const Records& rec, std::vector<std::size_t>& det_offsets);

/// Each evaluated category's detections gathered in image order into one flat array: its score,
/// its rank in its group, and per area range a T-bit true-positive mask and a T-bit ignore mask
/// (masks[j * 2 * A + 2 * a], [.. + 1]); category k's are [cat_begin[k], cat_begin[k + 1]).
struct FlatDets {
  std::vector<std::size_t> cat_begin;  // K + 1
  std::vector<std::int64_t> npig_all;  // K * A: non-ignored ground truth
  std::vector<double> score;
  std::vector<std::uint32_t> rank, masks;
};

/// Sets out.cat_ids (and out.cat_freq when federated) from the images' groups.
void choose_categories(const EvalConfig& cfg, const std::vector<ImageRef>& images,
                       const Records& rec, const std::vector<std::int64_t>& cat_ids_param,
                       Summary& out);

/// The flat per-category detections of the categories out.cat_ids.
FlatDets flatten(const EvalConfig& cfg, const std::vector<ImageRef>& images, const Records& rec,
                 const std::vector<std::size_t>& det_offsets, const Summary& out);

/// Sizes out's precision, recall (and scores) as pycocotools lays them out, -1 everywhere.
void init_arrays(const EvalConfig& cfg, const std::vector<double>& recs, Summary& out);

/// accumulate() for category k: its recall and precision (and scores) at every threshold, area
/// range and maxDet.
void accumulate_category(const EvalConfig& cfg, const FlatDets& flat, std::size_t k, Summary& out);

// ---- hotcoco's analyses (coco_analysis.cpp) ----

/// One image's confusion events (hotcoco's confusion_matrix), appended to `out`.
void confuse(const EvalConfig& cfg, const ImageData& img, Records& out);
/// The confusion matrix summed over the images (Summary::confusion).
void confusion_totals(const EvalConfig& cfg, const std::vector<ImageRef>& images,
                      const Records& rec, Summary& out);
/// hotcoco's calibration (Summary::ece and the rest).
void calibrate(const EvalConfig& cfg, const FlatDets& flat, Summary& out);
/// The pooled F1 against the score threshold (Summary::f1_thr, f1).
void f1_curve(const EvalConfig& cfg, const FlatDets& flat, Summary& out);

}  // namespace tally::detection::coco
