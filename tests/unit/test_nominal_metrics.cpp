// The nominal plugin (plugins/nominal), loaded as the real libtally_nominal.so through the
// Registry: CramersV, TschuprowsT, PearsonsContingencyCoefficient, TheilsU and FleissKappa against
// torchmetrics 1.9.0 on 1..7 ranks, and bad inputs.
//
// Expected values come from tests/reference/expected_nominal.json, written by
// tests/reference/nominal.py with torchmetrics 1.9.0 (float64 default dtype; the exact call, the
// versions and SciPy / statsmodels cross-checks are recorded in the file), unless a test says
// otherwise.
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

const Json& expected_file() { return expected_json("tests/reference/expected_nominal.json"); }

class NominalReference : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map in expected_nominal.json (torchmetrics; the call is the
// case's "call").
TEST_P(NominalReference, MatchesTorchmetricsOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  check_case(c, load_inputs(c.at("inputs")), GetParam());
  print_rel_diffs("torchmetrics");
}

INSTANTIATE_TEST_SUITE_P(Nominal, NominalReference,
                         ::testing::ValuesIn(case_names(expected_file())), param_name);

// Expected: section "example" of expected_nominal.json (torchmetrics on the wine data of
// configs/examples/data/nominal, made by tests/reference/nominal.py).
TEST(NominalExample, MatchesTorchmetrics) {
  check_example(expected_file().at("example"));
  print_rel_diffs("torchmetrics");
}

// Every metric is registered with a doc that names its reference, parameters and results.
TEST(Nominal, Documented) {
  for (const char* name :
       {"CramersV", "TschuprowsT", "PearsonsContingencyCoefficient", "TheilsU", "FleissKappa"}) {
    const Component* c = expect_documented(name, "nominal");
    ASSERT_NE(c, nullptr) << name;
    EXPECT_NE(c->info->doc.find("Reference: torchmetrics 1.9.0"), std::string::npos) << name;
  }
}

// The contingency state is num_classes^2 counts whatever the number of samples.
TEST(Nominal, StateDoesNotGrow) {
  const Json& c = find_case(expected_file(), "CramersV_digits_proba_bias_correction_True");
  const Batch data = load_inputs(c.at("inputs"));
  for (std::int64_t n : {std::int64_t{5}, data.size()}) {
    const auto m = make_metric("CramersV", {{"num_classes", 10}});
    m->add(data.slice(0, n));
    EXPECT_LT(pack_state(*m).size(), 1000u) << n;
  }
  const Json& f = find_case(expected_file(), "FleissKappa_raters_counts");
  const Batch r = load_inputs(f.at("inputs"));
  const auto m = make_metric("FleissKappa", {});
  m->add(r);
  EXPECT_LT(pack_state(*m).size(), 100u);
}

// Expected, by hand: FleissKappa needs samples (torchmetrics raises on an empty state).
TEST(FleissKappa, NoSamples) {
  EXPECT_HAS(error_of([&] { make_metric("FleissKappa", {})->compute_local(); }),
             "metric 'FleissKappa': field 'ratings' has no samples");
}

// Expected, by hand: mode probs counts each rater's argmax over all C categories, also where
// torchmetrics 1.9.0 raises (C > R; its one-hot uses R classes): 2 raters, 3 categories, both
// choose category 2 on both samples -> perfect agreement, (1 - 1) / (1 - 1 + 1e-5) = 0 as
// Pe = 1: kappa 0; and category 2 vs 0 on sample 1.
TEST(FleissKappa, ProbsWithMoreCategoriesThanRaters) {
  Batch b;
  // [N=2, C=3, R=2]: sample 0 both raters pick 2; sample 1 rater 0 picks 0, rater 1 picks 2.
  b.set("ratings", Tensor::from_vector<double>({0.1, 0.1, 0.2, 0.2, 0.9, 0.9,  //
                                                0.9, 0.1, 0.0, 0.2, 0.1, 0.7},
                                               {2, 3, 2}));
  const double got =
      run_single("FleissKappa", {{"mode", "probs"}}, b).at("fleiss_kappa").as_double();
  // counts [[0, 0, 2], [1, 0, 1]]: N 2, R 2; p = [1/4, 0, 3/4]; Pbar = ((4 + 2) - 4) / (2 * 2)
  // = 0.5; Pe = 1/16 + 9/16 = 0.625.
  EXPECT_DOUBLE_EQ(got, (0.5 - 0.625) / (1 - 0.625 + 1e-5));
}

// ---- bad inputs ---------------------------------------------------------------------------------

const std::vector<std::string>& pair_types() {
  static const std::vector<std::string> t = {"CramersV", "TschuprowsT",
                                             "PearsonsContingencyCoefficient", "TheilsU"};
  return t;
}

Batch pair(Tensor p, Tensor t) {
  Batch b;
  b.set("preds", std::move(p));
  b.set("target", std::move(t));
  return b;
}

TEST(NominalErrors, ClassIdsOutOfRange) {
  for (const auto& type : pair_types()) {
    const Value::Map k3{{"num_classes", 3}};
    EXPECT_HAS(error_of([&] {
                 make_metric(type, k3)->add(pair(Tensor::from_vector<std::int64_t>({0, 3}),
                                                 Tensor::from_vector<std::int64_t>({0, 1})));
               }),
               "metric '" + type + "': field 'preds' sample 1: class id 3 is outside [0, 3)");
    EXPECT_HAS(error_of([&] {
                 make_metric(type, k3)->add(pair(Tensor::from_vector<std::int64_t>({0, 1}),
                                                 Tensor::from_vector<std::int32_t>({-1, 1})));
               }),
               "metric '" + type + "': field 'target' sample 0: class id -1 is outside [0, 3)");
    EXPECT_HAS(error_of([&] {
                 make_metric(type, k3)->add(pair(Tensor::from_vector<double>({0, 7.5}),
                                                 Tensor::from_vector<double>({0, 1})));
               }),
               "field 'preds' sample 1: class id 7.500000 is outside [0, 3)");
    // [N, C] scores whose argmax is past num_classes.
    EXPECT_HAS(error_of([&] {
                 make_metric(type, k3)->add(pair(
                     Tensor::from_vector<double>({0.1, 0.2, 0.3, 0.9, 0.0, 0.0, 0.0, 0.1}, {2, 4}),
                     Tensor::from_vector<std::int64_t>({0, 1})));
               }),
               "field 'preds' sample 0: the argmax 3 is outside [0, 3)");
    // A NaN replaced by an id past num_classes.
    EXPECT_HAS(
        error_of([&] {
          make_metric(type, {{"num_classes", 3}, {"nan_replace_value", 5.0}})
              ->add(pair(Tensor::from_vector<double>({0, std::numeric_limits<double>::quiet_NaN()}),
                         Tensor::from_vector<double>({0, 1})));
        }),
        "field 'preds' sample 1: NaN, replaced by 5.000000 is outside [0, 3)");
    EXPECT_HAS(error_of([&] {
                 make_metric(type, k3)->add(
                     pair(Tensor::from_vector<double>({0, std::numeric_limits<double>::infinity()}),
                          Tensor::from_vector<double>({0, 1})));
               }),
               "field 'preds' sample 1: class id inf is outside [0, 3)");
  }
}

TEST(NominalErrors, ShapesAndTypes) {
  for (const auto& type : pair_types()) {
    const Value::Map k3{{"num_classes", 3}};
    // Mismatched lengths: the batch itself refuses them, before the metric sees them.
    EXPECT_HAS(error_of([&] {
                 make_metric(type, k3)->add(pair(Tensor::from_vector<std::int64_t>({0, 1, 2}),
                                                 Tensor::from_vector<std::int64_t>({0, 1})));
               }),
               "batch field 'target' has 2 samples, the other fields have 3");
    EXPECT_HAS(
        error_of([&] {
          make_metric(type, k3)->add(pair(Tensor::from_vector<std::int64_t>({0, 1}, {1, 1, 2}),
                                          Tensor::from_vector<std::int64_t>({0})));
        }),
        "field 'preds' must be [N] class ids or [N, C] scores, got i64[1, 1, 2]");
    EXPECT_HAS(error_of([&] {
                 make_metric(type, k3)->add(pair(Tensor::from_vector<bool>({true, false}),
                                                 Tensor::from_vector<std::int64_t>({0, 1})));
               }),
               "field 'preds' must hold class ids (integer or float), got bool[2]");
    EXPECT_HAS(error_of([&] {
                 make_metric(type, k3)->add(
                     pair(Tensor::from_vector<double>(
                              {0.1, std::numeric_limits<double>::quiet_NaN(), 0.3, 0.9}, {2, 2}),
                          Tensor::from_vector<std::int64_t>({0, 1})));
               }),
               "field 'preds' sample 0: score of class 1 is NaN");
    Batch missing;
    missing.set("preds", Tensor::from_vector<std::int64_t>({0, 1}));
    EXPECT_HAS(error_of([&] { make_metric(type, k3)->add(missing); }),
               "field 'target' is missing from the batch (it has: preds)");
  }
}

TEST(NominalErrors, Parameters) {
  for (const auto& type : pair_types()) {
    EXPECT_HAS(config_error(type, {}), "num_classes");
    EXPECT_HAS(config_error(type, {{"num_classes", 0}}), "num_classes");
    EXPECT_HAS(config_error(type, {{"num_classes", 4096}}), "at most 2048");
    EXPECT_HAS(config_error(type, {{"num_classes", 3}, {"nan_strategy", "mean"}}), "nan_strategy");
  }
  EXPECT_HAS(config_error("FleissKappa", {{"mode", "votes"}}), "mode");
}

TEST(FleissKappaErrors, BadRatings) {
  const auto add = [](const Value::Map& params, Tensor r) {
    return error_of([&] {
      Batch b;
      b.set("ratings", std::move(r));
      make_metric("FleissKappa", params)->add(b);
    });
  };
  EXPECT_HAS(add({}, Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2})),
             "metric 'FleissKappa': field 'ratings' must be integer [N, C] counts (C categories) "
             "with mode counts, got f64[2, 2]");
  EXPECT_HAS(add({}, Tensor::from_vector<std::int64_t>({1, 2, 3}, {3})),
             "must be integer [N, C] counts");
  EXPECT_HAS(add({}, Tensor::from_vector<std::int64_t>({1, 2, 3, -1}, {2, 2})),
             "field 'ratings' sample 1, category 1: a count of -1 raters is negative");
  EXPECT_HAS(add({{"mode", "probs"}}, Tensor::from_vector<std::int64_t>({1, 2, 3, 4}, {1, 2, 2})),
             "must be float [N, C, R] (C categories, R raters) with mode probs, got i64[1, 2, 2]");
  EXPECT_HAS(
      add({{"mode", "probs"}}, Tensor::from_vector<double>(
                                   {1, std::numeric_limits<double>::quiet_NaN(), 3, 4}, {1, 2, 2})),
      "field 'ratings' sample 0, category 0, rater 1: score is NaN");
  EXPECT_HAS(add({}, Tensor::from_vector<std::int64_t>({std::int64_t{1} << 40, 0}, {1, 2})),
             "field 'ratings' sample 0: the counts overflow int64");
  // Categories changing between batches.
  const auto m = make_metric("FleissKappa", {});
  Batch a, b;
  a.set("ratings", Tensor::from_vector<std::int64_t>({1, 2, 3, 0}, {2, 2}));
  b.set("ratings", Tensor::from_vector<std::int64_t>({1, 2, 0}, {1, 3}));
  m->add(a);
  EXPECT_HAS(error_of([&] { m->add(b); }),
             "field 'ratings' has 3 categories, earlier samples had 2");
}

// Ranks that saw different numbers of categories: an InputError at the sync, not a wrong result.
TEST(FleissKappaErrors, RanksDisagreeOnCategories) {
  const auto a = make_metric("FleissKappa", {}), b = make_metric("FleissKappa", {});
  Batch x, y;
  x.set("ratings", Tensor::from_vector<std::int64_t>({1, 2, 3, 0}, {2, 2}));
  y.set("ratings", Tensor::from_vector<std::int64_t>({1, 2, 0}, {1, 3}));
  a->add(x);
  b->add(y);
  EXPECT_THROW(compute_states(*a, {a, b}), InputError);
}

}  // namespace
}  // namespace tally::test
