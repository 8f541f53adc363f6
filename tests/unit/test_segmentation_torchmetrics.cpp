// The torchmetrics-named metrics of the segmentation plugin (plugins/segmentation): DiceScore,
// GeneralizedDiceScore and HausdorffDistance, loaded as the real libtally_segmentation.so through
// the Registry, against torchmetrics 1.9.0 on 1..7 ranks, and bad inputs.
//
// Expected values come from tests/reference/expected_segmentation_torchmetrics.json, written by
// tests/reference/segmentation_torchmetrics.py with torchmetrics 1.9.0 (float64; the exact call
// of each case and the versions are recorded in the file), unless a test says otherwise.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

const Json& expected_file() {
  return expected_json("tests/reference/expected_segmentation_torchmetrics.json");
}

class SegmentationTorchmetricsReference : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map (torchmetrics; the call is the case's "call").
TEST_P(SegmentationTorchmetricsReference, MatchesTorchmetricsOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  check_case(c, load_inputs(c.at("inputs")), GetParam());
  print_rel_diffs("torchmetrics");
}

INSTANTIATE_TEST_SUITE_P(SegmentationTorchmetrics, SegmentationTorchmetricsReference,
                         ::testing::ValuesIn(case_names(expected_file())), param_name);

// Expected: section "example" of expected_segmentation_torchmetrics.json (torchmetrics on the
// coins tiles of configs/examples/data/segmentation_dice).
TEST(SegmentationTorchmetricsExample, MatchesTorchmetrics) {
  check_example(expected_file().at("example"));
  print_rel_diffs("torchmetrics");
}

TEST(SegmentationTorchmetrics, Documented) {
  for (const char* name : {"DiceScore", "GeneralizedDiceScore", "HausdorffDistance"}) {
    const Component* c = expect_documented(name, "segmentation");
    ASSERT_NE(c, nullptr) << name;
    EXPECT_NE(c->info->doc.find("Reference: torchmetrics 1.9.0"), std::string::npos) << name;
  }
}

// The states hold a few exact accumulators, whatever the number of images.
TEST(SegmentationTorchmetrics, StateDoesNotGrow) {
  const Json& c = find_case(expected_file(),
                            "DiceScore_coins_index_average_macro_include_background_True_"
                            "aggregation_level_samplewise");
  const Batch data = load_inputs(c.at("inputs"));
  for (const char* type : {"DiceScore", "GeneralizedDiceScore"}) {
    const auto m = make_metric(type, {{"num_classes", 3}, {"input_format", "index"}});
    m->add(data);
    EXPECT_LT(pack_state(*m).size(), 700u) << type;
  }
}

// Expected, by hand: the mixed case of one float-score side and one 0/1-mask side reads the
// scores by their argmax: scores that put class 1 everywhere against a mask of class 1 on half
// the pixels -> Dice of class 1: 2 * 2 / (4 + 2) = 2/3; of class 0: 0 / 2 = 0; macro 1/3.
TEST(DiceScore, ScoresAgainstMasks) {
  Batch b;
  b.set("preds", Tensor::from_vector<float>({0, 0, 0, 0, 1, 1, 1, 1}, {1, 2, 2, 2}));
  b.set("target", Tensor::from_vector<std::uint8_t>({1, 1, 0, 0, 0, 0, 1, 1}, {1, 2, 2, 2}));
  EXPECT_DOUBLE_EQ(run_single("DiceScore", {{"num_classes", 2}}, b).at("dice_score").as_double(),
                   1.0 / 3.0);
  Batch bools;
  bools.set("preds", Tensor::from_vector<bool>({false, false, false, false, true, true, true, true},
                                               {1, 2, 2, 2}));
  bools.set("target", b.tensor("target"));
  EXPECT_DOUBLE_EQ(
      run_single("DiceScore", {{"num_classes", 2}}, bools).at("dice_score").as_double(), 1.0 / 3.0);
}

// ---- bad inputs ---------------------------------------------------------------------------------

const std::vector<std::string>& types() {
  static const std::vector<std::string> t = {"DiceScore", "GeneralizedDiceScore",
                                             "HausdorffDistance"};
  return t;
}

Batch maps(Tensor p, Tensor t) {
  Batch b;
  b.set("preds", std::move(p));
  b.set("target", std::move(t));
  return b;
}

TEST(SegmentationTorchmetricsErrors, ClassIdsAndMasks) {
  for (const auto& type : types()) {
    const Value::Map index{{"num_classes", 3}, {"input_format", "index"}};
    EXPECT_HAS(
        error_of([&] {
          make_metric(type, index)
              ->add(maps(Tensor::from_vector<std::int64_t>({0, 1, 2, 3}, {1, 2, 2}),
                         Tensor::from_vector<std::int64_t>({0, 1, 2, 2}, {1, 2, 2})));
        }),
        "metric '" + type + "': field 'preds' image 0, pixel 3: class id 3 is outside [0, 3)");
    EXPECT_HAS(error_of([&] {
                 make_metric(type, index)
                     ->add(maps(Tensor::from_vector<std::int64_t>({0, 1, 2, 2}, {1, 2, 2}),
                                Tensor::from_vector<std::int32_t>({0, -1, 2, 2}, {1, 2, 2})));
               }),
               "field 'target' image 0, pixel 1: class id -1 is outside [0, 3)");
    const Value::Map hot{{"num_classes", 2}};
    EXPECT_HAS(error_of([&] {
                 make_metric(type, hot)->add(maps(
                     Tensor::from_vector<std::int64_t>({0, 1, 1, 0, 2, 0, 0, 1}, {1, 2, 2, 2}),
                     Tensor::from_vector<std::int64_t>({0, 1, 1, 0, 1, 0, 0, 1}, {1, 2, 2, 2})));
               }),
               "field 'preds' image 0, class 1: value 2 in a one-hot mask (expected 0 or 1)");
    EXPECT_HAS(
        error_of([&] {
          make_metric(type, hot)->add(maps(
              Tensor::from_vector<double>(
                  {0, 1, std::numeric_limits<double>::quiet_NaN(), 0, 1, 0, 0, 1}, {1, 2, 2, 2}),
              Tensor::from_vector<std::int64_t>({0, 1, 1, 0, 1, 0, 0, 1}, {1, 2, 2, 2})));
        }),
        "field 'preds' image 0, class 0, pixel 2: score is NaN");
  }
}

TEST(SegmentationTorchmetricsErrors, Shapes) {
  for (const auto& type : types()) {
    const Value::Map hot{{"num_classes", 3}};
    EXPECT_HAS(error_of([&] {
                 make_metric(type, hot)->add(maps(
                     Tensor::from_vector<std::int64_t>({0, 1, 1, 0, 1, 0, 0, 1}, {1, 2, 2, 2}),
                     Tensor::from_vector<std::int64_t>({0, 1, 1, 0, 1, 0, 0, 1}, {1, 2, 2, 2})));
               }),
               "metric '" + type + "': field 'preds' has 2 channels, num_classes is 3");
    const std::string flat = error_of([&] {
      make_metric(type, hot)->add(maps(Tensor::from_vector<std::int64_t>({0, 1}, {1, 2}),
                                       Tensor::from_vector<std::int64_t>({0, 1}, {1, 2})));
    });
    EXPECT_HAS(flat, "field 'preds' must be [N, C, ");
    EXPECT_HAS(flat, "(input_format one-hot)");
    EXPECT_HAS(flat, "got i64[1, 2]");
    const Value::Map index{{"num_classes", 3}, {"input_format", "index"}};
    EXPECT_HAS(error_of([&] {
                 make_metric(type, index)
                     ->add(maps(Tensor::from_vector<std::int64_t>({0, 1, 2, 2}, {1, 2, 2}),
                                Tensor::from_vector<std::int64_t>({0, 1, 2, 2}, {1, 1, 4})));
               }),
               "field 'preds' has shape i64[1, 2, 2], 'target' has i64[1, 1, 4]");
    EXPECT_HAS(error_of([&] {
                 make_metric(type, index)
                     ->add(maps(Tensor::from_vector<double>({0, 1, 2, 2}, {1, 2, 2}),
                                Tensor::from_vector<std::int64_t>({0, 1, 2, 2}, {1, 2, 2})));
               }),
               "field 'preds' must hold integer class ids, got f64[1, 2, 2]");
    Batch missing;
    missing.set("preds", Tensor::from_vector<std::int64_t>({0, 1, 2, 2}, {1, 2, 2}));
    EXPECT_HAS(error_of([&] { make_metric(type, index)->add(missing); }),
               "field 'target' is missing from the batch (it has: preds)");
  }
}

TEST(SegmentationTorchmetricsErrors, Parameters) {
  for (const auto& type : types()) {
    EXPECT_HAS(config_error(type, {}), "num_classes");
    EXPECT_HAS(config_error(type, {{"num_classes", 0}}), "num_classes");
    EXPECT_HAS(config_error(type, {{"num_classes", 2}, {"input_format", "mixed"}}), "input_format");
  }
  EXPECT_HAS(config_error("DiceScore", {{"num_classes", 2}, {"average", "samples"}}), "average");
  EXPECT_HAS(config_error("GeneralizedDiceScore", {{"num_classes", 2}, {"weight_type", "log"}}),
             "weight_type");
}

// No images: NaN, as torchmetrics' 0 / 0 (DiceScore: the nanmean of nothing).
TEST(SegmentationTorchmetrics, NoImages) {
  for (const auto& type : types()) {
    const auto m = make_metric(type, {{"num_classes", 3}, {"input_format", "index"}});
    const Value v = m->compute_local();
    EXPECT_TRUE(std::isnan(v.as_map().front().second.as_double())) << type;
  }
}

// ---- HausdorffDistance -------------------------------------------------------------------------

Batch squares(std::vector<std::int64_t> p, std::vector<std::int64_t> t) {
  return maps(Tensor::from_vector<std::int64_t>(p, {1, 4, 4}),
              Tensor::from_vector<std::int64_t>(t, {1, 4, 4}));
}

// Expected, by hand: one mask empty, the other not -> +inf (torchmetrics: the distance to no
// edge is inf); directed h(P, T) = 1 and h(T, P) = sqrt(2) on the documented example.
TEST(HausdorffDistance, InfiniteAndDirected) {
  const Value::Map index{{"num_classes", 2}, {"input_format", "index"}};
  const std::vector<std::int64_t> p{0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0};
  const std::vector<std::int64_t> t{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 1, 1, 1};
  EXPECT_DOUBLE_EQ(
      run_single("HausdorffDistance", index, squares(p, t)).at("hausdorff_distance").as_double(),
      std::sqrt(2.0));
  Value::Map directed = index;
  directed.emplace_back("directed", true);
  EXPECT_EQ(
      run_single("HausdorffDistance", directed, squares(p, t)).at("hausdorff_distance").as_double(),
      1.0);
  const std::vector<std::int64_t> none(16, 0);
  EXPECT_TRUE(std::isinf(run_single("HausdorffDistance", index, squares(p, none))
                             .at("hausdorff_distance")
                             .as_double()));
}

TEST(HausdorffDistanceErrors, BadInputs) {
  const Value::Map index{{"num_classes", 3}, {"input_format", "index"}};
  const std::vector<std::int64_t> p{0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0};
  EXPECT_HAS(error_of([&] { make_metric("HausdorffDistance", index)->add(squares(p, p)); }),
             "metric 'HausdorffDistance': field 'target' image 0: class 2 is in neither preds nor "
             "target");
  EXPECT_HAS(
      error_of([&] {
        make_metric("HausdorffDistance", index)
            ->add(maps(
                Tensor::from_vector<std::int64_t>(std::vector<std::int64_t>(8, 0), {1, 2, 2, 2}),
                Tensor::from_vector<std::int64_t>(std::vector<std::int64_t>(8, 0), {1, 2, 2, 2})));
      }),
      "field 'preds' must be [N, H, W] (input_format index): 2-D images");
  EXPECT_HAS(error_of([&] {
               make_metric("HausdorffDistance", index)
                   ->add(squares({0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 5}, p));
             }),
             "field 'preds' image 0, pixel 15: class id 5 is outside [0, 3)");
  EXPECT_HAS(
      config_error("HausdorffDistance", {{"num_classes", 2}, {"spacing", Value::Array{1.0}}}),
      "parameter 'spacing' must be two finite positive numbers");
  EXPECT_HAS(
      config_error("HausdorffDistance", {{"num_classes", 2}, {"spacing", Value::Array{1.0, -1.0}}}),
      "spacing");
  EXPECT_HAS(config_error("HausdorffDistance", {{"num_classes", 2}, {"distance_metric", "l2"}}),
             "distance_metric");
}

}  // namespace
}  // namespace tally::test
