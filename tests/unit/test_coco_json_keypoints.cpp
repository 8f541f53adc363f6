// The coco_json reader's keypoints (pycocotools 2.0.11's COCO keypoints), through the real reader
// plugin loaded by the Registry: gt_keypoints [g, 3K], gt_num_keypoints [g], pred_keypoints
// [n, 3K]; a keypoints-only results file (as mmpose writes it) gets loadRes' keypoints-branch
// boxes; bad keypoints are InputErrors naming the file, the entry and the key; shards, parse
// blocks and threads give the same per-image data.
//
// Inputs: tests/data/detection/keypoints_gt.json (3 images listed out of id order, a category
// without keypoints, a crowd, num_keypoints given and left out), keypoints_results.json
// ({image_id, category_id, keypoints, score}, an image's results not together) and
// keypoints_results_bbox.json (bbox and keypoints). Bad inputs are written by the tests.
//
// Expected boxes and areas: pycocotools 2.0.11 in .venv-ref, printed with repr():
//   gt = COCO('tests/data/detection/keypoints_gt.json')
//   dt = gt.loadRes('tests/data/detection/keypoints_results.json')   # or _bbox.json
//   for a in dt.dataset['annotations']: print(a['image_id'], a['bbox'], a['area'])
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "metric_harness.hpp"
#include "support/expect_error.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

std::filesystem::path data_dir() { return source_path("tests/data/detection"); }
std::filesystem::path gt_file() { return data_dir() / "keypoints_gt.json"; }
std::filesystem::path kp_results() { return data_dir() / "keypoints_results.json"; }
std::filesystem::path bbox_results() { return data_dir() / "keypoints_results_bbox.json"; }

std::shared_ptr<Reader> open_coco(const std::filesystem::path& ann,
                                  const std::filesystem::path& res, Value::Map extra = {},
                                  ShardInfo shard = {}) {
  Value::Map p = {{"annotations", Value(ann.string())},
                  {"results", Value(res.string())},
                  {"batch_size", Value(1 << 30)}};
  for (auto& [k, v] : extra) p.emplace_back(k, v);
  return make_reader("coco_json", p, shard, "reader 'coco_json'");
}

/// Every image of the shard as one batch (empty when the shard has none).
Batch read_all(const std::filesystem::path& ann, const std::filesystem::path& res,
               Value::Map extra = {}, ShardInfo shard = {}) {
  auto reader = open_coco(ann, res, std::move(extra), shard);
  auto b = reader->next();
  if (!b) return Batch{};
  EXPECT_FALSE(reader->next().has_value());
  return b->clone();
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype()) {
      case DType::F64:
        v[i] = t.data_as<double>()[i];
        break;
      case DType::I64:
        v[i] = static_cast<double>(t.data_as<std::int64_t>()[i]);
        break;
      case DType::I32:
        v[i] = t.data_as<std::int32_t>()[i];
        break;
      case DType::U32:
        v[i] = t.data_as<std::uint32_t>()[i];
        break;
      case DType::U8:
        v[i] = t.data_as<std::uint8_t>()[i];
        break;
      default:
        ADD_FAILURE() << "unexpected dtype " << t.describe();
    }
  }
  return v;
}

/// Per field, per image: dtype, shape and values. Fields in the batch's order.
using Dump = std::map<std::string, std::vector<std::pair<std::string, std::vector<double>>>>;

Dump dump(const Batch& b) {
  Dump d;
  for (const auto& [name, field] : b.fields()) {
    auto& out = d[name];
    if (std::holds_alternative<Tensor>(field)) {
      const Tensor& t = std::get<Tensor>(field);
      for (std::int64_t i = 0; i < t.size(0); ++i) {
        const Tensor row = t.slice(i, i + 1);
        out.emplace_back(row.describe(), values(row));
      }
    } else {
      for (const Tensor& t : std::get<Batch::Ragged>(field))
        out.emplace_back(t.describe(), values(t));
    }
  }
  return d;
}

/// The shards' dumps, image after image.
Dump concat(const std::vector<Dump>& parts) {
  Dump d;
  for (const Dump& p : parts)
    for (const auto& [name, rows] : p) d[name].insert(d[name].end(), rows.begin(), rows.end());
  return d;
}

std::vector<std::int64_t> shape(const Batch& b, const std::string& field, std::size_t image) {
  return b.ragged(field).at(image).shape();
}

std::vector<double> ragged_values(const Batch& b, const std::string& field, std::size_t image) {
  return values(b.ragged(field).at(image));
}

std::filesystem::path write_temp(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() /
                 ("tally_kp_" + std::to_string(::getpid()) + "_" + name);  // ctest: a process
                                                                           // per test, in parallel
  std::FILE* f = std::fopen(p.c_str(), "w");
  EXPECT_NE(f, nullptr) << p;
  if (f != nullptr) {
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
  return p;
}

std::string read_error_of(const std::filesystem::path& ann, const std::filesystem::path& res,
                          Value::Map extra = {}) {
  return error_of<InputError>([&] { read_all(ann, res, std::move(extra)); });
}

const std::vector<double> kZeros9(9, 0.0);

TEST(CocoJsonKeypoints, KeypointResultsGiveFieldsAndLoadResBoxes) {
  const Batch b = read_all(gt_file(), kp_results());
  auto reader = open_coco(gt_file(), kp_results());
  const std::vector<std::string> fields = reader->fields();
  for (const char* f : {"gt_keypoints", "gt_num_keypoints", "pred_keypoints", "pred_bboxes_xywh"})
    EXPECT_NE(std::find(fields.begin(), fields.end(), f), fields.end()) << f;
  // No masks: the first result has no segmentation.
  EXPECT_EQ(std::find(fields.begin(), fields.end(), "pred_areas"), fields.end());
  ASSERT_EQ(b.size(), 3);
  EXPECT_EQ(values(b.tensor("img_id")), (std::vector<double>{1, 2, 5}));

  // Ground truth, file order within an image; K = 3.
  EXPECT_EQ(b.ragged("gt_keypoints")[0].dtype(), DType::F64);
  EXPECT_EQ(b.ragged("gt_num_keypoints")[0].dtype(), DType::I64);
  EXPECT_EQ(shape(b, "gt_keypoints", 0), (std::vector<std::int64_t>{2, 9}));
  std::vector<double> img1 = {5.5, 6.5, 2, 7.25, 8, 0, 9, 10.75, 2};
  img1.insert(img1.end(), kZeros9.begin(), kZeros9.end());  // id 12: a ball, no keypoints
  EXPECT_EQ(ragged_values(b, "gt_keypoints", 0), img1);
  // id 11: no num_keypoints, 2 keypoints with v > 0; id 12: none.
  EXPECT_EQ(ragged_values(b, "gt_num_keypoints", 0), (std::vector<double>{2, 0}));
  EXPECT_EQ(ragged_values(b, "gt_ids", 0), (std::vector<double>{11, 12}));
  EXPECT_EQ(ragged_values(b, "gt_keypoints", 1),
            (std::vector<double>{10, 20, 2, 30, 40, 1, 0, 0, 0, 51.5, 61.5, 1, 55, 70, 1, 58.25,
                                 79.5, 1}));
  EXPECT_EQ(ragged_values(b, "gt_num_keypoints", 1), (std::vector<double>{2, 3}));
  EXPECT_EQ(ragged_values(b, "gt_keypoints", 2), kZeros9);
  EXPECT_EQ(ragged_values(b, "gt_num_keypoints", 2), (std::vector<double>{0}));
  // Ground-truth boxes and areas are the file's.
  EXPECT_EQ(ragged_values(b, "gt_bboxes_xywh", 2), (std::vector<double>{0, 0, 50, 80}));
  EXPECT_EQ(ragged_values(b, "gt_areas", 0), (std::vector<double>{20, 78.5}));

  // Results, regrouped by image (image 1's are entries 1 and 4), file order kept.
  EXPECT_EQ(b.ragged("pred_keypoints")[0].dtype(), DType::F64);
  EXPECT_EQ(shape(b, "pred_keypoints", 0), (std::vector<std::int64_t>{2, 9}));
  EXPECT_EQ(ragged_values(b, "pred_keypoints", 0),
            (std::vector<double>{5.3, 6.1, 0.7, 7.3, 8.9, 0.2, 9.1, 10.7, 0.6, 20, 30, 0.5, 21, 31,
                                 0.5, 22.2, 32.1, 0.5}));
  EXPECT_EQ(ragged_values(b, "pred_scores", 0), (std::vector<double>{0.8, 0.25}));
  EXPECT_EQ(ragged_values(b, "pred_keypoints", 2),
            (std::vector<double>{12, 13, 1, 12, 40, 1, 12, 22, 1}));
  // loadRes' keypoints branch: bbox [x0, y0, x1 - x0, y1 - y0] over every keypoint (v = 0
  // too: image 2's first result includes (0, 0)), area (x1 - x0) * (y1 - y0) = w * h. The
  // numbers are pycocotools' (see the top of the file).
  struct Want {
    std::size_t image;
    std::vector<double> boxes;
    std::vector<double> areas;
  };
  const std::vector<Want> want = {
      {0,
       {5.3, 6.1, 3.8, 4.6, 20.0, 30.0, 2.1999999999999993, 2.1000000000000014},
       {17.479999999999997, 4.620000000000002}},
      {1,
       {0.0, 0.0, 30.7, 39.9, 51.1, 61.7, 7.799999999999997, 17.599999999999994},
       {1224.9299999999998, 137.27999999999992}},
      {2, {12.0, 13.0, 0.0, 27.0}, {0.0}},
  };
  for (const Want& w : want) {
    const std::vector<double> box = ragged_values(b, "pred_bboxes_xywh", w.image);
    EXPECT_EQ(box, w.boxes) << "image " << w.image;
    ASSERT_EQ(box.size(), w.areas.size() * 4);
    for (std::size_t k = 0; k < w.areas.size(); ++k)
      EXPECT_EQ(box[k * 4 + 2] * box[k * 4 + 3], w.areas[k]) << "image " << w.image << ", " << k;
  }
}

TEST(CocoJsonKeypoints, ResultsWithBboxKeepTheirBoxes) {
  const Batch b = read_all(gt_file(), bbox_results());
  ASSERT_EQ(b.size(), 3);
  // loadRes' bbox branch (area w * h: 42, 473, 58 in pycocotools).
  EXPECT_EQ(ragged_values(b, "pred_bboxes_xywh", 0), (std::vector<double>{4.5, 5.5, 6, 7}));
  EXPECT_EQ(ragged_values(b, "pred_bboxes_xywh", 1), (std::vector<double>{9, 19, 22, 21.5}));
  EXPECT_EQ(ragged_values(b, "pred_bboxes_xywh", 2), (std::vector<double>{11, 12, 2, 29}));
  EXPECT_EQ(ragged_values(b, "pred_keypoints", 1),
            (std::vector<double>{10.1, 20.2, 0.9, 30.7, 39.9, 0.8, 0, 0, 0.1}));
  EXPECT_EQ(shape(b, "pred_keypoints", 2), (std::vector<std::int64_t>{1, 9}));
  EXPECT_EQ(ragged_values(b, "gt_num_keypoints", 1), (std::vector<double>{2, 3}));
}

TEST(CocoJsonKeypoints, SegmentationResultsKeepMaskBoxesAndReadKeypoints) {
  // loadRes' segm branch (the first result has a segmentation, no bbox): the box and the area
  // are the mask's (toBbox [2, 2, 2, 3], area 6), keypoints are read along.
  const auto gt = write_temp("segm_gt.json", R"({"images": [{"id": 1, "height": 60, "width": 80}],
  "categories": [{"id": 1}],
  "annotations": [{"id": 3, "image_id": 1, "category_id": 1, "bbox": [1, 1, 4, 4], "area": 16,
    "segmentation": [[1, 1, 5, 1, 5, 5, 1, 5]], "keypoints": [2, 2, 2, 4, 4, 0, 0, 0, 0]}]})");
  const auto res = write_temp(
      "segm.json",
      R"([{"image_id": 1, "category_id": 1, "segmentation": {"size": [60, 80], "counts": [122, 3, 57, 3, 4615]},
           "keypoints": [1, 2, 1, 3, 4, 1, 5, 6, 0], "score": 0.5}])");
  const Batch b = read_all(gt, res);
  std::filesystem::remove(res);
  std::filesystem::remove(gt);
  ASSERT_EQ(b.size(), 1);
  EXPECT_EQ(ragged_values(b, "pred_bboxes_xywh", 0), (std::vector<double>{2, 2, 2, 3}));
  EXPECT_EQ(ragged_values(b, "pred_areas", 0), (std::vector<double>{6}));
  EXPECT_EQ(ragged_values(b, "pred_keypoints", 0),
            (std::vector<double>{1, 2, 1, 3, 4, 1, 5, 6, 0}));
  EXPECT_EQ(ragged_values(b, "gt_num_keypoints", 0), (std::vector<double>{1}));
}

TEST(CocoJsonKeypoints, ReadOnlyWhenTheResultsHoldKeypointsOrAsked) {
  // Box results on keypoint ground truth (bbox evaluation on person_keypoints_*.json): no
  // keypoint fields, the keys are not read.
  const auto res = write_temp(
      "boxes.json", R"([{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5}])");
  const auto fields = open_coco(gt_file(), res)->fields();
  EXPECT_EQ(std::find(fields.begin(), fields.end(), "gt_keypoints"), fields.end());
  EXPECT_FALSE(read_all(gt_file(), res).has("gt_keypoints"));
  // keypoints: true asks for them: every result needs them.
  const std::string e = read_error_of(gt_file(), res, {{"keypoints", Value("true")}});
  EXPECT_HAS(e, res.string());
  EXPECT_HAS(e, "[0] (image_id 1): no 'keypoints' (keypoints: true)");
  std::filesystem::remove(res);
  // keypoints: false: keypoint-only results still get loadRes' boxes, no keypoint fields.
  const Batch off = read_all(gt_file(), kp_results(), {{"keypoints", Value("false")}});
  EXPECT_FALSE(off.has("pred_keypoints"));
  EXPECT_FALSE(off.has("gt_num_keypoints"));
  EXPECT_EQ(ragged_values(off, "pred_bboxes_xywh", 2), (std::vector<double>{12, 13, 0, 27}));
  // keypoints: true with no results: the ground truth's K.
  const auto empty = write_temp("empty.json", "[]");
  const Batch none = read_all(gt_file(), empty, {{"keypoints", Value("true")}});
  std::filesystem::remove(empty);
  EXPECT_EQ(shape(none, "pred_keypoints", 0), (std::vector<std::int64_t>{0, 9}));
  EXPECT_EQ(shape(none, "gt_keypoints", 1), (std::vector<std::int64_t>{2, 9}));
}

TEST(CocoJsonKeypoints, ShardsBlocksAndThreadsGiveTheSameData) {
  for (const auto& res : {kp_results(), bbox_results()}) {
    const Dump one = dump(read_all(gt_file(), res));
    ASSERT_EQ(one.at("pred_keypoints").size(), 3u);
    for (int world : {2, 3, 4}) {
      std::vector<Dump> parts;
      for (int r = 0; r < world; ++r)
        parts.push_back(dump(read_all(gt_file(), res, {}, {r, world})));
      EXPECT_EQ(concat(parts), one) << res << ", " << world << " shards";
    }
    for (int threads : {1, 2})
      EXPECT_EQ(
          dump(read_all(gt_file(), res, {{"block_bytes", Value(64)}, {"threads", Value(threads)}})),
          one)
          << res << ", blocks of 64 bytes, " << threads << " threads";
  }
}

// ---- bad keypoints
// --------------------------------------------------------------------------------

/// A results file of keypoint results, the second's keypoints given as `second`.
std::filesystem::path results_with(const std::string& name, const std::string& second) {
  return write_temp(
      name,
      R"([{"image_id": 1, "category_id": 1, "keypoints": [1, 2, 1, 3, 4, 1, 5, 6, 1], "score": 0.9},
    {"image_id": 2, "category_id": 1, )" +
          second + R"(, "score": 0.5}])");
}

TEST(CocoJsonKeypoints, BadResultKeypointsAreInputErrors) {
  const struct {
    const char* second;
    const char* says;
  } cases[] = {
      {R"("keypoints": [1, 2, 1, 3])",
       "[1] (image_id 2): key 'keypoints': expected [x1, y1, v1, x2, y2, v2, ...] (3 numbers a "
       "keypoint), found 4 values"},
      {R"("keypoints": [])", "[1] (image_id 2): key 'keypoints': expected [x1, y1, v1"},
      {R"("keypoints": [1, 2, 1, 3, 4, 1])",
       "[1] (image_id 2): key 'keypoints': 6 values (2 keypoints), results '"},
      {R"("keypoints": [1, "a", 1, 3, 4, 1, 5, 6, 1])",
       "[1] (image_id 2): key 'keypoints': expected numbers, found the string \"a\" at [1]"},
      {R"("keypoints": [1, 2, true, 3, 4, 1, 5, 6, 1])",
       "[1] (image_id 2): key 'keypoints': expected numbers, found the bool true at [2]"},
      {R"("keypoints": {"x": 1})",
       "[1] (image_id 2): key 'keypoints': expected [x1, y1, v1, x2, y2, v2, ...] (3 numbers a "
       "keypoint), found an object"},
      {R"("keypoints": [1, 2, 1, 3, 4e9, 1, 5, 6, 1])",
       "[1] (image_id 2): key 'keypoints': "},  // then 4e9 as simdjson writes it

      {R"("bbox": [1, 2, 3, 4])",
       "[1] (image_id 2): no 'keypoints' (the first entry has them, and neither 'bbox' nor "
       "'segmentation')"},
  };
  for (const auto& c : cases) {
    const auto res = results_with("bad_results.json", c.second);
    const std::string e = read_error_of(gt_file(), res);
    EXPECT_HAS(e, "results '" + res.string() + "': ");
    EXPECT_HAS(e, c.says);
    // The same error from the blocks' parse.
    EXPECT_EQ(read_error_of(gt_file(), res, {{"block_bytes", Value(64)}}), e);
    std::filesystem::remove(res);
  }
  // Box results that carry keypoints: one without them is an error too.
  const auto res = write_temp(
      "bad_bbox.json",
      R"([{"image_id": 1, "category_id": 1, "bbox": [1, 1, 2, 2], "keypoints": [1, 2, 1, 3, 4, 1, 5, 6, 1], "score": 0.9},
          {"image_id": 2, "category_id": 1, "bbox": [1, 1, 2, 2], "score": 0.5}])");
  EXPECT_HAS(read_error_of(gt_file(), res),
             "results '" + res.string() +
                 "': [1] (image_id 2): no 'keypoints' (the first entry "
                 "has them)");
  std::filesystem::remove(res);
}

/// Ground truth with one person annotation (id 7) whose keypoints entries are `kp`.
std::filesystem::path gt_with(const std::string& kp) {
  return write_temp("bad_gt.json",
                    R"({"images": [{"id": 1, "height": 10, "width": 10}],
  "categories": [{"id": 1}],
  "annotations": [
    {"id": 6, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "area": 1},
    {"id": 7, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "area": 1, )" +
                        kp + "}]}");
}

TEST(CocoJsonKeypoints, BadGroundTruthKeypointsAreInputErrors) {
  const auto res = write_temp(
      "gt_results.json",
      R"([{"image_id": 1, "category_id": 1, "keypoints": [1, 2, 1, 3, 4, 1, 5, 6, 1], "score": 0.9}])");
  const struct {
    const char* kp;
    const char* says;
  } cases[] = {
      // K = 3 from the results.
      {R"("keypoints": [1, 2, 1, 3, 4, 1])",
       "annotations[1] (id 7): key 'keypoints': 6 values (2 keypoints), results '"},
      {R"("keypoints": [1, 2, 1, 3, 4, 1, 5, 6])",
       "annotations[1] (id 7): key 'keypoints': expected [x1, y1, v1, x2, y2, v2, ...] (3 "
       "numbers a keypoint), found 8 values"},
      {R"("keypoints": [1, 2, 1, 3, 4, null, 5, 6, 1])",
       "annotations[1] (id 7): key 'keypoints': expected numbers, found null at [5]"},
      {R"("keypoints": "none")",
       "annotations[1] (id 7): key 'keypoints': expected [x1, y1, v1, x2, y2, v2, ...] (3 "
       "numbers a keypoint), found the string \"none\""},
      {R"("keypoints": [1, 2, 1, 3, 4, 1, 5, 6, 1], "num_keypoints": "3")",
       "annotations[1] (id 7): key 'num_keypoints': expected an integer, found the string "
       "\"3\""},
      {R"("keypoints": [1, 2, 1, 3, 4, 1, 5, 6, 1], "num_keypoints": 1.5)",
       "annotations[1] (id 7): key 'num_keypoints': expected an integer, found the number 1.5"},
      {R"("keypoints": [1, 2, 1, 3, 4, 1, 5, 6, 1], "num_keypoints": -1)",
       "annotations[1] (id 7): key 'num_keypoints': -1 is negative"},
  };
  for (const auto& c : cases) {
    const auto gt = gt_with(c.kp);
    const std::string e = read_error_of(gt, res);
    EXPECT_HAS(e, "annotations '" + gt.string() + "': ");
    EXPECT_HAS(e, c.says);
    std::filesystem::remove(gt);
  }
  // Without results' keypoints (keypoints: true, no results), the first annotation with
  // keypoints fixes K.
  const auto empty = write_temp("gt_empty.json", "[]");
  const auto gt = write_temp("bad_gt_k.json",
                             R"({"images": [{"id": 1}], "categories": [{"id": 1}],
  "annotations": [
    {"id": 6, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "area": 1, "keypoints": [1, 2, 1]},
    {"id": 7, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "area": 1, "keypoints": [1, 2, 1, 3, 4, 1]}]})");
  EXPECT_HAS(read_error_of(gt, empty, {{"keypoints", Value("true")}}),
             "annotations '" + gt.string() +
                 "': annotations[1] (id 7): key 'keypoints': 6 values "
                 "(2 keypoints), annotations '" +
                 gt.string() + "': annotations[0] (id 6) holds 3 (1 keypoints)");
  std::filesystem::remove(gt);
  std::filesystem::remove(empty);
  std::filesystem::remove(res);
}

}  // namespace
}  // namespace tally::test
