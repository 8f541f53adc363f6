// The detection plugin's DOTAMeanAP, loaded as the real plugin library through the Registry:
// values against mmeval, the rotated IoU against OpenCV, independence from the number of ranks
// and threads, bad input.
//
// Expected values come from tests/reference/expected_dota.json, written by
// tests/reference/dota.py with mmeval 0.2.1 and opencv-python 5.0.0.93 (no mmcv: mmeval computes
// rotated IoU through OpenCV): "cases" record their exact mmeval call on
// tests/data/detection/dota_data.json (float32 rotated boxes and scores, no tied scores);
// "rotated_iou" records cv2's intersection area and mmeval's float32 IoU on hard pairs of boxes;
// "example" is configs/examples/detection_dota.yaml's data and mmeval's result on it.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../../plugins/detection/rotated_iou.hpp"
#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

const Json& expected_file() { return expected_json("tests/reference/expected_dota.json"); }

/// dota_data.json as a batch: one sample per image, ragged fields: boxes [n, 5] (or with `quads`
/// the quadrilaterals [n, 8] of pred_qboxes, gt_qboxes, gt_qboxes_ignore) and scores as float32
/// (or float64, the same values, with `wide`), labels int64.
Batch dota_data(bool wide, bool quads = false) {
  const Json images = load_json(source_path(expected_file().at("data").get<std::string>()));
  Batch out;
  const std::int64_t cols = quads ? 8 : 5;
  for (const std::string name : {"pred_bboxes", "gt_bboxes", "gt_bboxes_ignore"}) {
    std::string key = name;
    if (quads) key.replace(key.find("bboxes"), 6, "qboxes");
    out.set_ragged(name, json_ragged_floats(images, key, cols, wide));
  }
  out.set_ragged("pred_scores", json_ragged_floats(images, "pred_scores", 0, wide));
  for (const char* name : {"pred_labels", "gt_labels", "gt_labels_ignore"})
    out.set_ragged(name, json_ragged_ints(images, name));
  return out;
}

class DotaCase : public ::testing::TestWithParam<std::string> {};

// Each case on 1, 2, 3, 4 and 7 ranks (batches of all, 16 and 5 images), with an empty middle
// rank, and with rank 0 empty in batches of 3: bit for bit the single-rank result, which equals
// mmeval's (expected_dota.json, "cases").
TEST_P(DotaCase, MatchesMmevalOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  const bool quads = c.value("boxes", "") == "qboxes";
  const bool wide = c.contains("inputs") && !quads;  // "boxes and scores as float64"
  const Batch data = dota_data(wide, quads);
  RankSweep sweep;
  sweep.first_rank_empty_batch_size = 3;
  check_case(c, data, GetParam(), sweep);
  // Threads: the same bits.
  Value::Map params = to_map(c.at("params"));
  const Value one = run_single("DOTAMeanAP", params, data);
  params.emplace_back("threads", Value(3));
  EXPECT_TRUE(same_bits(run_single("DOTAMeanAP", params, data), one)) << "3 threads";
  print_rel_diffs("mmeval 0.2.1");
}

INSTANTIATE_TEST_SUITE_P(Mmeval, DotaCase,
                         ::testing::Values("dota_default", "dota_area_scales",
                                           "dota_11points_scales_first_full", "dota_keep_classwise",
                                           "dota_float64_scales", "dota_qbox",
                                           "dota_qbox_area_scales"));

// configs/examples/detection_dota.yaml's data and params (expected_dota.json, "example": mmeval
// on the same numbers).
TEST(DOTAMeanAP, ExampleMatchesMmeval) {
  const Json& ex = expected_file().at("example");
  const std::string path = ex.at("data").get<std::string>();
  auto reader = make_reader(
      "jsonl", {{"path", Value(source_path(path).string())}, {"batch_size", Value(1000)}});
  const auto batch = reader->next();
  ASSERT_TRUE(batch.has_value());
  const Batch data = batch->clone();
  ASSERT_EQ(data.size(), ex.at("samples").get<std::int64_t>());
  for (const auto& m : ex.at("metrics")) {
    const Value got = run_all_rank_counts("DOTAMeanAP", to_map(m.at("params")), data);
    expect_matches(got, m.at("expected"), "example", "DOTAMeanAP");
  }
}

// The port of OpenCV's rotatedRectangleIntersection + convexHull + contourArea (rotated_iou.hpp)
// against cv2 on hard pairs (expected_dota.json, "rotated_iou": cv2's intersection area, and
// mmeval's calculate_overlaps_rotated IoU): equal bit for bit.
TEST(DOTAMeanAP, RotatedIouEqualsOpenCvBitForBit) {
  namespace r = tally::detection::rotated;
  const Json& pairs = expected_file().at("rotated_iou");
  ASSERT_GE(pairs.size(), 300u);
  r::Scratch s;
  int n = 0;
  for (const auto& p : pairs) {
    const auto a = p.at("box1").get<std::vector<float>>();
    const auto b = p.at("box2").get<std::vector<float>>();
    const r::Rect ra = r::mmeval_rect(a[0], a[1], a[2], a[3], a[4]);
    const r::Rect rb = r::mmeval_rect(b[0], b[1], b[2], b[3], b[4]);
    EXPECT_EQ(r::intersection_area(ra, rb, s), p.at("inter").get<double>()) << p.dump();
    EXPECT_EQ(r::mmeval_iou(ra, rb, s), p.at("iou").get<float>()) << p.dump();
    ++n;
  }
  std::printf(
      "[ reference ] %d pairs of rotated boxes: intersection areas and IoUs equal to "
      "cv2 / mmeval's bit for bit\n",
      n);
}

// The port of OpenCV's minAreaRect (convexHull of int points + rotatingCalipers,
// rotated_iou.hpp), which mmeval's qbox_to_rbox applies to quadrilaterals, against cv2
// (expected_dota.json, "min_area_rect"): equal bit for bit.
TEST(DOTAMeanAP, MinAreaRectEqualsOpenCvBitForBit) {
  namespace r = tally::detection::rotated;
  const Json& quads = expected_file().at("min_area_rect");
  ASSERT_GE(quads.size(), 300u);
  for (const auto& q : quads) {
    const auto c = q.at("corners").get<std::vector<int>>();
    std::vector<r::Pi> pts;
    for (std::size_t i = 0; i < 4; ++i) pts.push_back({c[2 * i], c[2 * i + 1]});
    const r::MinRect got = r::min_area_rect(pts);
    const auto want = q.at("rect").get<std::vector<double>>();
    EXPECT_EQ(std::vector<double>({got.cx, got.cy, got.w, got.h, got.deg}), want) << q.dump();
  }
  std::printf("[ reference ] %zu quadrilaterals: cv2.minAreaRect's rectangles bit for bit\n",
              quads.size());
}

Batch one_image(std::vector<double> pred, double score, std::int64_t label) {
  Batch b;
  b.set_ragged("pred_bboxes", {Tensor::from_vector(pred, {1, 5})});
  b.set_ragged("pred_scores", {Tensor::from_vector(std::vector<double>{score})});
  b.set_ragged("pred_labels", {Tensor::from_vector(std::vector<std::int64_t>{label})});
  b.set_ragged("gt_bboxes",
               {Tensor::from_vector(std::vector<double>{50, 50, 20, 10, 0.3}, {1, 5})});
  b.set_ragged("gt_labels", {Tensor::from_vector(std::vector<std::int64_t>{0})});
  return b;
}

// The header comment's example: a prediction equal to the ground truth.
TEST(DOTAMeanAP, DocExample) {
  const auto m = [] { return make_metric("DOTAMeanAP", {{"num_classes", Value(1)}}); };
  const Batch b = one_image({50, 50, 20, 10, 0.3}, 0.9, 0);
  const Value r = run_ranks(m, b, contiguous_shards(1, 1));
  EXPECT_EQ(r.at("AP50").as_double(), 1.0);
  EXPECT_EQ(r.at("mAP").as_double(), 1.0);
}

/// Expects f to throw an InputError whose message holds every part.
void expect_input_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  const std::string msg = error_of<InputError>(f);
  for (const auto& part : parts) EXPECT_HAS(msg, part);
}

TEST(DOTAMeanAP, BadInputIsAnInputError) {
  auto m = make_metric("DOTAMeanAP", {{"num_classes", Value(1)}});
  const std::vector<double> ok = {50, 50, 20, 10, 0.3};
  EXPECT_THROW(m->add(one_image(ok, std::nan(""), 0)), InputError);  // NaN score
  expect_input_error([&] { m->add(one_image(ok, 0.5, 3)); },
                     {"pred_labels", "class id 3", "outside [0, 1)"});
  expect_input_error(
      [&] {
        m->add(one_image({50, 50, -2, 10, 0.3}, 0.5, 0));
      },
      {"pred_bboxes", "width -2", "expected both >= 0"});
  expect_input_error(
      [&] {
        m->add(one_image({50, 50, 20, 10, std::numeric_limits<double>::infinity()}, 0.5, 0));
      },
      {"pred_bboxes", "value 4 is inf", "finite"});
  expect_input_error(
      [&] {
        m->add(one_image({50, std::nan(""), 20, 10, 0.3}, 0.5, 0));
      },
      {"pred_bboxes", "NaN"});
  {
    Batch b = one_image(ok, 0.5, 0);
    b.set_ragged("gt_bboxes", {Tensor::from_vector(std::vector<double>{0, 0, 10, 10}, {1, 4})});
    expect_input_error([&] { m->add(b); }, {"gt_bboxes", "[n, 5]"});
  }
  {  // quadrilateral predictions, rotated ground truth
    Batch b = one_image(ok, 0.5, 0);
    b.set_ragged("pred_bboxes", {Tensor::from_vector(std::vector<double>(8, 1.0), {1, 8})});
    expect_input_error([&] { m->add(b); },
                       {"pred_bboxes", "has 8 columns and 'gt_bboxes' 5", "[n, 5]", "[n, 8]"});
  }
  {  // a quadrilateral corner beyond int32 (OpenCV's integer points)
    Batch b = one_image(ok, 0.5, 0);
    std::vector<double> q = {0, 0, 10, 0, 10, 10, 0, 3e9};
    b.set_ragged("pred_bboxes", {Tensor::from_vector(q, {1, 8})});
    b.set_ragged("gt_bboxes", {Tensor::from_vector(q, {1, 8})});
    expect_input_error([&] { m->add(b); }, {"pred_bboxes", "value 7", "below 2^31"});
  }
  {
    Batch b = one_image(ok, 0.5, 0);
    b.set_ragged("pred_scores", {Tensor::from_vector(std::vector<double>{0.5, 0.4})});
    expect_input_error([&] { m->add(b); }, {"pred_scores", "2 rows, expected 1"});
  }
  {
    Batch b = one_image(ok, 0.5, 0);
    b.set_ragged("gt_bboxes_ignore", {Tensor::from_vector(ok, {1, 5})});
    expect_input_error([&] { m->add(b); }, {"gt_labels_ignore", "is missing"});
  }
  Batch nolabels;
  nolabels.set_ragged("pred_bboxes", {Tensor::from_vector(ok, {1, 5})});
  EXPECT_THROW(m->add(nolabels), InputError);
  EXPECT_THROW(make_metric("DOTAMeanAP", {}), ConfigError);  // num_classes is required
  EXPECT_THROW(make_metric("DOTAMeanAP", {{"num_classes", Value(2)}, {"eval_mode", Value("x")}}),
               ConfigError);
  EXPECT_THROW(make_metric("DOTAMeanAP",
                           {{"num_classes", Value(2)}, {"scale_ranges", Value::Array{Value(1)}}}),
               ConfigError);
  EXPECT_THROW(make_metric("DOTAMeanAP", {{"num_classes", Value(2)}, {"iou_thrs", Value::Array{}}}),
               ConfigError);
}

}  // namespace
}  // namespace tally::test
