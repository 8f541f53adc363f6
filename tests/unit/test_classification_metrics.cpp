// The classification plugin (plugins/classification), loaded as the real libtally_classification.so
// through the Registry: values against scikit-learn, independence from the number of ranks, and
// every bad input.
//
// Expected values come from tests/reference/expected_classification.json, written by
// tests/reference/classification.py with scikit-learn (the versions and, for each value, the
// exact scikit-learn call are recorded in the file), unless a test says otherwise.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/state.hpp"

namespace tally::test {
namespace {

const Json& expected_file() {
  return expected_json("tests/reference/expected_classification.json");
}

// ---- values against scikit-learn, 1..7 ranks --------------------------------------------------

class ReferenceCase : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map in expected_classification.json (scikit-learn; the call
// for each key is in the case's "calls" map).
TEST_P(ReferenceCase, MatchesScikitLearnOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  check_case(c, load_inputs(c.at("inputs")), GetParam());
  print_rel_diffs("scikit-learn");
}

INSTANTIATE_TEST_SUITE_P(Classification, ReferenceCase,
                         ::testing::ValuesIn(case_names(expected_file())), param_name);

// Expected: section "example" of expected_classification.json (scikit-learn on the digits data
// of configs/examples/data, made by tests/reference/make_example_data.py).
TEST(ClassificationExample, MatchesScikitLearn) {
  check_example(expected_file().at("example"));
  print_rel_diffs("scikit-learn");
}

// Every float32/float64 and label-dtype variant of dataset a gives the same confusion matrix and
// accuracy: the data differ only in storage type (checked in classification.py: same ties).
TEST(ClassificationDtypes, EveryLabelDtypeGivesTheSameResult) {
  const Tensor s64 = load_npy(source_path("tests/data/classification/a_scores_f64.npy"));
  const Tensor s32 = load_npy(source_path("tests/data/classification/a_scores_f32.npy"));
  std::vector<Value> results;
  for (const char* labels : {"a_labels_i64.npy", "a_labels_i32.npy", "a_labels_u8.npy"}) {
    for (const Tensor* s : {&s64, &s32}) {
      Batch b;
      b.set("pred_scores", *s);
      b.set("gt_labels", load_npy(source_path(std::string("tests/data/classification/") + labels)));
      Value r = Value::map();
      r.set("acc", run_single("Accuracy", {{"topk", Value::Array{1, 2, 3}}}, b));
      r.set("cm", run_single("ConfusionMatrix", {{"num_classes", 7}}, b));
      r.set("prf", run_single("SingleLabelMetric", {{"average", "none"}}, b));
      results.push_back(r);
    }
  }
  for (const auto& r : results) EXPECT_EQ(r, results.front()) << r.to_json();
}

// ---- small hand-checked examples --------------------------------------------------------------

Batch mmeval_docstring_batch() {
  Batch b;
  b.set("pred_scores", Tensor::from_vector<double>({0.7, 0.1, 0.1, 0.1,  //
                                                    0.1, 0.3, 0.4, 0.2,  //
                                                    0.3, 0.4, 0.2, 0.1,  //
                                                    0.0, 0.0, 0.1, 0.9},
                                                   {4, 4}));
  b.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 1, 2, 3}));
  return b;
}

// Expected: the examples in the docstring of mmeval.metrics.Accuracy.
TEST(Accuracy, MmevalDocstringExamples) {
  const Batch b = mmeval_docstring_batch();
  const Value r = run_single("Accuracy", {{"topk", Value::Array{1, 2, 3}}}, b);
  EXPECT_EQ(r, Value(Value::Map{{"top1", 0.5}, {"top2", 0.75}, {"top3", 1.0}})) << r.to_json();
  const Value t = run_single("Accuracy", {{"topk", 2}, {"thrs", Value::Array{0.1, 0.5}}}, b);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.at("top2_thr-0.10").as_double(), 0.75);
  EXPECT_EQ(t.at("top2_thr-0.50").as_double(), 0.5);

  Batch labels;  // mmeval: preds [0, 2, 1, 3], labels [0, 1, 2, 3] -> top1 0.5
  labels.set("pred_labels", Tensor::from_vector<std::int64_t>({0, 2, 1, 3}));
  labels.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 1, 2, 3}));
  EXPECT_EQ(run_single("Accuracy", {}, labels).at("top1").as_double(), 0.5);
}

// Expected: the examples in the docstring of mmeval.metrics.SingleLabelMetric (50.0 percent
// there is 0.5 here).
TEST(SingleLabelMetric, MmevalDocstringExamples) {
  const Value micro =
      run_single("SingleLabelMetric", {{"average", "micro"}}, mmeval_docstring_batch());
  EXPECT_EQ(micro, Value(Value::Map{
                       {"precision_micro", 0.5}, {"recall_micro", 0.5}, {"f1-score_micro", 0.5}}))
      << micro.to_json();
  Batch labels;
  labels.set("pred_labels", Tensor::from_vector<std::int64_t>({0, 2, 1, 3}));
  labels.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 1, 2, 3}));
  const Value macro = run_single("SingleLabelMetric", {{"num_classes", 4}}, labels);
  EXPECT_EQ(macro, Value(Value::Map{{"precision", 0.5}, {"recall", 0.5}, {"f1-score", 0.5}}))
      << macro.to_json();
}

// Expected: mmeval 0.2.1's PrecisionRecallF1score docstring (preds [2, 0, 1, 1], labels [2, 1, 2,
// 0]: singlelabel 33.3333 / 16.6667 / 22.2222 percent, rounded there, are 1/3, 1/6, 2/9 here;
// multilabel micro 25.0 each), and the same call for thrs 0.7 and topk 1 on two multi-label score
// rows (mmeval: 100.0 each; classwise [100, 100, 0]). The factory gives SingleLabelMetric's and
// MultiLabelMetric's results with the same parameters (thrs standing for thr).
TEST(PrecisionRecallF1score, MmevalFactoryExamples) {
  Batch b;
  b.set("pred_labels", Tensor::from_vector<std::int64_t>({2, 0, 1, 1}));
  b.set("gt_labels", Tensor::from_vector<std::int64_t>({2, 1, 2, 0}));
  const Value single = run_single("PrecisionRecallF1score", {{"num_classes", 3}}, b);
  EXPECT_EQ(single,
            Value(Value::Map{{"precision", 1.0 / 3}, {"recall", 1.0 / 6}, {"f1-score", 2.0 / 9}}))
      << single.to_json();
  EXPECT_EQ(single, run_single("SingleLabelMetric", {{"num_classes", 3}}, b));
  const Value micro =
      run_single("PrecisionRecallF1score",
                 {{"task", "multilabel"}, {"average", "micro"}, {"num_classes", 3}}, b);
  EXPECT_EQ(micro,
            Value(Value::Map{
                {"precision_micro", 0.25}, {"recall_micro", 0.25}, {"f1-score_micro", 0.25}}))
      << micro.to_json();
  Batch m;
  m.set("pred_scores", Tensor::from_vector<double>({0.1, 0.9, 0.8, 0.8, 0.2, 0.6}, {2, 3}));
  m.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 1, 1, 1, 0, 0}, {2, 3}));
  const Value thr = run_single("PrecisionRecallF1score",
                               {{"task", "multilabel"}, {"num_classes", 3}, {"thrs", 0.7}}, m);
  EXPECT_EQ(thr.at("precision_thr-0.70").as_double(), 1.0) << thr.to_json();
  EXPECT_EQ(thr, run_single("MultiLabelMetric", {{"num_classes", 3}, {"thr", 0.7}}, m));
  const Value top =
      run_single("PrecisionRecallF1score",
                 {{"task", "multilabel"}, {"num_classes", 3}, {"topk", 1}, {"average", "none"}}, m);
  EXPECT_EQ(top.at("precision_top1_classwise"), Value(std::vector<double>{1.0, 1.0, 0.0}))
      << top.to_json();
  // Parameters the chosen task does not take are errors (mmeval drops topk silently).
  EXPECT_NE(config_error("PrecisionRecallF1score", {{"topk", 1}})
                .find("parameter 'topk' does not apply to task singlelabel"),
            std::string::npos);
  EXPECT_NE(config_error("PrecisionRecallF1score",
                         {{"task", "multilabel"}, {"thrs", Value::Array{0.3, 0.5}}})
                .find("task multilabel takes one"),
            std::string::npos);
}

// Expected, by hand from scikit-learn's rule (stable ascending argsort, reversed): for scores
// [0.5, 0.5, 0.5, 0.1] the order is classes 2, 1, 0, 3. So true class 0 is a top-3 hit only,
// class 2 a top-1 hit, class 3 only a top-4 hit.
TEST(Accuracy, TiesRankTheHigherClassFirst) {
  for (const auto& [label, first_k] :
       std::vector<std::pair<std::int64_t, int>>{{0, 3}, {1, 2}, {2, 1}, {3, 4}}) {
    for (bool f32 : {false, true}) {
      Batch b;
      if (f32)
        b.set("pred_scores", Tensor::from_vector<float>({0.5f, 0.5f, 0.5f, 0.1f}, {1, 4}));
      else
        b.set("pred_scores", Tensor::from_vector<double>({0.5, 0.5, 0.5, 0.1}, {1, 4}));
      b.set("gt_labels", Tensor::from_vector<std::int64_t>({label}));
      const Value r = run_single("Accuracy", {{"topk", Value::Array{1, 2, 3, 4}}}, b);
      for (int k = 1; k <= 4; ++k)
        EXPECT_EQ(r.at("top" + std::to_string(k)).as_double(), k >= first_k ? 1.0 : 0.0)
            << "label " << label << " k " << k << " f32 " << f32;
    }
  }
}

// Expected, by hand: with no threshold (tally's default) a true class with a negative logit is
// still a hit; with mmeval's default thrs 0.0 it would not be.
TEST(Accuracy, NegativeLogitsCountWithoutThreshold) {
  Batch b;
  b.set("pred_scores", Tensor::from_vector<float>({-1.0f, -3.0f, -2.0f, -0.5f}, {2, 2}));
  b.set("gt_labels", Tensor::from_vector<std::int32_t>({0, 1}));
  EXPECT_EQ(run_single("Accuracy", {}, b).at("top1").as_double(), 1.0);
  EXPECT_EQ(run_single("Accuracy", {{"thrs", 0.0}}, b).at("top1").as_double(), 0.0);
  const Value both = run_single("Accuracy", {{"thrs", Value::Array{Value(), 0.0}}}, b);
  EXPECT_EQ(both, Value(Value::Map{{"top1_no-thr", 1.0}, {"top1_thr-0.00", 0.0}}))
      << both.to_json();
}

// Expected, by hand: the argmax of [0.2, 0.4, 0.4] is class 1 (numpy.argmax, first among equal);
// with thrs 0.4 no class is predicted (max <= thr), so the sample is a false negative only.
TEST(SingleLabelMetric, ArgmaxTakesTheFirstOfEqualScoresAndThresholdsDropPredictions) {
  Batch b;
  b.set("pred_scores", Tensor::from_vector<double>({0.2, 0.4, 0.4, 0.9, 0.05, 0.05}, {2, 3}));
  b.set("gt_labels", Tensor::from_vector<std::uint8_t>({1, 0}));
  const Value r = run_single("SingleLabelMetric",
                             {{"average", "none"},
                              {"thrs", Value::Array{Value(), 0.4}},
                              {"items", Value::Array{"precision", "recall", "support"}}},
                             b);
  using D = std::vector<double>;
  using I = std::vector<std::int64_t>;
  const Value want(Value::Map{{"precision_no-thr_classwise", Value(D{1.0, 1.0, 0.0})},
                              {"recall_no-thr_classwise", Value(D{1.0, 1.0, 0.0})},
                              {"support_no-thr_classwise", Value(I{1, 1, 0})},
                              {"precision_thr-0.40_classwise", Value(D{1.0, 0.0, 0.0})},
                              {"recall_thr-0.40_classwise", Value(D{1.0, 0.0, 0.0})},
                              {"support_thr-0.40_classwise", Value(I{1, 1, 0})}});
  EXPECT_EQ(r, want) << r.to_json();
}

// Expected, by hand: one sample per cell. A 16-bit label 299 with K = 300 indexes cell
// 299 * 300 + 299 = 89999, past what 16 bits hold: the index must be computed in 64 bits.
TEST(ConfusionMatrix, NarrowLabelsIndexIn64Bits) {
  const std::int64_t k = 300;
  Batch b;
  b.set("pred_labels", Tensor::from_vector<std::uint16_t>({299, 0, 150, 299}));
  b.set("gt_labels", Tensor::from_vector<std::int16_t>({299, 299, 150, 0}));
  const Value r = run_single("ConfusionMatrix", {{"num_classes", k}}, b);
  const auto& rows = r.at("matrix").as_array();
  ASSERT_EQ(rows.size(), 300u);
  std::int64_t total = 0;
  for (std::int64_t y = 0; y < k; ++y) {
    ASSERT_EQ(rows[static_cast<std::size_t>(y)].size(), 300u);
    for (std::int64_t p = 0; p < k; ++p) {
      const std::int64_t v =
          rows[static_cast<std::size_t>(y)].as_array()[static_cast<std::size_t>(p)].as_int();
      total += v;
      const bool hit = (y == 299 && p == 299) || (y == 299 && p == 0) || (y == 150 && p == 150) ||
                       (y == 0 && p == 299);
      EXPECT_EQ(v, hit ? 1 : 0) << y << "," << p;
    }
  }
  EXPECT_EQ(total, 4);
}

// Expected, by hand: row = true class, column = prediction (scikit-learn's orientation).
TEST(ConfusionMatrix, RowsAreTrueClassesColumnsPredictions) {
  Batch b;
  b.set("pred_labels", Tensor::from_vector<std::int64_t>({0, 2, 1, 2}));
  b.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 1, 1, 2}));
  using I = std::vector<std::int64_t>;
  const Value r = run_single("ConfusionMatrix", {{"num_classes", 3}}, b);
  EXPECT_EQ(r, Value(Value::Map{{"matrix", Value(Value::Array{Value(I{1, 0, 0}), Value(I{0, 1, 1}),
                                                              Value(I{0, 0, 1})})}}))
      << r.to_json();
}

// Large state travels as one msgpack bin per array (docs/architecture.md, "The sync protocol": read
// in place, no per-element decode), not as a msgpack array of integers.
TEST(ClassificationState, CountersPackAsBinaries) {
  for (const auto& [type, params] :
       std::vector<std::pair<std::string, Value::Map>>{{"Accuracy", {}},
                                                       {"SingleLabelMetric", {{"num_classes", 3}}},
                                                       {"ConfusionMatrix", {{"num_classes", 3}}}}) {
    const msgpack::sbuffer buf = pack_state(*make_metric(type, params));
    const auto h = msgpack::unpack(buf.data(), buf.size());
    ASSERT_EQ(h.get().type, msgpack::type::ARRAY) << type;
    EXPECT_EQ(h.get().via.array.ptr[0].type, msgpack::type::BIN) << type;
  }
}

// ---- bad inputs: InputError naming the metric and the field -----------------------------------

Batch scores_batch(std::int64_t n, std::int64_t c, std::int64_t bad_row = -1,
                   std::int64_t bad_label = 0) {
  std::vector<float> s(static_cast<std::size_t>(n * c));
  std::vector<std::int64_t> y(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    y[static_cast<std::size_t>(i)] = i % c;
    for (std::int64_t j = 0; j < c; ++j)
      s[static_cast<std::size_t>(i * c + j)] = static_cast<float>((i * 7 + j * 3) % 11) / 10.0f;
  }
  if (bad_row >= 0) y[static_cast<std::size_t>(bad_row)] = bad_label;
  Batch b;
  b.set("pred_scores", Tensor::from_vector(s, {n, c}));
  b.set("gt_labels", Tensor::from_vector(y));
  return b;
}

const std::vector<std::pair<std::string, Value::Map>>& score_metrics() {
  static const std::vector<std::pair<std::string, Value::Map>> m = {
      {"Accuracy", {}}, {"SingleLabelMetric", {}}, {"ConfusionMatrix", {{"num_classes", 10}}}};
  return m;
}

// compute_local(), the engine's path in a world of one, gives the bits compute_synced() gives
// from the state synced as on a world of several ranks, and leaves the state in place, also
// after a compute that throws. Expected: compute_states (write_sums, pack_gathered,
// compute_synced) of the same metric's state.
TEST(ClassificationState, ComputeLocalIsComputeSyncedAndKeepsTheState) {
  auto metrics = score_metrics();
  metrics.emplace_back("AveragePrecision", Value::Map{});
  metrics.emplace_back("ROCAUC", Value::Map{{"multi_class", "ovr"}});
  for (const auto& [type, params] : metrics) {
    const auto m = make_metric(type, params);
    try {
      m->compute_local();  // no samples yet: an error for most
    } catch (const Error&) {
    }
    m->add(scores_batch(20, 10));
    EXPECT_TRUE(same_bits(m->compute_local(), compute_states(*m, {m}))) << type;
    m->add(scores_batch(30, 10));
    const Value both = m->compute_local();
    EXPECT_TRUE(same_bits(both, compute_states(*m, {m}))) << type;
    EXPECT_FALSE(both.as_map().empty()) << type;
  }
}

// Which counts are summed across ranks in place (MPI_Reduce) rather than gathered, and how many:
// Accuracy topk [1, 5] -> 2 hit counts + n; ConfusionMatrix 10 -> 100 + n; SingleLabelMetric
// with num_classes 10 -> support, tp, predicted (10 each) + n; without num_classes the classes
// come from the data (0: gathered, and added in rank order). ROC-AUC and AP gather their
// per-sample scores and labels and sum only n. Whether anything is gathered: the number of
// classes (agree) of the single- and multi-label metrics, the per-sample state of the ranking
// metrics. run_ranks (metric_harness.hpp) checks on every metric's test data that the summed
// counts give the bits of a world of one.
TEST(ClassificationState, CountsAreSummedInPlace) {
  const std::vector<std::tuple<std::string, Value::Map, std::size_t, bool>> cases = {
      {"Accuracy", {{"topk", Value::Array{1, 5}}}, 3, false},
      {"ConfusionMatrix", {{"num_classes", 10}}, 101, false},
      {"SingleLabelMetric", {{"num_classes", 10}}, 31, true},
      {"SingleLabelMetric", {}, 0, true},
      {"MultiLabelMetric", {{"num_classes", 10}}, 31, true},
      {"MultiLabelMetric", {}, 0, true},
      {"F1Score", {{"num_classes", 10}}, 31, false},
      {"ROCAUC", {}, 1, true},
      {"AveragePrecision", {}, 1, true}};
  for (const auto& [type, params, size, gathers] : cases) {
    const auto m = make_metric(type, params);
    EXPECT_EQ(m->summed_size(), size) << type;
    EXPECT_EQ(m->gathers(), gathers) << type;
  }
}

// A state whose count arrays do not have the size the parameters give (a checkpoint of another
// configuration restored into this one) is refused rather than summed out of place, or read out
// of range in a world of one.
TEST(ClassificationState, ACountArrayOfAnotherSizeIsNotSummed) {
  // A state saved under other parameters is refused when it is restored
  // (TypedMetric::check_restored), before it could be summed or computed.
  for (const auto& [type, k] : std::vector<std::pair<std::string, std::int64_t>>{
           {"ConfusionMatrix", 4}, {"SingleLabelMetric", 4}, {"F1Score", 4}, {"Accuracy", 0}}) {
    SCOPED_TRACE(type);
    const Value::Map three =
        k > 0 ? Value::Map{{"num_classes", 3}} : Value::Map{{"topk", Value::Array{1, 2}}};
    const Value::Map four =
        k > 0 ? Value::Map{{"num_classes", k}} : Value::Map{{"topk", Value::Array{1, 2, 3}}};
    const auto from = make_metric(type, three);
    if (type == "F1Score") {
      Batch b;
      b.set("pred_labels", Tensor::from_vector<std::int64_t>({0, 2, 1}));
      b.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 1, 1}));
      from->add(b);
    } else {
      from->add(scores_batch(20, 3));
    }
    EXPECT_HAS(error_of<RuntimeError>(
                   [&] { (void)restored([&] { return make_metric(type, four); }, *from); }),
               "counts where this metric's parameters make");
  }
  const auto three = make_metric("ConfusionMatrix", {{"num_classes", 3}});
  three->add(scores_batch(20, 3));
  EXPECT_HAS(
      error_of<RuntimeError>([&] {
        (void)restored([] { return make_metric("ConfusionMatrix", {{"num_classes", 4}}); }, *three);
      }),
      "the saved state is corrupt (state field 0): 9 counts where this metric's parameters make "
      "16");
}

TEST(ClassificationErrors, ClassIdOutOfRange) {
  for (const auto& [type, params] : score_metrics()) {
    const auto m = make_metric(type, params);
    const std::string msg = error_of([&] { m->add(scores_batch(30, 10, 17, 12)); });
    EXPECT_HAS(
        msg, "metric '" + type + "': field 'gt_labels' sample 17: class id 12 is outside [0, 10)");
  }
}

TEST(ClassificationErrors, SampleNumbersCountEarlierBatches) {
  const auto m = make_metric("Accuracy", {}, "top1");
  m->add(scores_batch(5, 10));
  const std::string msg = error_of([&] { m->add(scores_batch(30, 10, 17, 10)); });
  EXPECT_HAS(
      msg, "metric 'top1' (Accuracy): field 'gt_labels' sample 22: class id 10 is outside [0, 10)");
}

TEST(ClassificationErrors, NegativeClassId) {
  for (const auto& [type, params] : score_metrics()) {
    const auto m = make_metric(type, params);
    const std::string msg = error_of([&] { m->add(scores_batch(30, 10, 3, -1)); });
    EXPECT_HAS(msg,
               "metric '" + type + "': field 'gt_labels' sample 3: class id -1 is outside [0, 10)");
  }
  // Label predictions without a class count: only the lower bound applies.
  Batch b;
  b.set("pred_labels", Tensor::from_vector<std::int8_t>({1, -2, 0}));
  b.set("gt_labels", Tensor::from_vector<std::int8_t>({1, 1, 0}));
  const std::string msg = error_of([&] { make_metric("Accuracy", {})->add(b); });
  EXPECT_HAS(msg,
             "metric 'Accuracy': field 'pred_labels' sample 1: class id -2 is outside [0, inf)");
  const std::string cm = error_of([&] {
    make_metric("ConfusionMatrix", {{"num_classes", 3}})->add(b);
  });
  EXPECT_HAS(
      cm, "metric 'ConfusionMatrix': field 'pred_labels' sample 1: class id -2 is outside [0, 3)");
}

TEST(ClassificationErrors, NanScore) {
  for (const auto& [type, params] : score_metrics()) {
    for (bool f64 : {false, true}) {
      std::vector<double> s(40, 0.25);
      s[3 * 10 + 2] = std::numeric_limits<double>::quiet_NaN();
      Batch b;
      if (f64) {
        b.set("pred_scores", Tensor::from_vector(s, {4, 10}));
      } else {
        b.set("pred_scores", Tensor::from_vector(std::vector<float>(s.begin(), s.end()), {4, 10}));
      }
      b.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 1, 2, 3}));
      const std::string msg = error_of([&] { make_metric(type, params)->add(b); });
      EXPECT_HAS(msg,
                 "metric '" + type + "': field 'pred_scores' sample 3: score of class 2 is NaN");
    }
  }
}

TEST(ClassificationErrors, InfinitiesAreScoresNotErrors) {
  // Expected, by hand: -inf (a masked logit) ranks last, +inf first.
  const double inf = std::numeric_limits<double>::infinity();
  Batch b;
  b.set("pred_scores", Tensor::from_vector<double>({-inf, 1.0, inf, 0.0}, {2, 2}));
  b.set("gt_labels", Tensor::from_vector<std::int64_t>({1, 0}));
  EXPECT_EQ(run_single("Accuracy", {}, b).at("top1").as_double(), 1.0);
}

TEST(ClassificationErrors, ShapeMismatches) {
  for (const auto& [type, params] : score_metrics()) {
    Batch flat;  // scores must be [N, C]
    flat.set("pred_scores", Tensor::from_vector<float>({0.1f, 0.2f}));
    flat.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 1}));
    EXPECT_HAS(error_of([&] { make_metric(type, params)->add(flat); }),
               "metric '" + type + "': field 'pred_scores' must be 2-D [N, C], got f32[2]");
    Batch labels2d;  // labels must be [N]
    labels2d.set("pred_scores", Tensor::from_vector<float>(std::vector<float>(20, 0.5f), {2, 10}));
    labels2d.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 1}, {2, 1}));
    EXPECT_HAS(error_of([&] { make_metric(type, params)->add(labels2d); }),
               "metric '" + type + "': field 'gt_labels' must be 1-D [N], got i64[2, 1]");
  }
  // Columns against num_classes.
  EXPECT_HAS(error_of([&] {
               make_metric("ConfusionMatrix", {{"num_classes", 7}})->add(scores_batch(4, 10));
             }),
             "metric 'ConfusionMatrix': field 'pred_scores' has 10 columns, but num_classes is 7");
  EXPECT_HAS(
      error_of([&] {
        make_metric("SingleLabelMetric", {{"num_classes", 7}})->add(scores_batch(4, 10));
      }),
      "metric 'SingleLabelMetric': field 'pred_scores' has 10 columns, but num_classes is 7");
  // Columns changing between batches.
  const auto m = make_metric("SingleLabelMetric", {});
  m->add(scores_batch(4, 10));
  EXPECT_HAS(
      error_of([&] { m->add(scores_batch(4, 9)); }),
      "metric 'SingleLabelMetric': field 'pred_scores' has 9 columns, earlier batches had 10");
  // Rows: a Batch refuses fields of different lengths, so the check is the helper's.
  const InputChecker check("metric 'Accuracy'");
  EXPECT_HAS(error_of([&] {
               check.same_rows(Tensor::zeros(DType::F32, {99, 10}), "pred_scores",
                               Tensor::zeros(DType::I64, {100}), "gt_labels");
             }),
             "metric 'Accuracy': field 'pred_scores' has 99 rows, 'gt_labels' has 100");
}

// Without num_classes the number of classes comes from the data: ranks that saw another number
// of score columns (or indicator columns) read inconsistent data, an InputError (exit 2) naming
// the rank, whichever rank saw more, also past an empty rank; never a "corrupt state".
TEST(ClassificationErrors, ClassCountsDifferAcrossRanks) {
  const auto indicator = [](std::int64_t c) {
    Batch b = scores_batch(4, c);
    std::vector<std::int64_t> hot(static_cast<std::size_t>(4 * c), 0);
    for (std::int64_t i = 0; i < 4; ++i) hot[static_cast<std::size_t>(i * c + i % c)] = 1;
    b.set("gt_labels", Tensor::from_vector(hot, {4, c}));
    return b;
  };
  for (const std::string type : {"SingleLabelMetric", "MultiLabelMetric"}) {
    for (const auto& [c0, c1] :
         std::vector<std::pair<std::int64_t, std::int64_t>>{{10, 9}, {9, 10}, {3, 4}}) {
      for (const bool gap : {false, true}) {
        std::vector<std::shared_ptr<Metric>> ranks = {make_metric(type, {})};
        const auto batch = [&](std::int64_t c) {
          return type == "SingleLabelMetric" ? scores_batch(4, c) : indicator(c);
        };
        ranks.back()->add(batch(c0));
        if (gap) ranks.push_back(make_metric(type, {}));
        ranks.push_back(make_metric(type, {}));
        ranks.back()->add(batch(c1));
        EXPECT_HAS(error_of([&] { compute_states(*make_metric(type, {}), ranks); }),
                   "rank " + std::to_string(ranks.size() - 1) + " disagrees with an earlier rank")
            << type << " " << c0 << " then " << c1;
      }
    }
  }
}

TEST(ClassificationErrors, MissingField) {
  for (const auto& [type, params] : score_metrics()) {
    Batch no_gt;
    no_gt.set("pred_scores", Tensor::from_vector<float>(std::vector<float>(20, 0.5f), {2, 10}));
    EXPECT_HAS(
        error_of([&] { make_metric(type, params)->add(no_gt); }),
        "metric '" + type + "': field 'gt_labels' is missing from the batch (it has: pred_scores)");
    Batch no_pred;
    no_pred.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 1}));
    no_pred.set("logits", Tensor::from_vector<float>(std::vector<float>(20, 0.5f), {2, 10}));
    EXPECT_HAS(
        error_of([&] { make_metric(type, params)->add(no_pred); }),
        "metric '" + type +
            "': needs field 'pred_scores' or 'pred_labels' (the batch has: gt_labels, logits)");
  }
}

TEST(ClassificationErrors, WrongDtype) {
  for (const auto& [type, params] : score_metrics()) {
    Batch float_labels;
    float_labels.set("pred_scores",
                     Tensor::from_vector<float>(std::vector<float>(20, 0.5f), {2, 10}));
    float_labels.set("gt_labels", Tensor::from_vector<float>({0.0f, 1.0f}));
    EXPECT_HAS(error_of([&] { make_metric(type, params)->add(float_labels); }),
               "metric '" + type + "': field 'gt_labels' must hold integer class ids, got f32[2]");
    Batch int_scores;
    int_scores.set("pred_scores",
                   Tensor::from_vector<std::int32_t>(std::vector<std::int32_t>(20, 1), {2, 10}));
    int_scores.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 1}));
    EXPECT_HAS(error_of([&] { make_metric(type, params)->add(int_scores); }),
               "metric '" + type +
                   "': field 'pred_scores' must hold float32 or float64 scores, got i32[2, 10]");
    Batch bool_labels;
    bool_labels.set("pred_scores",
                    Tensor::from_vector<float>(std::vector<float>(20, 0.5f), {2, 10}));
    bool_labels.set("gt_labels", Tensor::from_vector<bool>({true, false}));
    EXPECT_HAS(error_of([&] { make_metric(type, params)->add(bool_labels); }),
               "metric '" + type + "': field 'gt_labels' must hold integer class ids");
  }
}

TEST(ClassificationErrors, RaggedAndGpuTensors) {
  Batch ragged;
  ragged.set_ragged("pred_scores",
                    {Tensor::zeros(DType::F32, {10}), Tensor::zeros(DType::F32, {10})});
  ragged.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 1}));
  EXPECT_HAS(error_of([&] { make_metric("Accuracy", {})->add(ragged); }),
             "metric 'Accuracy': field 'pred_scores' must be a dense tensor, got a ragged field");
  // A CUDA view is refused before its memory is touched.
  static const float fake[20] = {};
  Batch gpu;
  gpu.set("pred_scores", Tensor::view(fake, DType::F32, {2, 10}, Device::cuda(0)));
  gpu.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 1}));
  for (const auto& [type, params] : score_metrics())
    EXPECT_HAS(error_of([&] { make_metric(type, params)->add(gpu); }),
               "metric '" + type + "': field 'pred_scores' is a CUDA tensor");
}

TEST(ClassificationErrors, TopkLargerThanClasses) {
  EXPECT_HAS(error_of([&] {
               make_metric("Accuracy", {{"topk", Value::Array{1, 5}}})->add(scores_batch(4, 3));
             }),
             "metric 'Accuracy': field 'pred_scores' has 3 columns: top-5 accuracy is unavailable "
             "since the number of categories is 3");
}

TEST(ClassificationErrors, LabelPredictionsLimits) {
  Batch b;
  b.set("pred_labels", Tensor::from_vector<std::int32_t>({0, 1}));
  b.set("gt_labels", Tensor::from_vector<std::int32_t>({0, 0}));
  EXPECT_HAS(error_of([&] {
               make_metric("Accuracy", {{"topk", Value::Array{1, 3}}})->add(b);
             }),
             "metric 'Accuracy': field 'pred_labels' holds one label per sample, so only top-1 is "
             "defined");
  EXPECT_HAS(error_of([&] {
               make_metric("Accuracy", {{"thrs", 0.5}})->add(b);
             }),
             "metric 'Accuracy': field 'pred_labels' holds labels, not scores: thresholds (thrs) "
             "need 'pred_scores'");
  EXPECT_HAS(error_of<ConfigError>([&] { make_metric("SingleLabelMetric", {}, "prf")->add(b); }),
             "metric 'prf' (SingleLabelMetric): parameter 'num_classes' is required when the "
             "predictions are labels (field 'pred_labels')");
  EXPECT_HAS(error_of([&] {
               make_metric("SingleLabelMetric", {{"num_classes", 2}, {"thrs", 0.5}})->add(b);
             }),
             "metric 'SingleLabelMetric': field 'pred_labels' holds labels, not scores");
}

TEST(ClassificationErrors, NoSamples) {
  for (const auto& [type, params] : score_metrics()) {
    const Value::Map p = params;
    const std::string msg = error_of([&] {
      run_ranks([&] { return make_metric(type, p); }, scores_batch(0, 10), contiguous_shards(0, 3),
                {16, true});
    });
    EXPECT_HAS(msg, "metric '" + type + "': no samples");
  }
}

TEST(ClassificationErrors, AFailedBatchLeavesTheStateUntouched) {
  // Expected: the result of the good batch alone (computed by the same metric without the bad
  // batch).
  for (const auto& [type, params] : score_metrics()) {
    const auto m = make_metric(type, params);
    m->add(scores_batch(20, 10));
    EXPECT_THROW(m->add(scores_batch(20, 10, 19, 10)), InputError);
    EXPECT_EQ(compute_states(*m, {m}), run_single(type, params, scores_batch(20, 10))) << type;
  }
}

// ---- parameters: ConfigError naming the metric and the parameter ------------------------------

TEST(ClassificationParams, BadParameters) {
  EXPECT_HAS(config_error("Accuracy", {{"topk", 0}}), "parameter 'topk' must be >= 1, got 0");
  EXPECT_HAS(config_error("Accuracy", {{"topk", Value::Array{1, 3, 1}}}),
             "parameter 'topk' lists 1 twice");
  EXPECT_HAS(config_error("Accuracy", {{"topk", Value::Array{}}}), "parameter 'topk'");
  EXPECT_HAS(config_error("Accuracy", {{"thrs", Value::Array{}}}), "parameter 'thrs'");
  EXPECT_HAS(config_error("Accuracy", {{"thrs", Value::Array{0.5, 0.5}}}),
             "parameter 'thrs' lists the same threshold twice");
  EXPECT_HAS(config_error("Accuracy", {{"topk", "three"}}), "parameter 'topk'");
  EXPECT_HAS(config_error("SingleLabelMetric", {{"average", "weighted"}}), "parameter 'average'");
  EXPECT_HAS(config_error("SingleLabelMetric", {{"items", Value::Array{"precision", "auc"}}}),
             "parameter 'items'");
  EXPECT_HAS(config_error("SingleLabelMetric", {{"num_classes", 0}}),
             "parameter 'num_classes' must be >= 1, got 0");
  EXPECT_HAS(config_error("ConfusionMatrix", {}), "parameter 'num_classes'");
  EXPECT_HAS(config_error("ConfusionMatrix", {{"num_classes", -3}}),
             "parameter 'num_classes' must be >= 1, got -3");
  EXPECT_HAS(config_error("ConfusionMatrix", {{"num_classes", 1 << 20}}),
             "parameter 'num_classes' must be at most 16384");
  EXPECT_HAS(config_error("Accuracy", {{"bogus", 1}}), "unknown parameter 'bogus'");
  // num_classes is torchmetrics' Accuracy's (with task), not mmeval's.
  EXPECT_HAS(config_error("Accuracy", {{"num_classes", 3}}),
             "parameter 'num_classes' is a parameter of torchmetrics' Accuracy: give task too");
  EXPECT_HAS(config_error("Accuracy", {{"task", "multiclass"}}),
             "parameter 'num_classes' is required for task multiclass");
  EXPECT_HAS(config_error("SingleLabelMetric", {{"bogus", 1}}), "unknown parameter 'bogus'");
  EXPECT_HAS(config_error("ConfusionMatrix", {{"num_classes", 3}, {"bogus", 1}}),
             "unknown parameter 'bogus'");
}

TEST(ClassificationParams, MmevalNullAverageMeansClasswise) {
  // Expected: the same as average "none" (mmeval's average=None).
  const Batch b = mmeval_docstring_batch();
  EXPECT_EQ(run_single("SingleLabelMetric", {{"average", Value()}}, b),
            run_single("SingleLabelMetric", {{"average", "none"}}, b));
}

// ---- registration -------------------------------------------------------------------------------

TEST(ClassificationPlugin, RegistersDocumentedMetrics) {
  for (const char* name :
       {"Accuracy", "SingleLabelMetric", "SingleLabelPrecisionRecallF1score", "ConfusionMatrix"}) {
    const Component* c = expect_documented(name, "classification");
    ASSERT_NE(c, nullptr) << name;
    // Accuracy: mmeval's three fields, and torchmetrics' preds and target (with task).
    ASSERT_EQ(c->info->inputs.size(), std::string(name) == "Accuracy" ? 5u : 3u) << name;
  }
  EXPECT_EQ(registry().find(ComponentKind::Metric, "SingleLabelPrecisionRecallF1score")->info,
            registry().find(ComponentKind::Metric, "SingleLabelMetric")->info);
}

// ---- threads: the same counts for any number ---------------------------------------------------

// Expected: the metric's own result with threads = 1 (the sequential pass) on the same batches;
// batches of 40,000 x 10 scores (several blocks of 2^16 scores), float32 and float64, and a NaN
// in a late block reported as the sequential pass reports it (its sample number).
TEST(ClassificationThreads, AnyNumberOfThreadsGivesTheSameResultsAndErrors) {
  for (const auto& [type, base] : score_metrics()) {
    for (const bool f64 : {false, true}) {
      Value::Map one = base;
      one.emplace_back("threads", 1);
      const auto batch = [&](std::int64_t n, std::int64_t offset) {
        Batch b = scores_batch(n, 10);
        if (f64) {
          const Tensor& s = b.tensor("pred_scores");
          std::vector<double> d(static_cast<std::size_t>(s.numel()));
          for (std::size_t i = 0; i < d.size(); ++i)
            d[i] = static_cast<double>(s.data_as<float>()[i]) +
                   1e-3 * static_cast<double>((i + offset) % 7);
          b.set("pred_scores", Tensor::from_vector(d, {n, 10}));
        }
        return b;
      };
      const auto expected = run_single(type, one, batch(40000, 0));
      for (const int threads : {2, 3, 7, 64}) {
        Value::Map p = base;
        p.emplace_back("threads", threads);
        EXPECT_EQ(run_single(type, p, batch(40000, 0)), expected) << type << " threads " << threads;
        // A NaN at sample 31,234 (the last block of 3): the error names that sample.
        Batch bad = batch(40000, 0);
        Tensor s = bad.tensor("pred_scores").clone();
        if (f64)
          s.mutable_data_as<double>()[31234 * 10 + 4] = std::nan("");
        else
          s.mutable_data_as<float>()[31234 * 10 + 4] = std::nanf("");
        bad.set("pred_scores", s);
        const auto m = make_metric(type, p);
        const std::string msg = error_of([&] { m->add(bad); });
        const auto seq = make_metric(type, one);
        EXPECT_EQ(msg, error_of([&] { seq->add(bad); })) << type << " threads " << threads;
        EXPECT_HAS(msg, "31234");
      }
    }
  }
}

}  // namespace
}  // namespace tally::test
