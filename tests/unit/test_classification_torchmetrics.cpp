// torchmetrics' task-based classification metrics of plugins/classification (tm_core.hpp):
// StatScores, Specificity, FBetaScore, HammingDistance, JaccardIndex, ExactMatch,
// MatthewsCorrCoef, CohenKappa and CalibrationError, loaded as the real
// libtally_classification.so through the Registry: values against torchmetrics 1.9.0 on 1..7
// ranks, the size of their state, and bad inputs.
//
// Expected values come from tests/reference/expected_classification_torchmetrics.json, written
// by tests/reference/classification_torchmetrics.py (torchmetrics 1.9.0 in float64; each case
// records its call, the versions, and the cross-checks with torchmetrics' float32 and
// scikit-learn 1.7.2), unless a test says otherwise.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

const Json& expected_file() {
  return expected_json("tests/reference/expected_classification_torchmetrics.json");
}

// ---- values against torchmetrics, 1..7 ranks --------------------------------------------------

class TorchmetricsClassification : public ::testing::TestWithParam<std::string> {};

// 1, 2, 3, 4 and 7 ranks in one batch each and in batches of 7 samples, and with an empty rank
// (batches of 16): two batch sizes rather than the harness's three keep the ~300 cases fast
// under ASan; the states are integer counts and exact sums, so a third adds nothing.
RankSweep sweep() {
  RankSweep s;
  s.batch_sizes = {std::int64_t{1} << 30, 7};
  return s;
}

// Expected: the case's "expected" map (torchmetrics 1.9.0 in float64; the call is the case's
// "call").
TEST_P(TorchmetricsClassification, MatchesTorchmetricsOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  // A case with "tolerance" (MatthewsCorrCoef's zero-denominator branch, which torchmetrics
  // computes in float32 with torch's float32 sqrt; its "tolerance_why" says so) is checked to
  // that relative difference; every other case to 1e-9.
  if (c.contains("tolerance")) {
    const std::string type = c.at("metric").get<std::string>();
    const Value got =
        run_all_rank_counts(type, to_map(c.at("params")), load_inputs(c.at("inputs")));
    expect_matches(got, c.at("expected"), GetParam(), type, c.at("tolerance").get<double>());
  } else {
    check_case(c, load_inputs(c.at("inputs")), GetParam(), sweep());
  }
}

// The largest relative difference of each metric over every case, printed once at the end.
class PrintRelDiffs : public ::testing::Environment {
 public:
  void TearDown() override { print_rel_diffs("torchmetrics 1.9.0 (float64)"); }
};
const auto* const kPrintRelDiffs = ::testing::AddGlobalTestEnvironment(new PrintRelDiffs);

INSTANTIATE_TEST_SUITE_P(Classification, TorchmetricsClassification,
                         ::testing::ValuesIn(case_names(expected_file())), param_name);

// Expected: section "example" of the file (torchmetrics on the wine data of
// configs/examples/data/classification_torchmetrics).
TEST(TorchmetricsClassificationExample, MatchesTorchmetrics) {
  check_example(expected_file().at("example"));
}

// ---- state -------------------------------------------------------------------------------------

// The count state has the size its parameters give, whatever the number of samples (up to the
// msgpack width of its integers).
TEST(TorchmetricsClassificationState, SizeDoesNotGrowWithTheData) {
  const Json& c = find_case(expected_file(), "JaccardIndex_digits_prob");
  const Batch data = load_inputs(c.at("inputs"));
  for (const std::string type : {"StatScores", "JaccardIndex", "MatthewsCorrCoef", "CohenKappa",
                                 "CalibrationError", "ExactMatch"}) {
    Value::Map params = {{"task", "multiclass"}, {"num_classes", 10}};
    std::size_t first = 0;
    for (std::int64_t n : {std::int64_t{10}, data.size()}) {
      const auto m = make_metric(type, params);
      m->add(data.slice(0, n));
      const std::size_t size = pack_state(*m).size();
      if (first == 0) first = size;
      // Only the msgpack widths of the counts' integers may differ.
      EXPECT_LE(size, first + 16) << type << ": " << n << " samples";
      EXPECT_LT(size, 12000u) << type;
    }
  }
}

// ---- small hand-checked examples --------------------------------------------------------------

Batch binary_batch(std::vector<double> preds, std::vector<std::int64_t> target) {
  Batch b;
  b.set("preds", Tensor::from_vector(preds));
  b.set("target", Tensor::from_vector(target));
  return b;
}

// Expected, by hand: preds > 0.5 gives [0, 1, 1, 0] against [0, 1, 0, 1]: tp 1, fp 1, tn 1, fn 1.
TEST(TorchmetricsClassification, BinaryCountsByHand) {
  const Batch b = binary_batch({0.1, 0.9, 0.6, 0.4}, {0, 1, 0, 1});
  const Value v = run_single("StatScores", {{"task", "binary"}}, b);
  EXPECT_EQ(v.to_json(), R"({"tp":1,"fp":1,"tn":1,"fn":1,"support":2})");
  // A float32 threshold: 0.1f is above 0.1 as a double, so float32 preds compare with 0.1f
  // (torch compares a float32 tensor with the threshold cast to float32).
  Batch f;
  f.set("preds", Tensor::from_vector<float>({0.1f, 0.2f}));
  f.set("target", Tensor::from_vector<std::int64_t>({0, 1}));
  EXPECT_EQ(run_single("StatScores", {{"task", "binary"}, {"threshold", 0.1}}, f).at("fp").as_int(),
            0);
}

// torchmetrics decides per update() call whether float preds are logits (any value outside
// [0, 1]); tally decides per batch. Expected, by hand: [-1, 2] are logits: sigmoid -> [0.27,
// 0.88] -> labels [0, 1].
TEST(TorchmetricsClassification, LogitsPerBatch) {
  const Batch b = binary_batch({-1.0, 2.0}, {0, 1});
  EXPECT_EQ(run_single("StatScores", {{"task", "binary"}}, b).at("tp").as_int(), 1);
  EXPECT_EQ(run_single("StatScores", {{"task", "binary"}}, b).at("tn").as_int(), 1);
}

// ---- bad inputs -------------------------------------------------------------------------------

const std::vector<std::string>& count_types() {
  static const std::vector<std::string> t = {"StatScores",      "Specificity",  "FBetaScore",
                                             "HammingDistance", "JaccardIndex", "MatthewsCorrCoef"};
  return t;
}

TEST(TorchmetricsClassificationErrors, BinaryLabelsAndShapes) {
  for (const auto& type : count_types()) {
    const Value::Map p = {{"task", "binary"}};
    const std::string who = "metric '" + type + "': ";
    EXPECT_HAS(error_of([&] {
                 run_single(type, p, binary_batch({0.1, 0.9}, {0, 2}));
               }),
               who + "field 'target' sample 1: label 2 is not 0 or 1");
    EXPECT_HAS(error_of([&] {
                 run_single(type, {{"task", "binary"}, {"ignore_index", -1}},
                            binary_batch({0.1, 0.9}, {0, -2}));
               }),
               "label -2 is not 0 or 1 (or ignore_index -1)");
    Batch shape;
    shape.set("preds", Tensor::from_vector<double>({0.1, 0.9, 0.3, 0.2}, {2, 2}));
    shape.set("target", Tensor::from_vector<std::int64_t>({0, 1}));
    EXPECT_HAS(error_of([&] { run_single(type, p, shape); }),
               who + "field 'target' has shape i64[2], 'preds' has f64[2, 2]: they must be equal");
    EXPECT_HAS(error_of([&] {
                 run_single(type, p,
                            binary_batch({0.1, std::numeric_limits<double>::quiet_NaN()}, {0, 1}));
               }),
               who + "field 'preds' sample 1: score is NaN");
    Batch labels;
    labels.set("preds", Tensor::from_vector<std::int64_t>({0, 3}));
    labels.set("target", Tensor::from_vector<std::int64_t>({0, 1}));
    EXPECT_HAS(error_of([&] { run_single(type, p, labels); }),
               who + "field 'preds' sample 1: label 3 is not 0 or 1");
    Batch float_target;
    float_target.set("preds", Tensor::from_vector<double>({0.1, 0.9}));
    float_target.set("target", Tensor::from_vector<double>({0, 1}));
    EXPECT_HAS(error_of([&] { run_single(type, p, float_target); }),
               who + "field 'target' must hold integer labels, got f64[2]");
    Batch missing;
    missing.set("preds", Tensor::from_vector<double>({0.1}));
    EXPECT_HAS(error_of([&] { run_single(type, p, missing); }),
               who + "field 'target' is missing from the batch (it has: preds)");
  }
}

TEST(TorchmetricsClassificationErrors, MulticlassShapesAndClassIds) {
  for (const auto& type : count_types()) {
    const Value::Map p = {{"task", "multiclass"}, {"num_classes", 3}};
    const std::string who = "metric '" + type + "': ";
    Batch b;
    b.set("preds", Tensor::from_vector<double>({0.2, 0.8, 0.5, 0.5}, {2, 2}));
    b.set("target", Tensor::from_vector<std::int64_t>({0, 1}));
    EXPECT_HAS(error_of([&] { run_single(type, p, b); }),
               who + "field 'preds' has 2 columns (f64[2, 2]), but num_classes is 3");
    Batch out;
    out.set("preds", Tensor::from_vector<std::int64_t>({0, 1}));
    out.set("target", Tensor::from_vector<std::int64_t>({0, 3}));
    EXPECT_HAS(error_of([&] { run_single(type, p, out); }),
               who + "field 'target' sample 1: class id 3 is not in [0, 3)");
    Batch pred_out;
    pred_out.set("preds", Tensor::from_vector<std::int64_t>({-1, 1}));
    pred_out.set("target", Tensor::from_vector<std::int64_t>({0, 1}));
    EXPECT_HAS(error_of([&] { run_single(type, p, pred_out); }),
               who + "field 'preds' sample 0: class id -1 is outside [0, 3)");
    // (Fields of different sample counts never reach a metric: a Batch refuses them.)
    Batch target_2d;
    target_2d.set("preds", Tensor::from_vector<double>({0.2, 0.3, 0.5}, {1, 3}));
    target_2d.set("target", Tensor::from_vector<std::int64_t>({0, 1}, {1, 2}));
    EXPECT_HAS(error_of([&] { run_single(type, p, target_2d); }),
               who + "field 'target' must be 1-D [N] class ids, got i64[1, 2]");
    Batch three_d;
    three_d.set("preds", Tensor::from_vector<double>({0.2, 0.3, 0.5}, {1, 3, 1}));
    three_d.set("target", Tensor::from_vector<std::int64_t>({0}));
    EXPECT_HAS(
        error_of([&] { run_single(type, p, three_d); }),
        who + "field 'preds' must be [N, C] float scores or [N] class ids, got f64[1, 3, 1]");
    // A batch of another width after a first one: the columns no longer match num_classes.
    const auto m = make_metric(type, p);
    Batch ok;
    ok.set("preds", Tensor::from_vector<double>({0.2, 0.3, 0.5}, {1, 3}));
    ok.set("target", Tensor::from_vector<std::int64_t>({2}));
    m->add(ok);
    EXPECT_HAS(error_of([&] { m->add(b); }), "has 2 columns (f64[2, 2]), but num_classes is 3");
  }
}

TEST(TorchmetricsClassificationErrors, MultilabelShapes) {
  for (const auto& type : count_types()) {
    const Value::Map p = {{"task", "multilabel"}, {"num_labels", 3}};
    Batch b;
    b.set("preds", Tensor::from_vector<double>({0.2, 0.8, 0.5, 0.5}, {2, 2}));
    b.set("target", Tensor::from_vector<std::int64_t>({0, 1, 1, 0}, {2, 2}));
    EXPECT_HAS(
        error_of([&] { run_single(type, p, b); }),
        "metric '" + type + "': field 'preds' must be [N, 3] (num_labels columns), got f64[2, 2]");
    Batch t;
    t.set("preds", Tensor::from_vector<double>({0.2, 0.8, 0.5}, {1, 3}));
    t.set("target", Tensor::from_vector<std::int64_t>({0, 1, 5}, {1, 3}));
    EXPECT_HAS(error_of([&] { run_single(type, p, t); }),
               "field 'target' sample 0, label 2: label 5 is not 0 or 1");
  }
}

TEST(TorchmetricsClassificationErrors, CalibrationErrorInputs) {
  const Value::Map p = {{"task", "binary"}};
  Batch labels;
  labels.set("preds", Tensor::from_vector<std::int64_t>({0, 1}));
  labels.set("target", Tensor::from_vector<std::int64_t>({0, 1}));
  EXPECT_HAS(error_of([&] { run_single("CalibrationError", p, labels); }),
             "metric 'CalibrationError': field 'preds' must hold float probabilities or logits, "
             "got i64[2]");
  Batch mc;
  mc.set("preds", Tensor::from_vector<double>({0.2, 0.8}, {1, 2}));
  mc.set("target", Tensor::from_vector<std::int64_t>({1}));
  EXPECT_HAS(error_of([&] {
               run_single("CalibrationError", {{"task", "multiclass"}, {"num_classes", 3}}, mc);
             }),
             "field 'preds' must be [N, 3] (num_classes columns), got f64[1, 2]");
  EXPECT_HAS(error_of([&] {
               run_single("CalibrationError", p,
                          binary_batch({0.5, std::numeric_limits<double>::quiet_NaN()}, {0, 1}));
             }),
             "field 'preds' sample 1: score is NaN");
}

TEST(TorchmetricsClassificationErrors, ExactMatchAndCohenKappaTasks) {
  EXPECT_HAS(config_error("ExactMatch", {{"task", "binary"}}),
             "must be one of multiclass, multilabel");
  EXPECT_HAS(config_error("CohenKappa", {{"task", "multilabel"}}),
             "must be one of binary, multiclass");
  EXPECT_HAS(config_error("CalibrationError", {{"task", "multilabel"}}),
             "must be one of binary, multiclass");
}

TEST(TorchmetricsClassificationErrors, BadParameters) {
  EXPECT_HAS(config_error("StatScores", {{"task", "multiclass"}}),
             "parameter 'num_classes' is required for task multiclass");
  EXPECT_HAS(config_error("StatScores", {{"task", "multilabel"}}),
             "parameter 'num_labels' is required for task multilabel");
  EXPECT_HAS(config_error("StatScores", {{"task", "multiclass"}, {"num_classes", 1}}),
             "num_classes");
  EXPECT_HAS(config_error("Specificity", {{"task", "binary"}, {"threshold", 1.5}}),
             "parameter 'threshold' must be a number in [0, 1], got 1.5");
  EXPECT_HAS(config_error("StatScores", {{"task", "multiclass"}, {"num_classes", 3}, {"top_k", 4}}),
             "parameter 'top_k' must be at most num_classes (3), got 4");
  EXPECT_HAS(config_error("FBetaScore", {{"task", "binary"}, {"beta", 0.0}}),
             "parameter 'beta' must be a finite number above 0, got 0");
  EXPECT_HAS(config_error("FBetaScore", {{"task", "binary"}, {"zero_division", 0.5}}),
             "parameter 'zero_division' must be 0 or 1, got 0.5");
  EXPECT_HAS(config_error("CohenKappa", {{"task", "binary"}, {"weights", "cubic"}}),
             "must be one of none, linear, quadratic");
  EXPECT_HAS(config_error("CalibrationError", {{"task", "binary"}, {"norm", "l3"}}),
             "must be one of l1, l2, max");
  EXPECT_HAS(config_error("CalibrationError", {{"task", "binary"}, {"n_bins", 0}}), "n_bins");
  EXPECT_HAS(config_error("StatScores", {{"task", "binary"}, {"multidim_average", "samplewise"}}),
             "must be one of global");
  EXPECT_HAS(config_error("StatScores", {{"task", "multiclass"}, {"num_classes", 5000}}),
             "num_classes");
  EXPECT_HAS(config_error("StatScores", {{"task", "ternary"}}),
             "must be one of binary, multiclass, multilabel");
}

TEST(TorchmetricsClassificationErrors, NoSamples) {
  for (const auto& type : count_types()) {
    Batch empty;
    EXPECT_HAS(error_of([&] {
                 run_single(type, {{"task", "binary"}}, empty);
               }),
               "metric '" + type + "': no samples");
  }
  Batch empty;
  EXPECT_HAS(error_of([&] {
               run_single("CalibrationError", {{"task", "binary"}}, empty);
             }),
             "no samples");
  EXPECT_HAS(error_of([&] {
               run_single("ExactMatch", {{"task", "multiclass"}, {"num_classes", 3}}, empty);
             }),
             "no samples");
}

// ---- documentation -----------------------------------------------------------------------------

TEST(TorchmetricsClassification, Documented) {
  for (const std::string type :
       {"StatScores", "Specificity", "FBetaScore", "HammingDistance", "JaccardIndex", "ExactMatch",
        "MatthewsCorrCoef", "CohenKappa", "CalibrationError"}) {
    const Component* c = expect_documented(type, "classification");
    if (c == nullptr) continue;
    EXPECT_NE(c->info->doc.find("Reference: torchmetrics 1.9.0"), std::string::npos) << type;
    EXPECT_EQ(c->info->doc.back(), '.') << type;
  }
}

}  // namespace
}  // namespace tally::test
