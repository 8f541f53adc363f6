// The classification row kernels (plugins/classification/row_kernels.cpp), both builds of them:
// the one the loader picks on this CPU (AVX2 where it has it) and the baseline x86-64 one
// (compiled a second time with TALLY_NO_SIMD_CLONES under the names *_baseline, see
// tests/CMakeLists.txt), against the plain scalar definitions below, on random rows full of ties,
// signed zeros and infinities, for every row width up to 70 and a few wide ones, with the true
// class and the NaN at every position. Expected values: the scalar loops in this file (the
// definitions the header states; the metrics built on them are checked against scikit-learn in
// test_classification_metrics).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "../../plugins/classification/row_kernels.hpp"

namespace tally::classification {
template <class T>
std::int64_t true_class_ranks_baseline(const T* s, std::int64_t rows, std::int64_t cols,
                                       const std::int64_t* y, std::int32_t cap,
                                       std::int32_t* ranks);
template <class T>
std::int64_t row_argmax_baseline(const T* s, std::int64_t rows, std::int64_t cols,
                                 std::int64_t* out);
}  // namespace tally::classification

namespace tally::test {
namespace {

using classification::row_argmax;
using classification::row_argmax_baseline;
using classification::true_class_ranks;
using classification::true_class_ranks_baseline;

template <class T>
std::int64_t rank_of(const T* row, std::int64_t cols, std::int64_t y) {
  std::int64_t r = 0;
  for (std::int64_t c = 0; c < cols; ++c)
    r += c < y ? row[c] > row[y] : c > y ? row[c] >= row[y] : 0;
  return r;
}

template <class T>
std::int64_t argmax_of(const T* row, std::int64_t cols) {
  std::int64_t best = 0;
  for (std::int64_t c = 1; c < cols; ++c)
    if (row[c] > row[best]) best = c;
  return best;
}

/// Random scores from a few values, so that most rows hold ties; signed zeros and infinities.
template <class T>
std::vector<T> random_rows(std::mt19937_64& rng, std::int64_t rows, std::int64_t cols) {
  const T inf = std::numeric_limits<T>::infinity();
  const T pool[] = {T(0.25), T(0.5), T(-0.5), T(0.0), T(-0.0), T(1e-30), inf, -inf, T(3)};
  std::vector<T> s(static_cast<std::size_t>(rows * cols));
  std::uniform_int_distribution<int> pick(0, 8), often(0, 3);
  std::uniform_real_distribution<double> real(-1, 1);
  for (auto& x : s) x = often(rng) == 0 ? pool[pick(rng)] : static_cast<T>(real(rng));
  return s;
}

template <class T>
void check_widths() {
  std::mt19937_64 rng(20261123);
  std::vector<std::int64_t> widths;
  for (std::int64_t c = 1; c <= 70; ++c) widths.push_back(c);
  for (std::int64_t c : {127, 128, 129, 1000, 1001}) widths.push_back(c);
  for (const std::int64_t cols : widths) {
    const std::int64_t rows = std::max<std::int64_t>(cols, 24);
    std::vector<T> s = random_rows<T>(rng, rows, cols);
    // Row i's true class: every position in turn; a row of equal scores too.
    std::vector<std::int64_t> y(static_cast<std::size_t>(rows));
    for (std::int64_t i = 0; i < rows; ++i) y[static_cast<std::size_t>(i)] = i % cols;
    std::fill(s.begin(), s.begin() + cols, T(0.5));
    for (const std::int32_t cap : {1, 5, std::numeric_limits<std::int32_t>::max()}) {
      std::vector<std::int32_t> got(static_cast<std::size_t>(rows), -1),
          base(static_cast<std::size_t>(rows), -1);
      ASSERT_EQ(true_class_ranks(s.data(), rows, cols, y.data(), cap, got.data()), -1);
      ASSERT_EQ(true_class_ranks_baseline(s.data(), rows, cols, y.data(), cap, base.data()), -1);
      for (std::int64_t i = 0; i < rows; ++i) {
        const auto want = std::min<std::int64_t>(
            rank_of(s.data() + i * cols, cols, y[static_cast<std::size_t>(i)]), cap);
        ASSERT_EQ(got[static_cast<std::size_t>(i)], want) << "cols " << cols << " row " << i;
        ASSERT_EQ(base[static_cast<std::size_t>(i)], want) << "cols " << cols << " row " << i;
      }
    }
    std::vector<std::int64_t> got(static_cast<std::size_t>(rows), -1),
        base(static_cast<std::size_t>(rows), -1);
    ASSERT_EQ(row_argmax(s.data(), rows, cols, got.data()), -1);
    ASSERT_EQ(row_argmax_baseline(s.data(), rows, cols, base.data()), -1);
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t want = argmax_of(s.data() + i * cols, cols);
      ASSERT_EQ(got[static_cast<std::size_t>(i)], want) << "cols " << cols << " row " << i;
      ASSERT_EQ(base[static_cast<std::size_t>(i)], want) << "cols " << cols << " row " << i;
    }
  }
}

TEST(RowKernels, RanksAndArgmaxMatchTheScalarDefinitionFloat32) { check_widths<float>(); }
TEST(RowKernels, RanksAndArgmaxMatchTheScalarDefinitionFloat64) { check_widths<double>(); }

template <class T>
void check_nan() {
  std::mt19937_64 rng(7);
  for (const std::int64_t cols : {1, 3, 8, 9, 17, 33, 100}) {
    const std::int64_t rows = 5;
    for (std::int64_t at = 0; at < cols; ++at) {
      for (const std::int64_t y0 : {std::int64_t{0}, at, cols - 1}) {
        std::vector<T> s = random_rows<T>(rng, rows, cols);
        s[static_cast<std::size_t>(3 * cols + at)] = std::numeric_limits<T>::quiet_NaN();
        const std::vector<std::int64_t> y(static_cast<std::size_t>(rows), y0);
        std::vector<std::int32_t> ranks(static_cast<std::size_t>(rows));
        std::vector<std::int64_t> idx(static_cast<std::size_t>(rows));
        // The first row holding a NaN: row 3, wherever the NaN and the true class are.
        EXPECT_EQ(true_class_ranks(s.data(), rows, cols, y.data(), 5, ranks.data()), 3)
            << "cols " << cols << " NaN at " << at << " y " << y0;
        EXPECT_EQ(true_class_ranks_baseline(s.data(), rows, cols, y.data(), 5, ranks.data()), 3);
        EXPECT_EQ(row_argmax(s.data(), rows, cols, idx.data()), 3) << "cols " << cols;
        EXPECT_EQ(row_argmax_baseline(s.data(), rows, cols, idx.data()), 3);
      }
    }
  }
}

TEST(RowKernels, ReportTheFirstRowHoldingANaNFloat32) { check_nan<float>(); }
TEST(RowKernels, ReportTheFirstRowHoldingANaNFloat64) { check_nan<double>(); }

}  // namespace
}  // namespace tally::test
