// How the states of the classification, language and flow metrics merge across ranks (SDK 2:
// each state field declares its reduction, TALLY_STATE) and what their checkpoints hold:
//   - the ranking metrics (AveragePrecision, ROCAUC) concatenate every rank's scores in rank
//     order, and ranks may hold scores of different precisions (float32 until a float64 batch):
//     each rank's scores must still meet that rank's labels;
//   - ranks that read data of another format (score columns, labels, flow dtype) are an input
//     error (exit 2) naming the rank, never a result;
//   - the state of every metric still saves as the msgpack array of its fields in the order of
//     the earlier MSGPACK_DEFINE, so checkpoints written before SDK 2 restore.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/state.hpp"

namespace tally::test {
namespace {

// ---- ranking metrics: ranks of mixed precision ------------------------------------------------

enum class Labels { Binary, ClassIds, Indicator };

/// n samples of `cols` scores (float32 values, so that the float64 copy holds the same numbers;
/// ties on purpose: a few distinct values) and labels of the given kind.
struct RankingData {
  std::vector<float> s;
  std::vector<std::int64_t> y;  // Binary, ClassIds: [n]; Indicator: [n x cols]
  std::int64_t n = 0, cols = 0;
  Labels kind = Labels::Binary;

  Batch batch(bool f64, std::int64_t begin, std::int64_t end) const {
    const std::int64_t c = kind == Labels::Binary ? 1 : cols;
    const std::vector<float> part(s.begin() + begin * c, s.begin() + end * c);
    std::vector<std::int64_t> shape = {end - begin};
    if (kind != Labels::Binary) shape.push_back(cols);
    Batch b;
    if (f64)
      b.set("pred_scores",
            Tensor::from_vector(std::vector<double>(part.begin(), part.end()), shape));
    else
      b.set("pred_scores", Tensor::from_vector(part, shape));
    const std::int64_t yc = kind == Labels::Indicator ? cols : 1;
    const std::vector<std::int64_t> labels(y.begin() + begin * yc, y.begin() + end * yc);
    if (kind == Labels::Indicator)
      b.set("gt_labels", Tensor::from_vector(labels, {end - begin, cols}));
    else
      b.set("gt_labels", Tensor::from_vector(labels));
    return b;
  }
};

RankingData ranking_data(Labels kind, std::int64_t n, std::int64_t cols, unsigned seed) {
  std::mt19937 gen(seed);
  RankingData d;
  d.kind = kind;
  d.n = n;
  d.cols = kind == Labels::Binary ? 1 : cols;
  std::uniform_int_distribution<int> level(0, 9);
  for (std::int64_t i = 0; i < n * d.cols; ++i)
    d.s.push_back(static_cast<float>(level(gen)) / 7.0f);  // float32 rounding: not a double
  std::uniform_int_distribution<std::int64_t> cls(0, d.cols - 1), bit(0, 1);
  if (kind == Labels::Binary)
    for (std::int64_t i = 0; i < n; ++i) d.y.push_back(bit(gen));
  else if (kind == Labels::ClassIds)
    for (std::int64_t i = 0; i < n; ++i) d.y.push_back(cls(gen));
  else
    for (std::int64_t i = 0; i < n * d.cols; ++i) d.y.push_back(bit(gen));
  return d;
}

/// The ranking metrics' configurations for a kind of labels.
std::vector<std::pair<std::string, Value::Map>> ranking_metrics(Labels kind) {
  std::vector<std::pair<std::string, Value::Map>> m = {{"AveragePrecision", {{"average", "macro"}}},
                                                       {"AveragePrecision", {{"average", "none"}}},
                                                       {"ROCAUC", {{"average", "macro"}}},
                                                       {"ROCAUC", {{"average", "weighted"}}}};
  if (kind != Labels::Binary) {
    m.push_back({"ROCAUC", {{"average", "micro"}}});
    m.push_back({"ROCAUC", {{"average", "none"}}});
  }
  if (kind == Labels::ClassIds) {
    m.push_back({"ROCAUC", {{"multi_class", "ovo"}, {"average", "macro"}}});
    m.push_back({"ROCAUC", {{"multi_class", "ovo"}, {"average", "weighted"}}});
  }
  return m;
}

// Each rank keeps float32 scores until it sees a float64 batch, so the ranks of one sync may hold
// different precisions, in any order. Expected: the result of one rank over the same numbers as
// float64 (the scores are float32 values, so the float64 copy holds the same numbers), bit for
// bit, whatever the precision of each rank, also with an empty rank between them.
TEST(RankingSync, RanksOfMixedPrecisionPairEachScoreWithItsLabel) {
  // Which ranks read float64 (the others float32), in rank order, over 5 ranks; 'e': empty rank.
  const std::vector<std::string> layouts = {"fdfdf", "dfffd", "ffffd", "dffff", "fdedf", "ddfed"};
  for (const Labels kind : {Labels::Binary, Labels::ClassIds, Labels::Indicator}) {
    const RankingData data = ranking_data(kind, 60, 4, 7 + static_cast<unsigned>(kind));
    for (const auto& [type, params] : ranking_metrics(kind)) {
      const auto make = [&] { return make_metric(type, params); };
      const auto one = make();
      one->add(data.batch(true, 0, data.n));
      const Value expected = one->compute_local();
      for (const std::string& layout : layouts) {
        SCOPED_TRACE(type + " " + Value(params).to_json() + " kind " +
                     std::to_string(static_cast<int>(kind)) + " layout " + layout);
        std::vector<std::shared_ptr<Metric>> ranks;
        std::int64_t at = 0, left = static_cast<std::int64_t>(
                                 layout.size() - std::count(layout.begin(), layout.end(), 'e'));
        for (const char c : layout) {
          ranks.push_back(make());
          if (c == 'e') continue;
          const std::int64_t end = at + (data.n - at) / left--;
          ranks.back()->add(data.batch(c == 'd', at, end));
          at = end;
        }
        ASSERT_EQ(at, data.n);
        const Value got = compute_states(*make(), ranks);
        EXPECT_TRUE(same_bits(got, expected)) << got.to_json() << " vs " << expected.to_json();
        // And through a checkpoint of every rank (restore() forgets nothing of the merge).
        std::vector<std::shared_ptr<Metric>> again;
        for (const auto& r : ranks) again.push_back(restored(make, *r));
        EXPECT_TRUE(same_bits(compute_states(*make(), again), expected));
      }
    }
  }
}

// A rank that saw float32 then float64 batches holds float64 for all of them: the same result.
TEST(RankingSync, OneRankSwitchingToFloat64KeepsItsEarlierScores) {
  const RankingData data = ranking_data(Labels::ClassIds, 40, 3, 3);
  for (const auto& [type, params] : ranking_metrics(Labels::ClassIds)) {
    const auto mixed = make_metric(type, params);
    mixed->add(data.batch(false, 0, 10));
    mixed->add(data.batch(true, 10, 25));
    mixed->add(data.batch(false, 25, 40));
    const auto whole = make_metric(type, params);
    whole->add(data.batch(true, 0, 40));
    EXPECT_TRUE(same_bits(mixed->compute_local(), whole->compute_local())) << type;
    EXPECT_TRUE(same_bits(compute_states(*make_metric(type, params), {mixed, whole}),
                          compute_states(*make_metric(type, params), {whole, mixed})))
        << type;
  }
}

// Ranks that read inputs of another format (binary scores on one rank, [N, C] on another; C
// differing; class ids against an indicator) cannot be merged: an InputError naming the rank,
// not a result. A rank that saw no data takes no part.
TEST(RankingSync, RanksOfAnotherFormatAreAnInputError) {
  const RankingData binary = ranking_data(Labels::Binary, 12, 1, 1);
  const RankingData ids3 = ranking_data(Labels::ClassIds, 12, 3, 2);
  const RankingData ids4 = ranking_data(Labels::ClassIds, 12, 4, 3);
  const RankingData hot3 = ranking_data(Labels::Indicator, 12, 3, 4);
  const std::vector<std::pair<const RankingData*, const RankingData*>> pairs = {
      {&binary, &ids3}, {&ids3, &binary}, {&ids3, &ids4}, {&ids3, &hot3}, {&hot3, &ids3}};
  for (const std::string type : {"AveragePrecision", "ROCAUC"}) {
    for (const auto& [a, b] : pairs) {
      const auto r0 = make_metric(type, {});
      const auto r1 = make_metric(type, {});
      const auto r2 = make_metric(type, {});
      r0->add(a->batch(false, 0, 6));
      r2->add(b->batch(true, 6, 12));  // rank 1 is empty
      EXPECT_HAS(error_of([&] { compute_states(*make_metric(type, {}), {r0, r1, r2}); }), "rank 2");
    }
  }
}

// ---- flow ---------------------------------------------------------------------------------------

Batch flow(bool f64, float du) {
  const std::vector<float> gt = {3.0f + du, 4.0f};
  const std::vector<float> pred = {0.0f, 0.0f};
  Batch b;
  if (f64) {
    b.set("pred_flow",
          Tensor::from_vector(std::vector<double>(pred.begin(), pred.end()), {1, 1, 1, 2}));
    b.set("gt_flow", Tensor::from_vector(std::vector<double>(gt.begin(), gt.end()), {1, 1, 1, 2}));
  } else {
    b.set("pred_flow", Tensor::from_vector(pred, {1, 1, 1, 2}));
    b.set("gt_flow", Tensor::from_vector(gt, {1, 1, 1, 2}));
  }
  return b;
}

// EPE computes in the flows' dtype: ranks with float32 and float64 flows are an InputError
// naming the later rank, in either order, with or without an empty rank between them.
TEST(FlowSync, RanksWithAnotherFlowDtypeAreAnInputError) {
  for (const bool first64 : {false, true}) {
    for (const bool gap : {false, true}) {
      std::vector<std::shared_ptr<Metric>> ranks = {make_metric("EndPointError", {})};
      ranks.back()->add(flow(first64, 0.0f));
      if (gap) ranks.push_back(make_metric("EndPointError", {}));
      ranks.push_back(make_metric("EndPointError", {}));
      ranks.back()->add(flow(!first64, 1.0f));
      EXPECT_HAS(error_of([&] { compute_states(*make_metric("EndPointError", {}), ranks); }),
                 gap ? "rank 2" : "rank 1");
    }
  }
  // The same dtype on every rank: the per-sample values in rank order, as one rank.
  const auto a = make_metric("EndPointError", {});
  const auto b = make_metric("EndPointError", {});
  const auto ab = make_metric("EndPointError", {});
  a->add(flow(false, 0.0f));
  b->add(flow(false, 1.0f));
  ab->add(flow(false, 0.0f));
  ab->add(flow(false, 1.0f));
  EXPECT_TRUE(
      same_bits(compute_states(*make_metric("EndPointError", {}), {a, b}), ab->compute_local()));
}

// ---- checkpoints written before SDK 2 -----------------------------------------------------------

template <class T>
void pack_bin(Packer& p, const std::vector<T>& v) {
  p.pack(PackedVector<T>(v));
}

/// A metric fed `batch`, whose saved state must be `old` (the msgpack array of its fields in the
/// order of the former MSGPACK_DEFINE): save() writes those bytes, and a fresh metric restored
/// from them computes the same results.
void expect_old_layout(const std::string& type, const Value::Map& params, const Batch& batch,
                       const std::function<void(Packer&)>& old) {
  SCOPED_TRACE(type);
  const auto m = make_metric(type, params);
  m->add(batch);
  msgpack::sbuffer want;
  Packer p(want);
  old(p);
  const msgpack::sbuffer got = pack_state(*m);
  EXPECT_EQ(std::string(got.data(), got.size()), std::string(want.data(), want.size()));
  const auto back = make_metric(type, params);
  back->restore(bytes_of(want));
  EXPECT_TRUE(same_bits(back->compute_local(), m->compute_local()))
      << back->compute_local().to_json() << " vs " << m->compute_local().to_json();
}

TEST(StateLayout, CheckpointsOfTheFormerLayoutRestore) {
  Batch labels;  // pred [0, 2, 1, 2], gt [0, 1, 1, 2]
  labels.set("pred_labels", Tensor::from_vector<std::int64_t>({0, 2, 1, 2}));
  labels.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 1, 1, 2}));
  using I = std::vector<std::int64_t>;
  expect_old_layout("Accuracy", {}, labels, [](Packer& p) {  // hits, n
    p.pack_array(2);
    pack_bin(p, I{3});
    p.pack(std::int64_t{4});
  });
  expect_old_layout("ConfusionMatrix", {{"num_classes", 3}}, labels, [](Packer& p) {
    p.pack_array(2);  // counts, n
    pack_bin(p, I{1, 0, 0, 0, 1, 1, 0, 0, 1});
    p.pack(std::int64_t{4});
  });
  expect_old_layout("F1Score", {{"num_classes", 3}}, labels, [](Packer& p) {
    p.pack_array(4);  // tp, fp, fn, n
    pack_bin(p, I{1, 1, 1});
    pack_bin(p, I{0, 0, 1});
    pack_bin(p, I{0, 1, 0});
    p.pack(std::int64_t{4});
  });
  expect_old_layout("SingleLabelMetric", {{"num_classes", 3}}, labels, [](Packer& p) {
    p.pack_array(5);  // support, tp, predicted, num_classes, n
    pack_bin(p, I{1, 2, 1});
    pack_bin(p, I{1, 1, 1});
    pack_bin(p, I{1, 1, 2});
    p.pack(std::int64_t{3});
    p.pack(std::int64_t{4});
  });
  expect_old_layout("MultiLabelMetric", {{"num_classes", 3}}, labels, [](Packer& p) {
    p.pack_array(5);  // tp, fp, fn, num_classes, n
    pack_bin(p, I{1, 1, 1});
    pack_bin(p, I{0, 0, 1});
    pack_bin(p, I{0, 1, 0});
    p.pack(std::int64_t{3});
    p.pack(std::int64_t{4});
  });
  Batch binary;
  binary.set("pred_scores", Tensor::from_vector<float>({0.1f, 0.4f, 0.35f, 0.8f}));
  binary.set("gt_labels", Tensor::from_vector<std::int64_t>({0, 0, 1, 1}));
  for (const std::string type : {"ROCAUC", "AveragePrecision"})
    expect_old_layout(type, {}, binary, [](Packer& p) {
      p.pack_array(7);  // s32, s64, ids, hot, cols, kind, n
      pack_bin(p, std::vector<float>{0.1f, 0.4f, 0.35f, 0.8f});
      pack_bin(p, std::vector<double>{});
      pack_bin(p, std::vector<std::int32_t>{0, 0, 1, 1});
      pack_bin(p, std::vector<std::uint8_t>{});
      p.pack(std::int64_t{1});
      p.pack(std::int8_t{1});
      p.pack(std::int64_t{4});
    });
  Batch lm;  // one sample of 2 tokens, vocabulary 2, uniform: nll 2 log 2
  lm.set("pred_logits", Tensor::from_vector<double>({0, 0, 0, 0}, {1, 2, 2}));
  lm.set("gt_tokens", Tensor::from_vector<std::int64_t>({0, 1}, {1, 2}));
  expect_old_layout("Perplexity", {}, lm, [](Packer& p) {
    p.pack_array(3);  // n, nll, tokens
    p.pack(std::int64_t{1});
    pack_bin(p, std::vector<double>{std::log(2.0) + std::log(2.0)});
    pack_bin(p, I{2});
  });
  expect_old_layout("EndPointError", {}, flow(false, 0.0f), [](Packer& p) {
    p.pack_array(4);  // dtype_bytes, n, epe, pixels
    p.pack(std::int32_t{4});
    p.pack(std::int64_t{1});
    pack_bin(p, std::vector<double>{5.0});
    pack_bin(p, I{1});
  });
}

}  // namespace
}  // namespace tally::test
