// torchmetrics' classification curves of plugins/classification (curve_core.hpp):
// PrecisionRecallCurve, ROC and AUROC, exact and binned, loaded as the real
// libtally_classification.so through the Registry: values against torchmetrics 1.9.0 on 1..7 ranks,
// the size of the binned state, and bad inputs.
//
// Expected values come from tests/reference/expected_classification_curves.json, written by
// tests/reference/classification_curves.py (torchmetrics 1.9.0 with float64 as its default
// dtype; each case records its call, the versions and the cross-checks with torchmetrics' float32
// and scikit-learn 1.7.2), unless a test says otherwise.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

const Json& expected_file() {
  return expected_json("tests/reference/expected_classification_curves.json");
}

class ClassificationCurves : public ::testing::TestWithParam<std::string> {};

// One batch a rank and batches of 7 (an empty rank included): the binned states are integer
// counts and the exact curves depend only on the multiset of samples.
RankSweep sweep() {
  RankSweep s;
  s.batch_sizes = {std::int64_t{1} << 30, 7};
  return s;
}

// Expected: the case's "expected" map (torchmetrics 1.9.0, float64; the call is its "call").
// Logits cases: torchmetrics decides the sigmoid / softmax per update() call and tally per
// batch; the logits data hold a value outside [0, 1] in every batch of 7 rows.
TEST_P(ClassificationCurves, MatchesTorchmetricsOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  check_case(c, load_inputs(c.at("inputs")), GetParam(), sweep());
}

class PrintRelDiffs : public ::testing::Environment {
 public:
  void TearDown() override { print_rel_diffs("torchmetrics 1.9.0 (float64)"); }
};
const auto* const kPrintRelDiffs = ::testing::AddGlobalTestEnvironment(new PrintRelDiffs);

INSTANTIATE_TEST_SUITE_P(Classification, ClassificationCurves,
                         ::testing::ValuesIn(case_names(expected_file())), param_name);

// Expected: section "example" (torchmetrics on the wine data of
// configs/examples/data/classification_curves).
TEST(ClassificationCurvesExample, MatchesTorchmetrics) {
  check_example(expected_file().at("example"), sweep());
}

// The binned state's size is fixed by the parameters, whatever the number of samples.
TEST(ClassificationCurvesState, BinnedSizeDoesNotGrowWithTheData) {
  const Json& c = find_case(expected_file(), "ROC_wine_prob_t20");
  const Batch data = load_inputs(c.at("inputs"));
  for (const std::string type : {"PrecisionRecallCurve", "ROC", "AUROC"}) {
    const Value::Map params = {{"task", "multiclass"}, {"num_classes", 3}, {"thresholds", 20}};
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

// Expected: the file comments' examples, by hand (and torchmetrics: the doc-example test).
TEST(ClassificationCurves, ExamplesByHand) {
  const Batch b = batch_of(Tensor::from_vector<double>({0.1, 0.4, 0.35, 0.8}),
                           Tensor::from_vector<std::int64_t>({0, 1, 1, 0}));
  const Value roc = run_single("ROC", {{"task", "binary"}}, b);
  EXPECT_EQ(roc.at("fpr").to_json(), "[0,0.5,0.5,0.5,1]");
  EXPECT_EQ(roc.at("tpr").to_json(), "[0,0,0.5,1,1]");
  const Value pr = run_single("PrecisionRecallCurve", {{"task", "binary"}}, b);
  EXPECT_EQ(pr.at("recall").to_json(), "[1,1,0.5,0,0]");
  EXPECT_EQ(pr.at("thresholds").to_json(), "[0.1,0.35,0.4,0.8]");
  EXPECT_EQ(run_single("AUROC", {{"task", "binary"}}, b).at("auroc").as_double(), 0.5);
}

// ---- bad inputs -------------------------------------------------------------------------------

void expect_error(const std::string& type, const Value::Map& p, const Batch& b,
                  const std::vector<std::string>& parts) {
  const std::string e = input_error(type, p, b);
  ASSERT_FALSE(e.empty()) << type << ": no InputError";
  EXPECT_NE(e.find(type), std::string::npos) << e;
  for (const auto& part : parts) EXPECT_NE(e.find(part), std::string::npos) << e;
}

TEST(ClassificationCurvesErrors, BadInputsNameTheFieldAndWhatWasExpected) {
  for (const std::string type : {"PrecisionRecallCurve", "ROC", "AUROC"}) {
    const Value::Map bin = {{"task", "binary"}};
    const Value::Map mc = {{"task", "multiclass"}, {"num_classes", 3}};
    const Value::Map ml = {{"task", "multilabel"}, {"num_labels", 2}};
    const auto t01 = Tensor::from_vector<std::int64_t>({0, 1});
    // Integer preds: the curves need scores.
    expect_error(type, bin, batch_of(Tensor::from_vector<std::int64_t>({0, 1}), t01),
                 {"preds", "float"});
    // Mismatched shapes (the batch itself refuses different sample counts).
    expect_error(type, bin,
                 batch_of(Tensor::from_vector<double>({0.1, 0.2, 0.3, 0.4}, {2, 2}), t01),
                 {"target", "shape"});
    // A binary label out of range.
    expect_error(type, bin,
                 batch_of(Tensor::from_vector<double>({0.1, 0.2}),
                          Tensor::from_vector<std::int64_t>({0, 2})),
                 {"target", "0 or 1"});
    // NaN preds.
    expect_error(type, bin, batch_of(Tensor::from_vector<double>({0.1, std::nan("")}), t01),
                 {"preds", "NaN"});
    // Float target.
    expect_error(
        type, bin,
        batch_of(Tensor::from_vector<double>({0.1, 0.2}), Tensor::from_vector<double>({0.0, 1.0})),
        {"target", "integer"});
    // Multiclass: wrong number of columns, class id out of range.
    expect_error(type, mc, batch_of(Tensor::from_vector<double>({0.5, 0.5, 0.5, 0.5}, {2, 2}), t01),
                 {"preds", "num_classes"});
    expect_error(type, mc,
                 batch_of(Tensor::from_vector<double>({0.2, 0.3, 0.5, 0.1, 0.1, 0.8}, {2, 3}),
                          Tensor::from_vector<std::int64_t>({0, 3})),
                 {"target", "[0, 3)"});
    // Multilabel: shapes.
    expect_error(type, ml,
                 batch_of(Tensor::from_vector<double>({0.5, 0.5, 0.5}, {1, 3}),
                          Tensor::from_vector<std::int64_t>({0, 1, 1}, {1, 3})),
                 {"preds", "num_labels"});
    // Every target ignored: the curve has no point.
    expect_error(type, {{"task", "binary"}, {"ignore_index", -1}},
                 batch_of(Tensor::from_vector<double>({0.1, 0.2}),
                          Tensor::from_vector<std::int64_t>({-1, -1})),
                 {"target", "ignore_index"});
  }
}

TEST(ClassificationCurvesErrors, BadThresholdsAreConfigErrors) {
  for (const Value& t : {Value(1), Value(Value::Array{Value(1.5)}), Value("x")}) {
    const std::string e = config_error("ROC", {{"task", "binary"}, {"thresholds", t}});
    EXPECT_NE(e.find("thresholds"), std::string::npos) << e;
  }
  EXPECT_NE(config_error("ROC", {{"task", "multiclass"}}).find("num_classes"), std::string::npos);
  // AUROC: max_fpr in (0, 1]; multiclass has no micro average in torchmetrics 1.9.
  for (const double m : {0.0, 1.5})
    EXPECT_NE(config_error("AUROC", {{"task", "binary"}, {"max_fpr", m}}).find("max_fpr"),
              std::string::npos);
  EXPECT_NE(
      config_error("AUROC", {{"task", "multiclass"}, {"num_classes", 3}, {"average", "micro"}})
          .find("average"),
      std::string::npos);
}

}  // namespace
}  // namespace tally::test
