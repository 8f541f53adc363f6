// NIQE (plugins/restoration/niqe.cpp), loaded as the real libtally_restoration.so through the
// Registry: values against mmeval on natural and synthetic images (whole batches on 1 to 7
// ranks, and each sample alone), dense and ragged inputs, and bad inputs.
//
// Expected values come from tests/reference/expected_niqe.json, written by
// tests/reference/niqe.py with mmeval 0.2.1's NaturalImageQualityEvaluator (numpy 2.3.5, scipy
// 1.16.3, opencv-python 5.0.0; versions, and for each case the exact call, are recorded in the
// file), unless a test says otherwise.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "support/expect_error.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

const Json& expected_file() { return expected_json("tests/reference/expected_niqe.json"); }

/// The same samples as a ragged field: one tensor a sample (the batch itself when it is ragged).
Batch as_ragged(const Batch& dense) {
  Batch b;
  for (const auto& [name, field] : dense.fields()) {
    const auto* t = std::get_if<Tensor>(&field);
    if (t == nullptr) return dense;
    b.set_ragged(name, per_sample(*t));
  }
  return b;
}

/// Sample i of a batch alone, as a ragged field of one tensor.
Batch sample_alone(const Batch& data, std::int64_t i) {
  Batch b;
  const Batch r = as_ragged(data);
  b.set_ragged("pred_img", {r.ragged("pred_img")[static_cast<std::size_t>(i)]});
  return b;
}

/// Batches of 1 and 2 and whole shards; batches of 1 beside an empty rank.
const RankSweep kSweep{{std::int64_t{1} << 30, 2, 1}, 1};

// ---- values against mmeval, 1..7 ranks ---------------------------------------------------------

class NiqeReference : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map (mmeval's NaturalImageQualityEvaluator over the case's
// samples; the call is in its "calls" map) on every rank count, and its "per_sample" list (mmeval
// on each sample alone). Dense cases also run as ragged fields and must give the same bits.
TEST_P(NiqeReference, MatchesMmevalOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  const Batch data = load_inputs(c.at("inputs"));
  const Value got = check_case(c, data, GetParam(), kSweep);
  const Value ragged = run_single("NIQE", to_map(c.at("params")), as_ragged(data));
  EXPECT_TRUE(same_bits(ragged, got)) << ragged.to_json() << " vs " << got.to_json();
  const auto& per = c.at("per_sample");
  ASSERT_EQ(static_cast<std::int64_t>(per.size()), data.size());
  for (std::int64_t i = 0; i < data.size(); ++i) {
    const Value one = run_single("NIQE", to_map(c.at("params")), sample_alone(data, i));
    Json want = Json::object();
    want["niqe"] = per.at(static_cast<std::size_t>(i));
    expect_matches(one, want, GetParam() + " sample " + std::to_string(i), "NIQE");
  }
  print_rel_diffs(c.at("reference").get<std::string>());
}

INSTANTIATE_TEST_SUITE_P(Niqe, NiqeReference, ::testing::ValuesIn(case_names(expected_file())),
                         param_name);

// mmeval's class name is an alias; the metric is documented with its result.
TEST(Niqe, AliasAndDocs) {
  const Batch data = load_inputs(find_case(expected_file(), "jpeg_gray").at("inputs"));
  EXPECT_TRUE(same_bits(run_single("NaturalImageQualityEvaluator", {}, data),
                        run_single("NIQE", {}, data)));
  expect_documented("NIQE", "restoration");
}

// A gray image given with 3 equal channels and as one channel: the same rounded gray image
// (0.299 v + 0.587 v + 0.114 v rounds back to v for every uint8 v), so the same value.
TEST(Niqe, GrayAsOneOrThreeChannels) {
  const Batch rgb = load_inputs(find_case(expected_file(), "jpeg_gray").at("inputs"));
  const Tensor& t = rgb.tensor("pred_img");
  const std::int64_t h = t.size(1), w = t.size(2);
  std::vector<std::uint8_t> one(static_cast<std::size_t>(h * w)),
      three(static_cast<std::size_t>(h * w * 3));
  const auto* px = static_cast<const std::uint8_t*>(t.data());
  for (std::int64_t i = 0; i < h * w; ++i) {
    one[static_cast<std::size_t>(i)] = px[i * 3 + 1];
    for (std::int64_t k = 0; k < 3; ++k) three[static_cast<std::size_t>(i * 3 + k)] = px[i * 3 + 1];
  }
  Batch a, b;
  a.set("pred_img", Tensor::from_vector(one, {1, h, w}));
  b.set("pred_img", Tensor::from_vector(three, {1, h, w, 3}));
  const Value va = run_single("NIQE", {}, a), vb = run_single("NIQE", {}, b);
  EXPECT_TRUE(same_bits(va, vb)) << va.to_json() << " vs " << vb.to_json();
  EXPECT_TRUE(std::isfinite(va.at("niqe").as_double()));
}

// ---- bad inputs -------------------------------------------------------------------------------

Batch zeros_image(std::vector<std::int64_t> shape, DType dtype = DType::U8) {
  Batch b;
  b.set("pred_img", Tensor::zeros(dtype, shape));
  return b;
}

// mmeval fails on images smaller than 96x96 after the crop (AxisError), on one 96x96 block
// (np.cov of one row: NaN, LinAlgError) and on images whose blocks are flat (NaN features:
// LinAlgError); tally says so as an InputError naming the sample.
TEST(NiqeErrors, BadImages) {
  EXPECT_HAS(error_of([&] {
               make_metric("NIQE", {})->add(zeros_image({1, 95, 300, 3}));
             }),
             "metric 'NIQE': field 'pred_img' sample 0 (u8[95, 300, 3], HWC): NIQE needs at "
             "least two 96x96 blocks after cropping 0 pixels from each border, got 95x300");
  EXPECT_HAS(error_of([&] {
               make_metric("NIQE", {})->add(zeros_image({1, 191, 191}));
             }),
             "got 191x191 pixels");
  EXPECT_HAS(error_of([&] {
               make_metric("NIQE", {{"crop_border", 5}})->add(zeros_image({1, 200, 105, 3}));
             }),
             "after cropping 5 pixels from each border, got 190x95 pixels");
  EXPECT_HAS(error_of([&] {
               make_metric("NIQE", {})->add(zeros_image({1, 200, 200, 2}));
             }),
             "sample 0 (u8[200, 200, 2], HWC): convert_to gray needs 3 channels (or 1: an image "
             "already gray), got 2");
  EXPECT_HAS(error_of([&] {
               make_metric("NIQE", {})->add(zeros_image({2, 200, 200, 3}));
             }),
             "sample 0 (u8[200, 200, 3], HWC): fewer than two of its 96x96 blocks have finite "
             "features");
  std::vector<float> nan(200 * 200, 1.0f);
  nan[777] = std::numeric_limits<float>::quiet_NaN();
  Batch b;
  b.set("pred_img", Tensor::from_vector(nan, {1, 200, 200}));
  EXPECT_HAS(error_of([&] { make_metric("NIQE", {})->add(b); }),
             "field 'pred_img' sample 0 holds NaN pixels");
  Batch i32 = zeros_image({1, 200, 200}, DType::I32);
  EXPECT_HAS(error_of([&] { make_metric("NIQE", {})->add(i32); }),
             "must hold uint8, uint16, float32 or float64 pixels");
  Batch missing;
  missing.set("gt_img", Tensor::zeros(DType::U8, {1, 200, 200}));
  EXPECT_HAS(error_of([&] { make_metric("NIQE", {})->add(missing); }), "pred_img");
  EXPECT_HAS(error_of([&] { make_metric("NIQE", {})->compute_local(); }), "no samples");
}

TEST(NiqeErrors, BadParameters) {
  EXPECT_HAS(error_of<ConfigError>([&] {
               make_metric("NIQE", {{"crop_border", -1}});
             }),
             "parameter 'crop_border' must be >= 0, got -1");
  EXPECT_HAS(error_of<ConfigError>([&] {
               make_metric("NIQE", {{"convert_to", "rgb"}});
             }),
             "must be one of");
  EXPECT_HAS(error_of<ConfigError>([&] {
               make_metric("NIQE", {{"input_order", "hwc"}});
             }),
             "must be one of HWC, CHW");
  EXPECT_HAS(error_of<ConfigError>([&] {
               make_metric("NIQE", {{"channel_order", "rgbx"}});
             }),
             "must be one of rgb, bgr");
}

}  // namespace
}  // namespace tally::test
