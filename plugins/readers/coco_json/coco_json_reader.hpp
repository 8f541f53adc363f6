// The coco_json reader (see coco_json_reader.cpp for what it hands the metrics). Its parts, by
// what they parse:
//   coco_json_reader.cpp  the plugin: parameters, construction, fields, batches
//   results.cpp           the results file (detections: boxes, scores, masks, keypoints)
//   annotations.cpp       the annotations file's "annotations" list (the ground truth)
//   images_categories.cpp the annotations file's "images" and "categories" (with LVIS' lists)
//   grouping.cpp          both grouped by image, and result masks decoded batch by batch
//   json_values.hpp       an entry's ids, numbers, boxes and keypoints, checked
//   segmentation.hpp      polygons and RLE {size, counts}, and that a mask fits its image
//   json_file.hpp/.cpp    a JSON file whole, or its top-level array in chunks (ChunkSource)
//   annotation_chunks.hpp the annotations file's "annotations" list in chunks
//   instances.hpp         the per-instance arrays and the images
// Internal to plugins/readers/coco_json.
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "instances.hpp"
#include "segmentation.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/reader.hpp"
#include "tally_support/sharded_reader.hpp"

namespace tally_coco_json {

class AnnotationChunks;

/// Image id -> its index in the images sorted by id.
using ImageIndex = std::unordered_map<std::int64_t, std::size_t>;

// Its batches are views of the arrays read at construction, which nothing writes afterwards
// (StableBatchReader: the engine may read the next batch while the current one is added).
class CocoJsonReader final : public tally::support::ShardedReader, public tally::StableBatchReader {
 public:
  CocoJsonReader(const tally::Params& params, const tally::ShardInfo& shard);

  std::vector<std::string> fields() const override;

 protected:
  tally::Batch read_batch(std::int64_t begin, std::int64_t end) override;

 private:
  struct Data {
    Instances gt, dt;
    std::vector<std::size_t> gt_begin;            // per image, + end
    std::vector<std::size_t> dt_first, dt_count;  // per image of the shard
    std::vector<std::size_t> gt_counts_begin;     // per instance, + end
    std::vector<std::size_t> dt_str_begin;        // per result: its RLE string in rle_str, + end
    std::vector<std::int32_t> neg, nel;           // LVIS: the images' category lists (ImageInfo)
  };

  // results.cpp: the results file.
  void read_results(const std::string& path, const std::string& masks, const std::string& keypoints,
                    std::size_t block, int threads);

  // annotations.cpp: the annotations file, its "annotations" list.
  void read_annotations(const std::string& path, std::size_t block, int threads);
  bool annotations_side_by_side(AnnotationChunks& chunks, int threads, const std::string& path);
  static void append(Instances& to, const Instances& from);
  void add_annotation(dom::object obj, std::size_t at, const std::string& path);
  void add_annotation(dom::object obj, std::size_t at, const std::string& path, Instances& gt,
                      std::vector<GtSeg>& segs);

  // images_categories.cpp: the annotations file's top-level object, its images and categories.
  class TopList;
  void read_top(const dom::element& doc, const std::string& path);
  void read_images(const TopList& list, dom::element value);
  ImageInfo read_image(const TopList& list, dom::element e, std::size_t at);
  void read_categories(const TopList& list, dom::element value);

  // grouping.cpp: ground truth and results grouped by image; result masks decoded per batch.
  void group(const tally::ShardInfo& shard, const std::string& res_path, int threads);
  ImageIndex index_images();
  bool known_cat(std::int32_t c) const;
  void group_gt(const ImageIndex& index);
  std::vector<std::size_t> known_gt(const ImageIndex& index);
  void reserve_gt(Instances& out, std::size_t n) const;
  void add_gt_mask(std::size_t j, std::size_t im, Instances& out);
  void group_results(const ImageIndex& index, const std::string& res_path, std::size_t lo,
                     std::size_t hi);
  std::vector<std::int32_t> result_images(const ImageIndex& index, const std::string& res_path,
                                          std::size_t lo, std::size_t hi);
  bool results_in_runs(const std::vector<std::int32_t>& img, std::size_t shard_images);
  void regroup_results(const std::vector<std::int32_t>& img, std::size_t shard_images);
  void index_result_masks(const std::string& res_path, std::size_t lo, std::size_t shard_images);
  void decode_masks(std::size_t begin, std::size_t end, std::vector<std::uint32_t>& out,
                    std::vector<std::size_t>& at);

  std::shared_ptr<Data> data_;
  std::vector<ImageInfo> images_;
  std::vector<std::int64_t> cats_;
  std::unordered_map<std::int64_t, std::int8_t> cat_freq_;  // LVIS categories' frequency
  bool lvis_lists_ = false;  // an image has neg_category_ids or not_exhaustive_category_ids
  bool lvis_freq_ = false;   // a category has a frequency
  std::vector<GtSeg> gt_segs_;
  std::vector<std::vector<std::vector<double>>> dt_polys_;  // polygon results, by slot
  std::string res_path_;                                    // for messages
  std::vector<std::shared_ptr<std::vector<std::uint32_t>>> mask_buffers_;  // batches' counts
  bool with_masks_ = false;
  bool with_keypoints_ = false;
  std::size_t kp_len_ = 0;   // 3K: the values of each keypoints list (0: none read)
  std::string kp_len_from_;  // the entry that fixed it, for messages
};

}  // namespace tally_coco_json
