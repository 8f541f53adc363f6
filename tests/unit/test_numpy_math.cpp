// tally/sdk/numpy_math.hpp against NumPy: sums, means and nanmeans of float64 and float32 arrays
// equal NumPy's bit for bit (its pairwise summation, not a plain loop, which differs from 16 values
// on). Expected values: tests/reference/expected_numpy_math.json, written by
// tests/reference/numpy_math.py with NumPy 2.3.5 (np.sum, np.mean, np.nanmean).
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/numpy_math.hpp"

namespace {

using tally::test::expected_json;

// The data of numpy_math.py: only correctly rounded operations, so the doubles are NumPy's.
std::vector<double> data(std::size_t n) {
  std::vector<double> a(n);
  for (std::size_t i = 0; i < n; ++i)
    a[i] =
        (static_cast<double>((i * 7919) % 1000) - 500.0) * 1.37 + 1.0 / static_cast<double>(i + 1);
  return a;
}

const auto& reference() { return expected_json("tests/reference/expected_numpy_math.json"); }

TEST(NumpyMath, SumAndMeanEqualNumpyBitForBit) {
  for (const auto& c : reference()["cases"]) {
    const auto n = c["n"].get<std::size_t>();
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto a = data(n);
    std::vector<float> f(a.begin(), a.end());
    EXPECT_EQ(tally::numpy::sum(a), c["sum_f64"].get<double>());
    EXPECT_EQ(tally::numpy::sum(f), c["sum_f32"].get<double>());
    if (n == 0) {
      EXPECT_TRUE(std::isnan(tally::numpy::mean(a)));
      EXPECT_TRUE(std::isnan(tally::numpy::mean(f)));
      EXPECT_FALSE(std::signbit(tally::numpy::sum(a)));  // np.sum([]) is +0.0
    } else {
      EXPECT_EQ(tally::numpy::mean(a), c["mean_f64"].get<double>());
      EXPECT_EQ(tally::numpy::mean(f), c["mean_f32"].get<double>());
    }
  }
}

TEST(NumpyMath, PairwiseSumIsNotAPlainLoop) {
  // The reference records Python's left-to-right sum too: the cases where it differs from
  // np.sum are the ones that show the pairwise order is NumPy's.
  int differ = 0;
  for (const auto& c : reference()["cases"]) {
    if (c["loop_f64"].get<double>() == c["sum_f64"].get<double>()) continue;
    ++differ;
    EXPECT_NE(tally::numpy::sum(data(c["n"].get<std::size_t>())), c["loop_f64"].get<double>());
  }
  EXPECT_GE(differ, 5);
}

TEST(NumpyMath, NanmeanSkipsNans) {
  auto b = data(1000);
  for (std::size_t i = 0; i < b.size(); i += 7) b[i] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(tally::numpy::nanmean(b), reference()["nanmean_1000_every_7th_nan"].get<double>());
  const std::vector<double> all_nan(3, std::numeric_limits<double>::quiet_NaN());
  EXPECT_TRUE(std::isnan(tally::numpy::nanmean(all_nan)));
}

TEST(NumpyMath, WeakScalarRoundsToTheArrayType) {
  // np.float32(0.1) and the cast of a double just past FLT_MAX + half an ulp (NumPy: inf).
  EXPECT_EQ(tally::numpy::weak_scalar<float>(0.1), 0.100000001490116119384765625f);
  EXPECT_EQ(tally::numpy::weak_scalar<float>(3.4028235677973366e38),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(tally::numpy::weak_scalar<float>(3.4028234663852886e38),
            std::numeric_limits<float>::max());
  EXPECT_EQ(tally::numpy::weak_scalar<double>(0.1), 0.1);
}

}  // namespace
