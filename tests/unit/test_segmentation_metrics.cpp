// The segmentation plugin (plugins/segmentation: MeanIoU), loaded as the real
// libtally_segmentation.so through the Registry: values against mmeval 0.2.1, independence from
// the number of ranks and the batch size (bit for bit), dense and ragged inputs of every integer
// dtype, the example's PNG label maps through the png_masks reader, and every bad input.
//
// Expected values come from tests/reference/expected_segmentation.json, written by
// tests/reference/segmentation.py with mmeval 0.2.1's mmeval.metrics.MeanIoU (the versions and,
// for each case, the exact call are recorded in the file; null there is NaN), unless a test says
// otherwise.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/reader.hpp"

namespace tally::test {
namespace {

const Json& expected_file() { return expected_json("tests/reference/expected_segmentation.json"); }

/// The runs of run_all_rank_counts here: whole shards and batches of 3 and 1; batches of 2
/// beside an empty rank.
const RankSweep kSweep{{std::int64_t{1} << 30, 3, 1}, 2};

// ---- values against mmeval, 1..7 ranks ------------------------------------------------------

class ReferenceCase : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map in expected_segmentation.json (mmeval 0.2.1 MeanIoU; the
// call is the case's "call").
TEST_P(ReferenceCase, MatchesMmevalOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  check_case(c, load_inputs(c.at("inputs")), GetParam(), kSweep);
  print_rel_diffs("mmeval 0.2.1");
}

INSTANTIATE_TEST_SUITE_P(Segmentation, ReferenceCase,
                         ::testing::ValuesIn(case_names(expected_file())), param_name);

// The same maps dense, ragged, or one of each give the same bits; expected as case a_classwise.
TEST(MeanIoU, DenseAndRaggedFieldsAgree) {
  const Json& c = find_case(expected_file(), "a_classwise");
  const Batch dense = load_inputs(c.at("inputs"));
  const Value want = run_single("MeanIoU", to_map(c.at("params")), dense);
  for (int mode : {0, 1, 2}) {
    Batch b;
    const Tensor& p = dense.tensor("pred_sem_seg");
    const Tensor& g = dense.tensor("gt_sem_seg");
    if (mode == 0 || mode == 2)
      b.set_ragged("pred_sem_seg", per_sample(p));
    else
      b.set("pred_sem_seg", p);
    if (mode == 0 || mode == 1)
      b.set_ragged("gt_sem_seg", per_sample(g));
    else
      b.set("gt_sem_seg", g);
    const Value got = run_all_rank_counts("MeanIoU", to_map(c.at("params")), b, {}, kSweep);
    EXPECT_TRUE(same_bits(got, want)) << "mode " << mode << ": " << got.to_json();
    expect_matches(got, c.at("expected"), "a_classwise ragged mode " + std::to_string(mode),
                   "MeanIoU");
  }
  print_rel_diffs("mmeval 0.2.1");
}

// Expected: section "example" of expected_segmentation.json (mmeval 0.2.1 on the PNG label maps
// of configs/examples/data/segmentation, read with PIL), here read with the png_masks reader on
// 1 to 4 ranks.
TEST(MeanIoU, ExamplePngMasksMatchMmeval) {
  const Json& ex = expected_file().at("example");
  const auto read = [&](int rank, int world) {
    const Value::Map given{
        {"fields", Value(Value::Map{{"pred_sem_seg", source_path(ex.at("pred_dir")).string()},
                                    {"gt_sem_seg", source_path(ex.at("gt_dir")).string()}})},
        {"batch_size", 3}};
    auto reader = make_reader("png_masks", given, ShardInfo{rank, world});
    std::vector<Batch> batches;
    while (auto b = reader->next()) batches.push_back(std::move(*b));
    return batches;
  };
  // All samples in one batch, to feed the harness's simulated ranks.
  Batch all;
  Batch::Ragged pred, gt;
  for (const auto& b : read(0, 1)) {
    for (const auto& t : b.ragged("pred_sem_seg")) pred.push_back(t);
    for (const auto& t : b.ragged("gt_sem_seg")) gt.push_back(t);
  }
  all.set_ragged("pred_sem_seg", pred);
  all.set_ragged("gt_sem_seg", gt);
  ASSERT_EQ(all.size(), static_cast<std::int64_t>(ex.at("files").size()));
  for (std::size_t i = 0; i < gt.size(); ++i)
    EXPECT_EQ(gt[i].shape(), ex.at("shapes")[i].get<std::vector<std::int64_t>>()) << i;
  for (const auto& m : ex.at("metrics")) {
    const std::string label = m.at("label").get<std::string>();
    const Value got = run_all_rank_counts("MeanIoU", to_map(m.at("params")), all, label, kSweep);
    expect_matches(got, ex.at("results").at(label), "example." + label, "MeanIoU");
    // The real readers of 2..4 ranks, each rank's metric fed its own batches.
    for (int world : {2, 3, 4}) {
      std::vector<std::shared_ptr<Metric>> ranks;
      for (int r = 0; r < world; ++r) {
        ranks.push_back(make_metric("MeanIoU", to_map(m.at("params")), label));
        for (const auto& b : read(r, world)) ranks.back()->add(b);
      }
      const Value sharded =
          compute_states(*make_metric("MeanIoU", to_map(m.at("params")), label), ranks);
      EXPECT_TRUE(same_bits(sharded, got)) << label << " on " << world << " reader ranks";
    }
  }
  print_rel_diffs("mmeval 0.2.1");
}

// Expected, by hand: 600 x 700 pixels all (gt 1, pred 2), so 420000 pixels land in one cell,
// more than uint16 could count; aAcc 0 and class 2's precision 0.
TEST(MeanIoU, CountsManyPixelsOfOneCell) {
  Batch b;
  b.set("pred_sem_seg",
        Tensor::from_vector(std::vector<std::uint8_t>(600 * 700, 2), {1, 600, 700}));
  b.set("gt_sem_seg", Tensor::from_vector(std::vector<std::uint8_t>(600 * 700, 1), {1, 600, 700}));
  const Value r = run_single("MeanIoU", {{"num_classes", 3}, {"classwise_results", true}}, b);
  EXPECT_EQ(r.at("aAcc").as_double(), 0.0);
  EXPECT_EQ(r.at("mIoU").as_double(), 0.0);  // classes 1 and 2 have IoU 0, class 0 is NaN
  EXPECT_EQ(r.at("classwise_results").at("Precision").as_array()[2].as_double(), 0.0);
  EXPECT_TRUE(std::isnan(r.at("classwise_results").at("Acc").as_array()[2].as_double()));
}

// Not a check: the pixel throughput of add() (run with --gtest_also_run_disabled_tests).
TEST(MeanIoU, DISABLED_Throughput) {
  const std::int64_t n = 32, h = 512, w = 512;
  for (const std::int64_t k : {19, 150, 1000}) {
    for (const bool wide : {false, true}) {
      if (k > 255 && !wide) continue;
      std::vector<std::int64_t> gt64(static_cast<std::size_t>(n * h * w)), pred64(gt64.size());
      std::uint64_t x = 88172645463325252ull;
      for (std::size_t i = 0; i < gt64.size(); ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const auto block = static_cast<std::int64_t>(((i / 64) * 2654435761u) % k);  // runs of 64
        gt64[i] = (x % 50 == 0) ? 255 : block;
        pred64[i] = (x % 10 == 0) ? static_cast<std::int64_t>((x >> 20) % k) : block;
      }
      Batch b;
      if (wide) {
        b.set("pred_sem_seg", Tensor::from_vector(pred64, {n, h, w}));
        b.set("gt_sem_seg", Tensor::from_vector(gt64, {n, h, w}));
      } else {
        std::vector<std::uint8_t> g(gt64.begin(), gt64.end()), p(pred64.begin(), pred64.end());
        b.set("pred_sem_seg", Tensor::from_vector(p, {n, h, w}));
        b.set("gt_sem_seg", Tensor::from_vector(g, {n, h, w}));
      }
      for (const int threads : {1, 2}) {
        auto metric = make_metric(
            "MeanIoU", {{"num_classes", Value(static_cast<long>(k))}, {"threads", threads}});
        metric->add(b);  // warm-up
        const auto t0 = std::chrono::steady_clock::now();
        const int reps = 5;
        for (int r = 0; r < reps; ++r) metric->add(b);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("[ throughput ] K=%lld %s maps, %d thread(s): %.0f Mpixel/s\n",
                    static_cast<long long>(k), wide ? "int64" : "uint8", threads,
                    static_cast<double>(reps * n * h * w) / s / 1e6);
      }
    }
  }
}

// ---- bad inputs and parameters ----------------------------------------------------------------

std::string add_error(const Value::Map& params, const Batch& b) {
  return error_of([&] { make_metric("MeanIoU", params)->add(b); });
}

template <class P, class G>
Batch maps(std::vector<P> pred, std::vector<G> gt, std::vector<std::int64_t> shape) {
  Batch b;
  b.set("pred_sem_seg", Tensor::from_vector(pred, shape));
  b.set("gt_sem_seg", Tensor::from_vector(gt, shape));
  return b;
}

/// n pixels of label maps for k classes, as int32: the ground truth mostly the prediction, some
/// pixels another class, some ignored (255); with `reduce` (reduce_zero_label) classes count
/// from 1.
std::pair<std::vector<std::int32_t>, std::vector<std::int32_t>> noisy_maps(std::mt19937_64& rng,
                                                                           std::size_t n, int k,
                                                                           bool reduce = false) {
  std::uniform_int_distribution<int> cls(0, k - 1), noise(0, 9);
  std::vector<std::int32_t> p(n), g(n);
  for (std::size_t i = 0; i < n; ++i) {
    p[i] = cls(rng);
    const int r = noise(rng);
    g[i] = r == 0 ? 255 : r == 1 ? cls(rng) : p[i];
    if (reduce && g[i] != 255) g[i] += 1;  // 1..k mean classes 0..k-1
  }
  return {std::move(p), std::move(g)};
}

// uint8 maps with up to 255 classes count in 16-bit lanes, wider maps (and 256 classes) in 32-bit
// ones: every dtype pair, class count and option gives the same bits. Expected: the result of the
// same maps as int32 (the 32-bit path, checked against mmeval in ReferenceCase). Maps of 37 x 53
// pixels: no multiple of any vector width.
TEST(MeanIoU, NarrowAndWideMapsCountTheSame) {
  std::mt19937_64 rng(20261123);
  const std::vector<std::int64_t> shape{3, 37, 53};
  const std::size_t n = 3 * 37 * 53;
  for (const int k : {2, 19, 150, 255, 256}) {
    for (const bool reduce : {false, true}) {
      if (reduce && k == 256) continue;  // label l counts as l - 1: at most 255 classes from uint8
      const auto [p, g] = noisy_maps(rng, n, k, reduce);
      const Value::Map params{
          {"num_classes", k}, {"reduce_zero_label", reduce}, {"classwise_results", true}};
      // As JSON: classes without pixels are NaN (null), which == on Values would not match.
      const std::string want = run_single("MeanIoU", params, maps(p, g, shape)).to_json();
      const std::vector<std::uint8_t> p8(p.begin(), p.end()), g8(g.begin(), g.end());
      const std::vector<std::int16_t> g16(g.begin(), g.end());
      EXPECT_EQ(run_single("MeanIoU", params, maps(p8, g8, shape)).to_json(), want) << k;
      EXPECT_EQ(run_single("MeanIoU", params, maps(p8, g16, shape)).to_json(), want) << k;
    }
  }
}

// `threads` splits a batch's maps into pieces, contiguous blocks of them counted on their own
// threads and added up: every thread count gives the counts of one thread, dense or ragged, for
// lane-counted (K <= 256) and direct (K > 256) matrices. Expected: the same metric with threads 1
// (checked against mmeval in ReferenceCase).
TEST(MeanIoU, AnyNumberOfThreadsCountsTheSame) {
  std::mt19937_64 rng(20261124);
  for (const int k : {19, 150, 300}) {
    // 7 small maps (a piece each) and 1 map of 700 x 800 (3 pieces of at most 2^18 pixels).
    for (const auto& shape :
         {std::vector<std::int64_t>{7, 37, 53}, std::vector<std::int64_t>{1, 700, 800}}) {
      const auto n = static_cast<std::size_t>(shape[0] * shape[1] * shape[2]);
      const auto [p, g] = noisy_maps(rng, n, k);
      const Batch dense = maps(p, g, shape);
      Batch ragged;  // the same maps, one tensor each, every other one transposed in shape
      Batch::Ragged rp, rg;
      const auto px = static_cast<std::ptrdiff_t>(shape[1] * shape[2]);
      for (std::int64_t i = 0; i < shape[0]; ++i) {
        const std::vector<std::int64_t> s = i % 2 ? std::vector<std::int64_t>{shape[2], shape[1]}
                                                  : std::vector<std::int64_t>{shape[1], shape[2]};
        rp.push_back(Tensor::from_vector(
            std::vector<std::int32_t>(p.begin() + i * px, p.begin() + (i + 1) * px), s));
        rg.push_back(Tensor::from_vector(
            std::vector<std::int32_t>(g.begin() + i * px, g.begin() + (i + 1) * px), s));
      }
      ragged.set_ragged("pred_sem_seg", std::move(rp));
      ragged.set_ragged("gt_sem_seg", std::move(rg));
      for (const Batch* b : std::initializer_list<const Batch*>{&dense, &ragged}) {
        const std::string want =
            run_single("MeanIoU", {{"num_classes", k}, {"classwise_results", true}}, *b).to_json();
        for (const int threads : {2, 3, 7, 8}) {
          const Value::Map params{
              {"num_classes", k}, {"classwise_results", true}, {"threads", threads}};
          // With 3 threads also on 1 to 7 ranks and in smaller batches.
          const Value got = threads == 3 && shape[0] > 1
                                ? run_all_rank_counts("MeanIoU", params, *b)
                                : run_single("MeanIoU", params, *b);
          EXPECT_EQ(got.to_json(), want) << k << " classes, " << threads << " threads";
        }
      }
    }
  }
}

// On several threads the first bad image in sample order is reported, as on one, and the batch
// adds nothing (every thread counted into its own matrix). Expected: the message of threads 1;
// the result of the good batch alone.
TEST(MeanIoU, ThreadsReportTheFirstBadSampleAndKeepTheState) {
  std::vector<std::uint8_t> p(8 * 4, 1), g(8 * 4, 1);
  g[2 * 4 + 3] = 9;  // sample 2, row 1, column 1
  g[5 * 4 + 0] = 7;  // sample 5
  const Batch bad = maps(p, g, {8, 2, 2});
  const Batch good = maps<std::uint8_t, std::uint8_t>({0, 1, 1, 0}, {0, 1, 0, 0}, {1, 2, 2});
  const std::string one = add_error({{"num_classes", 4}}, bad);
  EXPECT_HAS(one, "field 'gt_sem_seg' sample 2 pixel (row 1, column 1): class id 9");
  // One map of 700 x 800, bad in its second and third pieces of 2^18 pixels: the pixel named is
  // the first, counted from the start of the map.
  std::vector<std::uint8_t> big(700 * 800, 1), big_gt(700 * 800, 1);
  big_gt[500000] = 9;  // row 625, column 0
  big_gt[550000] = 8;
  const Batch one_map = maps(big, big_gt, {1, 700, 800});
  EXPECT_HAS(add_error({{"num_classes", 4}}, one_map),
             "field 'gt_sem_seg' sample 0 pixel (row 625, column 0): class id 9");
  for (const int threads : {2, 4, 8}) {
    EXPECT_EQ(add_error({{"num_classes", 4}, {"threads", threads}}, one_map),
              add_error({{"num_classes", 4}}, one_map))
        << threads;
    EXPECT_EQ(add_error({{"num_classes", 4}, {"threads", threads}}, bad), one) << threads;
    const auto m = make_metric("MeanIoU", {{"num_classes", 4}, {"threads", threads}});
    EXPECT_THROW(m->add(bad), InputError);
    m->add(good);
    EXPECT_EQ(compute_states(*m, {m}).to_json(),
              run_single("MeanIoU", {{"num_classes", 4}}, good).to_json())
        << threads;
  }
}

TEST(MeanIoU, BadLabelsNameTheFieldSampleAndPixel) {
  // Sample 1, row 1, column 0 holds gt 7 with 4 classes.
  const Batch b = maps<std::uint8_t, std::uint8_t>({0, 1, 2, 3, 0, 1, 2, 3},
                                                   {0, 1, 2, 3, 0, 1, 7, 3}, {2, 2, 2});
  EXPECT_EQ(add_error({{"num_classes", 4}}, b),
            "metric 'MeanIoU': field 'gt_sem_seg' sample 1 pixel (row 1, column 0): class id 7 is "
            "outside [0, 4) and is not ignore_index 255");
  // A negative ground truth (int64).
  EXPECT_NE(
      add_error({{"num_classes", 4}}, maps<std::int64_t, std::int64_t>({0, 0}, {0, -3}, {1, 1, 2}))
          .find("field 'gt_sem_seg' sample 0 pixel (row 0, column 1): class id -3 is outside"),
      std::string::npos);
  // A prediction out of range on a counted pixel.
  EXPECT_EQ(
      add_error({{"num_classes", 4}}, maps<std::int32_t, std::uint8_t>({0, 4}, {0, 1}, {1, 1, 2})),
      "metric 'MeanIoU': field 'pred_sem_seg' sample 0 pixel (row 0, column 1): class id 4 "
      "is outside [0, 4) (only pixels whose ground truth is ignore_index may hold other "
      "values)");
  EXPECT_NE(
      add_error({{"num_classes", 4}}, maps<std::int16_t, std::uint8_t>({-1, 0}, {0, 1}, {1, 1, 2}))
          .find("field 'pred_sem_seg' sample 0 pixel (row 0, column 0): class id -1"),
      std::string::npos);
  // ... but anything goes where the ground truth is ignored (mmeval drops those pixels first).
  const Value ok =
      run_single("MeanIoU", {{"num_classes", 2}},
                 maps<std::int32_t, std::uint8_t>({-5, 1000, 1}, {255, 255, 1}, {1, 1, 3}));
  EXPECT_EQ(ok.at("aAcc").as_double(), 1.0);
  // reduce_zero_label: gt 0 and 255 are ignored, 5 means class 4, out of range for 4 classes.
  EXPECT_EQ(add_error({{"num_classes", 4}, {"reduce_zero_label", true}},
                      maps<std::uint8_t, std::uint8_t>({9, 0, 0}, {0, 255, 5}, {1, 1, 3})),
            "metric 'MeanIoU': field 'gt_sem_seg' sample 0 pixel (row 0, column 2): class id 5 is "
            "outside [1, 4] (reduce_zero_label: 0 and 255 are ignored, l counts as l - 1)");
  // Sample numbers count from the start of the rank's shard, across batches.
  auto metric = make_metric("MeanIoU", {{"num_classes", 2}});
  metric->add(maps<std::uint8_t, std::uint8_t>({0, 1, 0, 1}, {0, 1, 0, 1}, {2, 1, 2}));
  EXPECT_NE(error_of([&] {
              metric->add(maps<std::uint8_t, std::uint8_t>({0, 1}, {0, 2}, {1, 1, 2}));
            }).find("sample 2 pixel (row 0, column 1)"),
            std::string::npos);
}

TEST(MeanIoU, BadShapesAndTypesNameTheField) {
  const Value::Map k4{{"num_classes", 4}};
  // Shape mismatch in a ragged sample.
  Batch r;
  r.set_ragged("pred_sem_seg",
               {Tensor::zeros(DType::U8, {2, 2}), Tensor::zeros(DType::U8, {3, 2})});
  r.set_ragged("gt_sem_seg", {Tensor::zeros(DType::U8, {2, 2}), Tensor::zeros(DType::U8, {2, 3})});
  EXPECT_EQ(add_error(k4, r),
            "metric 'MeanIoU': field 'pred_sem_seg' sample 1: has shape [3, 2], 'gt_sem_seg' has "
            "[2, 3]");
  // Dense maps of different sizes.
  Batch d;
  d.set("pred_sem_seg", Tensor::zeros(DType::U8, {2, 4, 4}));
  d.set("gt_sem_seg", Tensor::zeros(DType::U8, {2, 4, 5}));
  EXPECT_NE(add_error(k4, d).find("sample 0: has shape [4, 4], 'gt_sem_seg' has [4, 5]"),
            std::string::npos);
  // Float maps, wrong dimensions, a 3-D ragged sample, a missing field.
  Batch f;
  f.set("pred_sem_seg", Tensor::zeros(DType::F32, {1, 2, 2}));
  f.set("gt_sem_seg", Tensor::zeros(DType::U8, {1, 2, 2}));
  EXPECT_EQ(
      add_error(k4, f),
      "metric 'MeanIoU': field 'pred_sem_seg' must hold integer label maps, got f32[1, 2, 2]");
  Batch two_d;
  two_d.set("pred_sem_seg", Tensor::zeros(DType::U8, {2, 2}));
  two_d.set("gt_sem_seg", Tensor::zeros(DType::U8, {2, 2}));
  EXPECT_NE(add_error(k4, two_d).find("field 'pred_sem_seg' must be 3-D [N, H, W]"),
            std::string::npos);
  Batch r3;
  r3.set_ragged("pred_sem_seg", {Tensor::zeros(DType::U8, {1, 2, 2})});
  r3.set_ragged("gt_sem_seg", {Tensor::zeros(DType::U8, {2, 2})});
  EXPECT_EQ(add_error(k4, r3),
            "metric 'MeanIoU': field 'pred_sem_seg' sample 0: must be 2-D [H, W], got u8[1, 2, 2]");
  Batch missing;
  missing.set("pred_sem_seg", Tensor::zeros(DType::U8, {1, 2, 2}));
  EXPECT_NE(add_error(k4, missing).find("field 'gt_sem_seg' is missing from the batch"),
            std::string::npos);
}

TEST(MeanIoU, NoSamplesIsAnError) {
  const auto make = [] { return make_metric("MeanIoU", {{"num_classes", 3}}); };
  EXPECT_EQ(error_of([&] {
              run_ranks(make, Batch{}, {{0, 0}, {0, 0}});
            }),
            "metric 'MeanIoU': no samples");
}

TEST(MeanIoU, BadParametersAreConfigErrors) {
  EXPECT_NE(config_error("MeanIoU", {}).find("num_classes"), std::string::npos);
  EXPECT_NE(config_error("MeanIoU", {{"num_classes", 0}})
                .find("parameter 'num_classes' must be >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(config_error("MeanIoU", {{"num_classes", 5000}}).find("must be at most 4096"),
            std::string::npos);
  EXPECT_NE(config_error("MeanIoU",
                         {{"num_classes", 3}, {"reduce_zero_label", true}, {"ignore_index", 0}})
                .find("parameter 'reduce_zero_label' maps ground truth 0 to 255"),
            std::string::npos);
  EXPECT_NE(config_error("MeanIoU", {{"num_classes", 3}, {"beta", "x"}}).find("beta"),
            std::string::npos);
  EXPECT_HAS(config_error("MeanIoU", {{"num_classes", 3}, {"threads", 0}}),
             "parameter 'threads' must be >= 1, got 0");
}

}  // namespace
}  // namespace tally::test
