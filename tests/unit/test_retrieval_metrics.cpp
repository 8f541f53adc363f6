// The retrieval plugin (plugins/retrieval), loaded as the real libtally_retrieval.so through the
// Registry: values against torchmetrics on 1..7 ranks (query documents scattered over the data
// and the ranks), the tie order, the example config's values, and bad inputs.
//
// Expected values come from tests/reference/expected_retrieval.json, written by
// tests/reference/retrieval.py with torchmetrics 1.9.0 (torch 2.15, CPU) run in float64 (the
// versions and, for each value, the exact torchmetrics call are recorded in the file), unless a
// test says otherwise.
#include <algorithm>
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

const Json& expected_file() { return expected_json("tests/reference/expected_retrieval.json"); }

const std::vector<std::string>& all_types() {
  static const std::vector<std::string> t = {
      "RetrievalMAP",       "RetrievalMRR",        "RetrievalNormalizedDCG",
      "RetrievalPrecision", "RetrievalRecall",     "RetrievalHitRate",
      "RetrievalFallOut",   "RetrievalRPrecision", "RetrievalAUROC"};
  return t;
}

/// `copies` copies of `b` one after the other, the query ids of copy r shifted by r * stride
/// (the "tile" of a case: past 32768 samples, where torch.sort of the ids is a stable sort).
Batch tiled(const Batch& b, std::int64_t copies, std::int64_t stride) {
  const Tensor& p = b.tensor("preds");
  const Tensor& t = b.tensor("target");
  const Tensor& q = b.tensor("indexes");
  std::vector<float> preds;
  std::vector<std::int64_t> ids, target;
  for (std::int64_t r = 0; r < copies; ++r)
    for (std::int64_t i = 0; i < p.numel(); ++i) {
      preds.push_back(p.data_as<float>()[i]);
      ids.push_back(static_cast<std::int64_t>(q.data_as<std::int32_t>()[i]) + r * stride);
      target.push_back(t.dtype() == DType::Bool ? (t.data_as<bool>()[i] ? 1 : 0)
                                                : t.data_as<std::uint8_t>()[i]);
    }
  Batch out;
  out.set("preds", Tensor::from_vector(preds));
  out.set("target", Tensor::from_vector(target));
  out.set("indexes", Tensor::from_vector(ids));
  return out;
}

// ---- values against torchmetrics, 1..7 ranks --------------------------------------------------

class RetrievalReference : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map in expected_retrieval.json (the torchmetrics call is in
// the case's "calls"). The samples of a query are scattered over the file, so over the ranks.
TEST_P(RetrievalReference, MatchesTorchmetricsOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  Batch data = load_inputs(c.at("inputs"));
  RankSweep sweep;
  if (c.contains("tile")) {
    data = tiled(data, c.at("tile").at("copies").get<std::int64_t>(),
                 c.at("tile").at("index_stride").get<std::int64_t>());
    sweep.batch_sizes = {std::int64_t{1} << 30};
    sweep.empty_rank_batch_size = 8191;
  } else if (data.size() < 100) {  // the edge cases: every batch size
    sweep.batch_sizes = {std::int64_t{1} << 30, 5, 1};
    sweep.empty_rank_batch_size = 3;
    sweep.first_rank_empty_batch_size = 2;
  } else {
    // One batch size besides the whole-shard run that run_all_rank_counts starts with: the
    // binary stays fast under ASan.
    sweep.batch_sizes = {397};
    sweep.empty_rank_batch_size = 1 << 30;
  }
  check_case(c, data, GetParam(), sweep);
  print_rel_diffs("torchmetrics (float64)");
}

INSTANTIATE_TEST_SUITE_P(Retrieval, RetrievalReference,
                         ::testing::ValuesIn(case_names(expected_file())), param_name);

// Expected: section "example" of expected_retrieval.json (torchmetrics on the bm25 run of
// configs/examples/data/retrieval); the binary metrics read the field `binary` as their target,
// as the config's `inputs:` maps it.
TEST(RetrievalExample, MatchesTorchmetrics) {
  const Json& ex = expected_file().at("example");
  const Batch all = load_inputs(ex.at("inputs"));
  EXPECT_EQ(all.size(), ex.at("samples").get<std::int64_t>());
  for (const auto& m : ex.at("metrics")) {
    Batch data;
    data.set("preds", all.tensor("preds"));
    data.set("indexes", all.tensor("indexes"));
    const bool binary = m.at("inputs").contains("target");
    data.set("target", all.tensor(binary ? "binary" : "target"));
    const std::string label = m.at("label").get<std::string>();
    const std::string type = m.at("metric").get<std::string>();
    const Value got = run_all_rank_counts(type, to_map(m.at("params")), data, label);
    expect_matches(got, ex.at("results").at(label), "example." + label, type);
  }
  print_rel_diffs("torchmetrics (float64)");
}

// Expected: stock torchmetrics (float32 arithmetic) is within 1e-6 of the float64 reference the
// tests use (recorded by tests/reference/retrieval.py, which asserts it too).
TEST(RetrievalReferenceFile, StockTorchmetricsIsWithinFloat32OfTheFloat64Reference) {
  for (const auto& c : expected_file().at("cases")) {
    const double f64 = c.at("expected").begin()->get<double>();
    const double f32 = c.at("torchmetrics_float32").get<double>();
    EXPECT_LE(std::abs(f64 - f32), 1e-6 * std::max(1.0, std::abs(f64))) << c.at("name");
  }
  const Json& x = expected_file().at("cross_checks");
  EXPECT_LT(x.at("ndcg").at("max_rel_diff").get<double>(), 1e-12);
  EXPECT_LT(x.at("auroc").at("max_rel_diff").get<double>(), 1e-12);
}

// ---- ties ---------------------------------------------------------------------------------------

Batch one_query(const std::vector<double>& preds, const std::vector<std::int64_t>& target,
                std::int64_t id = 0) {
  Batch b;
  b.set("preds", Tensor::from_vector(preds));
  b.set("target", Tensor::from_vector(target));
  b.set("indexes", Tensor::from_vector(std::vector<std::int64_t>(preds.size(), id)));
  return b;
}

double value_of(const std::string& type, const Value::Map& params, const Batch& b) {
  return run_single(type, params, b).as_map().front().second.as_double();
}

// Expected, by hand from PyTorch's CPU kernels: torch.argsort(descending=True) of 16 or fewer
// scores is std::sort's insertion sort, which keeps tied scores in input order; so with three
// tied documents of which only the last is relevant, precision@1 over a query of 3 is 0 and
// recall@2 is 0 (torchmetrics 1.9.0 gives 0.0 for both). Reversing the ties' input order makes
// the relevant one first: 1.0 and 1.0.
TEST(RetrievalTies, SmallQueriesKeepTiedScoresInInputOrder) {
  EXPECT_EQ(value_of("RetrievalRecall", {{"top_k", 2}}, one_query({0.5, 0.5, 0.5}, {0, 0, 1})),
            0.0);
  EXPECT_EQ(value_of("RetrievalRecall", {{"top_k", 2}}, one_query({0.5, 0.5, 0.5}, {1, 0, 0})),
            1.0);
  EXPECT_EQ(value_of("RetrievalHitRate", {{"top_k", 1}}, one_query({0.5, 0.5, 0.5}, {0, 0, 1})),
            0.0);
}

// Expected, by hand: nDCG averages over tied scores and AUROC moves tied scores together, so
// neither depends on the order of tied documents (torchmetrics' _tie_average_dcg and
// _binary_clf_curve); precision without top_k does not either.
TEST(RetrievalTies, TieAveragedMetricsIgnoreTheOrderOfTies) {
  const std::vector<double> p = {0.9, 0.5, 0.5, 0.5, 0.5, 0.1, 0.5, 0.9};
  const std::vector<std::int64_t> t = {1, 0, 1, 0, 0, 1, 1, 0};
  const double ndcg = value_of("RetrievalNormalizedDCG", {}, one_query(p, t));
  const double auroc = value_of("RetrievalAUROC", {}, one_query(p, t));
  // The targets of the two tie groups (0.9 at 0 and 7; 0.5 at 1, 2, 3, 4, 6) permuted.
  const std::vector<std::int64_t> swapped = {0, 1, 0, 0, 1, 1, 0, 1};
  EXPECT_DOUBLE_EQ(value_of("RetrievalNormalizedDCG", {}, one_query(p, swapped)), ndcg);
  EXPECT_DOUBLE_EQ(value_of("RetrievalAUROC", {}, one_query(p, swapped)), auroc);
}

// ---- the state ---------------------------------------------------------------------------------

// The state is the samples themselves, packed as raw bins (no per-element msgpack decoding).
TEST(RetrievalState, PacksSamplesAsBins) {
  const auto m = make_metric("RetrievalMAP", {});
  m->add(one_query({0.3, 0.2, 0.1}, {1, 0, 1}, 4));
  const msgpack::sbuffer buf = pack_state(*m);
  const auto h = msgpack::unpack(buf.data(), buf.size());
  ASSERT_EQ(h.get().type, msgpack::type::ARRAY);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(h.get().via.array.ptr[i].type, msgpack::type::BIN) << i;
}

// A rank whose fields do not fit together is refused, not read past its end.
TEST(RetrievalState, RefusesARankWithFieldsOfDifferentLengths) {
  const auto good = make_metric("RetrievalMAP", {});
  good->add(one_query({0.3, 0.2}, {1, 0}));
  msgpack::sbuffer bad;
  Packer pk(bad);
  pk.pack_array(3);
  pk.pack(PackedVector<std::int64_t>{1, 2});
  pk.pack(PackedVector<double>{0.5});
  pk.pack(PackedVector<std::uint8_t>{1, 0});
  std::vector<RankPayload> ranks;
  ranks.push_back(sync_payload(*good));
  ranks.emplace_back();
  ranks[1].sums = ranks[0].sums;
  ranks[1].gathered = std::move(bad);
  EXPECT_HAS(error_of<RuntimeError>([&] { compute_payloads(*good, ranks); }),
             "the state of rank 1 is corrupt");
}

// ---- documentation ------------------------------------------------------------------------------

TEST(RetrievalDocs, EveryMetricIsDocumentedWithItsReference) {
  for (const auto& type : all_types()) {
    const Component* c = expect_documented(type, "retrieval");
    ASSERT_NE(c, nullptr);
    EXPECT_NE(c->info->doc.find("Reference: torchmetrics 1.9.0 torchmetrics.retrieval." + type),
              std::string::npos)
        << c->info->doc;
    EXPECT_TRUE(c->info->doc.ends_with(".")) << type;
  }
  EXPECT_EQ(registry().get(ComponentKind::Metric, "RetrievalFallOut").info->results.at(0).better,
            Better::Lower);
}

// ---- bad inputs ---------------------------------------------------------------------------------

// Expected: torchmetrics raises ValueError ("... a query with no positive target") for
// empty_target_action='error' on these data (the file's "error_cases"); tally gives an
// InputError naming the metric, the field and the query.
TEST(RetrievalErrors, EmptyTargetActionError) {
  for (const auto& c : expected_file().at("error_cases")) {
    const std::string type = c.at("metric").get<std::string>();
    const Batch data = load_inputs(c.at("inputs"));
    const std::string msg = input_error(type, to_map(c.at("params")), data);
    EXPECT_HAS(msg, "metric '" + type + "': field 'target' query ");
    EXPECT_HAS(msg, "and empty_target_action is 'error'");
    EXPECT_HAS(msg,
               type == "RetrievalFallOut" ? "no non-relevant document" : "no relevant document");
  }
}

TEST(RetrievalErrors, TypesAndShapes) {
  for (const auto& type : all_types()) {
    const std::string who = "metric '" + type + "': ";
    Batch b = one_query({0.5, 0.2}, {1, 0});
    b.set("preds", Tensor::from_vector<std::int64_t>({5, 2}));
    EXPECT_HAS(input_error(type, {}, b),
               who + "field 'preds' must hold float32 or float64 scores, got i64[2]");
    b = one_query({0.5, 0.2}, {1, 0});
    b.set("indexes", Tensor::from_vector<double>({0, 0}));
    EXPECT_HAS(input_error(type, {}, b),
               who + "field 'indexes' must hold integer query ids, got f64[2]");
    b = one_query({0.5, 0.2}, {1, 0});
    b.set("target", Tensor::from_vector<std::int64_t>({1, 0}, {2, 1}));
    EXPECT_HAS(input_error(type, {}, b),
               who +
                   "field 'target' has shape i64[2, 1], 'preds' f64[2]: preds, target and "
                   "indexes must have the same shape");
    b = one_query({0.5, 0.2, 0.1, 0.4}, {1, 0, 1, 0});
    b.set("indexes", Tensor::from_vector<std::int64_t>({0, 0, 1, 1}, {4, 1}));
    EXPECT_HAS(input_error(type, {}, b),
               who +
                   "field 'indexes' has shape i64[4, 1], 'preds' f64[4]: preds, target and "
                   "indexes must have the same shape");
    Batch missing;
    missing.set("preds", Tensor::from_vector<double>({0.5}));
    missing.set("target", Tensor::from_vector<std::int64_t>({1}));
    EXPECT_HAS(input_error(type, {}, missing),
               who + "field 'indexes' is missing from the batch (it has: preds, target)");
    b = one_query({0.5, std::numeric_limits<double>::quiet_NaN()}, {1, 0});
    EXPECT_HAS(input_error(type, {}, b), who + "field 'preds' sample 1: NaN");
    EXPECT_HAS(input_error(type, {}, Batch{}), who + "no samples");
    // Every sample dropped by ignore_index.
    EXPECT_HAS(input_error(type, {{"ignore_index", 1}}, one_query({0.5}, {1})),
               "no samples (after dropping target == ignore_index)");
  }
}

TEST(RetrievalErrors, RelevanceValues) {
  for (const auto& type : all_types()) {
    if (type == "RetrievalNormalizedDCG") continue;
    EXPECT_HAS(input_error(type, {}, one_query({0.5, 0.2, 0.3}, {1, 0, 2})),
               "metric '" + type +
                   "': field 'target' sample 2: relevance 2 is not binary (0 or 1); graded "
                   "relevance is for RetrievalNormalizedDCG");
    // ignore_index drops such samples before the check, as torchmetrics does.
    EXPECT_EQ(input_error(type, {{"ignore_index", -100}}, one_query({0.5, 0.2}, {1, -100})), "");
  }
  EXPECT_HAS(input_error("RetrievalNormalizedDCG", {}, one_query({0.5, 0.2}, {1, -1})),
             "metric 'RetrievalNormalizedDCG': field 'target' sample 1: relevance -1 must be "
             "finite and >= 0");
  Batch inf = one_query({0.5, 0.2}, {1, 0});
  inf.set("target", Tensor::from_vector<double>({1.0, std::numeric_limits<double>::infinity()}));
  EXPECT_HAS(input_error("RetrievalNormalizedDCG", {}, inf), "must be finite and >= 0");
  // Float relevance: graded values for nDCG (as torchmetrics takes them), 0/1 for the others.
  Batch f = one_query({0.5, 0.2, 0.1}, {0, 0, 0});
  f.set("target", Tensor::from_vector<double>({0.5, 2.5, 0.0}));
  EXPECT_EQ(input_error("RetrievalNormalizedDCG", {}, f), "");
  EXPECT_HAS(input_error("RetrievalMAP", {}, f), "relevance 0.500000 is not binary");
}

TEST(RetrievalErrors, BadParameters) {
  EXPECT_HAS(config_error("RetrievalMAP", {{"top_k", 0}}),
             "parameter 'top_k' must be a positive integer or null (all documents), got 0");
  EXPECT_HAS(config_error("RetrievalAUROC", {{"max_fpr", 1.5}}),
             "parameter 'max_fpr' must be a number in (0, 1], got 1.5");
  EXPECT_HAS(config_error("RetrievalAUROC", {{"max_fpr", 0.0}}), "parameter 'max_fpr'");
  EXPECT_HAS(config_error("RetrievalMRR", {{"empty_target_action", "ignore"}}),
             "must be one of neg, pos, skip, error");
  EXPECT_HAS(config_error("RetrievalRecall", {{"aggregation", "sum"}}),
             "must be one of mean, median, min, max");
  // RetrievalRPrecision has no top_k, as in torchmetrics.
  EXPECT_NE(config_error("RetrievalRPrecision", {{"top_k", 3}}), "");
}

}  // namespace
}  // namespace tally::test
