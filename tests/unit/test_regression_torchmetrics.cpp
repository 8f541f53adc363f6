// The torchmetrics-named metrics of the regression plugin (plugins/regression: PearsonCorrCoef ...
// RelativeSquaredError), loaded as the real libtally_regression.so through the Registry: values
// against their references on 1..7 ranks, the O(N log N) Kendall counts against a direct count,
// and bad inputs.
//
// Expected values come from tests/reference/expected_regression_torchmetrics.json, written by
// tests/reference/regression_torchmetrics.py (each case records its reference library, version
// and exact call, and cross-checks with the other library), unless a test says otherwise.
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

const Json& expected_file() {
  return expected_json("tests/reference/expected_regression_torchmetrics.json");
}

/// expect_matches, plus the strings "inf" and "-inf" the reference script writes for infinities
/// (JSON has none).
void expect_matches_inf(const Value& actual, const Json& expected, const std::string& where,
                        const std::string& metric) {
  if (expected.is_string() && (expected == "inf" || expected == "-inf")) {
    ASSERT_TRUE(actual.is_float())
        << where << ": expected " << expected << ", got " << actual.to_json();
    EXPECT_EQ(actual.as_double(), expected == "inf" ? HUGE_VAL : -HUGE_VAL) << where;
  } else if (expected.is_array()) {
    ASSERT_TRUE(actual.is_array()) << where << ": expected an array, got " << actual.to_json();
    ASSERT_EQ(actual.size(), expected.size()) << where;
    for (std::size_t i = 0; i < expected.size(); ++i)
      expect_matches_inf(actual.as_array()[i], expected[i], where + "[" + std::to_string(i) + "]",
                         metric);
  } else if (expected.is_object()) {
    ASSERT_TRUE(actual.is_map()) << where << ": expected a map, got " << actual.to_json();
    std::vector<std::string> want_keys, got_keys;
    for (const auto& [k, v] : expected.items()) want_keys.push_back(k);
    for (const auto& [k, v] : actual.as_map()) got_keys.push_back(k);
    ASSERT_EQ(got_keys, want_keys) << where << ": result keys (in order)";
    for (const auto& [k, v] : expected.items())
      expect_matches_inf(actual.at(k), v, where + "." + k, metric);
  } else {
    expect_matches(actual, expected, where, metric);
  }
}

// ---- values against the references, 1..7 ranks ------------------------------------------------

/// A case's name as a test name: GoogleTest allows letters, digits and '_' ("power-1.0" ->
/// "power_1_0").
std::string test_name(const Json& c) {
  std::string n = c.at("name").get<std::string>();
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

std::vector<std::string> test_names() {
  std::vector<std::string> names;
  for (const auto& c : expected_file().at("cases")) names.push_back(test_name(c));
  return names;
}

const Json& case_named(const std::string& name) {
  for (const auto& c : expected_file().at("cases"))
    if (test_name(c) == name) return c;
  throw std::runtime_error("no case " + name);
}

class TorchmetricsRegressionReference : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map (its "reference" names the library and the call; cases
// with an "exact" value expect exact rational arithmetic's result).
TEST_P(TorchmetricsRegressionReference, MatchesTheReferenceOnAnyNumberOfRanks) {
  const Json& c = case_named(GetParam());
  const std::string type = c.at("metric").get<std::string>();
  const Value got = run_all_rank_counts(type, to_map(c.at("params")), load_inputs(c.at("inputs")));
  expect_matches_inf(got, c.at("expected"), GetParam(), type);
  print_rel_diffs(c.at("reference").at("library").get<std::string>());
}

INSTANTIATE_TEST_SUITE_P(Regression, TorchmetricsRegressionReference,
                         ::testing::ValuesIn(test_names()), param_name);

// Expected: section "example" of expected_regression_torchmetrics.json (the results of
// configs/examples/regression_torchmetrics.yaml, each metric's reference call in "calls").
TEST(TorchmetricsRegressionExample, MatchesTheReferences) {
  check_example(expected_file().at("example"));
  print_rel_diffs("the references");
}

// ---- Kendall's counts against a direct O(N^2) count --------------------------------------------

struct Pairs {
  std::int64_t con = 0, dis = 0, tx = 0, ty = 0;
};

Pairs count_pairs(const std::vector<double>& x, const std::vector<double>& y) {
  Pairs p;
  for (std::size_t i = 0; i < x.size(); ++i)
    for (std::size_t j = i + 1; j < x.size(); ++j) {
      const double dx = x[i] - x[j], dy = y[i] - y[j];
      if (dx == 0) ++p.tx;
      if (dy == 0) ++p.ty;
      if (dx * dy > 0) ++p.con;
      if (dx * dy < 0) ++p.dis;
    }
  return p;
}

// Expected: tau-a = (C - D) / (C + D) and tau-b = (C - D) / sqrt((n0 - n1)(n0 - n2)) from pairs
// counted one by one, on random data with many ties (values 0..9 and 0..4), shuffled batches.
TEST(KendallRankCorrCoef, MatchesADirectCountOfPairs) {
  std::mt19937_64 rng(11);
  for (std::size_t n : {std::size_t{3}, std::size_t{40}, std::size_t{257}, std::size_t{1000}}) {
    std::vector<double> x(n), y(n);
    for (std::size_t i = 0; i < n; ++i) {
      x[i] = static_cast<double>(rng() % 10) - 3.0;
      y[i] = static_cast<double>(rng() % 5) + 0.5 * (x[i] > 2);
    }
    const Pairs p = count_pairs(x, y);
    const auto n0 = static_cast<std::int64_t>(n * (n - 1) / 2);
    Batch b;
    b.set("preds", Tensor::from_vector(x));
    b.set("target", Tensor::from_vector(y));
    const double a = run_all_rank_counts("KendallRankCorrCoef", {{"variant", "a"}}, b)
                         .at("kendall_rank_corrcoef")
                         .as_double();
    const double tb =
        run_single("KendallRankCorrCoef", {}, b).at("kendall_rank_corrcoef").as_double();
    const auto cd = static_cast<double>(p.con - p.dis);
    EXPECT_DOUBLE_EQ(a, cd / static_cast<double>(p.con + p.dis)) << n;
    EXPECT_DOUBLE_EQ(tb, cd / std::sqrt(static_cast<double>(n0 - p.tx)) /
                             std::sqrt(static_cast<double>(n0 - p.ty)))
        << n;
  }
}

// Expected: NaN for the p-value of two samples (torchmetrics 1.9.0 returns NaN there: 0 / 0 in
// its variance; SciPy 1.16.3's kendalltau raises ZeroDivisionError), and tau 1.
TEST(KendallRankCorrCoef, TwoSamplesHaveNoPValue) {
  Batch b;
  b.set("preds", Tensor::from_vector<double>({1, 2}));
  b.set("target", Tensor::from_vector<double>({1, 3}));
  const Value v = run_single("KendallRankCorrCoef", {{"t_test", true}}, b);
  EXPECT_EQ(v.at("kendall_rank_corrcoef").as_double(), 1.0);
  EXPECT_TRUE(std::isnan(v.at("p_value").as_double()));
}

// ---- state --------------------------------------------------------------------------------------

// The states of the sum metrics do not grow with the number of samples.
TEST(TorchmetricsRegressionState, SumStatesStaySmall) {
  const Json& c = case_named("pearson_diabetes");
  const Batch data = load_inputs(c.at("inputs"));
  for (const char* type : {"PearsonCorrCoef", "ExplainedVariance", "RelativeSquaredError",
                           "MeanAbsolutePercentageError", "LogCoshError"}) {
    std::size_t small = 0;
    for (std::int64_t n : {std::int64_t{10}, data.size()}) {
      const auto m = make_metric(type, {});
      m->add(data.slice(0, n));
      const std::size_t size = pack_state(*m).size();
      if (n == 10) small = size;
      // The same accumulators; only the msgpack integer holding the count may widen.
      EXPECT_LE(size, small + 8) << type << ": " << n << " samples";
    }
  }
}

// ---- bad inputs ---------------------------------------------------------------------------------

Batch pair_batch(const Tensor& preds, const Tensor& target, const char* a = "preds",
                 const char* b = "target") {
  Batch batch;
  batch.set(a, preds);
  batch.set(b, target);
  return batch;
}

const std::vector<std::string>& output_metrics() {
  static const std::vector<std::string> t = {"PearsonCorrCoef",     "SpearmanCorrCoef",
                                             "KendallRankCorrCoef", "ConcordanceCorrCoef",
                                             "LogCoshError",        "RelativeSquaredError"};
  return t;
}

TEST(TorchmetricsRegressionErrors, OutputsMustMatchNumOutputs) {
  for (const auto& type : output_metrics()) {
    const Batch two = pair_batch(Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2}),
                                 Tensor::from_vector<double>({1, 2, 3, 5}, {2, 2}));
    EXPECT_HAS(error_of([&] { run_single(type, {}, two); }),
               "metric '" + type +
                   "': field 'preds' has 2 outputs (f64[2, 2]) but the parameter num_outputs is 1");
    const Batch one =
        pair_batch(Tensor::from_vector<double>({1, 2, 3}), Tensor::from_vector<double>({1, 2, 4}));
    EXPECT_HAS(error_of([&] {
                 run_single(type, {{"num_outputs", 2}}, one);
               }),
               "has 1 outputs (f64[3]) but the parameter num_outputs is 2");
    const Batch d3 = pair_batch(Tensor::from_vector<double>({1, 2}, {1, 1, 2}),
                                Tensor::from_vector<double>({1, 2}, {1, 1, 2}));
    EXPECT_HAS(
        error_of([&] { run_single(type, {}, d3); }),
        "metric '" + type + "': field 'preds' must be [N] or [N, D] (D outputs), got f64[1, 1, 2]");
  }
}

TEST(TorchmetricsRegressionErrors, ShapesTypesAndMissingFields) {
  const std::vector<std::pair<std::string, std::pair<const char*, const char*>>> all = {
      {"PearsonCorrCoef", {"preds", "target"}},
      {"SpearmanCorrCoef", {"preds", "target"}},
      {"KendallRankCorrCoef", {"preds", "target"}},
      {"ConcordanceCorrCoef", {"preds", "target"}},
      {"ExplainedVariance", {"preds", "target"}},
      {"MeanAbsolutePercentageError", {"preds", "target"}},
      {"SymmetricMeanAbsolutePercentageError", {"preds", "target"}},
      {"WeightedMeanAbsolutePercentageError", {"preds", "target"}},
      {"MeanSquaredLogError", {"preds", "target"}},
      {"TweedieDevianceScore", {"preds", "targets"}},
      {"LogCoshError", {"preds", "target"}},
      {"MinkowskiDistance", {"preds", "targets"}},
      {"RelativeSquaredError", {"preds", "target"}},
      {"CosineSimilarity", {"preds", "target"}},
      {"KLDivergence", {"p", "q"}}};
  for (const auto& [type, fields] : all) {
    const auto [a, b] = fields;
    Value::Map params;
    if (type == "MinkowskiDistance") params = {{"p", 2.0}};
    const bool matrix = type == "CosineSimilarity" || type == "KLDivergence";
    const std::vector<std::int64_t> shape =
        matrix ? std::vector<std::int64_t>{2, 2} : std::vector<std::int64_t>{4};
    const Tensor ok = Tensor::from_vector<double>({0.25, 0.75, 0.5, 0.5}, shape);
    // Mismatched shapes (the same number of samples: a batch checks that itself).
    const Tensor wide = Tensor::from_vector<double>({0.25, 0.75, 0.5, 0.5}, {2, 2});
    const Tensor wider = Tensor::from_vector<double>({0.25, 0.75, 0.5, 0.5, 0.5, 0.5}, {2, 3});
    EXPECT_HAS(error_of([&] { run_single(type, params, pair_batch(wide, wider, a, b)); }),
               "metric '" + type + "': field '" + a + "' has shape f64[2, 2], '" + b +
                   "' has f64[2, 3]: they must have the same shape");
    // A missing field.
    Batch missing;
    missing.set(a, ok);
    EXPECT_HAS(
        error_of([&] { run_single(type, params, missing); }),
        "metric '" + type + "': field '" + b + "' is missing from the batch (it has: " + a + ")");
    // Booleans.
    const Tensor flags = Tensor::from_vector<bool>({true, false, true, false}, shape);
    EXPECT_HAS(
        error_of([&] { run_single(type, params, pair_batch(ok, flags, a, b)); }),
        "metric '" + type + "': field '" + b + "' must hold numbers (float or integer), got bool");
    // NaN, in sample 1.
    const Tensor nan = Tensor::from_vector<double>(
        {0.25, 0.75, std::numeric_limits<double>::quiet_NaN(), 0.5}, shape);
    EXPECT_HAS(error_of([&] { run_single(type, params, pair_batch(nan, ok, a, b)); }),
               "metric '" + type + "': field '" + a + "' sample " + (matrix ? "1, value 0" : "2") +
                   ": NaN (expected finite values");
    // +infinity.
    const Tensor inf = Tensor::from_vector<double>({0.25, 0.75, 0.5, HUGE_VAL}, shape);
    EXPECT_HAS(error_of([&] { run_single(type, params, pair_batch(ok, inf, a, b)); }),
               "metric '" + type + "': field '" + b + "' sample " + (matrix ? "1, value 1" : "3") +
                   ": +infinity");
    // Matrix metrics need [N, D].
    if (matrix) {
      const Tensor flat = Tensor::from_vector<double>({0.25, 0.75});
      EXPECT_HAS(error_of([&] { run_single(type, params, pair_batch(flat, flat, a, b)); }),
                 "metric '" + type + "': field '" + a + "' must be 2-D [N, D], got f64[2]");
    }
    // No samples at all.
    EXPECT_HAS(error_of([&] { run_single(type, params, Batch{}); }),
               "metric '" + type + "': no samples");
  }
}

TEST(TorchmetricsRegressionErrors, ValuesOutsideTheDomain) {
  const Tensor ok = Tensor::from_vector<double>({1, 2, 3});
  const Tensor low = Tensor::from_vector<double>({1, -1, 3});
  EXPECT_HAS(error_of([&] { run_single("MeanSquaredLogError", {}, pair_batch(low, ok)); }),
             "metric 'MeanSquaredLogError': field 'preds' sample 1: -1 is <= -1 (the log error "
             "needs values > -1)");
  const Tensor zero = Tensor::from_vector<double>({1, 0, 3});
  EXPECT_HAS(error_of([&] {
               run_single("TweedieDevianceScore", {{"power", 2.0}},
                          pair_batch(ok, zero, "preds", "targets"));
             }),
             "metric 'TweedieDevianceScore': field 'targets' sample 1: 0 must be > 0 for power 2");
  EXPECT_HAS(error_of([&] {
               run_single("TweedieDevianceScore", {{"power", 1.0}},
                          pair_batch(zero, ok, "preds", "targets"));
             }),
             "field 'preds' sample 1: 0 must be > 0 for power 1");
  EXPECT_HAS(error_of([&] {
               run_single("TweedieDevianceScore", {{"power", 1.5}},
                          pair_batch(ok, low, "preds", "targets"));
             }),
             "field 'targets' sample 1: -1 must be >= 0 for power 1.5");
  EXPECT_HAS(error_of([&] {
               run_single("TweedieDevianceScore", {{"power", -1.0}},
                          pair_batch(low, ok, "preds", "targets"));
             }),
             "field 'preds' sample 1: -1 must be > 0 for power -1");
  // Negative probabilities; +inf log-probabilities (-inf is a probability of 0).
  const Tensor p = Tensor::from_vector<double>({0.5, 0.5, 0.25, 0.75}, {2, 2});
  const Tensor neg = Tensor::from_vector<double>({0.5, 0.5, -0.25, 1.25}, {2, 2});
  EXPECT_HAS(error_of([&] { run_single("KLDivergence", {}, pair_batch(p, neg, "p", "q")); }),
             "metric 'KLDivergence': field 'q' sample 1, value 0: -0.25 is negative "
             "(probabilities must be >= 0)");
  const Tensor minf = Tensor::from_vector<double>({0.0, -HUGE_VAL, -1.0, -0.5}, {2, 2});
  const Tensor pinf = Tensor::from_vector<double>({0.0, HUGE_VAL, -1.0, -0.5}, {2, 2});
  EXPECT_NO_THROW(
      run_single("KLDivergence", {{"log_prob", true}}, pair_batch(minf, minf, "p", "q")));
  EXPECT_HAS(error_of([&] {
               run_single("KLDivergence", {{"log_prob", true}}, pair_batch(pinf, minf, "p", "q"));
             }),
             "field 'p' sample 0, value 1: +infinity (expected finite values or -inf)");
  // Magnitudes whose products would overflow.
  const Tensor huge = Tensor::from_vector<double>({1, 1e200, 3});
  for (const char* type : {"PearsonCorrCoef", "ExplainedVariance", "RelativeSquaredError"})
    EXPECT_HAS(error_of([&] { run_single(type, {}, pair_batch(ok, huge)); }),
               std::string("metric '") + type +
                   "': field 'target' sample 1: 1e+200 has a magnitude above 1e100");
}

TEST(TorchmetricsRegressionErrors, ShapesChangingBetweenBatches) {
  const auto cos = make_metric("CosineSimilarity", {});
  cos->add(pair_batch(Tensor::from_vector<double>({1, 2}, {1, 2}),
                      Tensor::from_vector<double>({1, 2}, {1, 2})));
  EXPECT_HAS(error_of([&] {
               cos->add(pair_batch(Tensor::from_vector<double>({1, 2, 3}, {1, 3}),
                                   Tensor::from_vector<double>({1, 2, 3}, {1, 3})));
             }),
             "metric 'CosineSimilarity': field 'preds' has 3 values a sample but 2 in earlier "
             "samples");
  const auto ev = make_metric("ExplainedVariance", {});
  ev->add(pair_batch(Tensor::from_vector<double>({1, 2}), Tensor::from_vector<double>({1, 3})));
  EXPECT_HAS(error_of([&] {
               ev->add(pair_batch(Tensor::from_vector<double>({1, 2}, {1, 2}),
                                  Tensor::from_vector<double>({1, 3}, {1, 2})));
             }),
             "metric 'ExplainedVariance': field 'preds' has 2 outputs but 1 in earlier samples");
}

TEST(TorchmetricsRegressionErrors, BadParameters) {
  EXPECT_HAS(config_error("TweedieDevianceScore", {{"power", 0.5}}),
             "parameter 'power' must be <= 0 or >= 1");
  EXPECT_HAS(config_error("MinkowskiDistance", {{"p", 0.5}}),
             "parameter 'p' must be a finite number >= 1, got 0.5");
  EXPECT_HAS(config_error("MinkowskiDistance", {}), "'p'");
  EXPECT_HAS(config_error("KendallRankCorrCoef", {{"variant", "d"}}), "must be one of a, b, c");
  EXPECT_HAS(config_error("CosineSimilarity", {{"reduction", "max"}}),
             "must be one of sum, mean, none");
  EXPECT_HAS(config_error("PearsonCorrCoef", {{"num_outputs", 0}}), "num_outputs");
}

}  // namespace
}  // namespace tally::test
