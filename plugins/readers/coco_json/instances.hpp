// The coco_json reader's data model: the per-instance arrays of the ground truth and of the
// results (Instances), and what an image of the annotations holds (ImageInfo).
// Internal to plugins/readers/coco_json.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tally_coco_json {

/// Per-instance arrays: boxes, labels, scores/areas, optional masks (flat counts + lengths).
struct Instances {
  std::vector<std::int64_t> image;  // image id (raw), then image index after grouping
  std::vector<std::int32_t> label;
  std::vector<double> box;       // 4 per instance
  std::vector<double> value;     // results: score; ground truth: area
  std::vector<double> area;      // results with masks: loadRes' area
  std::vector<std::int64_t> id;  // ground truth ids
  std::vector<std::uint8_t> crowd;
  std::vector<std::uint32_t> counts;
  std::vector<std::int32_t> lengths;
  // Results' masks as parsed, decoded batch by batch (CocoJsonReader::decode_masks): the
  // compressed RLE strings, each result's source (mask_src: the string's length in bytes, -1 the
  // box's polygon, -2 - slot its polygons in dt_polys_; in `lengths` until group()), and what to
  // take from the mask once decoded (geom: 1 the area, 2 the box).
  std::string rle_str;
  std::vector<std::int32_t> mask_src;
  std::vector<std::uint8_t> geom;
  std::vector<std::uint32_t> mask_hw;  // 2 per instance
  std::vector<double> kp;              // keypoints: 3K per instance (ground truth: see kp_at)
  std::vector<std::int64_t> num_kp;    // ground truth: num_keypoints
  std::vector<std::int64_t> kp_at;     // ground truth as parsed: its offset in kp, -1 for none
  std::vector<std::int8_t> freq;       // ground truth (LVIS): its category's frequency
  std::size_t size() const { return label.size(); }
};

struct ImageInfo {
  std::int64_t id;
  std::int64_t height, width;
  // LVIS: the image's neg_category_ids and not_exhaustive_category_ids, [at, at + n) of the
  // flat lists Data::neg and Data::nel.
  std::uint32_t neg_at = 0, neg_n = 0, nel_at = 0, nel_n = 0;
};

}  // namespace tally_coco_json
