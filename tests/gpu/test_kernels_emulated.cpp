// The classification kernels' own device code (plugins/classification/cuda/kernels_device.cuh)
// run on the CPU through cuda_emulation.hpp, against plain loops that follow the CPU metrics'
// definitions: rank with ties, first argmax, thresholds, run merging of label pairs, the
// 16-byte uint8 path, shared and global histograms, the first-bad-index flags, segments.
// Needs no GPU: on a machine without one this is what executes the kernels' logic;
// test_gpu_kernels and test_gpu_metrics run the same on a device.
#include "cuda_emulation.hpp"
// (after the emulation)
#include "kernels_device.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using namespace tally_cuda;
using namespace tally_cuda::kernels;
using cuda_emulation::launch;

namespace {

using Counts = std::vector<unsigned long long>;

struct Shape {
  unsigned blocks;
  unsigned threads;
  bool shared;
};
const Shape kShapes[] = {{1, 32, true}, {3, 64, true}, {2, 96, false}, {5, 32, false}};

// Scores with many exact ties, and a NaN where asked.
template <class T>
std::vector<T> tie_scores(std::int64_t rows, std::int64_t cols, std::mt19937& gen) {
  std::vector<T> s(static_cast<std::size_t>(rows * cols));
  std::uniform_int_distribution<int> v(-2, 3);
  const T inf = std::numeric_limits<T>::infinity();
  for (auto& x : s) {
    const int r = v(gen);
    x = r == -2 ? -inf : r == 3 ? T(-0.0) : static_cast<T>(r) * T(0.5);
  }
  return s;
}

std::vector<std::int64_t> ids(std::size_t n, std::int64_t k, std::mt19937& gen) {
  std::uniform_int_distribution<std::int64_t> d(0, k - 1);
  std::vector<std::int64_t> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

// The CPU metrics' definitions.
template <class T>
std::int64_t rank_of(const T* row, std::int64_t cols, std::int64_t y) {
  std::int64_t r = 0;
  for (std::int64_t c = 0; c < cols; ++c)
    r += c < y ? row[c] > row[y] : (c > y && row[c] >= row[y]);
  return r;
}
template <class T>
std::int64_t argmax_of(const T* row, std::int64_t cols) {
  T best = row[0];
  for (std::int64_t c = 1; c < cols; ++c) best = row[c] > best ? row[c] : best;
  std::int64_t i = 0;
  while (row[i] != best) ++i;
  return i;
}

}  // namespace

TEST(EmulatedKernels, AccuracyRanksTiesAndThresholds) {
  std::mt19937 gen(1);
  for (const std::int64_t cols : {1, 5, 32, 33, 70}) {
    const std::int64_t rows = 257, maxk = std::min<std::int64_t>(cols, 4);
    const auto s = tie_scores<float>(rows, cols, gen);
    const auto y = ids(static_cast<std::size_t>(rows), cols, gen);
    const float thr[3] = {0.f, 0.25f, -1.f};
    const unsigned char active[3] = {0, 1, 1};
    const long long width = maxk + 1;
    Counts want(static_cast<std::size_t>(3 * width), 0);
    for (std::int64_t i = 0; i < rows; ++i) {
      const float* row = &s[static_cast<std::size_t>(i * cols)];
      const std::int64_t yi = y[static_cast<std::size_t>(i)];
      const std::int64_t r = std::min(rank_of(row, cols, yi), maxk);
      for (int j = 0; j < 3; ++j)
        if (!active[j] || row[yi] > thr[j]) ++want[static_cast<std::size_t>(j * width + r)];
    }
    for (const Shape& sh : kShapes) {
      Counts got(want.size(), 0);
      Flags flags;
      const auto run = [&](auto g) {
        constexpr int G = decltype(g)::value;
        launch(sh.blocks, sh.threads, got.size() * 4, [&] {
          accuracy_kernel<float, G>(s.data(), y.data(), Scalar::I64,
                                    static_cast<unsigned long long>(cols), cols, 0, rows, maxk, thr,
                                    active, 3, &flags, got.data(), sh.shared);
        });
      };
      if (cols > 32)
        run(std::integral_constant<int, 32>{});
      else
        run(std::integral_constant<int, 1>{});
      EXPECT_EQ(got, want) << "cols " << cols << ", " << sh.blocks << "x" << sh.threads;
      EXPECT_EQ(flags.nan_row, kNone);
      EXPECT_EQ(flags.bad_a, kNone);
      // Warp teams also on narrow rows: the same counts.
      if (cols <= 32) {
        Counts g32(want.size(), 0);
        Flags f32;
        launch(sh.blocks, sh.threads, g32.size() * 4, [&] {
          accuracy_kernel<float, 32>(s.data(), y.data(), Scalar::I64,
                                     static_cast<unsigned long long>(cols), cols, 0, rows, maxk,
                                     thr, active, 3, &f32, g32.data(), sh.shared);
        });
        EXPECT_EQ(g32, want) << "cols " << cols << " with warp teams";
      }
    }
  }
}

TEST(EmulatedKernels, AccuracyFlagsTheFirstNanRowAndBadLabel) {
  std::mt19937 gen(2);
  const std::int64_t rows = 200, cols = 40;
  auto s = tie_scores<double>(rows, cols, gen);
  auto y = ids(static_cast<std::size_t>(rows), cols, gen);
  s[static_cast<std::size_t>(150 * cols + 39)] = std::nan("");
  s[static_cast<std::size_t>(60 * cols + 2)] = std::nan("");
  y[170] = 40;
  y[99] = -3;
  const double thr = 0;
  const unsigned char active = 0;
  Counts hist(2, 0);
  Flags flags;
  launch(3, 64, 8, [&] {
    accuracy_kernel<double, 32>(s.data(), y.data(), Scalar::I64, 40, cols, 0, rows, 1, &thr,
                                &active, 1, &flags, hist.data(), true);
  });
  EXPECT_EQ(flags.nan_row, 60u);
  EXPECT_EQ(flags.bad_a, 99u);
  EXPECT_EQ(hist[0] + hist[1], static_cast<unsigned long long>(rows - 4))
      << "flagged rows are not counted";
}

TEST(EmulatedKernels, ArgmaxForSingleLabelAndConfusion) {
  std::mt19937 gen(3);
  for (const std::int64_t cols : {1, 3, 32, 45}) {
    const std::int64_t rows = 300;
    const auto s = tie_scores<float>(rows, cols, gen);
    std::vector<std::int16_t> y(static_cast<std::size_t>(rows));
    for (auto& v : y) v = static_cast<std::int16_t>(ids(1, cols, gen)[0]);
    const float thr[2] = {0.f, 0.5f};
    const unsigned char active[2] = {0, 1};
    const auto c = static_cast<std::size_t>(cols);
    Counts slm(c * 5, 0), cm(c * c, 0);
    for (std::int64_t i = 0; i < rows; ++i) {
      const float* row = &s[static_cast<std::size_t>(i * cols)];
      const auto p = static_cast<std::size_t>(argmax_of(row, cols));
      const auto yi = static_cast<std::size_t>(y[static_cast<std::size_t>(i)]);
      ++slm[yi];
      for (std::size_t j = 0; j < 2; ++j) {
        if (active[j] && !(row[p] > thr[j])) continue;
        if (p == yi) ++slm[c + j * c + p];
        ++slm[c + 2 * c + j * c + p];
      }
      ++cm[yi * c + p];
    }
    for (const Shape& sh : kShapes) {
      Counts got_slm(slm.size(), 0), got_cm(cm.size(), 0);
      Flags f1, f2;
      const auto run = [&](auto g) {
        constexpr int G = decltype(g)::value;
        launch(sh.blocks, sh.threads, got_slm.size() * 4, [&] {
          argmax_kernel<float, G, ArgmaxUse::SingleLabel>(
              s.data(), y.data(), Scalar::I16, static_cast<unsigned long long>(cols), cols, 0, rows,
              thr, active, 2, &f1, got_slm.data(), sh.shared);
        });
        launch(sh.blocks, sh.threads, got_cm.size() * 4, [&] {
          argmax_kernel<float, G, ArgmaxUse::Confusion>(
              s.data(), y.data(), Scalar::I16, static_cast<unsigned long long>(cols), cols, 0, rows,
              nullptr, nullptr, 0, &f2, got_cm.data(), sh.shared);
        });
      };
      run(std::integral_constant<int, 1>{});
      EXPECT_EQ(got_slm, slm) << "cols " << cols << ", thread teams";
      EXPECT_EQ(got_cm, cm) << "cols " << cols << ", thread teams";
      std::fill(got_slm.begin(), got_slm.end(), 0);
      std::fill(got_cm.begin(), got_cm.end(), 0);
      run(std::integral_constant<int, 32>{});
      EXPECT_EQ(got_slm, slm) << "cols " << cols << ", warp teams";
      EXPECT_EQ(got_cm, cm) << "cols " << cols << ", warp teams";
      EXPECT_EQ(f1.nan_row, kNone);
      EXPECT_EQ(f2.bad_a, kNone);
    }
  }
}

TEST(EmulatedKernels, LabelPairsInEveryModeWithBadIds) {
  std::mt19937 gen(4);
  const std::int64_t k = 6;
  const std::size_t n = 3001;
  std::vector<std::int32_t> pred(n);
  std::vector<std::uint16_t> gt(n);
  // Runs (merged by a thread) and noise.
  for (std::size_t i = 0; i < n; ++i) {
    pred[i] = static_cast<std::int32_t>(i < 1500 ? (i / 37) % k : ids(1, k, gen)[0]);
    gt[i] = static_cast<std::uint16_t>(i < 1500 ? (i / 53) % k : ids(1, k, gen)[0]);
  }
  pred[2000] = 6;
  pred[2999] = -1;
  gt[10] = 7;
  Counts eq(1, 0), single(3 * k, 0), conf(k * k, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t p = pred[i], y = gt[i];
    if (p < 0 || p >= k || y >= k) continue;
    eq[0] += p == y;
    ++single[static_cast<std::size_t>(y)];
    if (p == y) ++single[static_cast<std::size_t>(k + p)];
    ++single[static_cast<std::size_t>(2 * k + p)];
    ++conf[static_cast<std::size_t>(y * k + p)];
  }
  for (const Shape& sh : kShapes) {
    Counts a(1, 0), b(3 * k, 0), c(k * k, 0);
    Flags fa, fb, fc;
    const auto lim = static_cast<unsigned long long>(k);
    launch(sh.blocks, sh.threads, 4, [&] {
      pair_kernel<PairMode::Equal>(pred.data(), Scalar::I32, lim, gt.data(), Scalar::U16, lim, k, 0,
                                   n, &fa, a.data(), sh.shared);
    });
    launch(sh.blocks, sh.threads, b.size() * 4, [&] {
      pair_kernel<PairMode::SingleLabel>(pred.data(), Scalar::I32, lim, gt.data(), Scalar::U16, lim,
                                         k, 0, n, &fb, b.data(), sh.shared);
    });
    // In two segments, as the launcher splits very large inputs.
    launch(sh.blocks, sh.threads, c.size() * 4, [&] {
      pair_kernel<PairMode::Confusion>(pred.data(), Scalar::I32, lim, gt.data(), Scalar::U16, lim,
                                       k, 0, 1234, &fc, c.data(), sh.shared);
    });
    launch(sh.blocks, sh.threads, c.size() * 4, [&] {
      pair_kernel<PairMode::Confusion>(pred.data(), Scalar::I32, lim, gt.data(), Scalar::U16, lim,
                                       k, 1234, n, &fc, c.data(), sh.shared);
    });
    EXPECT_EQ(a, eq);
    EXPECT_EQ(b, single);
    EXPECT_EQ(c, conf);
    for (const Flags* f : {&fa, &fb, &fc}) {
      EXPECT_EQ(f->bad_a, 2000u);
      EXPECT_EQ(f->bad_b, 10u);
    }
  }
}

TEST(EmulatedKernels, Uint8LabelMapsIn16ByteLoads) {
  std::mt19937 gen(5);
  const std::int64_t k = 19;
  const std::size_t vectors = 700, tail = 9, n = vectors * 16 + tail;
  // uint4 storage: 16-byte aligned, as the launcher requires for this kernel.
  std::vector<uint4> pv(vectors + 1), gv(vectors + 1);
  auto* pred = reinterpret_cast<std::uint8_t*>(pv.data());
  auto* gt = reinterpret_cast<std::uint8_t*>(gv.data());
  std::uniform_int_distribution<int> len(1, 50);
  for (std::size_t i = 0; i < n;) {
    const auto cp = static_cast<std::uint8_t>(ids(1, k, gen)[0]);
    const auto cy = static_cast<std::uint8_t>(ids(1, k, gen)[0]);
    for (int j = len(gen); j > 0 && i < n; --j, ++i) {
      pred[i] = cp;
      gt[i] = cy;
    }
  }
  pred[5000] = 19;  // inside the vectors
  gt[n - 1] = 200;  // in the tail
  Counts want(static_cast<std::size_t>(k * k), 0);
  for (std::size_t i = 0; i < n; ++i)
    if (pred[i] < k && gt[i] < k) ++want[static_cast<std::size_t>(gt[i] * k + pred[i])];
  for (const Shape& sh : kShapes) {
    Counts got(want.size(), 0);
    Flags flags;
    const auto lim = static_cast<unsigned long long>(k);
    launch(sh.blocks, sh.threads, got.size() * 4, [&] {
      pair_u8_kernel<PairMode::Confusion>(pv.data(), lim, gv.data(), lim, k, 0,
                                          static_cast<long long>(vectors), &flags, got.data(),
                                          sh.shared);
    });
    // The elements past the last vector, element by element (as the launcher does).
    launch(1, 32, got.size() * 4, [&] {
      pair_kernel<PairMode::Confusion>(pred, Scalar::U8, lim, gt, Scalar::U8, lim, k,
                                       static_cast<long long>(vectors * 16),
                                       static_cast<long long>(n), &flags, got.data(), sh.shared);
    });
    EXPECT_EQ(got, want) << sh.blocks << "x" << sh.threads;
    EXPECT_EQ(flags.bad_a, 5000u);
    EXPECT_EQ(flags.bad_b, n - 1);
  }
}

TEST(EmulatedKernels, StandaloneChecks) {
  const std::int64_t rows = 50, cols = 40;
  std::vector<float> s(static_cast<std::size_t>(rows * cols), 1.f);
  s[static_cast<std::size_t>(33 * cols + 7)] = std::nanf("");
  s[static_cast<std::size_t>(41 * cols)] = std::nanf("");
  std::vector<std::int8_t> y(500, 2);
  y[321] = -1;
  y[499] = 3;
  Flags f;
  launch(2, 64, 0, [&] { nan_rows_kernel<float, 32>(s.data(), rows, cols, &f); });
  EXPECT_EQ(f.nan_row, 33u);
  Flags g;
  launch(2, 64, 0, [&] { nan_rows_kernel<float, 1>(s.data(), rows, cols, &g); });
  EXPECT_EQ(g.nan_row, 33u);
  unsigned long long first = kNone;
  launch(3, 32, 0, [&] { bad_ids_kernel(y.data(), Scalar::I8, 500, 3, &first); });
  EXPECT_EQ(first, 321u);
}
