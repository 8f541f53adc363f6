// The segmentation plugin (plugins/segmentation: MeanIoU), loaded as the real
// libtally_segmentation.so through the Registry: values against mmeval 0.2.1, independence from
// the number of ranks and the batch size (bit for bit), dense and ragged inputs of every integer
// dtype, the example's PNG label maps through the png_masks reader, and every bad input.
//
// Expected values come from tests/reference/expected_segmentation.json, written by
// tests/reference/segmentation.py with mmeval 0.2.1's mmeval.metrics.MeanIoU (the versions and,
// for each case, the exact call are recorded in the file; null there is NaN), unless a test says
// otherwise.
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/error.hpp"
#include "tally/reader.hpp"

namespace tally::test {
namespace {

const Json& expected_file() {
  static const Json j = load_json(source_path("tests/reference/expected_segmentation.json"));
  return j;
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& c : expected_file().at("cases"))
    names.push_back(c.at("name").get<std::string>());
  return names;
}

const Json& find_case(const std::string& name) {
  for (const auto& c : expected_file().at("cases"))
    if (c.at("name") == name) return c;
  throw std::runtime_error("no case " + name);
}

Value::Map to_map(const Json& j) { return to_value(j).as_map(); }

void print_rel_diffs() {
  for (const auto& [metric, d] : max_rel_diffs())
    std::printf("[ reference ] %s: largest relative difference to mmeval 0.2.1 %.3g\n",
                metric.c_str(), d);
  max_rel_diffs().clear();
}

/// A dense [N, H, W] tensor as a ragged field: one [H, W] tensor per sample.
Batch::Ragged to_ragged(const Tensor& dense) {
  Batch::Ragged out;
  for (std::int64_t i = 0; i < dense.size(0); ++i) {
    Tensor s = dense.slice(i, i + 1).clone();
    out.push_back(Tensor::view(s.data(), s.dtype(), {dense.size(1), dense.size(2)}, Device::cpu(),
                               std::make_shared<Tensor>(s)));
  }
  return out;
}

/// Cuts a flat map file into [H, W] samples by a shapes file ([N, 2] int64).
Batch::Ragged cut(const Tensor& flat, const Tensor& shapes) {
  Batch::Ragged out;
  const auto* hw = shapes.data_as<std::int64_t>();
  const auto* bytes = static_cast<const char*>(flat.data());
  std::size_t offset = 0;
  for (std::int64_t i = 0; i < shapes.size(0); ++i) {
    Tensor t = Tensor::zeros(flat.dtype(), {hw[2 * i], hw[2 * i + 1]});
    std::memcpy(t.mutable_data(), bytes + offset, t.nbytes());
    offset += t.nbytes();
    out.push_back(t);
  }
  EXPECT_EQ(offset, flat.nbytes());
  return out;
}

Batch load_inputs(const Json& inputs) {
  Batch b;
  for (const auto& [field, spec] : inputs.items()) {
    if (spec.is_string()) {
      b.set(field, load_npy(source_path(spec.get<std::string>())));
    } else if (spec.contains("inline")) {
      std::vector<std::int64_t> values, shape;
      const Json& maps = spec.at("inline");
      shape = {static_cast<std::int64_t>(maps.size()), static_cast<std::int64_t>(maps[0].size()),
               static_cast<std::int64_t>(maps[0][0].size())};
      for (const auto& m : maps)
        for (const auto& row : m)
          for (const auto& v : row) values.push_back(v.get<std::int64_t>());
      b.set(field, Tensor::from_vector(values, shape));
    } else {
      b.set_ragged(field, cut(load_npy(source_path(spec.at("flat").get<std::string>())),
                              load_npy(source_path(spec.at("shapes").get<std::string>()))));
    }
  }
  return b;
}

/// Bit-for-bit equality of two results (NaN equals NaN of the same bits, unlike Value's ==).
bool same_bits(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  if (a.is_map()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (a.as_map()[i].first != b.as_map()[i].first ||
          !same_bits(a.as_map()[i].second, b.as_map()[i].second))
        return false;
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!same_bits(a.as_array()[i], b.as_array()[i])) return false;
    return true;
  }
  if (a.kind() == Value::Kind::Float)
    return std::bit_cast<std::uint64_t>(a.as_double()) ==
           std::bit_cast<std::uint64_t>(b.as_double());
  return a == b;
}

/// expect_matches, where a null expected value (mmeval's NaN) requires a NaN.
void expect_matches_nan(const Value& actual, const Json& expected, const std::string& where) {
  if (expected.is_null()) {
    EXPECT_TRUE(actual.kind() == Value::Kind::Float && std::isnan(actual.as_double()))
        << where << ": expected NaN, got " << actual.to_json();
  } else if (expected.is_array()) {
    ASSERT_TRUE(actual.is_array()) << where;
    ASSERT_EQ(actual.size(), expected.size()) << where;
    for (std::size_t i = 0; i < expected.size(); ++i)
      expect_matches_nan(actual.as_array()[i], expected[i], where + "[" + std::to_string(i) + "]");
  } else if (expected.is_object()) {
    ASSERT_TRUE(actual.is_map()) << where << ": got " << actual.to_json();
    std::vector<std::string> want, got;
    for (const auto& [k, v] : expected.items()) want.push_back(k);
    for (const auto& [k, v] : actual.as_map()) got.push_back(k);
    ASSERT_EQ(got, want) << where << ": result keys (in order)";
    for (const auto& [k, v] : expected.items())
      expect_matches_nan(actual.at(k), v, where + "." + k);
  } else {
    expect_matches(actual, expected, where, "MeanIoU");
  }
}

/// Runs MeanIoU over `data` as 1, 2, 3, 4 and 7 ranks, in batches of several sizes, and with an
/// empty rank; expects every result to equal the single-rank one bit for bit, and returns it.
Value run_all_rank_counts(const Value::Map& params, const Batch& data,
                          const std::string& label = {}) {
  const auto make = [&] { return make_metric("MeanIoU", params, label); };
  const Value one = run_ranks(make, data, contiguous_shards(data.size(), 1));
  for (int ranks : {1, 2, 3, 4, 7}) {
    for (std::int64_t batch : {std::int64_t{1} << 30, std::int64_t{3}, std::int64_t{1}}) {
      const Value got =
          run_ranks(make, data, contiguous_shards(data.size(), ranks), {batch, false});
      EXPECT_TRUE(same_bits(got, one)) << ranks << " ranks, batches of " << batch << ": "
                                       << got.to_json() << " vs " << one.to_json();
    }
    if (ranks == 1) continue;
    for (bool add_empty : {false, true}) {
      const Value got =
          run_ranks(make, data, contiguous_shards(data.size(), ranks, ranks / 2), {2, add_empty});
      EXPECT_TRUE(same_bits(got, one))
          << ranks << " ranks with rank " << ranks / 2 << " empty (add_empty=" << add_empty << ")";
    }
  }
  return one;
}

Value run_single(const Value::Map& params, const Batch& data) {
  return run_ranks([&] { return make_metric("MeanIoU", params); }, data,
                   contiguous_shards(data.size(), 1));
}

// ---- values against mmeval, 1..7 ranks ------------------------------------------------------

class ReferenceCase : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map in expected_segmentation.json (mmeval 0.2.1 MeanIoU; the
// call is the case's "call").
TEST_P(ReferenceCase, MatchesMmevalOnAnyNumberOfRanks) {
  const Json& c = find_case(GetParam());
  const Batch data = load_inputs(c.at("inputs"));
  const Value got = run_all_rank_counts(to_map(c.at("params")), data);
  expect_matches_nan(got, c.at("expected"), GetParam());
  print_rel_diffs();
}

INSTANTIATE_TEST_SUITE_P(Segmentation, ReferenceCase, ::testing::ValuesIn(case_names()),
                         [](const auto& param_info) { return param_info.param; });

// The same maps dense, ragged, or one of each give the same bits; expected as case a_classwise.
TEST(MeanIoU, DenseAndRaggedFieldsAgree) {
  const Json& c = find_case("a_classwise");
  const Batch dense = load_inputs(c.at("inputs"));
  const Value want = run_single(to_map(c.at("params")), dense);
  for (int mode : {0, 1, 2}) {
    Batch b;
    const Tensor& p = dense.tensor("pred_sem_seg");
    const Tensor& g = dense.tensor("gt_sem_seg");
    if (mode == 0 || mode == 2)
      b.set_ragged("pred_sem_seg", to_ragged(p));
    else
      b.set("pred_sem_seg", p);
    if (mode == 0 || mode == 1)
      b.set_ragged("gt_sem_seg", to_ragged(g));
    else
      b.set("gt_sem_seg", g);
    const Value got = run_all_rank_counts(to_map(c.at("params")), b);
    EXPECT_TRUE(same_bits(got, want)) << "mode " << mode << ": " << got.to_json();
    expect_matches_nan(got, c.at("expected"), "a_classwise ragged mode " + std::to_string(mode));
  }
  print_rel_diffs();
}

// Expected: section "example" of expected_segmentation.json (mmeval 0.2.1 on the PNG label maps
// of configs/examples/data/segmentation, read with PIL), here read with the png_masks reader on
// 1 to 4 ranks.
TEST(MeanIoU, ExamplePngMasksMatchMmeval) {
  const Json& ex = expected_file().at("example");
  const Component& c = registry().get(ComponentKind::Reader, "png_masks");
  const auto read = [&](int rank, int world) {
    const Value::Map given{
        {"fields", Value(Value::Map{{"pred_sem_seg", source_path(ex.at("pred_dir")).string()},
                                    {"gt_sem_seg", source_path(ex.at("gt_dir")).string()}})},
        {"batch_size", 3}};
    auto reader =
        Registry::make_reader(c, make_params(*c.info, given, "data"), ShardInfo{rank, world});
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
    const Value got = run_all_rank_counts(to_map(m.at("params")), all, label);
    expect_matches_nan(got, ex.at("results").at(label), "example." + label);
    // The real readers of 2..4 ranks, each rank's metric fed its own batches.
    for (int world : {2, 3, 4}) {
      std::vector<msgpack::sbuffer> buffers(static_cast<std::size_t>(world));
      for (int r = 0; r < world; ++r) {
        auto metric = make_metric("MeanIoU", to_map(m.at("params")), label);
        for (const auto& b : read(r, world)) metric->add(b);
        Packer packer(buffers[static_cast<std::size_t>(r)]);
        metric->pack(packer);
      }
      std::vector<msgpack::object_handle> handles;
      std::vector<msgpack::object> objects;
      for (const auto& buf : buffers) {
        handles.push_back(msgpack::unpack(buf.data(), buf.size()));
        objects.push_back(handles.back().get());
      }
      const Value sharded =
          make_metric("MeanIoU", to_map(m.at("params")), label)->compute_packed(objects);
      EXPECT_TRUE(same_bits(sharded, got)) << label << " on " << world << " reader ranks";
    }
  }
  print_rel_diffs();
}

// Expected, by hand: 600 x 700 pixels all (gt 1, pred 2), so 420000 pixels land in one cell,
// more than uint16 could count; aAcc 0 and class 2's precision 0.
TEST(MeanIoU, CountsManyPixelsOfOneCell) {
  Batch b;
  b.set("pred_sem_seg",
        Tensor::from_vector(std::vector<std::uint8_t>(600 * 700, 2), {1, 600, 700}));
  b.set("gt_sem_seg", Tensor::from_vector(std::vector<std::uint8_t>(600 * 700, 1), {1, 600, 700}));
  const Value r = run_single({{"num_classes", 3}, {"classwise_results", true}}, b);
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
      auto metric = make_metric("MeanIoU", {{"num_classes", Value(static_cast<long>(k))}});
      metric->add(b);  // warm-up
      const auto t0 = std::chrono::steady_clock::now();
      const int reps = 5;
      for (int r = 0; r < reps; ++r) metric->add(b);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("[ throughput ] K=%lld %s maps: %.0f Mpixel/s\n", static_cast<long long>(k),
                  wide ? "int64" : "uint8", static_cast<double>(reps * n * h * w) / s / 1e6);
    }
  }
}

// ---- bad inputs and parameters ----------------------------------------------------------------

template <class E = InputError>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no exception";
  return {};
}

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
  const Value ok = run_single({{"num_classes", 2}}, maps<std::int32_t, std::uint8_t>(
                                                        {-5, 1000, 1}, {255, 255, 1}, {1, 1, 3}));
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
  const auto config_error = [](const Value::Map& p) {
    return error_of<ConfigError>([&] { make_metric("MeanIoU", p); });
  };
  EXPECT_NE(config_error({}).find("num_classes"), std::string::npos);
  EXPECT_NE(config_error({{"num_classes", 0}}).find("parameter 'num_classes' must be >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(config_error({{"num_classes", 5000}}).find("must be at most 4096"), std::string::npos);
  EXPECT_NE(config_error({{"num_classes", 3}, {"reduce_zero_label", true}, {"ignore_index", 0}})
                .find("parameter 'reduce_zero_label' maps ground truth 0 to 255"),
            std::string::npos);
  EXPECT_NE(config_error({{"num_classes", 3}, {"beta", "x"}}).find("beta"), std::string::npos);
}

}  // namespace
}  // namespace tally::test
