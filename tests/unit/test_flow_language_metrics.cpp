// The flow (EndPointError) and language (Perplexity) plugins, loaded as the real shared libraries
// through the Registry: values against mmeval 0.2.1, independence from the number of ranks, bad
// inputs.
//
// Expected values come from tests/reference/expected_flow_language.json, written by
// tests/reference/flow_language.py with mmeval 0.2.1 (the versions and, for each case, the exact
// mmeval call are recorded in the file), unless a test says otherwise.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

const Json& expected_file() { return expected_json("tests/reference/expected_flow_language.json"); }

/// The runs of run_all_rank_counts here: whole shards and batches of 3 and 1; batches of 2
/// beside an empty rank.
const RankSweep kSweep{{std::int64_t{1} << 30, 3, 1}, 2};

// ---- values against mmeval, 1..7 ranks --------------------------------------------------------

class FlowLanguageCase : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map in expected_flow_language.json (mmeval 0.2.1; the call is
// in the case's "call", deviations from mmeval in its "note"; null there is NaN).
TEST_P(FlowLanguageCase, MatchesMmevalOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  check_case(c, load_inputs(c.at("inputs")), GetParam(), kSweep);
  print_rel_diffs("mmeval 0.2.1");
}

INSTANTIATE_TEST_SUITE_P(FlowLanguage, FlowLanguageCase,
                         ::testing::ValuesIn(case_names(expected_file())), param_name);

// Expected: section "example" of expected_flow_language.json (mmeval 0.2.1 on the data of
// configs/examples/data/language_model, the metric of configs/examples/language_model.yaml).
TEST(LanguageModelExample, MatchesMmeval) {
  check_example(expected_file().at("example"), kSweep);
  print_rel_diffs("mmeval 0.2.1");
}

// ---- hand-checked examples -------------------------------------------------------------------

// Expected: the NumPy example in the docstring of mmeval's EndPointError ({'EPE':
// 5.318186230865093}).
TEST(EndPointError, MmevalDocstringExample) {
  Batch b;
  b.set("pred_flow",
        Tensor::from_vector<double>({10., 5., 0.1, 3., 3., 15.2, 2.4, 4.5}, {1, 2, 2, 2}));
  b.set("gt_flow",
        Tensor::from_vector<double>({10.1, 4.8, 10, 3., 6., 10.2, 2.0, 4.1}, {1, 2, 2, 2}));
  b.set("valid_mask", Tensor::from_vector<double>({1., 1., 1., 0.}, {1, 2, 2}));
  EXPECT_EQ(run_single("EndPointError", {}, b), Value(Value::Map{{"EPE", 5.318186230865093}}));
}

// Expected, by hand: uniform logits over V = 2 give every token probability 1/2: perplexity 2
// (exp(log 2) rounds to 2 exactly in float64). Ignored tokens (-100) do not count.
TEST(Perplexity, UniformLogitsGiveTheVocabularySize) {
  Batch b;
  b.set("pred_logits", Tensor::from_vector<float>({0, 0, 0, 0, 0, 0}, {1, 3, 2}));
  b.set("gt_tokens", Tensor::from_vector<std::int64_t>({0, 1, -100}, {1, 3}));
  EXPECT_EQ(run_single("Perplexity", {{"ignore_labels", -100}}, b),
            Value(Value::Map{{"perplexity", 2.0}}));
}

// Expected: the dense result of the same data (ragged samples are the dense rows, cut to their
// unpadded lengths; the padding is ignored in the dense run).
TEST(Perplexity, RaggedSamplesEqualDenseOnes) {
  const Json& c = find_case(expected_file(), "ppl_ignore_pad");
  const Batch dense = load_inputs(c.at("inputs"));
  const Tensor& x = dense.tensor("pred_logits");
  const Tensor& y = dense.tensor("gt_tokens");
  const std::int64_t n = x.size(0), l = x.size(1), v = x.size(2);
  Batch::Ragged xs, ys;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto* yi = y.data_as<std::int64_t>() + i * l;
    std::int64_t len = l;
    while (len > 0 && yi[len - 1] == -100) --len;
    const auto* xi = x.data_as<double>() + i * l * v;
    xs.push_back(Tensor::from_vector(std::vector<double>(xi, xi + len * v), {len, v}));
    ys.push_back(Tensor::from_vector(std::vector<std::int64_t>(yi, yi + len), {len}));
  }
  Batch ragged;
  ragged.set_ragged("pred_logits", xs);
  ragged.set_ragged("gt_tokens", ys);
  const Value want = run_single("Perplexity", {{"ignore_labels", -100}}, dense);
  const auto make = [] { return make_metric("Perplexity", {}); };
  for (int ranks : {1, 3, 7})
    for (std::int64_t batch : {std::int64_t{1} << 30, std::int64_t{2}})
      EXPECT_EQ(run_ranks(make, ragged, contiguous_shards(n, ranks), {batch, false}), want)
          << ranks << " ranks, batches of " << batch;
}

// ---- bad inputs ---------------------------------------------------------------------------------

Batch flow_batch(std::int64_t n, std::int64_t h = 3, std::int64_t w = 4) {
  std::vector<float> p(static_cast<std::size_t>(n * h * w * 2)), g(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    p[i] = static_cast<float>(i % 7) * 0.5f;
    g[i] = static_cast<float>(i % 5) * 0.25f;
  }
  Batch b;
  b.set("pred_flow", Tensor::from_vector(p, {n, h, w, 2}));
  b.set("gt_flow", Tensor::from_vector(g, {n, h, w, 2}));
  b.set("valid_mask",
        Tensor::from_vector(std::vector<float>(static_cast<std::size_t>(n * h * w), 1.0f),
                            {n, h, w}));
  return b;
}

TEST(EndPointErrorErrors, ShapesDtypesAndNaN) {
  const auto m = make_metric("EndPointError", {});
  Batch b = flow_batch(2);
  b.set("gt_flow", Tensor::from_vector(std::vector<float>(2 * 3 * 4 * 2), {2, 4, 3, 2}));
  EXPECT_HAS(error_of([&] { m->add(b); }),
             "metric 'EndPointError': field 'gt_flow' must have the shape of 'pred_flow' "
             "f32[2, 3, 4, 2], got f32[2, 4, 3, 2]");
  b = flow_batch(2);
  b.set("pred_flow", Tensor::from_vector(std::vector<float>(2 * 3 * 4 * 3), {2, 3, 4, 3}));
  EXPECT_HAS(error_of([&] { m->add(b); }), "field 'pred_flow' must be [N, H, W, 2]");
  b = flow_batch(2);
  b.set("pred_flow", Tensor::from_vector(std::vector<std::int32_t>(2 * 3 * 4 * 2), {2, 3, 4, 2}));
  EXPECT_HAS(error_of([&] { m->add(b); }), "field 'pred_flow' must hold float32 or float64 flow");
  b = flow_batch(2);
  b.set("valid_mask", Tensor::from_vector(std::vector<float>(2 * 12), {2, 12}));
  EXPECT_HAS(error_of([&] { m->add(b); }), "field 'valid_mask' must be [N, H, W] = [2, 3, 4]");
  b = flow_batch(2);
  Tensor p = b.tensor("pred_flow").clone();
  p.mutable_data_as<float>()[(12 + 5) * 2] = std::nanf("");
  b.set("pred_flow", p);
  EXPECT_HAS(error_of([&] { m->add(b); }),
             "field 'pred_flow' sample 1 pixel 5: the flow of a valid pixel is NaN");
  Batch missing;
  missing.set("pred_flow", flow_batch(2).tensor("pred_flow"));
  EXPECT_HAS(error_of([&] { m->add(missing); }), "field 'gt_flow' is missing from the batch");
  // float64 after float32 batches.
  const auto m2 = make_metric("EndPointError", {});
  m2->add(flow_batch(1));
  Batch d;
  d.set("pred_flow", Tensor::from_vector(std::vector<double>(24), {1, 3, 4, 2}));
  d.set("gt_flow", Tensor::from_vector(std::vector<double>(24), {1, 3, 4, 2}));
  EXPECT_HAS(error_of([&] { m2->add(d); }),
             "field 'pred_flow' holds float64 flow, earlier batches float32");
  EXPECT_HAS(error_of([&] { make_metric("EndPointError", {})->compute_local(); }),
             "metric 'EndPointError': no samples");
  EXPECT_HAS(error_of<ConfigError>([&] {
               make_metric("EndPointError", {{"max_flow", -1.0}});
             }),
             "parameter 'max_flow' must be > 0");
}

TEST(EndPointErrorErrors, AFailedBatchLeavesTheStateUntouched) {
  const auto m = make_metric("EndPointError", {});
  m->add(flow_batch(3));
  Batch b = flow_batch(3);
  Tensor g = b.tensor("gt_flow").clone();
  g.mutable_data_as<float>()[g.numel() - 1] = std::nanf("");
  b.set("gt_flow", g);
  EXPECT_THROW(m->add(b), InputError);
  EXPECT_EQ(compute_states(*m, {m}), run_single("EndPointError", {}, flow_batch(3)));
}

Batch lm_batch(std::int64_t n, std::int64_t l = 4, std::int64_t v = 5) {
  std::vector<double> x(static_cast<std::size_t>(n * l * v));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>((i * 7) % 11) - 5.0;
  std::vector<std::int64_t> y(static_cast<std::size_t>(n * l));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<std::int64_t>(i % 5);
  Batch b;
  b.set("pred_logits", Tensor::from_vector(x, {n, l, v}));
  b.set("gt_tokens", Tensor::from_vector(y, {n, l}));
  return b;
}

TEST(PerplexityErrors, TargetsLogitsAndShapes) {
  const auto m = make_metric("Perplexity", {{"ignore_labels", Value::Array{-100}}});
  m->add(lm_batch(2));
  Batch b = lm_batch(3);
  Tensor y = b.tensor("gt_tokens").clone();
  y.mutable_data_as<std::int64_t>()[1 * 4 + 2] = 5;
  b.set("gt_tokens", y);
  EXPECT_HAS(error_of([&] { m->add(b); }),
             "metric 'Perplexity': field 'gt_tokens' sample 3 token 2: id 5 is outside [0, 5) "
             "(and not in ignore_labels)");
  y.mutable_data_as<std::int64_t>()[1 * 4 + 2] = -1;
  b.set("gt_tokens", y);
  EXPECT_HAS(error_of([&] { m->add(b); }), "sample 3 token 2: id -1 is outside [0, 5)");
  b = lm_batch(3);
  Tensor x = b.tensor("pred_logits").clone();
  x.mutable_data_as<double>()[(2 * 4 + 1) * 5 + 3] = std::nan("");
  b.set("pred_logits", x);
  EXPECT_HAS(error_of([&] { m->add(b); }), "field 'pred_logits' sample 4 token 1: logit 3 is NaN");
  x.mutable_data_as<double>()[(2 * 4 + 1) * 5 + 3] = INFINITY;
  b.set("pred_logits", x);
  EXPECT_HAS(error_of([&] { m->add(b); }), "sample 4 token 1: logit 3 is +inf");
  for (int c = 0; c < 5; ++c) x.mutable_data_as<double>()[(2 * 4 + 1) * 5 + c] = -INFINITY;
  b.set("pred_logits", x);
  EXPECT_HAS(error_of([&] { m->add(b); }), "sample 4 token 1: every logit is -inf");
  b = lm_batch(3);
  b.set("gt_tokens", Tensor::from_vector(std::vector<std::int64_t>(9), {3, 3}));
  EXPECT_HAS(error_of([&] { m->add(b); }), "field 'gt_tokens' must be [N, L] = [3, 4]");
  b = lm_batch(3);
  b.set("gt_tokens", Tensor::from_vector(std::vector<float>(12), {3, 4}));
  EXPECT_HAS(error_of([&] { m->add(b); }), "field 'gt_tokens' must hold integer token ids");
  b = lm_batch(3);
  b.set("pred_logits", Tensor::from_vector(std::vector<double>(12), {3, 4}));
  EXPECT_HAS(error_of([&] { m->add(b); }), "field 'pred_logits' must be [N, L, V]");
  Batch r;
  r.set_ragged("pred_logits", {Tensor::from_vector(std::vector<double>(10), {2, 5})});
  r.set_ragged("gt_tokens", {Tensor::from_vector(std::vector<std::int64_t>(3), {3})});
  EXPECT_HAS(error_of([&] { m->add(r); }), "field 'gt_tokens' sample 2: must be [L] = [2]");
  Batch mixed;
  mixed.set_ragged("pred_logits", {Tensor::from_vector(std::vector<double>(10), {2, 5})});
  mixed.set("gt_tokens", Tensor::from_vector(std::vector<std::int64_t>(2), {1, 2}));
  EXPECT_HAS(error_of([&] { m->add(mixed); }), "field 'gt_tokens' must be ragged like");
  // Nothing of the failed batches was kept: the state holds the first batch only.
  EXPECT_EQ(compute_states(*m, {m}), run_single("Perplexity", {}, lm_batch(2)));
  EXPECT_HAS(error_of([&] { make_metric("Perplexity", {})->compute_local(); }),
             "metric 'Perplexity': no samples");
  EXPECT_HAS(error_of<ConfigError>([&] {
               make_metric("Perplexity", {{"ignore_labels", "pad"}});
             }),
             "parameter 'ignore_labels'");
}

// ---- registration -------------------------------------------------------------------------------

TEST(FlowLanguagePlugins, RegisterDocumentedMetrics) {
  for (const auto& [name, plugin] : std::vector<std::pair<std::string, std::string>>{
           {"EndPointError", "flow"}, {"Perplexity", "language"}}) {
    ASSERT_NE(expect_documented(name, plugin), nullptr) << name;
  }
}

}  // namespace
}  // namespace tally::test
