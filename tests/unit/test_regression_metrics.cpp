// The regression plugin (plugins/regression), loaded as the real libtally_regression.so through
// the Registry: values against scikit-learn, independence from the number of ranks, the exact
// accumulator, and bad inputs.
//
// Expected values come from tests/reference/expected_regression.json, written by
// tests/reference/regression.py with scikit-learn 1.7.2 (the versions and, for each value, the
// exact scikit-learn call are recorded in the file), unless a test says otherwise.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/exact_sum.hpp"

namespace tally::test {
namespace {

const Json& expected_file() { return expected_json("tests/reference/expected_regression.json"); }

// ---- values against scikit-learn, 1..7 ranks --------------------------------------------------

class RegressionReference : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map in expected_regression.json (the scikit-learn call for each
// key is in the case's "calls" map).
TEST_P(RegressionReference, MatchesScikitLearnOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  check_case(c, load_inputs(c.at("inputs")), GetParam());
  print_rel_diffs("scikit-learn");
}

INSTANTIATE_TEST_SUITE_P(Regression, RegressionReference,
                         ::testing::ValuesIn(case_names(expected_file())), param_name);

// Expected: section "example" of expected_regression.json (scikit-learn on the diabetes split of
// configs/examples/data/regression, made by tests/reference/regression.py).
TEST(RegressionExample, MatchesScikitLearn) {
  check_example(expected_file().at("example"));
  print_rel_diffs("scikit-learn");
}

// ---- small hand-checked examples --------------------------------------------------------------

Batch docstring_batch() {
  Batch b;
  b.set("target", Tensor::from_vector<double>({3, -0.5, 2, 7}));
  b.set("pred", Tensor::from_vector<double>({2.5, 0.0, 2, 8}));
  return b;
}

// Expected: the docstring examples of scikit-learn 1.7.2's mean_absolute_error (0.5),
// mean_squared_error (0.375), root_mean_squared_error (0.6123724356957945) and r2_score
// (0.9486081370449679).
TEST(Regression, ScikitLearnDocstringExamples) {
  const Batch b = docstring_batch();
  EXPECT_EQ(run_single("RegressionMAE", {}, b).at("mae").as_double(), 0.5);
  EXPECT_EQ(run_single("RegressionMSE", {}, b).at("mse").as_double(), 0.375);
  EXPECT_DOUBLE_EQ(run_single("RMSE", {}, b).at("rmse").as_double(), 0.6123724356957945);
  EXPECT_DOUBLE_EQ(run_single("R2", {}, b).at("r2").as_double(), 0.9486081370449679);
  EXPECT_DOUBLE_EQ(run_single("R2Score", {}, b).at("r2").as_double(), 0.9486081370449679);
  // scikit-learn's docstring, 2 outputs: y [[0.5, 1], [-1, 1], [7, -6]], p [[0, 2], [-1, 2],
  // [8, -5]]: MAE raw_values [0.5, 1.0], uniform 0.75; r2 variance_weighted 0.938256...
  Batch m;
  m.set("target", Tensor::from_vector<double>({0.5, 1, -1, 1, 7, -6}, {3, 2}));
  m.set("pred", Tensor::from_vector<double>({0, 2, -1, 2, 8, -5}, {3, 2}));
  EXPECT_EQ(run_single("RegressionMAE", {{"multioutput", "raw_values"}}, m).at("mae"),
            Value(std::vector<double>{0.5, 1.0}));
  EXPECT_EQ(run_single("RegressionMAE", {}, m).at("mae").as_double(), 0.75);
  EXPECT_NEAR(run_single("R2", {{"multioutput", "variance_weighted"}}, m).at("r2").as_double(),
              0.938256658595642, 1e-15);
}

// Expected, by hand (scikit-learn's rules): fewer than 2 samples -> NaN; a constant target
// predicted exactly -> 1, predicted wrong -> 0.
TEST(R2, DegenerateCases) {
  Batch one;
  one.set("target", Tensor::from_vector<double>({1.0}));
  one.set("pred", Tensor::from_vector<double>({2.0}));
  EXPECT_TRUE(std::isnan(run_single("R2", {}, one).at("r2").as_double()));
  Batch c;
  c.set("target", Tensor::from_vector<double>({5, 5, 5}));
  c.set("pred", Tensor::from_vector<double>({5, 5, 5}));
  EXPECT_EQ(run_single("R2", {}, c).at("r2").as_double(), 1.0);
  c.set("pred", Tensor::from_vector<double>({5, 5, 6}));
  EXPECT_EQ(run_single("R2", {}, c).at("r2").as_double(), 0.0);
}

// Integer inputs are read as float64 (scikit-learn converts them too).
TEST(Regression, IntegerInputs) {
  Batch b;
  b.set("target", Tensor::from_vector<std::int32_t>({3, 1, 2, 7}));
  b.set("pred", Tensor::from_vector<std::int64_t>({2, 1, 2, 9}));
  EXPECT_EQ(run_single("RegressionMAE", {}, b).at("mae").as_double(), 0.75);
}

// ---- the exact accumulator ----------------------------------------------------------------------

// Expected, by hand: exact sums (1e16 + 1 - 1e16 = 1, which plain double addition gets wrong)
// and the same bits in any order and any split.
TEST(ExactSum, IsExactAndOrderFree) {
  using tally::ExactSum;
  ExactSum a;
  a.add(1e16);
  a.add(1.0);
  a.add(-1e16);
  EXPECT_EQ(a.value(), 1.0);
  ExactSum tiny;
  tiny.add(std::numeric_limits<double>::denorm_min());
  tiny.add(std::numeric_limits<double>::max());
  tiny.add(-std::numeric_limits<double>::max());
  EXPECT_EQ(tiny.value(), std::numeric_limits<double>::denorm_min());
  std::mt19937_64 rng(7);
  std::vector<double> xs;
  for (int i = 0; i < 5000; ++i) {
    const double mag = std::ldexp(1.0, static_cast<int>(rng() % 200) - 100);
    xs.push_back((static_cast<double>(rng() % 2000001) - 1e6) * mag);
  }
  ExactSum ref;
  for (double x : xs) ref.add(x);
  const double want = ref.value();
  for (int trial = 0; trial < 5; ++trial) {
    std::shuffle(xs.begin(), xs.end(), rng);
    const std::size_t cut = rng() % xs.size();
    ExactSum left, right;
    for (std::size_t i = 0; i < xs.size(); ++i) (i < cut ? left : right).add(xs[i]);
    left.normalize();
    right.normalize();
    ExactSum merged;
    merged.merge(left.words().data());
    merged.merge(right.words().data());
    EXPECT_EQ(merged.value(), want);
    // Negating every term negates the sum exactly.
    ExactSum neg;
    for (double x : xs) neg.add(-x);
    EXPECT_EQ(neg.value(), -want);
  }
  // Compare with a long double reference summed in sorted-by-magnitude order (far from exact
  // cancellation, so it is accurate to about 1e-18 relative).
  std::sort(xs.begin(), xs.end(), [](double x, double y) { return std::abs(x) < std::abs(y); });
  long double ld = 0;
  for (double x : xs) ld += x;
  EXPECT_NEAR(want, static_cast<double>(ld), std::abs(want) * 1e-15);
}

// The error metrics' state does not grow with the number of samples.
TEST(RegressionState, ErrorSumsStaySmall) {
  const Json& c = find_case(expected_file(), "RegressionMSE_diabetes_uniform_average");
  const Batch data = load_inputs(c.at("inputs"));
  for (std::int64_t n : {std::int64_t{10}, data.size()}) {
    const auto m = make_metric("RegressionMSE", {});
    m->add(data.slice(0, n));
    const msgpack::sbuffer buf = pack_state(*m);
    EXPECT_LT(buf.size(), 1200u) << n;
    const auto h = msgpack::unpack(buf.data(), buf.size());
    EXPECT_EQ(h.get().via.array.ptr[0].type, msgpack::type::BIN);
  }
}

// ---- bad inputs -------------------------------------------------------------------------------

const std::vector<std::string>& all_types() {
  static const std::vector<std::string> t = {"RegressionMAE", "RegressionMSE", "RMSE", "R2"};
  return t;
}

TEST(RegressionErrors, NonFiniteValues) {
  for (const auto& type : all_types()) {
    Batch b;
    b.set("target", Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2}));
    b.set("pred",
          Tensor::from_vector<double>({1, 2, std::numeric_limits<double>::quiet_NaN(), 4}, {2, 2}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(b); }),
               "metric '" + type + "': field 'pred' sample 1, output 0: NaN");
    Batch inf;
    inf.set("target", Tensor::from_vector<float>({1, std::numeric_limits<float>::infinity()}));
    inf.set("pred", Tensor::from_vector<float>({1, 2}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(inf); }),
               "metric '" + type + "': field 'target' sample 1: infinity");
  }
}

TEST(RegressionErrors, Shapes) {
  for (const auto& type : all_types()) {
    Batch b;
    b.set("target", Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2}));
    b.set("pred", Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(b); }),
               "metric '" + type + "': field 'pred' has 3 outputs (f64[2, 3]), 'target' has 2");
    Batch d3;
    d3.set("target", Tensor::from_vector<double>({1, 2}, {1, 1, 2}));
    d3.set("pred", Tensor::from_vector<double>({1, 2}, {1, 1, 2}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(d3); }),
               "field 'pred' must be [N] or [N, D] (D outputs), got f64[1, 1, 2]");
    Batch w2;
    w2.set("target", Tensor::from_vector<double>({1, 2}));
    w2.set("pred", Tensor::from_vector<double>({1, 2}));
    w2.set("sample_weight", Tensor::from_vector<double>({1, 2}, {2, 1}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(w2); }),
               "field 'sample_weight' must be 1-D [N], got f64[2, 1]");
    Batch missing;
    missing.set("pred", Tensor::from_vector<double>({1, 2}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(missing); }),
               "field 'target' is missing from the batch (it has: pred)");
    Batch boolean;
    boolean.set("target", Tensor::from_vector<bool>({true, false}));
    boolean.set("pred", Tensor::from_vector<double>({1, 2}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(boolean); }),
               "field 'target' must hold numbers (float or integer), got bool[2]");
    // Outputs changing between batches.
    const auto m = make_metric(type, {});
    Batch a;
    a.set("target", Tensor::from_vector<double>({1, 2}));
    a.set("pred", Tensor::from_vector<double>({1, 2}));
    m->add(a);
    EXPECT_HAS(error_of([&] { m->add(b.slice(0, 2).renamed({})); }), "outputs");
  }
}

TEST(RegressionErrors, WeightsGivenForSomeBatchesOnlyOrSummingToZero) {
  for (const auto& type : all_types()) {
    Batch a, b;
    a.set("target", Tensor::from_vector<double>({1, 2}));
    a.set("pred", Tensor::from_vector<double>({1, 3}));
    b = a;
    b.set("sample_weight", Tensor::from_vector<double>({1, 1}));
    const auto m = make_metric(type, {});
    m->add(a);
    EXPECT_HAS(error_of([&] { m->add(b); }),
               "field 'sample_weight' is given but was missing for earlier samples");
    Batch z = a;
    z.set("sample_weight", Tensor::from_vector<double>({1, -1}));
    EXPECT_HAS(error_of([&] { run_single(type, {}, z); }),
               "metric '" + type + "': field 'sample_weight' sums to 0");
  }
}

TEST(RegressionErrors, BadParameters) {
  EXPECT_HAS(error_of<ConfigError>([&] {
               make_metric("RegressionMAE", {{"multioutput", "variance_weighted"}});
             }),
             "must be one of uniform_average, raw_values");
  EXPECT_HAS(error_of<ConfigError>([&] {
               make_metric("R2", {{"multioutput", "mean"}});
             }),
             "must be one of uniform_average, raw_values, variance_weighted");
}

TEST(RegressionErrors, NoSamples) {
  for (const auto& type : all_types()) {
    Batch empty;
    EXPECT_HAS(error_of([&] { run_single(type, {}, empty); }), "no samples");
  }
}

}  // namespace
}  // namespace tally::test
