// The image-restoration plugin (plugins/restoration), loaded as the real
// libtally_restoration.so through the Registry: values against mmeval (and scikit-image for
// SSIM), dense and ragged inputs, independence from the number of ranks, and bad inputs.
//
// Expected values come from tests/reference/expected_restoration.json, written by
// tests/reference/restoration.py with mmeval 0.2.1 and scikit-image 0.26 (versions, and for
// each value the exact call, are recorded in the file), unless a test says otherwise.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/state.hpp"

namespace tally::test {
namespace {

const Json& expected_file() { return expected_json("tests/reference/expected_restoration.json"); }

/// The same samples as ragged fields: one tensor a sample (the batch itself when a field is
/// ragged already).
Batch as_ragged(const Batch& dense) {
  Batch b;
  for (const auto& [name, field] : dense.fields()) {
    const auto* t = std::get_if<Tensor>(&field);
    if (t == nullptr) return dense;
    b.set_ragged(name, per_sample(*t));
  }
  return b;
}

/// The runs of run_all_rank_counts here: whole shards and batches of 2 and 1; batches of 2
/// beside an empty rank.
const RankSweep kSweep{{std::int64_t{1} << 30, 2, 1}, 2};

// ---- values against mmeval and scikit-image, 1..7 ranks ---------------------------------------

class RestorationReference : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map in expected_restoration.json (mmeval's metric class, or
// scikit-image's structural_similarity; the call is in the case's "calls" map). Dense cases are
// also run as ragged fields and must give the same bits.
TEST_P(RestorationReference, MatchesReferenceOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  const Batch data = load_inputs(c.at("inputs"));
  const Value got = check_case(c, data, GetParam(), kSweep);
  const Value ragged =
      run_single(c.at("metric").get<std::string>(), to_map(c.at("params")), as_ragged(data));
  EXPECT_TRUE(same_bits(ragged, got)) << ragged.to_json() << " vs " << got.to_json();
  print_rel_diffs(c.at("reference").get<std::string>());
}

INSTANTIATE_TEST_SUITE_P(Restoration, RestorationReference,
                         ::testing::ValuesIn(case_names(expected_file())), param_name);

// Aliases are the same metric.
TEST(Restoration, MmevalClassNamesAreAliases) {
  const Batch data = load_inputs(find_case(expected_file(), "PSNR_color").at("inputs"));
  for (const auto& [alias, type] :
       std::vector<std::pair<std::string, std::string>>{{"PeakSignalNoiseRatio", "PSNR"},
                                                        {"SignalNoiseRatio", "SNR"},
                                                        {"StructuralSimilarity", "SSIM"},
                                                        {"MeanAbsoluteError", "MAE"},
                                                        {"MeanSquaredError", "MSE"}})
    EXPECT_EQ(run_single(alias, {}, data), run_single(type, {}, data)) << alias;
}

// ---- mmeval's docstring examples ----------------------------------------------------------------

Batch constant_pair(std::vector<std::int64_t> shape, double pred, double gt) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  Batch b;
  b.set("pred_img",
        Tensor::from_vector(std::vector<double>(static_cast<std::size_t>(n), pred), shape));
  b.set("gt_img", Tensor::from_vector(std::vector<double>(static_cast<std::size_t>(n), gt), shape));
  return b;
}

// Expected: mmeval 0.2.1's docstrings: SignalNoiseRatio.compute_snr(ones, 2 * ones) on
// (3, 32, 32) = 6.020599913279624; StructuralSimilarity.compute_ssim(2 * ones, ones) on 32x32 =
// 0.913062377743969; MeanAbsoluteError / MeanSquaredError.compute_*(ones, 2 * ones, mask) with
// mask = 2 * ones (32, 32, 3), rows :16 zeroed = 0.003921568627 / 0.000015378700496 (printed
// there to 12 and 15 digits; in full, from mmeval: 0.0039215686274509795 and
// 1.5378700499807765e-05).
TEST(Restoration, MmevalDocstringExamples) {
  EXPECT_NEAR(run_single("SNR", {{"input_order", "CHW"}}, constant_pair({1, 3, 32, 32}, 1, 2))
                  .at("snr")
                  .as_double(),
              6.020599913279624, 1e-14);
  EXPECT_NEAR(run_single("SSIM", {}, constant_pair({1, 32, 32}, 2, 1)).at("ssim").as_double(),
              0.913062377743969, 1e-14);
  Batch m = constant_pair({1, 32, 32, 3}, 1, 2);
  std::vector<double> mask(32 * 32 * 3, 2.0);
  for (std::size_t i = 0; i < 16 * 32 * 3; ++i) mask[i] = 0.0;
  m.set("mask", Tensor::from_vector(mask, {1, 32, 32, 3}));
  EXPECT_DOUBLE_EQ(run_single("MAE", {}, m).at("mae").as_double(), 0.0039215686274509795);
  EXPECT_DOUBLE_EQ(run_single("MSE", {}, m).at("mse").as_double(), 1.5378700499807765e-05);
  // By hand: mse 1 -> PSNR 20 log10(255) = 48.13080360867910; a perfect prediction -> +inf.
  EXPECT_DOUBLE_EQ(run_single("PSNR", {}, constant_pair({2, 16, 16}, 1, 2)).at("psnr").as_double(),
                   20 * std::log10(255.0));
  EXPECT_EQ(run_single("PSNR", {}, constant_pair({2, 16, 16}, 3, 3)).at("psnr").as_double(),
            std::numeric_limits<double>::infinity());
}

// The state is one float64 per sample, packed as one msgpack bin.
TEST(RestorationState, OneFloat64PerSampleAsBin) {
  const Batch data = load_inputs(find_case(expected_file(), "SSIM_color").at("inputs"));
  for (const char* type : {"PSNR", "SNR", "SSIM", "MAE", "MSE"}) {
    const auto m = make_metric(type, {});
    m->add(data);
    const msgpack::sbuffer buf = pack_state(*m);
    const auto h = msgpack::unpack(buf.data(), buf.size());
    ASSERT_EQ(h.get().via.array.ptr[0].type, msgpack::type::BIN) << type;
    EXPECT_EQ(h.get().via.array.ptr[0].via.bin.size, 8u * static_cast<std::size_t>(data.size()));
  }
}

// SSIM is the hot path: a 512x512x3 uint8 image (astronaut-sized) must not take long.
// Prints the time; the bound is loose (sanitizer and debug builds).
TEST(RestorationPerformance, SsimOfA512x512ColourImage) {
  const std::int64_t h = 512, w = 512;
  std::vector<std::uint8_t> a(static_cast<std::size_t>(h * w * 3)), b(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<std::uint8_t>((i * 7919) % 251);
    b[i] = static_cast<std::uint8_t>((i * 7919 + (i % 13)) % 251);
  }
  Batch batch;
  batch.set("pred_img", Tensor::from_vector(a, {1, h, w, 3}));
  batch.set("gt_img", Tensor::from_vector(b, {1, h, w, 3}));
  const auto m = make_metric("SSIM", {});
  m->add(batch);  // warm-up: the scratch buffers grow once
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) m->add(batch);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 5;
  std::printf("[ timing    ] SSIM 512x512x3 uint8: %.2f ms per image\n", ms);
  EXPECT_LT(ms, 2000.0);
}

// ---- bad inputs ---------------------------------------------------------------------------------

const std::vector<std::string>& all_types() {
  static const std::vector<std::string> t = {"PSNR", "SNR", "SSIM", "MAE", "MSE"};
  return t;
}

Batch images(std::vector<std::int64_t> pshape, std::vector<std::int64_t> gshape) {
  const auto filled = [](const std::vector<std::int64_t>& s) {
    std::int64_t n = 1;
    for (auto x : s) n *= x;
    std::vector<std::uint8_t> v(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint8_t>(i * 31 % 256);
    return Tensor::from_vector(v, s);
  };
  Batch b;
  b.set("pred_img", filled(pshape));
  b.set("gt_img", filled(gshape));
  return b;
}

TEST(RestorationErrors, ShapesDiffer) {
  for (const auto& type : all_types()) {
    Batch b;
    b.set_ragged("pred_img",
                 {Tensor::zeros(DType::U8, {16, 16, 3}), Tensor::zeros(DType::U8, {16, 16, 3})});
    b.set_ragged("gt_img",
                 {Tensor::zeros(DType::U8, {16, 16, 3}), Tensor::zeros(DType::U8, {16, 17, 3})});
    EXPECT_HAS(
        error_of([&] { make_metric(type, {})->add(b); }),
        "metric '" + type +
            "': field 'pred_img' sample 1 is u8[16, 16, 3] but 'gt_img' is u8[16, 17, 3]: the "
            "shapes must be equal");
  }
}

TEST(RestorationErrors, DimensionsAndDtypes) {
  for (const auto& type : all_types()) {
    EXPECT_HAS(error_of([&] {
                 make_metric(type, {})->add(images({4, 16}, {4, 16}));
               }),
               "field 'pred_img' must be 3-D to 5-D [N, ...]");
    Batch i32;
    i32.set("pred_img", Tensor::zeros(DType::I32, {1, 16, 16}));
    i32.set("gt_img", Tensor::zeros(DType::I32, {1, 16, 16}));
    EXPECT_HAS(
        error_of([&] { make_metric(type, {})->add(i32); }),
        "field 'pred_img' must hold uint8, uint16, float32 or float64 pixels, got i32[1, 16, 16]");
    Batch r;
    r.set_ragged("pred_img", {Tensor::zeros(DType::U8, {16})});
    r.set_ragged("gt_img", {Tensor::zeros(DType::U8, {16})});
    EXPECT_HAS(
        error_of([&] { make_metric(type, {})->add(r); }),
        "field 'pred_img' sample 0 must be [H, W], [H, W, C] or [C, H, W] or a video [T, ...], "
        "got u8[16]");
    Batch missing;
    missing.set("pred_img", Tensor::zeros(DType::U8, {1, 16, 16}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(missing); }),
               "field 'gt_img' is missing from the batch (it has: pred_img)");
  }
}

TEST(RestorationErrors, NanPixels) {
  for (const auto& type : all_types()) {
    Batch b = constant_pair({3, 16, 16}, 1, 2);
    std::vector<float> v(16 * 16, 1.0f);
    v[77] = std::numeric_limits<float>::quiet_NaN();
    Batch::Ragged r;
    for (int i = 0; i < 3; ++i) r.push_back(Tensor::from_vector(v, {16, 16}));
    r[0] = Tensor::from_vector(std::vector<float>(256, 1.0f), {16, 16});
    b.set_ragged("gt_img", r);
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(b); }),
               "metric '" + type + "': field 'gt_img' sample 1 holds NaN pixels");
  }
}

TEST(RestorationErrors, TransformsThatCannotApply) {
  for (const char* type : {"PSNR", "SNR", "SSIM"}) {
    EXPECT_HAS(error_of([&] {
                 make_metric(type, {{"convert_to", "Y"}})->add(images({2, 16, 16}, {2, 16, 16}));
               }),
               "field 'pred_img' sample 0 (u8[16, 16], HW): convert_to Y needs 3 channels, got 1");
    EXPECT_HAS(
        error_of([&] {
          make_metric(type, {{"crop_border", 8}})->add(images({2, 16, 16, 3}, {2, 16, 16, 3}));
        }),
        "nothing is left after cropping 8 pixels from each border of a 16x16 image");
    EXPECT_HAS(error_of<ConfigError>([&] {
                 make_metric(type, {{"crop_border", -1}});
               }),
               "parameter 'crop_border' must be >= 0, got -1");
    EXPECT_HAS(error_of<ConfigError>([&] {
                 make_metric(type, {{"input_order", "hwc"}});
               }),
               "must be one of HWC, CHW");
    EXPECT_HAS(error_of<ConfigError>([&] {
                 make_metric(type, {{"convert_to", "gray"}});
               }),
               "must be one of Y, y");
  }
  EXPECT_HAS(
      error_of([&] {
        make_metric("SSIM", {{"crop_border", 1}})->add(images({1, 12, 40, 3}, {1, 12, 40, 3}));
      }),
      "metric 'SSIM': field 'pred_img' sample 0: SSIM needs images of at least 11x11 after the "
      "crop (its Gaussian window), got 10x38");
}

TEST(RestorationErrors, Masks) {
  for (const char* type : {"MAE", "MSE"}) {
    Batch b = images({2, 8, 8, 3}, {2, 8, 8, 3});
    b.set("mask", Tensor::zeros(DType::U8, {2, 8, 4, 1}));
    EXPECT_HAS(
        error_of([&] { make_metric(type, {})->add(b); }),
        "field 'mask' sample 0 is u8[8, 4, 1]: it does not broadcast to the image u8[8, 8, 3]");
    Batch v = images({1, 3, 8, 8, 3}, {1, 3, 8, 8, 3});
    v.set("mask", Tensor::zeros(DType::U8, {1, 2, 8, 8, 1}));
    EXPECT_HAS(
        error_of([&] { make_metric(type, {})->add(v); }),
        "field 'mask' sample 0 is u8[2, 8, 8, 1]: a video's mask needs one mask a frame, [3, ...]");
    Batch nan = images({1, 8, 8}, {1, 8, 8});
    std::vector<float> mv(64, 1.0f);
    mv[5] = std::numeric_limits<float>::quiet_NaN();
    nan.set("mask", Tensor::from_vector(mv, {1, 8, 8}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(nan); }),
               "field 'mask' sample 0 holds NaN");
  }
  // Expected, by mmeval's formula: an all-zero mask gives MAE 0 / (0 + 1e-12) = 0; MSE's 0/0 is an
  // input error here (NaN in mmeval).
  Batch z = images({1, 8, 8}, {1, 8, 8});
  z.set("mask", Tensor::zeros(DType::Bool, {1, 8, 8}));
  EXPECT_EQ(run_single("MAE", {}, z).at("mae").as_double(), 0.0);
  EXPECT_HAS(error_of([&] { make_metric("MSE", {})->add(z); }),
             "metric 'MSE': field 'mask' sample 0 is all zero");
}

TEST(RestorationErrors, NoSamples) {
  for (const auto& type : all_types()) {
    Batch empty;
    EXPECT_HAS(error_of([&] { run_single(type, {}, empty); }), "metric '" + type + "': no samples");
  }
}

// ---- alpha matting: SAD, MattingMSE, GradientError, ConnectivityError -------------------------

const Json& matting_file() { return expected_json("tests/reference/expected_matting.json"); }

class MattingReference : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map in expected_matting.json (mmeval 0.2.1's
// SumAbsoluteDifferences, MattingMeanSquaredError, GradientError or ConnectivityError on the
// float64 mattes; the call is in the case's "calls" map). SAD, MattingMSE and ConnectivityError
// sum as numpy does, GradientError filters in another order than OpenCV's DFT (1e-9 relative is
// the bound; print_rel_diffs shows the measured difference).
TEST_P(MattingReference, MatchesMmevalOnAnyNumberOfRanks) {
  const Json& c = find_case(matting_file(), GetParam());
  const Batch data = load_inputs(c.at("inputs"));
  const Value got = check_case(c, data, GetParam(), kSweep);
  if (c.at("inputs").at("gt_alpha").is_string()) {
    const Value ragged =
        run_single(c.at("metric").get<std::string>(), to_map(c.at("params")), as_ragged(data));
    EXPECT_TRUE(same_bits(ragged, got)) << ragged.to_json() << " vs " << got.to_json();
  }
  print_rel_diffs("mmeval");
}

INSTANTIATE_TEST_SUITE_P(Matting, MattingReference, ::testing::ValuesIn(case_names(matting_file())),
                         param_name);

TEST(Matting, MmevalClassNamesAreAliases) {
  const Batch data = load_inputs(find_case(matting_file(), "MattingMSE_dense").at("inputs"));
  EXPECT_EQ(run_single("SumAbsoluteDifferences", {}, data), run_single("SAD", {}, data));
  EXPECT_EQ(run_single("MattingMeanSquaredError", {}, data), run_single("MattingMSE", {}, data));
}

Batch mattes(std::vector<double> pred, std::vector<double> gt, std::vector<double> trimap,
             std::vector<std::int64_t> shape) {
  Batch b;
  b.set("pred_alpha", Tensor::from_vector(pred, shape));
  b.set("gt_alpha", Tensor::from_vector(gt, shape));
  if (!trimap.empty()) b.set("trimap", Tensor::from_vector(trimap, shape));
  return b;
}

// Expected, by hand from mmeval's formulas (the same numbers as the metrics' `// Example:` lines):
// SAD of 1024 unit differences / 1000 = 1.024; MattingMSE 1024 / 256 unknown pixels = 4; with no
// unknown pixel MattingMSE is 0 (mmeval's special case); ConnectivityError: the prediction never
// reaches 0.1, so every pixel rounds down to 0, phi(gt) = 0 and phi(pred) = 1 on 256 unknown
// pixels: 0.256.
TEST(Matting, HandCheckedValues) {
  std::vector<double> zeros(32 * 32, 0.0), ones(32 * 32, 1.0), corner(32 * 32, 0.0);
  for (std::size_t y = 0; y < 16; ++y)
    for (std::size_t x = 0; x < 16; ++x) corner[y * 32 + x] = 128;
  EXPECT_DOUBLE_EQ(
      run_single("SAD", {}, mattes(zeros, ones, {}, {1, 32, 32})).at("sad").as_double(), 1.024);
  const Batch b = mattes(zeros, ones, corner, {1, 32, 32});
  EXPECT_EQ(run_single("MattingMSE", {}, b).at("matting_mse").as_double(), 4.0);
  EXPECT_EQ(run_single("MattingMSE", {}, mattes(zeros, ones, zeros, {1, 32, 32}))
                .at("matting_mse")
                .as_double(),
            0.0);
  EXPECT_DOUBLE_EQ(run_single("ConnectivityError", {}, b).at("connectivity_error").as_double(),
                   0.256);
  // Equal mattes: no error of any kind.
  const Batch same = mattes(corner, corner, corner, {1, 32, 32});
  for (const char* type : {"SAD", "MattingMSE", "GradientError", "ConnectivityError"})
    EXPECT_EQ(run_single(type, {}, same).as_map().begin()->second.as_double(), 0.0) << type;
}

TEST(MattingErrors, BadInputsAndParameters) {
  std::vector<double> a(12, 0.5);
  // Shapes: trimap and mattes must agree; GradientError and ConnectivityError filter 2-D mattes.
  Batch b = mattes(a, a, a, {1, 3, 4});
  b.set("trimap", Tensor::from_vector(std::vector<double>(12, 128), {1, 4, 3}));
  EXPECT_HAS(error_of([&] { make_metric("GradientError", {})->add(b); }),
             "metric 'GradientError': field 'trimap' sample 0 is f64[4, 3] but 'pred_alpha' is "
             "f64[3, 4]: the trimap must have the alpha matte's shape");
  Batch c = mattes(a, a, a, {1, 2, 2, 3});
  EXPECT_HAS(error_of([&] { make_metric("ConnectivityError", {})->add(c); }),
             "metric 'ConnectivityError': field 'pred_alpha' must be 3-D to 3-D");
  EXPECT_EQ(run_single("SAD", {}, c).at("sad").as_double(), 0.0);  // any shape for the sums
  Batch d = mattes(a, a, {}, {1, 3, 4});
  d.set("gt_alpha", Tensor::from_vector(std::vector<double>(6, 0.5), {1, 2, 3}));
  EXPECT_HAS(error_of([&] { make_metric("SAD", {})->add(d); }),
             "metric 'SAD': field 'pred_alpha' sample 0 is f64[3, 4] but 'gt_alpha' is f64[2, 3]");
  std::vector<double> n = a;
  n[7] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_HAS(error_of([&] {
               make_metric("MattingMSE", {})->add(mattes(a, n, a, {1, 3, 4}));
             }),
             "metric 'MattingMSE': field 'gt_alpha' sample 0 holds NaN or infinite values");
  Batch no_trimap = mattes(a, a, {}, {1, 3, 4});
  EXPECT_HAS(error_of([&] { make_metric("GradientError", {})->add(no_trimap); }), "'trimap'");
  EXPECT_HAS(config_error("GradientError", {{"sigma", 0.0}}), "must be in (0, 20], got 0");
  EXPECT_HAS(config_error("GradientError", {{"sigma", 50.0}}), "must be in (0, 20]");
  EXPECT_HAS(config_error("ConnectivityError", {{"step", 0.0}}),
             "parameter 'step' must be a number in [0.0001, 1], got 0");
  EXPECT_HAS(config_error("SAD", {{"norm_const", -1.0}}), "must be a finite number > 0");
  for (const char* type : {"SAD", "MattingMSE", "GradientError", "ConnectivityError"}) {
    Batch empty;
    EXPECT_HAS(error_of([&] { run_single(type, {}, empty); }), "no samples");
  }
}

}  // namespace
}  // namespace tally::test
