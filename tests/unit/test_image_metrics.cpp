// The image-quality plugin (plugins/image), loaded as the real libtally_image.so through the
// Registry: values against torchmetrics 1.9.0, independence from the number of ranks and batch
// sizes, and bad inputs.
//
// Expected values come from tests/reference/expected_image.json, written by
// tests/reference/image.py with torchmetrics 1.9.0 on float64 tensors (the versions and, for each
// value, the exact torchmetrics call are recorded in the file), unless a test says otherwise.
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

const Json& expected_file() { return expected_json("tests/reference/expected_image.json"); }

// Lighter sweeps than the default (the binary stays fast under ASan): the sets hold 1 to 4 images,
// so batches of 1 split every shard as finely as it goes, and one batch each keeps it whole.
RankSweep image_sweep() {
  RankSweep s;
  s.batch_sizes = {std::int64_t{1} << 30, 1};
  s.empty_rank_batch_size = 1;
  return s;
}

// ---- values against torchmetrics, 1..7 ranks ------------------------------------------------

class ImageReference : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map in expected_image.json (the torchmetrics call in "calls").
TEST_P(ImageReference, MatchesTorchmetricsOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  check_case(c, load_inputs(c.at("inputs")), GetParam(), image_sweep());
  print_rel_diffs("torchmetrics 1.9.0");
}

INSTANTIATE_TEST_SUITE_P(Image, ImageReference, ::testing::ValuesIn(case_names(expected_file())),
                         param_name);

// Expected: section "example" of expected_image.json (torchmetrics on
// configs/examples/data/image, made by tests/reference/image.py).
TEST(ImageExample, MatchesTorchmetrics) {
  check_example(expected_file().at("example"), image_sweep());
  print_rel_diffs("torchmetrics 1.9.0");
}

// ---- inputs of one kind or another ------------------------------------------------------------

Tensor ramp(std::int64_t c = 1, double scale = 1.0, double offset = 0.0) {
  std::vector<double> v;
  for (std::int64_t ch = 0; ch < c; ++ch)
    for (std::int64_t k = 0; k < 256; ++k)
      v.push_back((static_cast<double>(k % 23) / 22.0 + offset) * scale);
  return Tensor::from_vector(v, {1, c, 16, 16});
}

Batch pair(const Tensor& p, const Tensor& t) {
  Batch b;
  b.set("preds", p);
  b.set("target", t);
  return b;
}

// float32 data is read as float64: the same value as the float64 copy of the same numbers.
// Expected: equality with the float64 run (both are tally's).
TEST(Image, Float32EqualsFloat64OfTheSameNumbers) {
  const Json& c = find_case(expected_file(), "uqi_rgb_default");
  const Batch b32 = load_inputs(c.at("inputs"));
  const Tensor& p = b32.tensor("preds");
  const Tensor& t = b32.tensor("target");
  std::vector<double> p64(p.data_as<float>(), p.data_as<float>() + p.numel());
  std::vector<double> t64(t.data_as<float>(), t.data_as<float>() + t.numel());
  const Batch b64 = pair(Tensor::from_vector(p64, p.shape()), Tensor::from_vector(t64, t.shape()));
  for (const char* type : {"UniversalImageQualityIndex", "SpectralAngleMapper",
                           "ErrorRelativeGlobalDimensionlessSynthesis"})
    EXPECT_TRUE(same_bits(run_single(type, {}, b32), run_single(type, {}, b64))) << type;
}

// Aliases answer to the same metric. Expected: equality with the canonical name's result.
TEST(Image, Aliases) {
  const Batch b = pair(ramp(3, 0.75, 0.1), ramp(3, 1.0, 0.1));
  EXPECT_TRUE(same_bits(run_single("SAM", {}, b), run_single("SpectralAngleMapper", {}, b)));
  EXPECT_TRUE(same_bits(run_single("UQI", {}, b), run_single("UniversalImageQualityIndex", {}, b)));
  EXPECT_TRUE(same_bits(run_single("ERGAS", {}, b),
                        run_single("ErrorRelativeGlobalDimensionlessSynthesis", {}, b)));
}

// The per-image state of the mean reductions does not grow with the number of images.
TEST(ImageState, SumsStaySmall) {
  const Json& c = find_case(expected_file(), "uqi_rgb_default");
  const Batch data = load_inputs(c.at("inputs"));
  for (const char* type : {"UniversalImageQualityIndex", "SpectralAngleMapper",
                           "ErrorRelativeGlobalDimensionlessSynthesis", "TotalVariation"}) {
    for (std::int64_t n : {std::int64_t{1}, data.size()}) {
      const auto m = make_metric(type, {});
      Batch b = data.slice(0, n);
      if (std::string(type) == "TotalVariation") {
        Batch tv;
        tv.set("img", b.tensor("preds"));
        b = tv;
      }
      m->add(b);
      EXPECT_LT(pack_state(*m).size(), 1300u) << type << " " << n;
    }
  }
}

// ---- bad inputs -------------------------------------------------------------------------------

const std::vector<std::string>& pair_types() {
  static const std::vector<std::string> t = {"MultiScaleStructuralSimilarityIndexMeasure",
                                             "UniversalImageQualityIndex",
                                             "SpectralAngleMapper",
                                             "ErrorRelativeGlobalDimensionlessSynthesis",
                                             "RelativeAverageSpectralError",
                                             "SpatialCorrelationCoefficient",
                                             "SpectralDistortionIndex",
                                             "VisualInformationFidelity"};
  return t;
}

Batch good_pair() {
  const Json& c = find_case(expected_file(), "uqi_rgb_default");
  return load_inputs(c.at("inputs"));
}

TEST(ImageErrors, ShapesDtypesAndMissingFields) {
  const Batch good = good_pair();
  for (const auto& type : pair_types()) {
    const std::string who = "metric '" + type + "': ";
    // Mismatched shapes.
    Batch mism = pair(good.tensor("preds"), Tensor::zeros(DType::F32, {4, 3, 48, 40}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(mism); }),
               who + "field 'preds' is f32[4, 3, 48, 48] but 'target' is f32[4, 3, 48, 40]");
    // Wrong rank.
    Batch three =
        pair(Tensor::zeros(DType::F32, {4, 48, 48}), Tensor::zeros(DType::F32, {4, 48, 48}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(three); }),
               who + "field 'preds' must be 4-D [N, C, H, W], got f32[4, 48, 48]");
    // Integer pixels.
    Batch ints = pair(Tensor::zeros(DType::U8, {1, 3, 48, 48}), good.tensor("target").slice(0, 1));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(ints); }),
               who + "field 'preds' must hold float32 or float64 pixels, got u8[1, 3, 48, 48]");
    // Missing target.
    Batch missing;
    missing.set("preds", good.tensor("preds"));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(missing); }),
               who + "field 'target' is missing from the batch (it has: preds)");
    // NaN and infinity.
    Tensor nan = good.tensor("target").clone();
    nan.mutable_data_as<float>()[2 * 3 * 48 * 48 + 48 * 5 + 7] =
        std::numeric_limits<float>::quiet_NaN();
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(pair(good.tensor("preds"), nan)); }),
               who + "field 'target' sample 2 holds a NaN pixel (channel 0, row 5, column 7)");
    Tensor inf = good.tensor("preds").clone();
    inf.mutable_data_as<float>()[3 * 48 * 48 + 1] = std::numeric_limits<float>::infinity();
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(pair(inf, good.tensor("target"))); }),
               who + "field 'preds' sample 1 holds a infinite pixel");
    // No samples at all.
    EXPECT_HAS(error_of([&] { make_metric(type, {})->compute_local(); }), who + "no samples");
  }
  // TotalVariation reads `img`.
  Batch tv;
  tv.set("img", Tensor::zeros(DType::F64, {2, 16, 16}));
  EXPECT_HAS(error_of([&] { make_metric("TotalVariation", {})->add(tv); }),
             "metric 'TotalVariation': field 'img' must be 4-D [N, C, H, W], got f64[2, 16, 16]");
  EXPECT_HAS(
      error_of([&] { make_metric("TotalVariation", {})->add(good_pair()); }),
      "metric 'TotalVariation': field 'img' is missing from the batch (it has: preds, target)");
}

// Sizes torchmetrics rejects. Expected: torchmetrics' own checks (ms-ssim: H, W >= 2^S and
// H // max(1, S-1)^2 > kernel_size - 1; SAM: C > 1; VIF: at least 41x41; RASE: round(w / 2) <
// H, W; SCC: window_size <= H, W), each an InputError naming the metric and the field.
TEST(ImageErrors, ImageSizes) {
  const Batch small = pair(ramp(), ramp(1, 0.5));  // 16x16, one channel
  EXPECT_HAS(
      error_of([&] { make_metric("MultiScaleStructuralSimilarityIndexMeasure", {})->add(small); }),
      "metric 'MultiScaleStructuralSimilarityIndexMeasure': field 'preds' sample 0 onwards "
      "(16x16): with 5 betas the images must be at least 32 pixels high and wide");
  EXPECT_HAS(error_of([&] {
               make_metric("MultiScaleStructuralSimilarityIndexMeasure",
                           {{"betas", Value::Array{Value(0.5), Value(0.5)}}, {"kernel_size", 17}})
                   ->add(small);
             }),
             "with 2 betas and kernel_size 17 the image height must be larger than 16");
  EXPECT_HAS(error_of([&] { make_metric("SpectralAngleMapper", {})->add(small); }),
             "metric 'SpectralAngleMapper': field 'preds' must have more than 1 channel");
  EXPECT_HAS(
      error_of([&] { make_metric("VisualInformationFidelity", {})->add(small); }),
      "metric 'VisualInformationFidelity': field 'preds' images must be at least 41x41, got 16x16");
  EXPECT_HAS(
      error_of([&] {
        make_metric("SpatialCorrelationCoefficient", {{"window_size", 17}})->add(small);
      }),
      "metric 'SpatialCorrelationCoefficient': field 'preds' window_size 17 is larger than the "
      "16x16 images");
  EXPECT_HAS(
      error_of([&] {
        make_metric("RelativeAverageSpectralError", {{"window_size", 32}})->add(small);
      }),
      "metric 'RelativeAverageSpectralError': field 'preds' round(window_size / 2) = 16 must be "
      "smaller than the image size 16x16");
  EXPECT_HAS(
      error_of([&] {
        make_metric("UniversalImageQualityIndex", {{"kernel_size", 17}})->add(small);
      }),
      "metric 'UniversalImageQualityIndex': field 'preds' images of 16x16 are smaller than the "
      "17x17 window");
}

// Dataset-level metrics need every image of one size (torchmetrics concatenates them).
TEST(ImageErrors, SizeChangesBetweenBatches) {
  for (const char* type : {"RelativeAverageSpectralError", "SpectralDistortionIndex"}) {
    const auto m = make_metric(type, {});
    m->add(pair(ramp(3, 0.75, 0.1), ramp(3, 1.0, 0.1)));
    Batch other =
        pair(Tensor::zeros(DType::F64, {1, 3, 16, 20}), Tensor::zeros(DType::F64, {1, 3, 16, 20}));
    EXPECT_HAS(error_of([&] { m->add(other); }),
               std::string("metric '") + type +
                   "': field 'preds' images are 3x16x20 but earlier "
                   "ones 3x16x16");
  }
}

TEST(ImageErrors, BadParameters) {
  EXPECT_HAS(error_of<ConfigError>([&] {
               make_metric("MultiScaleStructuralSimilarityIndexMeasure", {{"kernel_size", 4}});
             }),
             "kernel_size' must hold odd positive numbers");
  EXPECT_HAS(error_of<ConfigError>([&] {
               make_metric("MultiScaleStructuralSimilarityIndexMeasure", {{"sigma", -1.0}});
             }),
             "sigma' must hold positive numbers");
  EXPECT_HAS(error_of<ConfigError>([&] {
               make_metric("MultiScaleStructuralSimilarityIndexMeasure",
                           {{"data_range", Value::Array{Value(1.0), Value(0.0)}}});
             }),
             "parameter 'data_range' must be a range [lo, hi] with lo < hi, got [1, 0]");
  EXPECT_HAS(error_of<ConfigError>([&] {
               make_metric("UniversalImageQualityIndex",
                           {{"kernel_size", Value::Array{Value(3), Value(5)}}});
             }),
             "kernel_size' must be square");
  EXPECT_HAS(error_of<ConfigError>([&] {
               make_metric("SpectralDistortionIndex", {{"p", 0}});
             }),
             "'p' must be at least 1");
  EXPECT_HAS(error_of<ConfigError>([&] {
               make_metric("TotalVariation", {{"reduction", "max"}});
             }),
             "must be one of");
}

}  // namespace
}  // namespace tally::test
