// The keypoints plugin (plugins/keypoints), loaded as the real libtally_keypoints.so through the
// Registry: values against mmeval 0.2.1, independence from the number of ranks, bad inputs.
//
// Expected values come from tests/reference/expected_keypoints.json, written by
// tests/reference/keypoints.py with mmeval 0.2.1 (the versions and, for each case, the exact
// mmeval call are recorded in the file), unless a test says otherwise.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../../plugins/keypoints/numpy_reduce.hpp"
#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

const Json& expected_file() { return expected_json("tests/reference/expected_keypoints.json"); }

// ---- values against mmeval, 1..7 ranks --------------------------------------------------------

class KeypointCase : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map in expected_keypoints.json (mmeval 0.2.1; the call is in
// the case's "call"; null there is mmeval's masked / NaN value, expected as NaN).
TEST_P(KeypointCase, MatchesMmevalOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  check_case(c, load_inputs(c.at("inputs")), GetParam());
  print_rel_diffs("mmeval 0.2.1");
}

INSTANTIATE_TEST_SUITE_P(Keypoints, KeypointCase, ::testing::ValuesIn(case_names(expected_file())),
                         param_name);

// Expected: section "example" of expected_keypoints.json (mmeval 0.2.1 on the data of
// configs/examples/data/keypoints, the metrics of configs/examples/keypoints.yaml).
TEST(KeypointExample, MatchesMmeval) {
  check_example(expected_file().at("example"));
  print_rel_diffs("mmeval 0.2.1");
}

// ---- mmeval's docstring examples ---------------------------------------------------------------

Batch docstring_batch() {
  Batch b;
  b.set("pred_coords",
        Tensor::from_vector<double>({10, 4, 10, 18, 0, 0, 40, 40, 20, 10}, {1, 5, 2}));
  b.set("gt_coords", Tensor::from_vector<double>({10, 0, 10, 10, 0, -1, 30, 30, 0, 10}, {1, 5, 2}));
  b.set("mask", Tensor::from_vector<bool>({true, true, false, true, true}, {1, 5}));
  return b;
}

// Expected: the outputs printed in the docstrings of mmeval's KeypointAUC (AUC@4 0.375) and
// KeypointEndPointError (EPE 11.535533905029297).
TEST(KeypointDocstrings, AucAndEpe) {
  const Batch b = docstring_batch();
  EXPECT_EQ(run_single("KeypointAUC", {{"norm_factor", 20.0}, {"num_thrs", 4}}, b),
            Value(Value::Map{{"AUC@4", 0.375}}));
  EXPECT_EQ(run_single("KeypointEndPointError", {}, b),
            Value(Value::Map{{"EPE", 11.535533905029297}}));
}

// Expected: the example in the docstring of mmeval's KeypointNME, as mmeval 0.2.1 computes it:
// NME = float32(0.5 / 20 * sqrt(2)) = 0.0353553406894207 (the first instance has box_size 0 and
// is masked out). The docstring prints 0.03535533892480951, the float64 value of an older mmeval;
// 0.2.1 keeps distances in float32.
TEST(KeypointDocstrings, Nme) {
  Batch b;
  b.set("pred_coords",
        Tensor::from_vector<double>(std::vector<double>(2 * 19 * 2, 0.0), {2, 19, 2}));
  b.set("gt_coords", Tensor::from_vector<double>(std::vector<double>(2 * 19 * 2, 0.5), {2, 19, 2}));
  b.set("mask", Tensor::from_vector<bool>(std::vector<bool>(2 * 19, true), {2, 19}));
  b.set("box_size", Tensor::from_vector<double>({0.0, 20.0}, {2, 1}));
  EXPECT_EQ(
      run_single("KeypointNME", {{"norm_mode", "use_norm_item"}, {"norm_item", "box_size"}}, b),
      Value(Value::Map{{"NME", 0.0353553406894207}}));
}

// Expected: the docstrings of mmeval's PCKAccuracy ({'PCK@0.5': 1.0}) and JhmdbPCKAccuracy
// (every tPCK 1.0) with pred = gt, and of MpiiPCKAccuracy (everything 100.0 with gt = pred + 1).
TEST(KeypointDocstrings, PckFamily) {
  std::vector<double> coords(16 * 2);
  for (std::size_t i = 0; i < coords.size(); ++i) coords[i] = static_cast<double>(i % 7) + 0.25;
  std::vector<double> shifted = coords;
  for (double& v : shifted) v += 1.0;
  const auto batch = [&](std::int64_t k, const std::vector<double>& gt) {
    Batch b;
    b.set("pred_coords",
          Tensor::from_vector<double>(std::vector<double>(coords.begin(), coords.begin() + 2 * k),
                                      {1, k, 2}));
    b.set("gt_coords", Tensor::from_vector<double>(
                           std::vector<double>(gt.begin(), gt.begin() + 2 * k), {1, k, 2}));
    b.set("mask",
          Tensor::from_vector<bool>(std::vector<bool>(static_cast<std::size_t>(k), true), {1, k}));
    for (const char* f : {"bbox_size", "head_size", "torso_size"})
      b.set(f, Tensor::from_vector<double>({3.5, 7.25}, {1, 2}));
    return b;
  };
  EXPECT_EQ(run_single("PCKAccuracy", {{"thr", 0.5}}, batch(15, coords)),
            Value(Value::Map{{"PCK@0.5", 1.0}}));
  const Value j =
      run_single("JhmdbPCKAccuracy", {{"thr", 0.2}, {"norm_item", "torso"}}, batch(15, coords));
  ASSERT_EQ(j.size(), 8u) << j.to_json();
  for (const char* k : {"Head tPCK", "Sho tPCK", "Elb tPCK", "Wri tPCK", "Hip tPCK", "Knee tPCK",
                        "Ank tPCK", "Mean tPCK"})
    EXPECT_EQ(j.at(k).as_double(), 1.0) << k;
  const Value m = run_single("MpiiPCKAccuracy", {{"thr", 0.3}}, batch(16, shifted));
  ASSERT_EQ(m.size(), 9u) << m.to_json();
  for (const auto& [k, v] : m.as_map()) EXPECT_EQ(v.as_double(), 100.0) << k;
}

// ---- NumPy helpers
// -------------------------------------------------------------------------------

// Expected: Python 3.11's repr() of each float (mmeval's keys are f"PCK@{thr}").
TEST(KeypointKeys, ThresholdsPrintAsPython) {
  const std::vector<std::pair<double, const char*>> cases = {{0.2, "0.2"},
                                                             {0.5, "0.5"},
                                                             {1.0, "1.0"},
                                                             {0.05, "0.05"},
                                                             {1e-05, "1e-05"},
                                                             {0.0001, "0.0001"},
                                                             {1e16, "1e+16"},
                                                             {1e15, "1000000000000000.0"},
                                                             {123.456, "123.456"},
                                                             {-0.5, "-0.5"},
                                                             {0.1 + 0.2, "0.30000000000000004"},
                                                             {2.5e-7, "2.5e-07"},
                                                             {1.5e300, "1.5e+300"},
                                                             {0.0, "0.0"},
                                                             {30.0, "30.0"}};
  for (const auto& [v, want] : cases) EXPECT_EQ(numpy::python_float_repr(v), want) << want;
}

// Expected, by hand: numpy's pairwise order, seen in float32 where it differs from a plain
// running sum: 2^24 followed by sixteen 1s. Summed in order, each 1 is lost (2^24 + 1 rounds
// back to 2^24); numpy's 8 accumulators add the 1s among themselves first: 2^24 + 16.
TEST(KeypointKeys, NumpyPairwiseSumOrder) {
  std::vector<float> a(17, 1.0f);
  a[0] = 16777216.0f;
  float running = 0.0f;
  for (float v : a) running += v;
  EXPECT_EQ(running, 16777216.0f);
  // r0 = 2^24 + 1 (lost) = 2^24, r1..r7 = 2 each, then the 17th element in order:
  // ((2^24 + 2) + (2 + 2)) + ((2 + 2) + (2 + 2)) + 1 = 2^24 + 14 + 1 (rounded: 2^24 + 16).
  EXPECT_EQ(numpy::sum(a.data(), 17), 16777232.0f);
  EXPECT_EQ(numpy::sum(a.data(), 0), 0.0f);
}

// ---- bad inputs: InputError naming the metric and the field -----------------------------------

/// n instances of k keypoints in d dimensions, every field of the PCK family.
Batch pose_batch(std::int64_t n, std::int64_t k, std::int64_t d = 2) {
  std::vector<double> p(static_cast<std::size_t>(n * k * d)), g(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    g[i] = static_cast<double>((i * 37) % 101);
    p[i] = g[i] + static_cast<double>((i * 13) % 7) - 3.0;
  }
  Batch b;
  b.set("pred_coords", Tensor::from_vector(p, {n, k, d}));
  b.set("gt_coords", Tensor::from_vector(g, {n, k, d}));
  std::vector<bool> m(static_cast<std::size_t>(n * k));
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = i % 5 != 0;
  b.set("mask", Tensor::from_vector(m, {n, k}));
  std::vector<double> size(static_cast<std::size_t>(n * d), 40.0);
  for (const char* f : {"bbox_size", "head_size", "torso_size"})
    b.set(f, Tensor::from_vector(size, {n, d}));
  b.set("box_size", Tensor::from_vector(std::vector<double>(static_cast<std::size_t>(n), 40.0)));
  return b;
}

Value::Map nme_items() { return {{"norm_mode", "use_norm_item"}, {"norm_item", "box_size"}}; }

const std::vector<std::pair<std::string, Value::Map>>& all_metrics() {
  static const std::vector<std::pair<std::string, Value::Map>> m = {
      {"PCKAccuracy", {{"norm_item", Value::Array{"bbox", "head", "torso"}}}},
      {"MpiiPCKAccuracy", {}},
      {"JhmdbPCKAccuracy", {}},
      {"KeypointAUC", {}},
      {"KeypointEndPointError", {}},
      {"KeypointNME", nme_items()}};
  return m;
}

TEST(KeypointErrors, NanCoordinateNamesSampleAndKeypoint) {
  for (const auto& [type, params] : all_metrics()) {
    const auto m = make_metric(type, params);
    m->add(pose_batch(4, 16));  // sample numbers count the samples of earlier batches
    Batch b = pose_batch(3, 16);
    Tensor p = b.tensor("pred_coords").clone();
    p.mutable_data_as<double>()[(2 * 16 + 5) * 2 + 1] = std::nan("");
    b.set("pred_coords", p);
    const std::string msg = error_of([&] { m->add(b); });
    EXPECT_HAS(msg, "metric '" + type +
                        "': field 'pred_coords' sample 6 keypoint 5: a "
                        "coordinate is NaN");
  }
}

TEST(KeypointErrors, ShapesAndDtypes) {
  for (const auto& [type, params] : all_metrics()) {
    const auto m = make_metric(type, params);
    Batch b = pose_batch(3, 16);
    b.set("gt_coords", Tensor::from_vector(std::vector<double>(3 * 15 * 2), {3, 15, 2}));
    EXPECT_HAS(error_of([&] { m->add(b); }),
               "field 'gt_coords' must have the shape of 'pred_coords' f64[3, 16, 2], got "
               "f64[3, 15, 2]");
    b = pose_batch(3, 16);
    b.set("pred_coords", Tensor::from_vector(std::vector<double>(3 * 32), {3, 32}));
    EXPECT_HAS(error_of([&] { m->add(b); }), "field 'pred_coords' must be 3-D [N, K, D]");
    b = pose_batch(3, 16);
    b.set("pred_coords", Tensor::from_vector(std::vector<std::int32_t>(3 * 32), {3, 16, 2}));
    EXPECT_HAS(error_of([&] { m->add(b); }),
               "field 'pred_coords' must hold float32 or float64 values, got i32[3, 16, 2]");
    b = pose_batch(3, 16);
    b.set("mask", Tensor::from_vector(std::vector<bool>(3 * 15), {3, 15}));
    EXPECT_HAS(error_of([&] { m->add(b); }), "field 'mask' must be [N, K] = [3, 16]");
    b = pose_batch(3, 16);
    b.set("mask", Tensor::from_vector(std::vector<float>(3 * 16), {3, 16}));
    EXPECT_HAS(error_of([&] { m->add(b); }), "field 'mask' must hold bool (or integer)");
    b = pose_batch(3, 16);
    Batch missing;
    for (const auto& name : b.names())
      if (name != "mask") missing.set(name, b.tensor(name));
    EXPECT_HAS(error_of([&] { m->add(missing); }), "field 'mask' is missing from the batch");
  }
}

TEST(KeypointErrors, Normalisers) {
  for (const auto& [type, params] : all_metrics()) {
    if (type == "KeypointAUC" || type == "KeypointEndPointError") continue;
    const std::string field = type == "KeypointNME"       ? "box_size"
                              : type == "MpiiPCKAccuracy" ? "head_size"
                                                          : "bbox_size";
    const auto m = make_metric(type, params);
    Batch b = pose_batch(3, 16);
    Batch without;
    for (const auto& name : b.names())
      if (name != field) without.set(name, b.tensor(name));
    EXPECT_HAS(error_of([&] { m->add(without); }), "field '" + field + "' is missing");
    b.set(field, Tensor::from_vector(std::vector<double>(3 * 3), {3, 3}));
    EXPECT_HAS(error_of([&] { m->add(b); }), "field '" + field + "' must be [N");
    b = pose_batch(3, 16);
    Tensor s = b.tensor(field).clone();
    s.mutable_data_as<double>()[s.numel() - 1] = std::nan("");
    b.set(field, s);
    EXPECT_HAS(error_of([&] { m->add(b); }), "field '" + field + "' sample 2: ");
  }
}

TEST(KeypointErrors, KeypointCounts) {
  EXPECT_HAS(error_of([&] { make_metric("MpiiPCKAccuracy", {})->add(pose_batch(2, 17)); }),
             "field 'pred_coords' has 17 keypoints; the MPII summary (norm_item head) needs the "
             "16 MPII keypoints");
  EXPECT_HAS(error_of([&] { make_metric("JhmdbPCKAccuracy", {})->add(pose_batch(2, 14)); }),
             "has 14 keypoints; the JHMDB summary");
  EXPECT_HAS(error_of([&] {
               make_metric("KeypointNME",
                           {{"norm_mode", "keypoint_distance"}, {"dataset_name", "300w"}})
                   ->add(pose_batch(2, 19));
             }),
             "field 'gt_coords' has 19 keypoints; keypoint_indices [36, 45] are outside [0, 19)");
  EXPECT_HAS(error_of([&] { make_metric("KeypointAUC", {})->add(pose_batch(2, 5, 3)); }),
             "field 'pred_coords' must hold 2-D coordinates [N, K, 2], got f64[2, 5, 3]");
  for (const auto& [type, params] : all_metrics()) {
    const auto m = make_metric(type, params);
    m->add(pose_batch(2, 16));
    EXPECT_HAS(error_of([&] { m->add(pose_batch(2, 15)); }),
               "field 'pred_coords' has 15 keypoints, earlier batches had 16");
  }
}

TEST(KeypointErrors, NoSamples) {
  for (const auto& [type, params] : all_metrics()) {
    const auto m = make_metric(type, params);
    EXPECT_HAS(error_of([&] { m->compute_local(); }), "metric '" + type + "': no samples");
    EXPECT_HAS(error_of([&] {
                 compute_states(*m, {m, make_metric(type, params)});
               }),
               "metric '" + type + "': no samples");
  }
}

TEST(KeypointErrors, AFailedBatchLeavesTheStateUntouched) {
  // Expected: the result of the good batch alone. The bad batch fails on its last normaliser
  // (torso_size) after the others were read.
  for (const auto& [type, params] : all_metrics()) {
    const auto m = make_metric(type, params);
    m->add(pose_batch(20, 16));
    Batch bad = pose_batch(20, 16);
    bad.set("torso_size", Tensor::from_vector(std::vector<double>(20), {20, 1}));
    bad.set("box_size", Tensor::from_vector(std::vector<double>(20 * 3), {20, 3}));
    if (type == "PCKAccuracy" || type == "KeypointNME") {
      EXPECT_THROW(m->add(bad), InputError) << type;
    }
    Batch nan = pose_batch(20, 16);
    Tensor g = nan.tensor("gt_coords").clone();
    g.mutable_data_as<double>()[g.numel() - 1] = std::nan("");
    nan.set("gt_coords", g);
    EXPECT_THROW(m->add(nan), InputError) << type;
    EXPECT_EQ(compute_states(*m, {m}), run_single(type, params, pose_batch(20, 16))) << type;
  }
}

// ---- parameters: ConfigError naming the metric and the parameter ------------------------------

TEST(KeypointParams, BadParameters) {
  EXPECT_HAS(config_error("PCKAccuracy", {{"norm_item", "shoulder"}}), "parameter 'norm_item'");
  EXPECT_HAS(config_error("PCKAccuracy", {{"norm_item", Value::Array{}}}),
             "parameter 'norm_item' must name at least one of bbox, head, torso");
  EXPECT_HAS(config_error("PCKAccuracy", {{"thr", "high"}}), "parameter 'thr'");
  EXPECT_HAS(config_error("KeypointAUC", {{"num_thrs", 0}}),
             "parameter 'num_thrs' must be >= 1, got 0");
  EXPECT_HAS(config_error("KeypointAUC", {{"norm_factor", 0.0}}),
             "parameter 'norm_factor' must not be 0");
  EXPECT_HAS(config_error("KeypointNME", {}), "parameter 'norm_mode'");
  EXPECT_HAS(config_error("KeypointNME", {{"norm_mode", "bbox"}}), "parameter 'norm_mode'");
  EXPECT_HAS(config_error("KeypointNME", {{"norm_mode", "use_norm_item"}}),
             "parameter 'norm_item' is required with norm_mode use_norm_item");
  EXPECT_HAS(config_error("KeypointNME", {{"norm_mode", "keypoint_distance"}}),
             "parameter 'keypoint_indices' is required with norm_mode keypoint_distance");
  EXPECT_HAS(config_error("KeypointNME", {{"norm_mode", "keypoint_distance"},
                                          {"keypoint_indices", Value::Array{1, 2, 3}}}),
             "parameter 'keypoint_indices' must be a pair of keypoint indices, got 3 values");
  EXPECT_HAS(config_error("KeypointNME", {{"norm_mode", "keypoint_distance"},
                                          {"keypoint_indices", Value::Array{-1, 2}}}),
             "parameter 'keypoint_indices' must be >= 0, got -1");
  EXPECT_HAS(
      config_error("KeypointNME", {{"norm_mode", "keypoint_distance"}, {"dataset_name", "coco"}}),
      "parameter 'dataset_name'");
  EXPECT_HAS(config_error("KeypointEndPointError", {{"thr", 0.1}}), "unknown parameter 'thr'");
}

// ---- registration -------------------------------------------------------------------------------

TEST(KeypointPlugin, RegistersDocumentedMetrics) {
  for (const char* name : {"PCKAccuracy", "MpiiPCKAccuracy", "JhmdbPCKAccuracy", "KeypointAUC",
                           "KeypointEndPointError", "KeypointNME"}) {
    ASSERT_NE(expect_documented(name, "keypoints"), nullptr) << name;
  }
}

}  // namespace
}  // namespace tally::test
