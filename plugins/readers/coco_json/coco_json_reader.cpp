// The `coco_json` reader: COCO ground truth (`annotations:`, instances_*.json, person_keypoints_*
// .json) and a COCO results file (`results:`, a JSON array of {image_id, category_id, bbox |
// segmentation | keypoints, score}), parsed with simdjson, served one image per sample in ascending
// image-id order (pycocotools' order); each rank reads its contiguous block of images.
//
// What it hands the metrics follows pycocotools 2.0.11 (COCO.loadRes, COCO.annToRLE):
//   - loadRes picks its branch from the results' first entry: a (non-empty) bbox, else a
//     segmentation, else keypoints. A detection's area is w*h of its bbox in the first, its
//     mask's area in the second (without a bbox the box is the mask's tight box, toBbox); in the
//     third its box is the keypoints' extent [x0, y0, x1 - x0, y1 - y0] (x0 = min of x = s[0::3],
//     every keypoint counted, v = 0 too; a bbox in the entry is replaced), so w*h is loadRes'
//     area (x1 - x0) * (y1 - y0) bit for bit;
//   - keypoints (when read: `keypoints: auto`, the first result has them): every result's
//     [x1, y1, v1, x2, ...] as pred_keypoints [n, 3K] and every annotation's as gt_keypoints
//     [g, 3K] with gt_num_keypoints [g] (`num_keypoints`, default the count of v > 0). K is fixed
//     by the first entry holding keypoints (results first, then annotations): every list holds
//     3K numbers. An annotation without `keypoints` (another category) gets 3K zeros and
//     num_keypoints 0, whatever its num_keypoints says, so keypoint evaluation ignores it
//     (pycocotools would fail on it);
//   - masks (when read): polygons rasterised with rleFrPoly and merged, uncompressed RLE taken as
//     is, compressed RLE strings decoded (tally_support/mask.hpp, the port of maskApi.c); a
//     bbox-only result gets the box's polygon as its mask, as loadRes gives it;
//   - ground truth keeps its `area`, `iscrowd` (default 0) and `id`; annotations and results of
//     categories absent from `categories` are left out (pycocotools evaluates params.catIds only);
//   - LVIS annotation files (lvis 0.5.3): each image's `neg_category_ids` and
//     `not_exhaustive_category_ids` become the per-image fields of the same names (when any
//     image has them; an image without them gets empty lists), and the categories' `frequency`
//     ("r", "c", "f") becomes gt_frequency per ground truth (0, 1, 2; -1 for a category without
//     one), what LVISDetection reads;
//   - a result whose image is not in the annotations is an error (pycocotools asserts);
//   - result polygons are rasterised at the image's size when the results carry a bbox (loadRes
//     keeps them, annToRLE rasterises them); without a bbox they are an error, as loadRes
//     cannot take their area.
// Bounds (tally_support/mask.hpp): box, polygon and keypoint coordinates (and keypoints' v or
// score) finite and at most 1e8 in magnitude; num_keypoints an integer >= 0; image sides and RLE
// sizes below 2^31, and h * w below 2^32 when masks are read; RLE counts below 2^32 and covering
// the image exactly. A value outside them, of the wrong type, or a key that is missing is an
// InputError naming the file, the entry (`annotations[i] (id N)`, `images[i]`, `[i] (image_id N)`
// of the results) and the key.
// The results file is parsed in blocks of whole array elements (`block_bytes`, simdjson's DOM
// parser, whose kernels are picked at run time for the CPU), so memory stays near the size of the
// parsed arrays, not of the file; with `threads: 2` the next block is parsed while the current one
// is read. Each image's fields are views into those arrays. Image ids listed twice in the
// annotations are an error.
// The parts of the reader are listed in coco_json_reader.hpp.
#include "coco_json_reader.hpp"

#include <simdjson.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/reader.hpp"
#include "tally_support/sharded_reader.hpp"

namespace tally_coco_json {

CocoJsonReader::CocoJsonReader(const tally::Params& params, const tally::ShardInfo& shard) {
  read_batch_size(params);
  const std::string ann_path = params.get_string("annotations");
  const std::string res_path = params.get_string("results");
  res_path_ = res_path;
  const std::string masks = params.get_string("masks");
  const std::string keypoints = params.get_string("keypoints");
  const std::int64_t block = params.get_int("block_bytes");
  if (block < 64) params.fail("block_bytes", "must be at least 64");
  // A block is one buffer of that many bytes: past 4 GiB it would only fail to allocate.
  if (block > (std::int64_t{1} << 32))
    params.fail("block_bytes", "must be at most 4294967296 (4 GiB: a block is one buffer), got " +
                                   std::to_string(block));
  const auto threads = static_cast<int>(params.get_int("threads"));
  if (threads < 1) params.fail("threads", "must be >= 1");
  tally::support::check_shard("coco_json", shard);
  data_ = std::make_shared<Data>();
  try {
    read_results(res_path, masks, keypoints, static_cast<std::size_t>(block), threads);
  } catch (const simdjson::simdjson_error& e) {
    fail("results '" + res_path +
         "': not valid JSON, or a value of an unexpected type (simdjson: " + e.what() + ")");
  }
  try {
    read_annotations(ann_path, static_cast<std::size_t>(block), threads);
  } catch (const simdjson::simdjson_error& e) {
    fail("annotations '" + ann_path +
         "': not valid JSON, or a value of an unexpected type (simdjson: " + e.what() + ")");
  }
  group(shard, res_path, threads);
}

std::vector<std::string> CocoJsonReader::fields() const {
  std::vector<std::string> f = {"img_id",           "height",      "width",      "gt_bboxes_xywh",
                                "gt_labels",        "gt_ids",      "gt_areas",   "gt_iscrowd",
                                "pred_bboxes_xywh", "pred_scores", "pred_labels"};
  if (with_masks_)
    for (const char* m :
         {"pred_areas", "pred_rle_counts", "pred_rle_lengths", "gt_rle_counts", "gt_rle_lengths"})
      f.emplace_back(m);
  if (with_keypoints_)
    for (const char* k : {"gt_keypoints", "gt_num_keypoints", "pred_keypoints"}) f.emplace_back(k);
  if (lvis_lists_)
    for (const char* k : {"neg_category_ids", "not_exhaustive_category_ids"}) f.emplace_back(k);
  if (lvis_freq_) f.emplace_back("gt_frequency");
  return f;
}

tally::Batch CocoJsonReader::read_batch(std::int64_t begin, std::int64_t end) {
  const auto shard_begin = static_cast<std::size_t>(shard_range().begin);
  const auto n = static_cast<std::size_t>(end - begin);
  std::vector<std::int64_t> ids(n), hs(n), ws(n);
  tally::Batch::Ragged gbox, glabel, gid, garea, gcrowd, pbox, pscore, plabel, parea, pcounts,
      plengths, gcounts, glengths, gkp, gnumkp, pkp, negs, nels, gfreq;
  const std::shared_ptr<const void> keep = data_;
  const Data& d = *data_;
  // The batch's result masks, decoded into a buffer the batch's views keep alive.
  std::shared_ptr<std::vector<std::uint32_t>> pbuf;
  std::vector<std::size_t> pbuf_at;  // per image of the batch, + end
  if (with_masks_) {
    // A buffer no earlier batch holds any more, else a new one (a batch and the one read
    // ahead hold two): its pages stay mapped from batch to batch.
    for (const auto& b : mask_buffers_)
      if (b.use_count() == 1) pbuf = b;
    if (!pbuf) {
      pbuf = std::make_shared<std::vector<std::uint32_t>>();
      if (mask_buffers_.size() < 4) mask_buffers_.push_back(pbuf);
    }
    decode_masks(static_cast<std::size_t>(begin), static_cast<std::size_t>(end), *pbuf, pbuf_at);
  }
  for (std::size_t k = 0; k < n; ++k) {
    const auto i = static_cast<std::size_t>(begin) + k;
    ids[k] = images_[i].id;
    hs[k] = images_[i].height;
    ws[k] = images_[i].width;
    const std::size_t g0 = d.gt_begin[i], g1 = d.gt_begin[i + 1];
    const std::size_t p0 = d.dt_first[i - shard_begin], p1 = p0 + d.dt_count[i - shard_begin];
    const auto ng = static_cast<std::int64_t>(g1 - g0), np = static_cast<std::int64_t>(p1 - p0);
    using tally::DType;
    using tally::Tensor;
    const auto view = [&](const auto* p, DType t, std::vector<std::int64_t> shape) {
      return Tensor::view(p, t, std::move(shape), tally::Device::cpu(), keep);
    };
    gbox.push_back(view(d.gt.box.data() + g0 * 4, DType::F64, {ng, 4}));
    glabel.push_back(view(d.gt.label.data() + g0, DType::I32, {ng}));
    gid.push_back(view(d.gt.id.data() + g0, DType::I64, {ng}));
    garea.push_back(view(d.gt.value.data() + g0, DType::F64, {ng}));
    gcrowd.push_back(view(d.gt.crowd.data() + g0, DType::U8, {ng}));
    pbox.push_back(view(d.dt.box.data() + p0 * 4, DType::F64, {np, 4}));
    pscore.push_back(view(d.dt.value.data() + p0, DType::F64, {np}));
    plabel.push_back(view(d.dt.label.data() + p0, DType::I32, {np}));
    if (with_masks_) {
      parea.push_back(view(d.dt.area.data() + p0, DType::F64, {np}));
      plengths.push_back(view(d.dt.lengths.data() + p0, DType::I32, {np}));
      glengths.push_back(view(d.gt.lengths.data() + g0, DType::I32, {ng}));
      const std::size_t pc0 = pbuf_at[k], pc1 = pbuf_at[k + 1];
      const std::size_t gc0 = d.gt_counts_begin[g0], gc1 = d.gt_counts_begin[g1];
      pcounts.push_back(Tensor::view(pbuf->data() + pc0, DType::U32,
                                     {static_cast<std::int64_t>(pc1 - pc0)}, tally::Device::cpu(),
                                     pbuf));
      gcounts.push_back(
          view(d.gt.counts.data() + gc0, DType::U32, {static_cast<std::int64_t>(gc1 - gc0)}));
    }
    if (with_keypoints_) {
      const auto len = static_cast<std::int64_t>(kp_len_);
      gkp.push_back(view(d.gt.kp.data() + g0 * kp_len_, DType::F64, {ng, len}));
      gnumkp.push_back(view(d.gt.num_kp.data() + g0, DType::I64, {ng}));
      pkp.push_back(view(d.dt.kp.data() + p0 * kp_len_, DType::F64, {np, len}));
    }
    if (lvis_lists_) {
      const ImageInfo& im = images_[i];
      negs.push_back(view(d.neg.data() + im.neg_at, DType::I32, {std::int64_t{im.neg_n}}));
      nels.push_back(view(d.nel.data() + im.nel_at, DType::I32, {std::int64_t{im.nel_n}}));
    }
    if (lvis_freq_) gfreq.push_back(view(d.gt.freq.data() + g0, DType::I8, {ng}));
  }
  tally::Batch b;
  b.set("img_id", tally::Tensor::from_vector(ids));
  b.set("height", tally::Tensor::from_vector(hs));
  b.set("width", tally::Tensor::from_vector(ws));
  b.set_ragged("gt_bboxes_xywh", std::move(gbox));
  b.set_ragged("gt_labels", std::move(glabel));
  b.set_ragged("gt_ids", std::move(gid));
  b.set_ragged("gt_areas", std::move(garea));
  b.set_ragged("gt_iscrowd", std::move(gcrowd));
  b.set_ragged("pred_bboxes_xywh", std::move(pbox));
  b.set_ragged("pred_scores", std::move(pscore));
  b.set_ragged("pred_labels", std::move(plabel));
  if (with_masks_) {
    b.set_ragged("pred_areas", std::move(parea));
    b.set_ragged("pred_rle_counts", std::move(pcounts));
    b.set_ragged("pred_rle_lengths", std::move(plengths));
    b.set_ragged("gt_rle_counts", std::move(gcounts));
    b.set_ragged("gt_rle_lengths", std::move(glengths));
  }
  if (with_keypoints_) {
    b.set_ragged("gt_keypoints", std::move(gkp));
    b.set_ragged("gt_num_keypoints", std::move(gnumkp));
    b.set_ragged("pred_keypoints", std::move(pkp));
  }
  if (lvis_lists_) {
    b.set_ragged("neg_category_ids", std::move(negs));
    b.set_ragged("not_exhaustive_category_ids", std::move(nels));
  }
  if (lvis_freq_) b.set_ragged("gt_frequency", std::move(gfreq));
  return b;
}

namespace {

std::vector<tally::ParamSpec> coco_json_params() {
  return {
      tally::param("annotations", tally::ParamType::Path,
                   "COCO ground truth JSON (images, annotations, categories)"),
      tally::param("results", tally::ParamType::Path,
                   "COCO results JSON: an array of {image_id, category_id, bbox, segmentation "
                   "and/or keypoints, score}"),
      tally::param("masks", tally::ParamType::String,
                   "Read masks (needed by segm): auto = when the first result has a segmentation")
          .def("auto")
          .choices({"auto", "true", "false"}),
      tally::param("keypoints", tally::ParamType::String,
                   "Read keypoints (needed by keypoints): auto = when the first result has "
                   "'keypoints'; then every result needs them, all with the same 3K numbers, as "
                   "every annotation that has them (the others get zeros and num_keypoints 0)")
          .def("auto")
          .choices({"auto", "true", "false"}),
      tally::support::batch_size_param("images per batch", 512),
      tally::param("block_bytes", tally::ParamType::Int,
                   "The results file is parsed in blocks of about this many bytes (whole "
                   "elements; a longer element grows the block): memory against speed")
          .def(8 << 20),
      tally::param("threads", tally::ParamType::Int,
                   "2 or more: a second thread parses the next block of results while the current "
                   "one is read (the data are the same for any value)")
          .def(1),
  };
}

}  // namespace
}  // namespace tally_coco_json

TALLY_PLUGIN("coco_json", "0.1.0", [] {
  return std::vector<tally::ComponentInfo>{tally::reader<tally_coco_json::CocoJsonReader>(
      "coco_json",
      "COCO ground truth + COCO results JSON (simdjson), one image per sample in ascending image "
      "id order; areas, masks and boxes as pycocotools' loadRes / annToRLE give them (a "
      "keypoints-only result's box is its keypoints' extent). Fields: img_id, height, width, "
      "gt_bboxes_xywh, gt_labels, gt_ids, gt_areas, gt_iscrowd, pred_bboxes_xywh, pred_scores, "
      "pred_labels; with masks pred_areas, pred_rle_counts, pred_rle_lengths, gt_rle_counts, "
      "gt_rle_lengths; with keypoints gt_keypoints [g, 3K], gt_num_keypoints [g], pred_keypoints "
      "[n, 3K] (x, y, v or score per keypoint); from LVIS files neg_category_ids and "
      "not_exhaustive_category_ids per image and gt_frequency [g] (0 r, 1 c, 2 f). Each rank "
      "reads its contiguous block of images.",
      tally_coco_json::coco_json_params())};
})
