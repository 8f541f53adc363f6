// The GPU path of the classification metrics against their CPU path: the same batches, once in
// host memory and once in CUDA memory (cudaMalloc + Tensor::view on Device::cuda), must give the
// same packed state byte for byte -- every counter equal -- and the same errors, word for word,
// leaving the state as it was. Random data with many ties, infinities, signed zeros and denormal
// scores; every label dtype; aligned and misaligned label maps; shared-memory and global
// histograms. Skips without a CUDA device.
//
// Built twice: test_gpu_metrics, against the plugin on a real device; and
// test_gpu_metrics_emulated (TALLY_EMULATED_GPU), with the metrics' sources compiled in, the CUDA
// runtime replaced by fake_cudart.cpp (host memory as device memory) and the kernels run on the
// CPU by cuda_emulation.hpp, so that the whole GPU path is exercised on machines without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "config.hpp"
#include "registry.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/tensor.hpp"

using tally::Batch;
using tally::DType;
using tally::Tensor;
using tally::Value;

namespace {

std::string no_device_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  if (n < 1) return "cudaGetDeviceCount returned 0";
  return {};
}

class GpuMetrics : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = no_device_reason();
    if (!why.empty()) GTEST_SKIP() << "no CUDA device: " << why;
  }
};

// ---- tensors in CUDA memory --------------------------------------------------------------------

// A copy of `t` in device memory, `offset` bytes past a 256-byte aligned allocation.
Tensor to_cuda(const Tensor& t, std::size_t offset = 0) {
  void* p = nullptr;
  const std::size_t bytes = t.nbytes() + offset;
  if (cudaMalloc(&p, bytes == 0 ? 1 : bytes) != cudaSuccess)
    throw std::runtime_error("cudaMalloc failed");
  std::shared_ptr<void> keep(p, [](void* q) { cudaFree(q); });
  auto* at = static_cast<std::byte*>(p) + offset;
  if (t.nbytes() != 0 &&
      cudaMemcpy(at, t.data(), t.nbytes(), cudaMemcpyHostToDevice) != cudaSuccess)
    throw std::runtime_error("cudaMemcpy failed");
  return Tensor::view(at, t.dtype(), t.shape(), tally::Device::cuda(0), keep);
}

Batch to_cuda(const Batch& b, std::size_t offset = 0) {
  Batch out;
  for (const auto& [name, field] : b.fields())
    out.set(name, to_cuda(std::get<Tensor>(field), offset));
  return out;
}

// ---- metrics ------------------------------------------------------------------------------------

#ifdef TALLY_EMULATED_GPU
}  // namespace
namespace tally::classification {
ComponentInfo accuracy_info();
ComponentInfo single_label_metric_info();
ComponentInfo confusion_matrix_info();
}  // namespace tally::classification
namespace {

// The metrics compiled into this test with the GPU path on an emulated device (fake_cudart.cpp).
std::shared_ptr<tally::Metric> make_metric(const std::string& type, const Value::Map& params) {
  static const std::vector<tally::ComponentInfo> infos = {
      tally::classification::accuracy_info(), tally::classification::single_label_metric_info(),
      tally::classification::confusion_matrix_info()};
  for (const auto& info : infos)
    if (info.name == type)
      return info.make_metric(tally::make_params(info, params, "metric '" + type + "'"));
  throw std::runtime_error("no metric " + type);
}
#else
const tally::Registry& registry() {
  static const tally::Registry r = tally::Registry::load();
  return r;
}

// The metrics of the classification plugin, loaded as the CLI loads them.
std::shared_ptr<tally::Metric> make_metric(const std::string& type, const Value::Map& params) {
  const auto& c = registry().get(tally::ComponentKind::Metric, type);
  return tally::Registry::make_metric(c,
                                      tally::make_params(*c.info, params, "metric '" + type + "'"));
}
#endif

// The whole state of `m`, as a checkpoint saves it.
std::string packed(const tally::Metric& m) {
  tally::internal::StringSink sink;
  m.save(sink);
  return std::move(sink.bytes);
}

// The results from the states of `ranks` (rank order), synced as the engine syncs them: the
// counts summed, the rest of each state packed, gathered and unpacked.
Value compute_synced(const tally::Metric& into,
                     const std::vector<std::shared_ptr<tally::Metric>>& ranks) {
  std::vector<std::int64_t> sums(into.summed_size(), 0);
  std::vector<tally::internal::StringSink> bufs(ranks.size());
  std::vector<tally::Bytes> objs;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    std::vector<std::int64_t> mine(sums.size());
    ranks[r]->write_sums(mine);
    for (std::size_t i = 0; i < sums.size(); ++i) sums[i] += mine[i];
    if (!into.gathers()) continue;
    ranks[r]->pack_gathered(bufs[r]);
    objs.push_back(std::as_bytes(std::span(bufs[r].bytes)));
  }
  return into.compute_synced(objs, sums);
}

// The exit code and message of what `f` throws; {0, ""} when it does not.
std::pair<int, std::string> outcome(const std::function<void()>& f) {
  try {
    f();
  } catch (const tally::Error& e) {
    return {e.exit_code(), e.what()};
  } catch (const std::exception& e) {
    return {-1, e.what()};
  }
  return {0, {}};
}

// Feeds the same batches to a CPU metric and a GPU metric; every add must end alike (both
// succeed, or both fail with the same message), and after each the packed states are equal.
void expect_same(const std::string& type, const Value::Map& params,
                 const std::vector<Batch>& batches, std::size_t offset = 0) {
  const auto cpu = make_metric(type, params);
  const auto gpu = make_metric(type, params);
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const Batch dev = to_cuda(batches[i], offset);
    const auto a = outcome([&] { cpu->add(batches[i]); });
    auto b = outcome([&] { gpu->add(dev); });
    // The one difference: a CUDA tensor describes itself with its device ("i32[4] on cuda:0").
    for (std::size_t at; (at = b.second.find(" on cuda:0")) != std::string::npos;)
      b.second.erase(at, std::strlen(" on cuda:0"));
    EXPECT_EQ(a, b) << type << " " << Value(params).to_json() << ", batch " << i;
    ASSERT_EQ(packed(*cpu), packed(*gpu))
        << type << " " << Value(params).to_json() << ", after batch " << i;
  }
}

// ---- data ---------------------------------------------------------------------------------------

// Scores drawn from a few values (many exact ties), with infinities, signed zeros and denormals.
template <class T>
Tensor scores(std::int64_t n, std::int64_t c, std::mt19937& gen, bool extremes = true) {
  const T denorm = std::numeric_limits<T>::denorm_min() * 3;
  const T inf = std::numeric_limits<T>::infinity();
  const T pool[] = {T(-1), T(0), T(0.25), T(0.5), T(0.5), T(1), T(2), T(0.7)};
  const T special[] = {-inf, inf, T(-0.0), T(0.0), denorm, -denorm};
  std::vector<T> v(static_cast<std::size_t>(n * c));
  std::uniform_int_distribution<int> pick(0, 7), odd(0, 15), sp(0, 5);
  std::uniform_real_distribution<T> u(T(-3), T(3));
  for (auto& x : v) {
    const int o = odd(gen);
    if (extremes && o == 0)
      x = special[sp(gen)];
    else if (o < 8)
      x = pool[pick(gen)];
    else
      x = u(gen);
  }
  return Tensor::from_vector(v, {n, c});
}

template <class L>
Tensor labels(std::int64_t n, std::int64_t c, std::mt19937& gen) {
  std::uniform_int_distribution<std::int64_t> d(0, c - 1);
  std::vector<L> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<L>(d(gen));
  return Tensor::from_vector(v);
}

Tensor labels_of(DType t, std::int64_t n, std::int64_t c, std::mt19937& gen) {
  switch (t) {
    case DType::U8:
      return labels<std::uint8_t>(n, c, gen);
    case DType::I8:
      return labels<std::int8_t>(n, c, gen);
    case DType::U16:
      return labels<std::uint16_t>(n, c, gen);
    case DType::I16:
      return labels<std::int16_t>(n, c, gen);
    case DType::I32:
      return labels<std::int32_t>(n, c, gen);
    case DType::U32:
      return labels<std::uint32_t>(n, c, gen);
    default:
      return labels<std::int64_t>(n, c, gen);
  }
}

std::int64_t dtype_max_classes(DType t) {
  switch (t) {
    case DType::U8:
      return 256;
    case DType::I8:
      return 128;
    case DType::I16:
      return 32768;
    default:
      return 1 << 20;
  }
}

Tensor score_tensor(DType t, std::int64_t n, std::int64_t c, std::mt19937& gen) {
  return t == DType::F64 ? scores<double>(n, c, gen) : scores<float>(n, c, gen);
}

Batch score_batch(DType st, DType lt, std::int64_t n, std::int64_t c, std::mt19937& gen) {
  Batch b;
  b.set("pred_scores", score_tensor(st, n, c, gen));
  b.set("gt_labels", labels_of(lt, n, c, gen));
  return b;
}

// A label map of `n` pixels: runs of one class (as segmentation maps are), or noise.
Tensor label_map(std::int64_t n, std::int64_t k, std::mt19937& gen, bool runs) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(n));
  std::uniform_int_distribution<std::int64_t> cls(0, k - 1), len(1, 300);
  for (std::size_t i = 0; i < v.size();) {
    const auto c = static_cast<std::uint8_t>(cls(gen));
    const std::size_t l = runs ? static_cast<std::size_t>(len(gen)) : 1;
    for (std::size_t j = 0; j < l && i < v.size(); ++j) v[i++] = c;
  }
  return Tensor::from_vector(v);
}

// Sizes, smaller on the emulated device (every emulated GPU thread is an OS thread).
#ifdef TALLY_EMULATED_GPU
constexpr std::int64_t kScale = 10;
#else
constexpr std::int64_t kScale = 1;
#endif
std::int64_t scaled(std::int64_t n) { return n <= 16 ? n : std::max<std::int64_t>(16, n / kScale); }

const DType kLabelTypes[] = {DType::U8,  DType::I8,  DType::U16, DType::I16,
                             DType::I32, DType::U32, DType::I64};

}  // namespace

// ---- counts: bit for bit ------------------------------------------------------------------------

TEST_F(GpuMetrics, AccuracyOverScores) {
  std::mt19937 gen(1);
  for (const DType st : {DType::F32, DType::F64})
    for (const std::int64_t c : {1, 2, 5, 31, 32, 33, 100, 1000}) {
      std::vector<Value::Map> configs = {
          {{"topk", Value::Array{1}}},
          {{"topk", Value::Array{1}}, {"thrs", Value::Array{Value(), 0.5, -0.1, 2.0}}}};
      if (c >= 5) configs.push_back({{"topk", Value::Array{1, 2, 5}}});
      if (c >= 33)
        configs.push_back({{"topk", Value::Array{3, 33}}, {"thrs", Value::Array{0.0, Value()}}});
      for (const auto& params : configs)
        for (const DType lt : kLabelTypes) {
          if (c > dtype_max_classes(lt)) continue;
          expect_same("Accuracy", params,
                      {score_batch(st, lt, scaled(777), c, gen), score_batch(st, lt, 0, c, gen),
                       score_batch(st, lt, 1, c, gen), score_batch(st, lt, scaled(300), c, gen)});
        }
    }
}

TEST_F(GpuMetrics, AccuracyOverLabels) {
  std::mt19937 gen(2);
  for (const DType pt : kLabelTypes)
    for (const DType yt : {DType::U8, DType::I64, DType::I16}) {
      Batch b;
      b.set("pred_labels", labels_of(pt, scaled(5000), 7, gen));
      b.set("gt_labels", labels_of(yt, scaled(5000), 7, gen));
      expect_same("Accuracy", {}, {b, b.slice(0, 1), b.slice(3, 3)});
    }
}

TEST_F(GpuMetrics, SingleLabelMetricOverScores) {
  std::mt19937 gen(3);
  for (const DType st : {DType::F32, DType::F64})
    for (const std::int64_t c : {1, 3, 32, 33, 257, 1000})
      for (const Value::Map& params :
           {Value::Map{{"average", "none"},
                       {"items", Value::Array{"precision", "recall", "f1-score", "support"}}},
            Value::Map{{"average", "micro"}, {"thrs", Value::Array{Value(), 0.5, 1.0, -0.1}}},
            Value::Map{{"num_classes", static_cast<int>(c)}}})
        for (const DType lt : {DType::U8, DType::I32, DType::I64, DType::U16}) {
          if (c > dtype_max_classes(lt)) continue;
          expect_same("SingleLabelMetric", params,
                      {score_batch(st, lt, scaled(999), c, gen), score_batch(st, lt, 0, c, gen),
                       score_batch(st, lt, 64, c, gen)});
        }
}

TEST_F(GpuMetrics, SingleLabelMetricOverLabels) {
  std::mt19937 gen(4);
  for (const DType t : kLabelTypes) {
    Batch b;
    b.set("pred_labels", labels_of(t, scaled(4096), 11, gen));
    b.set("gt_labels", labels_of(t, scaled(4096), 11, gen));
    expect_same("SingleLabelMetric", {{"num_classes", 11}, {"average", "none"}},
                {b, b.slice(5, 9)});
  }
}

TEST_F(GpuMetrics, ConfusionMatrixOverScores) {
  std::mt19937 gen(5);
  // 5 and 19: shared-memory histograms; 150: over 48 KiB of shared memory (opt-in); 300: global.
  for (const DType st : {DType::F32, DType::F64})
    for (const std::int64_t k : {1, 5, 19, 33, 150, 300})
      for (const DType lt : {DType::U8, DType::I64}) {
        if (k > dtype_max_classes(lt)) continue;
        expect_same("ConfusionMatrix", {{"num_classes", static_cast<int>(k)}},
                    {score_batch(st, lt, scaled(2000), k, gen), score_batch(st, lt, 0, k, gen),
                     score_batch(st, lt, 17, k, gen)});
      }
}

TEST_F(GpuMetrics, ConfusionMatrixOverLabelMaps) {
  std::mt19937 gen(6);
  for (const std::int64_t k : {2, 19, 150, 255})
    for (const bool runs : {true, false})
      for (const std::int64_t n : {std::int64_t{64 * 64}, scaled(1000003), std::int64_t{15}}) {
        Batch b;
        b.set("pred_labels", label_map(n, k, gen, runs));
        b.set("gt_labels", label_map(n, k, gen, runs));
        const Value::Map params{{"num_classes", static_cast<int>(k)}};
        // Aligned (16-byte loads) and misaligned (the element-wise kernel) label maps.
        for (const std::size_t offset : {std::size_t{0}, std::size_t{1}, std::size_t{8}})
          expect_same("ConfusionMatrix", params, {b, b.slice(0, n / 2)}, offset);
      }
  // Mixed dtypes go through the element-wise kernel.
  Batch b;
  b.set("pred_labels", labels_of(DType::I16, scaled(100000), 150, gen));
  b.set("gt_labels", labels_of(DType::U8, scaled(100000), 150, gen));
  expect_same("ConfusionMatrix", {{"num_classes", 150}}, {b});
}

// ---- errors: the CPU path's, word for word; the state unchanged ---------------------------------

namespace {

Batch with_nan(Batch b, std::int64_t row, std::int64_t col) {
  Tensor s = b.tensor("pred_scores").clone();
  s.mutable_data_as<float>()[row * s.size(1) + col] = std::numeric_limits<float>::quiet_NaN();
  b.set("pred_scores", s);
  return b;
}

template <class L>
Batch with_label(Batch b, const char* field, std::int64_t i, L value) {
  Tensor t = b.tensor(field).clone();
  t.mutable_data_as<L>()[i] = value;
  b.set(field, t);
  return b;
}

}  // namespace

TEST_F(GpuMetrics, ValueErrorsAreTheCpuPathsAndLeaveTheStateAlone) {
  std::mt19937 gen(7);
  const Batch good = score_batch(DType::F32, DType::I64, 50, 10, gen);
  std::vector<std::pair<std::string, Batch>> bad = {
      {"NaN", with_nan(good, 17, 3)},
      {"two NaNs", with_nan(with_nan(good, 30, 0), 17, 9)},
      {"label too large", with_label<std::int64_t>(good, "gt_labels", 12, 10)},
      {"negative label", with_label<std::int64_t>(good, "gt_labels", 40, -1)},
      {"NaN after a bad label",
       with_nan(with_label<std::int64_t>(good, "gt_labels", 2, 99), 20, 1)},
  };
  for (const auto& [type, params] :
       std::vector<std::pair<std::string, Value::Map>>{{"Accuracy", {{"topk", Value::Array{1, 3}}}},
                                                       {"SingleLabelMetric", {}},
                                                       {"ConfusionMatrix", {{"num_classes", 10}}}})
    for (const auto& [what, batch] : bad) {
      SCOPED_TRACE(type + ": " + what);
      // A good batch first, so that sample numbers count it.
      expect_same(type, params, {good, batch, good});
    }
}

TEST_F(GpuMetrics, LabelPairErrorsNameTheFirstBadField) {
  std::mt19937 gen(8);
  Batch good;
  good.set("pred_labels", labels_of(DType::I8, 100, 5, gen));
  good.set("gt_labels", labels_of(DType::I8, 100, 5, gen));
  const std::vector<Batch> bad = {
      with_label<std::int8_t>(good, "pred_labels", 70, 5),
      with_label<std::int8_t>(good, "gt_labels", 3, -2),
      with_label<std::int8_t>(with_label<std::int8_t>(good, "gt_labels", 3, 9), "pred_labels", 90,
                              7),
  };
  for (const auto& b : bad) {
    expect_same("ConfusionMatrix", {{"num_classes", 5}}, {good, b});
    expect_same("SingleLabelMetric", {{"num_classes", 5}}, {good, b});
    expect_same("Accuracy", {}, {good, with_label<std::int8_t>(b, "gt_labels", 1, -5)});
  }
}

TEST_F(GpuMetrics, MetadataErrorsComeInTheCpuPathsOrder) {
  std::mt19937 gen(9);
  const Batch good = score_batch(DType::F32, DType::I32, 40, 6, gen);
  // A NaN and float labels: the CPU path checks the scores' values before the labels' dtype.
  Batch nan_and_float_labels = with_nan(good, 5, 5);
  nan_and_float_labels.set("gt_labels", Tensor::from_vector<float>(std::vector<float>(40, 1.f)));
  // A bad label; with top-7 of 6 classes, or num_classes 7, a later metadata error too: the ids
  // come first.
  const Batch bad_id = with_label<std::int32_t>(good, "gt_labels", 4, 6);
  // (A batch cannot hold fields of different row counts: Batch::set refuses them, so the metrics'
  // own row check is not reachable from here.)
  Batch labels_2d = good;
  labels_2d.set("gt_labels", Tensor::zeros(DType::I32, {40, 1}));
  Batch no_labels;
  no_labels.set("pred_scores", good.tensor("pred_scores"));
  for (const auto& [type, params] : std::vector<std::pair<std::string, Value::Map>>{
           {"Accuracy", {{"topk", Value::Array{1, 7}}}},  // top-7 of 6 classes: its own error
           {"Accuracy", {}},
           {"SingleLabelMetric", {{"num_classes", 7}}},  // the class count mismatch comes last
           {"ConfusionMatrix", {{"num_classes", 6}}},
           {"ConfusionMatrix", {{"num_classes", 5}}}})
    for (const Batch& b : {nan_and_float_labels, bad_id, labels_2d, no_labels, good}) {
      SCOPED_TRACE(type + " " + Value(params).to_json());
      expect_same(type, params, {b});
    }
}

TEST_F(GpuMetrics, SingleLabelMetricClassCountsMustAgreeAcrossBatches) {
  std::mt19937 gen(10);
  expect_same("SingleLabelMetric", {},
              {score_batch(DType::F32, DType::I64, 10, 4, gen),
               score_batch(DType::F32, DType::I64, 10, 5, gen)});
}

TEST_F(GpuMetrics, InputsOnDifferentDevicesOrInHostMemoryAreRefused) {
  std::mt19937 gen(11);
  const Batch cpu = score_batch(DType::F32, DType::I64, 8, 3, gen);
  Batch mixed;
  mixed.set("pred_scores", to_cuda(cpu.tensor("pred_scores")));
  mixed.set("gt_labels", cpu.tensor("gt_labels"));
  auto [code, msg] = outcome([&] { make_metric("Accuracy", {})->add(mixed); });
  EXPECT_EQ(code, 2);
  EXPECT_NE(
      msg.find("metric 'Accuracy': field 'gt_labels' is on the CPU but 'pred_scores' is on cuda:0"),
      std::string::npos)
      << msg;

  static const float host[6] = {};
  Batch fake;
  fake.set("pred_scores", Tensor::view(host, DType::F32, {2, 3}, tally::Device::cuda(0)));
  fake.set("gt_labels", to_cuda(Tensor::from_vector<std::int64_t>({0, 1})));
  std::tie(code, msg) = outcome([&] {
    make_metric("ConfusionMatrix", {{"num_classes", 3}})->add(fake);
  });
  EXPECT_EQ(code, 2);
  EXPECT_NE(msg.find("field 'pred_scores' is a CUDA tensor (f32[2, 3] on cuda:0) whose memory is "
                     "not CUDA memory"),
            std::string::npos)
      << msg;
}

TEST_F(GpuMetrics, ShardsSyncedThroughPackedStatesGiveTheCpuResults) {
  // Two "ranks" on the GPU, one on the CPU: the states mix freely, as the engine's sync does.
  std::mt19937 gen(12);
  const Batch all = score_batch(DType::F32, DType::I64, 900, 12, gen);
  for (const auto& [type, params] : std::vector<std::pair<std::string, Value::Map>>{
           {"Accuracy", {{"topk", Value::Array{1, 5}}}},
           {"SingleLabelMetric", {{"average", "macro"}}},
           {"ConfusionMatrix", {{"num_classes", 12}}}}) {
    std::vector<std::shared_ptr<tally::Metric>> ranks = {
        make_metric(type, params), make_metric(type, params), make_metric(type, params)};
    ranks[0]->add(to_cuda(all.slice(0, 300)));
    ranks[1]->add(all.slice(300, 600));
    ranks[2]->add(to_cuda(all.slice(600, 900)));
    const auto whole = make_metric(type, params);
    whole->add(all);
    EXPECT_EQ(compute_synced(*make_metric(type, params), ranks).to_json(),
              compute_synced(*make_metric(type, params), {whole}).to_json())
        << type;
  }
}
