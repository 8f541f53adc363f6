// The text-detection plugin (plugins/text_detection: HmeanIoU), loaded as the real
// libtally_text_detection.so through the Registry, its data read by the real jsonl reader: values
// against mmeval on 1-7 ranks, the docstring example, and bad inputs.
//
// Expected values come from tests/reference/expected_hmean_iou.json, written by
// tests/reference/hmean_iou.py with mmeval 0.2.1 and shapely 2.2 (versions and the exact call are
// recorded in the file), unless a test says otherwise.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "support/expect_error.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

const Json& expected_file() { return expected_json("tests/reference/expected_hmean_iou.json"); }

/// Every line of a jsonl file of the source tree as one batch, read by the jsonl reader.
Batch load_lines(const std::string& relative) {
  auto reader = make_reader("jsonl", {{"path", Value(source_path(relative).string())},
                                      {"batch_size", Value(std::int64_t{1} << 20)}});
  auto batch = reader->next();
  if (!batch) return {};
  EXPECT_FALSE(reader->next().has_value());
  return *batch;
}

const RankSweep kSweep{{std::int64_t{1} << 30, 4}, 3, 2};

class HmeanIoUReference : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map (mmeval.HmeanIoU on the same polygons; the call is in the
// case's "call").
TEST_P(HmeanIoUReference, MatchesMmevalOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  check_case(c, load_lines(c.at("data").get<std::string>()), GetParam(), kSweep);
  print_rel_diffs("mmeval");
}

INSTANTIATE_TEST_SUITE_P(TextDetection, HmeanIoUReference,
                         ::testing::ValuesIn(case_names(expected_file())), param_name);

// Expected: the "example" entry (mmeval on configs/examples/data/text_detection/icdar_style.jsonl).
TEST(HmeanIoU, ExampleData) {
  const Json& ex = expected_file().at("example");
  const Batch data = load_lines(ex.at("data").get<std::string>());
  expect_matches(run_single("HmeanIoU", {}, data), ex.at("results").at("HmeanIoU"), "example",
                 "HmeanIoU");
  expect_matches(run_single("HmeanIoU", {{"strategy", "max_matching"}}, data),
                 ex.at("results").at("hmean_max_matching"), "example", "HmeanIoU");
}

Batch one_image(std::vector<double> preds, std::vector<std::int64_t> pred_shape,
                std::vector<double> scores, std::vector<double> gts,
                std::vector<std::int64_t> gt_shape) {
  Batch b;
  b.set_ragged("pred_polygons", {Tensor::from_vector(preds, pred_shape)});
  b.set_ragged("pred_scores",
               {Tensor::from_vector(scores, {static_cast<std::int64_t>(scores.size())})});
  b.set_ragged("gt_polygons", {Tensor::from_vector(gts, gt_shape)});
  return b;
}

// Expected: mmeval 0.2.1's HmeanIoU docstring: gt one unit square, the same square predicted
// twice with scores 1 and 0.5, thresholds arange(0.5, 0.7, 0.1) -> {0.5: precision 0.5, recall
// 1, hmean 0.6666666666666666; 0.6: 1, 1, 1; best: 1, 1, 1}. The [n, k, 2] layout is the same
// polygons.
TEST(HmeanIoU, MmevalDocstringExample) {
  const std::vector<double> sq{0, 0, 1, 0, 1, 1, 0, 1};
  std::vector<double> two = sq;
  two.insert(two.end(), sq.begin(), sq.end());
  const Value::Map params{
      {"pred_score_thrs", Value::Map{{"start", 0.5}, {"stop", 0.7}, {"step", 0.1}}}};
  for (const auto& shape : {std::vector<std::int64_t>{2, 8}, std::vector<std::int64_t>{2, 4, 2}}) {
    const Value r = run_single("HmeanIoU", params, one_image(two, shape, {1, 0.5}, sq, {1, 8}));
    EXPECT_EQ(r.at("hmean").as_double(), 1.0);
    EXPECT_EQ(r.at("best_score_thr").as_double(), 0.6);
    EXPECT_EQ(r.at("hmean_per_thr"), Value(std::vector<double>{2.0 / 3.0, 1.0}));
    EXPECT_EQ(r.at("precision_per_thr"), Value(std::vector<double>{0.5, 1.0}));
  }
}

TEST(HmeanIoUErrors, BadPolygonsScoresFlagsAndParameters) {
  const std::vector<double> sq{0, 0, 1, 0, 1, 1, 0, 1};
  EXPECT_HAS(input_error("HmeanIoU", {}, one_image(sq, {1, 8}, {0.9, 0.8}, sq, {1, 8})),
             "metric 'HmeanIoU': field 'pred_scores' sample 0 must be [1] (one score a predicted "
             "polygon), got f64[2]");
  EXPECT_HAS(input_error("HmeanIoU", {}, one_image({0, 0, 1, 0}, {1, 4}, {0.9}, sq, {1, 8})),
             "field 'pred_polygons' sample 0 has polygons of 4 coordinates: a polygon needs an "
             "even number, at least 6 (3 points)");
  EXPECT_HAS(input_error("HmeanIoU", {}, one_image(sq, {8}, {0.9}, sq, {1, 8})),
             "field 'pred_polygons' sample 0 must be [n, 2k] or [n, k, 2]");
  Batch lengths = one_image(sq, {8}, {0.9}, sq, {1, 8});
  lengths.set_ragged("pred_polygon_lengths", {Tensor::from_vector<std::int64_t>({6}, {1})});
  EXPECT_HAS(input_error("HmeanIoU", {}, lengths),
             "field 'pred_polygon_lengths' sample 0 sums to 6 but 'pred_polygons' holds 8 "
             "coordinates");
  std::vector<double> nan = sq;
  nan[3] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_HAS(input_error("HmeanIoU", {}, one_image(sq, {1, 8}, {0.9}, nan, {1, 8})),
             "field 'gt_polygons' sample 0 holds a NaN or infinite coordinate");
  Batch flags = one_image(sq, {1, 8}, {0.9}, sq, {1, 8});
  flags.set_ragged("gt_ignore_flags", {Tensor::from_vector<std::int64_t>({2}, {1})});
  EXPECT_HAS(input_error("HmeanIoU", {}, flags),
             "field 'gt_ignore_flags' sample 0 holds 2: flags are 0/1 or booleans");
  EXPECT_HAS(config_error("HmeanIoU", {{"pred_score_thrs",
                                        Value::Map{{"start", 0.9}, {"stop", 0.3}, {"step", 0.1}}}}),
             "parameter 'pred_score_thrs' gives");
  EXPECT_HAS(config_error("HmeanIoU", {{"pred_score_thrs", Value::Map{{"start", 0.3}}}}),
             "needs start, stop and step");
  EXPECT_HAS(config_error("HmeanIoU", {{"strategy", "greedy"}}), "greedy");
}

}  // namespace
}  // namespace tally::test
