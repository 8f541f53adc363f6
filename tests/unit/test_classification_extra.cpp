// MultiLabelMetric, AveragePrecision, ROCAUC and F1Score (plugins/classification), loaded as the
// real libtally_classification.so through the Registry: values against scikit-learn and mmeval,
// independence from the number of ranks and batches, label formats, and bad inputs.
//
// Expected values come from tests/reference/expected_classification_extra.json, written by
// tests/reference/classification_extra.py (scikit-learn 1.7.2, mmeval 0.2.1; each value records
// the exact call, and "checks" how the other library agreed), unless a test says otherwise.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/reader.hpp"

namespace tally::test {
namespace {

const Json& expected_file() {
  return expected_json("tests/reference/expected_classification_extra.json");
}

// ---- values against the references, 1..7 ranks ------------------------------------------------

class ExtraReferenceCase : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map in expected_classification_extra.json (the call for each
// key is in its "calls" map; null there is NaN, scikit-learn's undefined AUC).
TEST_P(ExtraReferenceCase, MatchesTheReferenceOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  check_case(c, load_inputs(c.at("inputs")), GetParam());
  print_rel_diffs("the reference");
}

INSTANTIATE_TEST_SUITE_P(ClassificationExtra, ExtraReferenceCase,
                         ::testing::ValuesIn(case_names(expected_file())), param_name);

// ---- label formats ------------------------------------------------------------------------------

/// The indicator matrix [N, C] of `onehot` as per-sample lists of class ids (ragged).
Batch::Ragged index_lists(const Tensor& onehot) {
  Batch::Ragged out;
  const auto* v = onehot.data_as<std::uint8_t>();
  const std::int64_t n = onehot.size(0), c = onehot.size(1);
  for (std::int64_t i = 0; i < n; ++i) {
    std::vector<std::int64_t> ids;
    for (std::int64_t k = c - 1; k >= 0; --k)  // any order, and a repeat, mean the same set
      if (v[i * c + k]) ids.push_back(k);
    if (!ids.empty() && i % 3 == 0) ids.push_back(ids.front());
    out.push_back(Tensor::from_vector(ids));
  }
  return out;
}

// Expected: the indicator-matrix cases of expected_classification_extra.json: per-sample lists of
// class ids (mmeval's label format) give the same values, on any number of ranks.
TEST(LabelFormats, IndexListsEqualTheIndicatorMatrix) {
  for (const char* name : {"mlm_tied_f64_thr03_none", "mlm_smooth_top2_none", "ap_ml_tied_f64_none",
                           "auc_ml_tied_f64_none", "auc_ml_smooth_f64_micro"}) {
    const Json& c = find_case(expected_file(), name);
    Batch data = load_inputs(c.at("inputs"));
    data.set_ragged("gt_labels", index_lists(data.tensor("gt_labels")));
    const std::string type = c.at("metric").get<std::string>();
    expect_matches(run_all_rank_counts(type, to_map(c.at("params")), data), c.at("expected"), name,
                   type);
  }
  // predictions as lists too
  const Json& c = find_case(expected_file(), "mlm_pred_onehot_macro");
  Batch data = load_inputs(c.at("inputs"));
  data.set_ragged("pred_labels", index_lists(data.tensor("pred_labels")));
  expect_matches(run_all_rank_counts("MultiLabelMetric", {}, data), c.at("expected"), "lists",
                 "MultiLabelMetric");
  print_rel_diffs("the reference");
}

// Expected: case f1_both; the same labels as per-sample lists (ragged) give the same values.
TEST(LabelFormats, F1ScoreRaggedEqualsDense) {
  const Json& c = find_case(expected_file(), "f1_both");
  const Batch dense = load_inputs(c.at("inputs"));
  Batch ragged;
  for (const char* f : {"pred_labels", "gt_labels"})
    ragged.set_ragged(f, per_sample(dense.tensor(f)));
  expect_matches(run_all_rank_counts("F1Score", to_map(c.at("params")), ragged), c.at("expected"),
                 "ragged", "F1Score");
}

// ---- mmeval's docstring examples ----------------------------------------------------------------

Tensor docstring_scores() {
  return Tensor::from_vector<double>(
      {0.9, 0.8, 0.3, 0.2, 0.1, 0.2, 0.2, 0.1, 0.7, 0.5, 0.9, 0.3, 0.8, 0.1, 0.1, 0.2}, {4, 4});
}

// Expected: mmeval.metrics.AveragePrecision's docstring: mAP 70.833 (percent), AP_classwise
// [100.0, 83.33, 100.0, 0.0]. The docstring's data has a tie (0.2, 0.2 in class 1) that does not
// change AP.
TEST(AveragePrecision, MmevalDocstringExample) {
  Batch b;
  b.set("pred_scores", docstring_scores());
  b.set_ragged("gt_labels",
               {Tensor::from_vector<std::int64_t>({0, 1}), Tensor::from_vector<std::int64_t>({1}),
                Tensor::from_vector<std::int64_t>({2}), Tensor::from_vector<std::int64_t>({0})});
  EXPECT_NEAR(run_single("AveragePrecision", {}, b).at("mAP").as_double(), 0.7083333333333333,
              1e-15);
  const Value none = run_single("AveragePrecision", {{"average", "none"}}, b);
  const auto& ap = none.at("AP_classwise").as_array();
  ASSERT_EQ(ap.size(), 4u);
  EXPECT_EQ(ap[0].as_double(), 1.0);
  EXPECT_NEAR(ap[1].as_double(), 5.0 / 6.0, 1e-15);
  EXPECT_EQ(ap[2].as_double(), 1.0);
  EXPECT_EQ(ap[3].as_double(), 0.0);
}

// Expected: mmeval.metrics.MultiLabelMetric's docstring: topk 2, micro, scores of
// SingleLabelMetric's example with labels [0], [1], [2], [3]: 37.5, 75.0, 50.0 percent.
TEST(MultiLabelMetric, MmevalDocstringExample) {
  Batch b;
  b.set("pred_scores", Tensor::from_vector<double>({0.7, 0.1, 0.1, 0.1, 0.1, 0.3, 0.4, 0.2, 0.3,
                                                    0.4, 0.2, 0.1, 0.0, 0.0, 0.1, 0.9},
                                                   {4, 4}));
  b.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 1, 2, 3}));
  const Value r = run_single("MultiLabelMetric", {{"topk", 2}, {"average", "micro"}}, b);
  EXPECT_EQ(r, Value(Value::Map{{"precision_top2_micro", 0.375},
                                {"recall_top2_micro", 0.75},
                                {"f1-score_top2_micro", 0.5}}))
      << r.to_json();
  // The alias answers too.
  EXPECT_EQ(run_single("MultiLabelPrecisionRecallF1score", {{"topk", 2}, {"average", "micro"}}, b),
            r);
}

// Expected, by hand: on equal scores top-k takes the lower class id first.
TEST(MultiLabelMetric, TopkTiesTakeTheLowerClassFirst) {
  Batch b;
  b.set("pred_scores", Tensor::from_vector<float>({0.5f, 0.2f, 0.5f, 0.5f}, {1, 4}));
  b.set("gt_labels", Tensor::from_vector<std::uint8_t>({0, 0, 1, 1}, {1, 4}));
  const Value r =
      run_single("MultiLabelMetric", {{"topk", 2}, {"average", "none"}, {"items", "recall"}}, b);
  EXPECT_EQ(r.at("recall_top2_classwise"), Value(std::vector<double>{0, 0, 1, 0})) << r.to_json();
}

// Expected: mmeval.metrics.F1Score's docstring: macro_f1 0.4, micro_f1 0.6666666666666666.
TEST(F1Score, MmevalDocstringExample) {
  Batch b;
  b.set("pred_labels", Tensor::from_vector<std::int64_t>({0, 1, 2}));
  b.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 1, 4}));
  const Value r =
      run_single("F1Score", {{"num_classes", 5}, {"mode", Value::Array{"macro", "micro"}}}, b);
  EXPECT_DOUBLE_EQ(r.at("macro_f1").as_double(), 0.4);
  EXPECT_DOUBLE_EQ(r.at("micro_f1").as_double(), 0.6666666666666666);
}

// Expected, by hand (the example in roc_auc.cpp): one of the four (positive, negative) pairs is
// ordered wrongly -> 0.75; a tie between a positive and a negative counts one half.
TEST(ROCAUC, SmallBinaryExamples) {
  Batch b;
  b.set("pred_scores", Tensor::from_vector<double>({0.1, 0.4, 0.35, 0.8}));
  b.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 0, 1, 1}));
  EXPECT_EQ(run_single("ROCAUC", {}, b).at("AUC").as_double(), 0.75);
  Batch t;
  t.set("pred_scores", Tensor::from_vector<float>({0.5f, 0.5f}));
  t.set("gt_labels", Tensor::from_vector<bool>({true, false}));
  EXPECT_EQ(run_single("ROCAUC", {}, t).at("AUC").as_double(), 0.5);
}

// ---- the example config -------------------------------------------------------------------------

// Expected: section "example" of expected_classification_extra.json (scikit-learn and mmeval on
// scikit-learn's digits, made by classification_extra.py); the data read through the npy
// reader's npz support, as configs/examples/multilabel.yaml does.
TEST(MultilabelExample, MatchesTheReference) {
  const Json& ex = expected_file().at("example");
  const std::string npz = source_path(ex.at("archive").get<std::string>()).string();
  Value::Map fields;
  for (const char* m : {"ml_scores", "ml_labels", "digit_proba", "digit_true", "digit_pred"})
    fields.emplace_back(m, npz + ":" + m);
  auto reader = make_reader("npy", {{"fields", Value(fields)}, {"batch_size", 100000}});
  const auto data = reader->next();
  ASSERT_TRUE(data.has_value());
  EXPECT_EQ(data->size(), ex.at("samples").get<std::int64_t>());
  const std::vector<std::pair<std::string, std::string>> ml{{"pred_scores", "ml_scores"},
                                                            {"gt_labels", "ml_labels"}};
  const Batch ml_batch = data->renamed(ml);
  const Batch ovo = data->renamed({{"pred_scores", "digit_proba"}, {"gt_labels", "digit_true"}});
  const Batch f1 = data->renamed({{"pred_labels", "digit_pred"}, {"gt_labels", "digit_true"}});
  const Json& want = ex.at("results");
  const auto check = [&](const std::string& label, const std::string& type, const Value::Map& p,
                         const Batch& b) {
    expect_matches(run_all_rank_counts(type, p, b, label), want.at(label), "example." + label,
                   type);
  };
  check("MultiLabelMetric", "MultiLabelMetric",
        {{"items", Value::Array{"precision", "recall", "f1-score", "support"}}}, ml_batch);
  check("mlm_classwise", "MultiLabelMetric", {{"average", "none"}}, ml_batch);
  check("AveragePrecision", "AveragePrecision", {}, ml_batch);
  check("ap_classwise", "AveragePrecision", {{"average", "none"}}, ml_batch);
  check("ROCAUC", "ROCAUC", {}, ml_batch);
  check("auc_digits_ovo", "ROCAUC", {{"multi_class", "ovo"}}, ovo);
  check("F1Score", "F1Score",
        {{"num_classes", 10},
         {"mode", Value::Array{"macro", "micro"}},
         {"ignored_classes", Value::Array{0}}},
        f1);
  print_rel_diffs("the reference");
}

// ---- bad inputs
// ----------------------------------------------------------------------------------

Batch two(Tensor scores, Tensor labels, const char* pred = "pred_scores") {
  Batch b;
  b.set(pred, std::move(scores));
  b.set("gt_labels", std::move(labels));
  return b;
}

TEST(BadInputs, RankingMetrics) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const char* type : {"AveragePrecision", "ROCAUC"}) {
    EXPECT_EQ(input_error(type, {},
                          two(Tensor::from_vector<double>({0.1, nan, 0.3, 0.4}, {2, 2}),
                              Tensor::from_vector<std::int64_t>({0, 1}))),
              std::string("metric '") + type +
                  "': field 'pred_scores' sample 0: score of class 1 is NaN (scikit-learn "
                  "refuses non-finite scores)");
    EXPECT_NE(input_error(type, {},
                          two(Tensor::from_vector<double>({0.1, inf}),
                              Tensor::from_vector<std::int64_t>({0, 1})))
                  .find("sample 1: score is infinite"),
              std::string::npos);
    EXPECT_NE(input_error(type, {},
                          two(Tensor::from_vector<double>({0.1, 0.2}),
                              Tensor::from_vector<std::int64_t>({0, 2})))
                  .find("field 'gt_labels' sample 1: label 2 is not 0 or 1"),
              std::string::npos);
    EXPECT_NE(input_error(type, {},
                          two(Tensor::from_vector<double>({0.1, 0.2, 0.3, 0.4}, {2, 2}),
                              Tensor::from_vector<std::int64_t>({0, 2})))
                  .find("field 'gt_labels' sample 1: class id 2 is outside [0, 2)"),
              std::string::npos);
    EXPECT_NE(input_error(type, {},
                          two(Tensor::from_vector<double>({0.1, 0.2, 0.3, 0.4}, {2, 2}),
                              Tensor::from_vector<std::int32_t>({0, 1, 2, 1}, {2, 2})))
                  .find("field 'gt_labels' sample 1: indicator of class 0 is 2, expected 0 or 1"),
              std::string::npos);
    EXPECT_NE(input_error(type, {},
                          two(Tensor::from_vector<double>({0.1, 0.2, 0.3, 0.4}, {2, 2}),
                              Tensor::from_vector<std::uint8_t>({0, 1, 1, 1, 0, 0}, {2, 3})))
                  .find("field 'gt_labels' has 3 columns, expected 2 classes"),
              std::string::npos);
    EXPECT_NE(input_error(type, {},
                          two(Tensor::from_vector<std::int64_t>({1, 2}),
                              Tensor::from_vector<std::int64_t>({0, 1})))
                  .find("must hold float32 or float64 scores"),
              std::string::npos);
    Batch ragged;
    ragged.set("pred_scores", Tensor::from_vector<double>({0.1, 0.2, 0.3, 0.4}, {2, 2}));
    ragged.set_ragged("gt_labels", {Tensor::from_vector<std::int64_t>({0}),
                                    Tensor::from_vector<std::int64_t>({1, 5})});
    EXPECT_NE(input_error(type, {}, ragged)
                  .find("field 'gt_labels' sample 1: class id 5 is outside [0, 2)"),
              std::string::npos);
    Batch missing;
    missing.set("pred_scores", Tensor::from_vector<double>({0.1, 0.2}));
    EXPECT_NE(input_error(type, {}, missing).find("field 'gt_labels' is missing"),
              std::string::npos);
    // A change of format between batches.
    const auto m = make_metric(type, {});
    m->add(two(Tensor::from_vector<double>({0.1, 0.2}), Tensor::from_vector<std::int64_t>({0, 1})));
    EXPECT_THROW(m->add(two(Tensor::from_vector<double>({0.1, 0.2, 0.3, 0.4}, {2, 2}),
                            Tensor::from_vector<std::int64_t>({0, 1}))),
                 InputError);
  }
  EXPECT_EQ(config_error("ROCAUC", {{"multi_class", "ovo"}, {"average", "micro"}}),
            "metric 'ROCAUC': parameter 'average' must be macro or weighted with multi_class ovo "
            "(as scikit-learn), got 'micro'");
  EXPECT_NE(config_error("AveragePrecision", {{"average", "micro"}}), "");
}

TEST(BadInputs, MultiLabelMetric) {
  EXPECT_NE(config_error("MultiLabelMetric", {{"thr", 0.3}, {"topk", 2}})
                .find("parameter 'topk' cannot be given together with thr"),
            std::string::npos);
  EXPECT_NE(config_error("MultiLabelMetric", {{"topk", 0}}).find("must be >= 1"),
            std::string::npos);
  const Batch b = two(Tensor::from_vector<double>({0.1, 0.2, 0.3, 0.4}, {2, 2}),
                      Tensor::from_vector<std::uint8_t>({0, 1, 1, 1}, {2, 2}));
  EXPECT_NE(input_error("MultiLabelMetric", {{"topk", 3}}, b)
                .find("field 'pred_scores' has 2 classes, fewer than topk 3"),
            std::string::npos);
  EXPECT_NE(input_error("MultiLabelMetric", {{"num_classes", 3}}, b)
                .find("field 'pred_scores' has 2 columns, expected 3 (num_classes)"),
            std::string::npos);
  EXPECT_NE(input_error("MultiLabelMetric", {},
                        two(Tensor::from_vector<double>({0.1, 0.2, 0.3, 0.4}, {2, 2}),
                            Tensor::from_vector<std::int64_t>({0, 2})))
                .find("field 'gt_labels' sample 1: class id 2 is outside [0, 2)"),
            std::string::npos);
  EXPECT_NE(input_error("MultiLabelMetric", {{"thr", 0.2}},
                        two(Tensor::from_vector<std::uint8_t>({0, 1, 1, 1}, {2, 2}),
                            Tensor::from_vector<std::uint8_t>({0, 1, 1, 1}, {2, 2}), "pred_labels"))
                .find("holds labels, not scores"),
            std::string::npos);
  Batch ids;
  ids.set("pred_labels", Tensor::from_vector<std::int64_t>({0, 1}));
  ids.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 1}));
  try {
    run_single("MultiLabelMetric", {}, ids);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'num_classes' is required"), std::string::npos);
  }
}

TEST(BadInputs, F1Score) {
  EXPECT_NE(config_error("F1Score", {}).find("num_classes"), std::string::npos);
  EXPECT_NE(config_error("F1Score", {{"num_classes", 3},
                                     {"cared_classes", Value::Array{1}},
                                     {"ignored_classes", Value::Array{2}}})
                .find("cannot be given together with cared_classes"),
            std::string::npos);
  EXPECT_NE(config_error("F1Score", {{"num_classes", 3}, {"cared_classes", Value::Array{3}}})
                .find("holds 3, outside [0, 3)"),
            std::string::npos);
  const Value::Map p{{"num_classes", 3}};
  EXPECT_EQ(
      input_error("F1Score", p,
                  two(Tensor::from_vector<std::int64_t>({0, 1, 2, 1}, {2, 2}),
                      Tensor::from_vector<std::int64_t>({0, 1, 3, -1}, {2, 2}), "pred_labels")),
      "metric 'F1Score': field 'gt_labels' sample 1: label 3 is not below num_classes 3 "
      "(negative labels mean no class)");
  EXPECT_NE(
      input_error("F1Score", p,
                  two(Tensor::from_vector<std::int64_t>({0, 1, 2, 1}, {2, 2}),
                      Tensor::from_vector<std::int64_t>({0, 1, 2, 1, 0, 0}, {2, 3}), "pred_labels"))
          .find("expected the same shape"),
      std::string::npos);
  EXPECT_NE(input_error("F1Score", p,
                        two(Tensor::from_vector<double>({0.0, 1.0}),
                            Tensor::from_vector<std::int64_t>({0, 1}), "pred_labels"))
                .find("must hold integer labels"),
            std::string::npos);
  Batch ragged;
  ragged.set_ragged("pred_labels", {Tensor::from_vector<std::int64_t>({0, 1})});
  ragged.set_ragged("gt_labels", {Tensor::from_vector<std::int64_t>({0})});
  EXPECT_NE(input_error("F1Score", p, ragged).find("sample 0: has 2 labels, 'gt_labels' has 1"),
            std::string::npos);
}

}  // namespace
}  // namespace tally::test
