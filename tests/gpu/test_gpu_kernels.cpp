// The classification kernels through their launchers (plugins/classification/cuda/kernels.hpp),
// against plain CPU loops, over launch shapes the metrics never pick: one block (every item
// through one shared sub-histogram), odd block counts, small and large blocks. Checks the flags
// (first bad index, kNone when none) and the 16-byte path for uint8 label maps at every
// alignment. Skips without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels.hpp"

using namespace tally_cuda;

namespace {

std::string no_device_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  if (n < 1) return "cudaGetDeviceCount returned 0";
  return {};
}

class GpuKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = no_device_reason();
    if (!why.empty()) GTEST_SKIP() << "no CUDA device: " << why;
  }
};

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

// Device memory for the duration of a test.
class DeviceBytes {
 public:
  explicit DeviceBytes(std::size_t n) {
    if (cudaMalloc(&p_, n == 0 ? 1 : n) != cudaSuccess) p_ = nullptr;
  }
  ~DeviceBytes() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  std::byte* get() const { return static_cast<std::byte*>(p_); }

 private:
  void* p_ = nullptr;
};

struct Result {
  Flags flags;
  std::vector<unsigned long long> counts;
};

// Runs `launch(flags, counts)` on zeroed counters and kNone flags; returns both.
template <class F>
Result run(std::size_t cells, F&& launch) {
  DeviceBytes flags(sizeof(Flags));
  DeviceBytes counts(cells * 8);
  const Flags none{};
  Result r;
  r.counts.resize(cells);
  EXPECT_EQ(cudaMemcpy(flags.get(), &none, sizeof none, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemset(counts.get(), 0, cells * 8), cudaSuccess);
  EXPECT_EQ(launch(reinterpret_cast<Flags*>(flags.get()),
                   reinterpret_cast<unsigned long long*>(counts.get())),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(&r.flags, flags.get(), sizeof r.flags, cudaMemcpyDeviceToHost), cudaSuccess);
  if (cells != 0) {
    EXPECT_EQ(cudaMemcpy(r.counts.data(), counts.get(), cells * 8, cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
  return r;
}

std::vector<std::uint8_t> label_map(std::size_t n, int k, std::mt19937& gen) {
  std::vector<std::uint8_t> v(n);
  std::uniform_int_distribution<int> cls(0, k - 1), len(1, 40);
  for (std::size_t i = 0; i < n;) {
    const auto c = static_cast<std::uint8_t>(cls(gen));
    for (int j = len(gen); j > 0 && i < n; --j) v[i++] = c;
  }
  return v;
}

const Launch kShapes[] = {{0, 0}, {1, 0}, {1, 32}, {7, 64}, {1000, 256}, {3, 1024}};

}  // namespace

TEST_F(GpuKernels, ConfusionMatrixOfLabelMapsAtEveryShapeAndAlignment) {
  std::mt19937 gen(1);
  for (const int k : {1, 19, 150, 250}) {
    const std::size_t n = 100003;
    const auto pred = label_map(n, k, gen);
    const auto gt = label_map(n, k, gen);
    std::vector<unsigned long long> want(static_cast<std::size_t>(k * k), 0);
    for (std::size_t i = 0; i < n; ++i) ++want[gt[i] * static_cast<std::size_t>(k) + pred[i]];
    for (const std::size_t offset : {0, 1, 5, 16}) {
      DeviceBytes dp(n + offset), dg(n + offset);
      CUDA_OK(cudaMemcpy(dp.get() + offset, pred.data(), n, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(dg.get() + offset, gt.data(), n, cudaMemcpyHostToDevice));
      const Labels lp{dp.get() + offset, Scalar::U8, static_cast<std::int64_t>(n),
                      static_cast<unsigned long long>(k)};
      const Labels lg{dg.get() + offset, Scalar::U8, static_cast<std::int64_t>(n),
                      static_cast<unsigned long long>(k)};
      for (const Launch& shape : kShapes) {
        const Result r = run(want.size(), [&](Flags* f, unsigned long long* c) {
          return confusion_matrix_counts(lp, lg, k, f, c, nullptr, shape);
        });
        EXPECT_EQ(r.counts, want) << "k " << k << ", offset " << offset << ", blocks "
                                  << shape.blocks << ", threads " << shape.threads;
        EXPECT_EQ(r.flags.bad_a, kNone);
        EXPECT_EQ(r.flags.bad_b, kNone);
      }
    }
  }
}

TEST_F(GpuKernels, LabelPairFlagsHoldTheFirstBadIndexOfEachTensor) {
  std::mt19937 gen(2);
  const std::size_t n = 5000;
  auto pred = label_map(n, 10, gen);
  auto gt = label_map(n, 10, gen);
  pred[4321] = 10;
  pred[777] = 200;
  gt[4999] = 11;
  DeviceBytes dp(n), dg(n);
  CUDA_OK(cudaMemcpy(dp.get(), pred.data(), n, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dg.get(), gt.data(), n, cudaMemcpyHostToDevice));
  const Labels lp{dp.get(), Scalar::U8, static_cast<std::int64_t>(n), 10};
  const Labels lg{dg.get(), Scalar::U8, static_cast<std::int64_t>(n), 10};
  for (const Launch& shape : kShapes) {
    const Result r = run(100, [&](Flags* f, unsigned long long* c) {
      return label_pair_counts(lp, lg, PairMode::Confusion, 10, f, c, nullptr, shape);
    });
    EXPECT_EQ(r.flags.bad_a, 777u);
    EXPECT_EQ(r.flags.bad_b, 4999u);
    EXPECT_EQ(r.flags.nan_row, kNone);
    unsigned long long total = 0;
    for (auto v : r.counts) total += v;
    EXPECT_EQ(total, n - 3) << "the pairs with a bad id are not counted";
  }
}

TEST_F(GpuKernels, EqualAndSingleLabelModes) {
  std::mt19937 gen(3);
  const std::size_t n = 65537;
  std::vector<std::int32_t> pred(n), gt(n);
  std::uniform_int_distribution<int> d(0, 6);
  for (std::size_t i = 0; i < n; ++i) {
    pred[i] = d(gen);
    gt[i] = i % 3 == 0 ? pred[i] : d(gen);
  }
  unsigned long long equal = 0;
  std::vector<unsigned long long> single(21, 0);
  for (std::size_t i = 0; i < n; ++i) {
    equal += pred[i] == gt[i];
    ++single[static_cast<std::size_t>(gt[i])];
    if (pred[i] == gt[i]) ++single[7 + static_cast<std::size_t>(pred[i])];
    ++single[14 + static_cast<std::size_t>(pred[i])];
  }
  DeviceBytes dp(n * 4), dg(n * 4);
  CUDA_OK(cudaMemcpy(dp.get(), pred.data(), n * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dg.get(), gt.data(), n * 4, cudaMemcpyHostToDevice));
  const Labels lp{dp.get(), Scalar::I32, static_cast<std::int64_t>(n), 7};
  const Labels lg{dg.get(), Scalar::I32, static_cast<std::int64_t>(n), 7};
  for (const Launch& shape : kShapes) {
    EXPECT_EQ(run(1,
                  [&](Flags* f, unsigned long long* c) {
                    return label_pair_counts(lp, lg, PairMode::Equal, 1, f, c, nullptr, shape);
                  })
                  .counts,
              std::vector<unsigned long long>{equal});
    EXPECT_EQ(run(21,
                  [&](Flags* f, unsigned long long* c) {
                    return label_pair_counts(lp, lg, PairMode::SingleLabel, 7, f, c, nullptr,
                                             shape);
                  })
                  .counts,
              single);
  }
}

TEST_F(GpuKernels, AccuracyRanksAndArgmaxAtEveryShape) {
  std::mt19937 gen(4);
  for (const std::int64_t cols : {1, 5, 32, 33, 1000}) {
    const std::int64_t rows = 3001;
    std::vector<float> s(static_cast<std::size_t>(rows * cols));
    std::vector<std::int64_t> y(static_cast<std::size_t>(rows));
    std::uniform_int_distribution<int> v(0, 3);
    std::uniform_int_distribution<std::int64_t> cls(0, cols - 1);
    for (auto& x : s) x = static_cast<float>(v(gen)) * 0.5f;  // many ties
    for (auto& x : y) x = cls(gen);
    const std::int64_t maxk = std::min<std::int64_t>(cols, 3);
    const float thr[2] = {0.f, 0.75f};
    const unsigned char active[2] = {0, 1};
    std::vector<unsigned long long> hist(static_cast<std::size_t>(2 * (maxk + 1)), 0);
    std::vector<unsigned long long> cm(static_cast<std::size_t>(cols * cols), 0);
    for (std::int64_t i = 0; i < rows; ++i) {
      const float* row = &s[static_cast<std::size_t>(i * cols)];
      const std::int64_t yi = y[static_cast<std::size_t>(i)];
      std::int64_t rank = 0, arg = 0;
      for (std::int64_t c = 0; c < cols; ++c) {
        rank += c < yi ? row[c] > row[yi] : (c > yi && row[c] >= row[yi]);
        if (row[c] > row[arg]) arg = c;
      }
      rank = std::min(rank, maxk);
      for (int j = 0; j < 2; ++j)
        if (!active[j] || row[yi] > thr[j]) ++hist[static_cast<std::size_t>(j * (maxk + 1) + rank)];
      ++cm[static_cast<std::size_t>(yi * cols + arg)];
    }
    DeviceBytes ds(s.size() * 4), dy(y.size() * 8), dt(16);
    CUDA_OK(cudaMemcpy(ds.get(), s.data(), s.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dy.get(), y.data(), y.size() * 8, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dt.get(), thr, 8, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dt.get() + 8, active, 2, cudaMemcpyHostToDevice));
    const Scores sc{ds.get(), Scalar::F32, rows, cols};
    const Labels lb{dy.get(), Scalar::I64, rows, static_cast<unsigned long long>(cols)};
    const Thresholds th{dt.get(), reinterpret_cast<const unsigned char*>(dt.get() + 8), 2};
    for (const Launch& shape : kShapes) {
      const Result a = run(hist.size(), [&](Flags* f, unsigned long long* c) {
        return accuracy_counts(sc, lb, maxk, th, f, c, nullptr, shape);
      });
      EXPECT_EQ(a.counts, hist) << "cols " << cols << ", blocks " << shape.blocks;
      EXPECT_EQ(a.flags.nan_row, kNone);
      EXPECT_EQ(a.flags.bad_a, kNone);
      const Result m = run(cm.size(), [&](Flags* f, unsigned long long* c) {
        return confusion_matrix_scores(sc, lb, f, c, nullptr, shape);
      });
      EXPECT_EQ(m.counts, cm) << "cols " << cols << ", blocks " << shape.blocks;
    }
  }
}

TEST_F(GpuKernels, StandaloneChecks) {
  const std::int64_t rows = 100, cols = 40;
  std::vector<double> s(static_cast<std::size_t>(rows * cols), 1.0);
  s[static_cast<std::size_t>(77 * cols + 39)] = std::numeric_limits<double>::quiet_NaN();
  s[static_cast<std::size_t>(91 * cols)] = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::int16_t> ids(1000, 3);
  ids[500] = -1;
  ids[999] = 4;
  DeviceBytes ds(s.size() * 8), di(ids.size() * 2);
  CUDA_OK(cudaMemcpy(ds.get(), s.data(), s.size() * 8, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(di.get(), ids.data(), ids.size() * 2, cudaMemcpyHostToDevice));
  const Result r = run(0, [&](Flags* f, unsigned long long*) {
    const cudaError_t e = find_nan_rows(Scores{ds.get(), Scalar::F64, rows, cols}, f, nullptr);
    if (e != cudaSuccess) return e;
    return find_bad_ids(Labels{di.get(), Scalar::I16, 1000, 4}, &f->bad_a, nullptr);
  });
  EXPECT_EQ(r.flags.nan_row, 77u);
  EXPECT_EQ(r.flags.bad_a, 500u);
}
