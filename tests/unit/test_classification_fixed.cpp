// torchmetrics' operating-point and area metrics built on the classification curves of
// plugins/classification (curve_core.hpp): PrecisionAtFixedRecall, RecallAtFixedPrecision,
// SensitivityAtSpecificity, SpecificityAtSensitivity, LogAUC, AveragePrecision with a task, and
// PrecisionRecallCurve / ROC with average micro / macro, exact and binned, loaded as the real
// libtally_classification.so through the Registry: values against torchmetrics 1.9.0 on 1..7
// ranks, the size of the binned state, and bad inputs.
//
// Expected values come from tests/reference/expected_classification_fixed.json, written by
// tests/reference/classification_fixed.py (torchmetrics 1.9.0 functional calls with float64 as its
// default dtype; each case records its call, the versions and the difference to torchmetrics'
// float32 as it ships), unless a test says otherwise.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

const Json& expected_file() {
  return expected_json("tests/reference/expected_classification_fixed.json");
}

class ClassificationFixed : public ::testing::TestWithParam<std::string> {};

// One batch a rank and batches of 7 (an empty rank included): the binned states are integer
// counts and the exact curves depend only on the multiset of samples.
RankSweep sweep() {
  RankSweep s;
  s.batch_sizes = {std::int64_t{1} << 30, 7};
  return s;
}

// expect_matches, with the reference's "inf" / "-inf" strings (JSON has no infinity: LogAUC's
// infinite slopes give some) read as those infinities.
void expect_matches_inf(const Value& got, const Json& want, const std::string& where,
                        const std::string& type) {
  if (want.is_string() && (want == "inf" || want == "-inf")) {
    EXPECT_TRUE(got.is_float() && std::isinf(got.as_double()) &&
                (got.as_double() > 0) == (want == "inf"))
        << where << ": expected " << want.dump() << ", got " << got.to_json();
  } else if (want.is_array()) {
    ASSERT_TRUE(got.is_array()) << where << ": expected an array, got " << got.to_json();
    ASSERT_EQ(got.size(), want.size()) << where;
    for (std::size_t i = 0; i < want.size(); ++i)
      expect_matches_inf(got.as_array()[i], want[i], where + "[" + std::to_string(i) + "]", type);
  } else if (want.is_object()) {
    ASSERT_TRUE(got.is_map()) << where << ": expected a map, got " << got.to_json();
    std::vector<std::string> want_keys, got_keys;
    for (const auto& [k, v] : want.items()) want_keys.push_back(k);
    for (const auto& [k, v] : got.as_map()) got_keys.push_back(k);
    ASSERT_EQ(got_keys, want_keys) << where << ": result keys (in order)";
    for (const auto& [k, v] : want.items()) expect_matches_inf(got.at(k), v, where + "." + k, type);
  } else {
    expect_matches(got, want, where, type);
  }
}

// Expected: the case's "expected" map (torchmetrics 1.9.0, float64; the call is its "call").
// Logits cases: torchmetrics decides the sigmoid / softmax per update() call and tally per
// batch; the logits data hold a value outside [0, 1] in every batch of 7 rows.
TEST_P(ClassificationFixed, MatchesTorchmetricsOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  const std::string type = c.at("metric").get<std::string>();
  const Value got =
      run_all_rank_counts(type, to_map(c.at("params")), load_inputs(c.at("inputs")), {}, sweep());
  expect_matches_inf(got, c.at("expected"), GetParam(), type);
}

class PrintRelDiffs : public ::testing::Environment {
 public:
  void TearDown() override { print_rel_diffs("torchmetrics 1.9.0 (float64)"); }
};
const auto* const kPrintRelDiffs = ::testing::AddGlobalTestEnvironment(new PrintRelDiffs);

INSTANTIATE_TEST_SUITE_P(Classification, ClassificationFixed,
                         ::testing::ValuesIn(case_names(expected_file())), param_name);

// Expected: section "example" (torchmetrics on the wine data of
// configs/examples/data/classification_curves, as configs/examples/classification_fixed.yaml).
TEST(ClassificationFixedExample, MatchesTorchmetrics) {
  check_example(expected_file().at("example"), sweep());
}

// Expected: the "torchmetrics_errors" section: calls torchmetrics 1.9.0 refuses (RecallAtFixed-
// Precision with a NaN recall among the points that reach min_precision: IndexError). tally
// fails with an InputError naming the metric and the recall.
TEST(ClassificationFixed, WhereTorchmetricsFailsTallyFailsWithAnInputError) {
  const Json& errors = expected_file().at("torchmetrics_errors");
  ASSERT_FALSE(errors.empty());
  for (const auto& c : errors) {
    const std::string type = c.at("metric").get<std::string>();
    const std::string e = input_error(type, to_map(c.at("params")), load_inputs(c.at("inputs")));
    EXPECT_NE(e.find(type), std::string::npos) << c.at("name") << ": " << e;
    EXPECT_NE(e.find("recall is NaN"), std::string::npos) << c.at("name") << ": " << e;
  }
}

// The binned state's size is fixed by the parameters, whatever the number of samples.
TEST(ClassificationFixedState, BinnedSizeDoesNotGrowWithTheData) {
  const Json& c = find_case(expected_file(), "LogAUC_wine_prob_macro_t20");
  const Batch data = load_inputs(c.at("inputs"));
  const std::vector<std::pair<std::string, Value::Map>> metrics = {
      {"PrecisionAtFixedRecall", {{"min_recall", 0.5}}},
      {"RecallAtFixedPrecision", {{"min_precision", 0.5}}},
      {"SensitivityAtSpecificity", {{"min_specificity", 0.5}}},
      {"SpecificityAtSensitivity", {{"min_sensitivity", 0.5}}},
      {"LogAUC", {}},
      {"AveragePrecision", {}},
      {"PrecisionRecallCurve", {{"average", "macro"}}},
      {"ROC", {{"average", "micro"}}}};
  for (const auto& [type, extra] : metrics) {
    Value::Map params = {{"task", "multiclass"}, {"num_classes", 3}, {"thresholds", 20}};
    for (const auto& kv : extra) params.push_back(kv);
    std::size_t first = 0;
    for (std::int64_t n : {std::int64_t{10}, data.size()}) {
      const auto m = make_metric(type, params);
      m->add(data.slice(0, n));
      const std::size_t size = pack_state(*m).size();
      if (first == 0) first = size;
      EXPECT_LE(size, first + 16) << type << ": " << n << " samples";
    }
  }
}

Batch batch_of(Tensor preds, Tensor target) {
  Batch b;
  b.set("preds", std::move(preds));
  b.set("target", std::move(target));
  return b;
}

Batch example_batch() {
  return batch_of(Tensor::from_vector<double>({0.1, 0.4, 0.35, 0.8}),
                  Tensor::from_vector<std::int64_t>({0, 1, 1, 0}));
}

// Expected: the file comments' examples (torchmetrics 1.9.0 on these four samples; the
// doc-example test checks them too).
TEST(ClassificationFixed, ExamplesByHand) {
  const Batch b = example_batch();
  const Value::Map bin = {{"task", "binary"}};
  Value v = run_single("PrecisionAtFixedRecall", {{"task", "binary"}, {"min_recall", 0.5}}, b);
  EXPECT_DOUBLE_EQ(v.at("precision").as_double(), 2.0 / 3.0);
  EXPECT_EQ(v.at("threshold").as_double(), 0.35);
  v = run_single("RecallAtFixedPrecision", {{"task", "binary"}, {"min_precision", 0.5}}, b);
  EXPECT_EQ(v.to_json(), R"({"recall":1,"threshold":0.35})");
  v = run_single("SpecificityAtSensitivity", {{"task", "binary"}, {"min_sensitivity", 0.5}}, b);
  EXPECT_EQ(v.to_json(), R"({"specificity":0.5,"threshold":0.4})");
  v = run_single("AveragePrecision", bin, b);
  EXPECT_DOUBLE_EQ(v.at("average_precision").as_double(), 0.5833333333333333);
  // No threshold reaches min_specificity 1 in this binned list: torchmetrics' (0, 1e6).
  v = run_single("SensitivityAtSpecificity",
                 {{"task", "binary"}, {"min_specificity", 1.0}, {"thresholds", Value::Array{0.2}}},
                 b);
  EXPECT_EQ(v.to_json(), R"({"sensitivity":0,"threshold":1000000})");
}

// AveragePrecision without a task stays mmeval's (keys mAP / AP_classwise, fields pred_scores and
// gt_labels): the mmeval docstring example of average_precision.cpp.
TEST(ClassificationFixed, AveragePrecisionWithoutTaskIsUnchanged) {
  Batch b;
  b.set("pred_scores", Tensor::from_vector<double>({0.9, 0.8, 0.3, 0.2, 0.1, 0.2, 0.2, 0.1, 0.7,
                                                    0.5, 0.9, 0.3, 0.8, 0.1, 0.1, 0.2},
                                                   {4, 4}));
  b.set("gt_labels", Tensor::from_vector<std::int64_t>(
                         {1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0}, {4, 4}));
  const Value v = run_single("AveragePrecision", {}, b);
  EXPECT_NEAR(v.at("mAP").as_double(), 0.7083333333333333, 1e-12) << v.to_json();
}

// ---- bad inputs -------------------------------------------------------------------------------

void expect_error(const std::string& type, const Value::Map& p, const Batch& b,
                  const std::vector<std::string>& parts) {
  const std::string e = input_error(type, p, b);
  ASSERT_FALSE(e.empty()) << type << ": no InputError";
  EXPECT_NE(e.find(type), std::string::npos) << e;
  for (const auto& part : parts) EXPECT_NE(e.find(part), std::string::npos) << e;
}

void expect_config_error(const std::string& type, const Value::Map& p,
                         const std::vector<std::string>& parts) {
  const std::string e = config_error(type, p);
  ASSERT_FALSE(e.empty()) << type << ": no ConfigError for " << Value(p).to_json();
  EXPECT_NE(e.find(type), std::string::npos) << e;
  for (const auto& part : parts) EXPECT_NE(e.find(part), std::string::npos) << e;
}

const std::vector<std::pair<std::string, std::string>>& operating_points() {
  static const std::vector<std::pair<std::string, std::string>> m = {
      {"PrecisionAtFixedRecall", "min_recall"},
      {"RecallAtFixedPrecision", "min_precision"},
      {"SensitivityAtSpecificity", "min_specificity"},
      {"SpecificityAtSensitivity", "min_sensitivity"}};
  return m;
}

TEST(ClassificationFixedErrors, BadInputsNameTheFieldAndWhatWasExpected) {
  std::vector<std::pair<std::string, Value::Map>> metrics;
  for (const auto& [type, bound] : operating_points()) metrics.push_back({type, {{bound, 0.5}}});
  metrics.push_back({"LogAUC", {}});
  metrics.push_back({"AveragePrecision", {}});
  const auto t01 = Tensor::from_vector<std::int64_t>({0, 1});
  for (const auto& [type, extra] : metrics) {
    const auto with = [&](Value::Map p) {
      for (const auto& kv : extra) p.push_back(kv);
      return p;
    };
    const Value::Map bin = with({{"task", "binary"}});
    expect_error(type, bin, batch_of(Tensor::from_vector<std::int64_t>({0, 1}), t01),
                 {"preds", "float"});
    expect_error(type, bin,
                 batch_of(Tensor::from_vector<double>({0.1, 0.2}),
                          Tensor::from_vector<std::int64_t>({0, 2})),
                 {"target", "0 or 1"});
    expect_error(type, bin, batch_of(Tensor::from_vector<double>({0.1, std::nan("")}), t01),
                 {"preds", "NaN"});
    expect_error(type, with({{"task", "multiclass"}, {"num_classes", 3}}),
                 batch_of(Tensor::from_vector<double>({0.5, 0.5, 0.5, 0.5}, {2, 2}), t01),
                 {"preds", "num_classes"});
    expect_error(type, with({{"task", "binary"}, {"ignore_index", -1}}),
                 batch_of(Tensor::from_vector<double>({0.1, 0.2}),
                          Tensor::from_vector<std::int64_t>({-1, -1})),
                 {"target", "ignore_index"});
  }
}

TEST(ClassificationFixedErrors, BadParametersAreConfigErrors) {
  for (const auto& [type, bound] : operating_points()) {
    for (const double v : {-0.1, 1.5, std::nan("")})
      expect_config_error(type, {{"task", "binary"}, {bound, v}}, {bound, "[0, 1]"});
    expect_config_error(type, {{"task", "binary"}}, {bound});  // required
    expect_config_error(type, {{"task", "binary"}, {bound, 0.5}, {"thresholds", 1}},
                        {"thresholds"});
  }
  for (const Value& r :
       {Value(Value::Array{0.1, 0.1}), Value(Value::Array{0.5, 0.1}),
        Value(Value::Array{-0.1, 0.5}), Value(Value::Array{0.1, 1.5}), Value(Value::Array{0.1})})
    expect_config_error("LogAUC", {{"task", "binary"}, {"fpr_range", r}}, {"fpr_range"});
  expect_config_error(
      "LogAUC", {{"task", "multiclass"}, {"num_classes", 3}, {"average", "weighted"}}, {"average"});
  // AveragePrecision: micro is multilabel's only; without task, mmeval's averages and no
  // torchmetrics parameter.
  expect_config_error("AveragePrecision",
                      {{"task", "multiclass"}, {"num_classes", 3}, {"average", "micro"}},
                      {"average", "micro"});
  expect_config_error("AveragePrecision", {{"average", "weighted"}}, {"average", "task"});
  expect_config_error("AveragePrecision", {{"thresholds", 10}}, {"thresholds", "task"});
  // PrecisionRecallCurve / ROC: average for multiclass only; ROC's binned macro needs 2
  // thresholds.
  for (const std::string type : {"PrecisionRecallCurve", "ROC"}) {
    expect_config_error(type, {{"task", "binary"}, {"average", "micro"}},
                        {"average", "multiclass"});
    expect_config_error(type, {{"task", "multiclass"}, {"num_classes", 3}, {"average", "weighted"}},
                        {"average"});
  }
  expect_config_error("ROC",
                      {{"task", "multiclass"},
                       {"num_classes", 3},
                       {"average", "macro"},
                       {"thresholds", Value::Array{0.5}}},
                      {"average", "2 thresholds"});
}

}  // namespace
}  // namespace tally::test
