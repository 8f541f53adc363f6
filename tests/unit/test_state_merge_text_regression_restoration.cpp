// The text, regression and restoration metrics on the SDK 2 contract (TALLY_STATE): checkpoints
// written by the earlier code (MSGPACK_DEFINE of the same fields, in the same order) restore and
// give the expected results; how each field merges across ranks (sum, concat, first, agree,
// merge); and states that are corrupt or inconsistent across ranks end in an error, never in a
// crash or a wrong number.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <msgpack.hpp>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/exact_sum.hpp"
#include "tally/sdk/state.hpp"

namespace tally::test {
namespace {

// ---- the states as the earlier code declared them (MSGPACK_DEFINE): a checkpoint's layout -------

struct OldEditRate {
  std::int64_t edits = 0, ref_tokens = 0, n = 0;
  MSGPACK_DEFINE(edits, ref_tokens, n)
};
struct OldChar {
  std::int64_t gt = 0, pred = 0, tp = 0, n = 0;
  MSGPACK_DEFINE(gt, pred, tp, n)
};
struct OldWordAccuracy {
  std::int64_t exact = 0, ignore_case = 0, ignore_case_symbol = 0, n = 0;
  MSGPACK_DEFINE(exact, ignore_case, ignore_case_symbol, n)
};
struct OldBleu {
  PackedVector<std::int64_t> counts;
  std::int64_t first_lang = -1;
  std::int64_t n = 0;
  MSGPACK_DEFINE(counts, first_lang, n)
};
struct OldRouge {
  PackedVector<double> scores;
  std::int64_t first_lang = -1;
  std::int64_t n = 0;
  MSGPACK_DEFINE(scores, first_lang, n)
};
struct OldErrorSum {
  PackedVector<std::int64_t> words;
  std::int64_t outputs = -1, weighted = -1, n = 0;
  MSGPACK_DEFINE(words, outputs, weighted, n)
};
struct OldR2 {
  PackedVector<double> target, pred, weight;
  std::int64_t outputs = -1, weighted = -1;
  MSGPACK_DEFINE(target, pred, weight, outputs, weighted)
};
struct OldPerSample {
  PackedVector<double> values;
  MSGPACK_DEFINE(values)
};

template <class Old>
msgpack::sbuffer packed(const Old& old) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, old);
  return buf;
}

/// A metric of `type` restored from `bytes` (a checkpoint's state of it).
std::shared_ptr<Metric> restore_bytes(const std::string& type, const Value::Map& params,
                                      const msgpack::sbuffer& bytes) {
  auto m = make_metric(type, params);
  m->restore(bytes_of(bytes));
  return m;
}

/// A metric of `type` restored from the earlier code's state `old`; expects save() to write the
/// same bytes back (the layout did not change).
template <class Old>
std::shared_ptr<Metric> from_old(const std::string& type, const Value::Map& params,
                                 const Old& old) {
  const msgpack::sbuffer want = packed(old);
  auto m = restore_bytes(type, params, want);
  const msgpack::sbuffer got = pack_state(*m);
  EXPECT_EQ(std::string(got.data(), got.size()), std::string(want.data(), want.size()))
      << type << ": save() after restore() does not write the checkpoint's bytes back";
  return m;
}

/// The result of `m` on a world of one (compute_local) and as the only rank of a synced world
/// (compute_synced); expects both the same.
Value result_of(const std::shared_ptr<Metric>& m, const std::string& type,
                const Value::Map& params) {
  const Value synced = compute_states(*make_metric(type, params), {m});
  const Value local = m->compute_local();
  EXPECT_TRUE(same_bits(local, synced))
      << type << ": " << local.to_json() << " vs " << synced.to_json();
  return local;
}

/// `outputs` + 1 accumulators holding `sums` (one per output, then the weight sum).
PackedVector<std::int64_t> exact_words(const std::vector<double>& sums) {
  PackedVector<std::int64_t> w;
  for (const double s : sums) {
    ExactSum a;
    a.add(s);
    a.normalize();
    w.insert(w.end(), a.words().begin(), a.words().end());
  }
  return w;
}

// ---- checkpoints of the earlier code
// -------------------------------------------------------------

// Expected, by hand from each metric's formula on the counts / values of the saved state.
TEST(OldCheckpoints, TextStatesRestore) {
  const Value::Map modes{{"mode", Value::Array{"exact", "ignore_case", "ignore_case_symbol"}}};
  const Value wa = result_of(from_old("WordAccuracy", modes, OldWordAccuracy{2, 3, 1, 4}),
                             "WordAccuracy", modes);
  EXPECT_EQ(wa.at("accuracy").as_double(), 0.5);
  EXPECT_EQ(wa.at("ignore_case_accuracy").as_double(), 0.75);
  EXPECT_EQ(wa.at("ignore_case_symbol_accuracy").as_double(), 0.25);

  const Value cr = result_of(from_old("CharRecallPrecision", {}, OldChar{10, 8, 6, 2}),
                             "CharRecallPrecision", {});
  EXPECT_EQ(cr.at("recall").as_double(), 0.6);
  EXPECT_EQ(cr.at("precision").as_double(), 0.75);

  EXPECT_EQ(result_of(from_old("WER", {}, OldEditRate{2, 5, 2}), "WER", {}).at("wer").as_double(),
            0.4);
  EXPECT_EQ(result_of(from_old("CER", {}, OldEditRate{3, 0, 1}), "CER", {}).at("cer").as_double(),
            3.0);  // jiwer: the number of insertions when there are no reference tokens

  // BLEU, n_gram 1: [C, R, M1, T1] = [4, 4, 2, 4] -> p1 0.5, BP 1 -> 0.5. With tokenizer auto
  // there are two sets (en, cn) and first_lang picks one.
  const Value::Map one{{"n_gram", 1}, {"tokenizer", "en"}};
  EXPECT_EQ(result_of(from_old("BLEU", one, OldBleu{PackedVector<std::int64_t>{4, 4, 2, 4}, -1, 2}),
                      "BLEU", one)
                .at("bleu")
                .as_double(),
            0.5);
  const Value::Map autotok{{"n_gram", 1}};
  const PackedVector<std::int64_t> two_sets{4, 4, 2, 4, 4, 4, 1, 4};
  EXPECT_EQ(
      result_of(from_old("BLEU", autotok, OldBleu{two_sets, 0, 2}), "BLEU", autotok).at("bleu"),
      Value(0.5));
  EXPECT_EQ(
      result_of(from_old("BLEU", autotok, OldBleu{two_sets, 1, 2}), "BLEU", autotok).at("bleu"),
      Value(0.25));

  // ROUGE-L, two samples (F, P, R): (0.5, 0.25, 0.75) and (1, 1, 1) -> their means.
  const Value::Map rl{{"rouge_keys", "L"}, {"tokenizer", "en"}};
  const Value r = result_of(
      from_old("ROUGE", rl, OldRouge{PackedVector<double>{0.5, 0.25, 0.75, 1, 1, 1}, -1, 2}),
      "ROUGE", rl);
  EXPECT_EQ(r.at("rougeL_fmeasure").as_double(), 0.75);
  EXPECT_EQ(r.at("rougeL_precision").as_double(), 0.625);
  EXPECT_EQ(r.at("rougeL_recall").as_double(), 0.875);
}

TEST(OldCheckpoints, RegressionStatesRestore) {
  // One output: sum w e = 3, sum w = 2 -> 1.5 (MAE, MSE), sqrt(1.5) (RMSE).
  const OldErrorSum e{exact_words({3.0, 2.0}), 1, 0, 2};
  EXPECT_EQ(result_of(from_old("RegressionMAE", {}, e), "RegressionMAE", {}).at("mae"), Value(1.5));
  EXPECT_EQ(result_of(from_old("RegressionMSE", {}, e), "RegressionMSE", {}).at("mse"), Value(1.5));
  EXPECT_EQ(result_of(from_old("RMSE", {}, e), "RMSE", {}).at("rmse"), Value(std::sqrt(1.5)));
  // Two outputs, raw values: [6 / 4, 1 / 4].
  const Value::Map raw{{"multioutput", "raw_values"}};
  const OldErrorSum e2{exact_words({6.0, 1.0, 4.0}), 2, 1, 3};
  EXPECT_EQ(result_of(from_old("RegressionMSE", raw, e2), "RegressionMSE", raw).at("mse"),
            Value(std::vector<double>{1.5, 0.25}));
  // scikit-learn's r2_score docstring: 0.9486081370449679.
  const OldR2 r2{PackedVector<double>{3, -0.5, 2, 7}, PackedVector<double>{2.5, 0, 2, 8}, {}, 1, 0};
  EXPECT_DOUBLE_EQ(result_of(from_old("R2", {}, r2), "R2", {}).at("r2").as_double(),
                   0.9486081370449679);
  // A checkpoint restored and then fed more data: the exact sums go on from the saved ones.
  const auto m = from_old("RegressionMSE", {}, e);
  Batch b;
  b.set("target", Tensor::from_vector<double>({1.0}));
  b.set("pred", Tensor::from_vector<double>({4.0}));
  m->add(b);  // + 9, + 1 weight -> 12 / 3
  EXPECT_EQ(m->compute_local().at("mse"), Value(4.0));
}

TEST(OldCheckpoints, RestorationStatesRestore) {
  for (const char* type : {"PSNR", "SNR", "SSIM", "MAE", "MSE"})
    EXPECT_EQ(
        result_of(from_old(type, {}, OldPerSample{PackedVector<double>{10, 20, 45}}), type, {})
            .as_map()
            .begin()
            ->second,
        Value(25.0))
        << type;
}

// ---- merging across ranks
// ------------------------------------------------------------------------

// Each rank's state as the earlier code saved it, merged: the sums add, the per-sample values
// concatenate in rank order, a rank without samples counts for nothing.
TEST(StateMerge, RanksOfOldCheckpointsMerge) {
  const Value::Map modes{{"mode", Value::Array{"exact", "ignore_case"}}};
  EXPECT_EQ(compute_states(*make_metric("WordAccuracy", modes),
                           {from_old("WordAccuracy", modes, OldWordAccuracy{1, 2, 0, 2}),
                            from_old("WordAccuracy", modes, OldWordAccuracy{}),
                            from_old("WordAccuracy", modes, OldWordAccuracy{1, 1, 0, 2})}),
            compute_states(*make_metric("WordAccuracy", modes),
                           {from_old("WordAccuracy", modes, OldWordAccuracy{2, 3, 0, 4})}));
  for (const char* type : {"PSNR", "MAE"}) {
    // numpy's mean of [1, 2, 3, 4, 5] in dataset order, whatever the split.
    const Value got = compute_states(
        *make_metric(type, {}), {from_old(type, {}, OldPerSample{PackedVector<double>{1, 2}}),
                                 from_old(type, {}, OldPerSample{}),
                                 from_old(type, {}, OldPerSample{PackedVector<double>{3, 4, 5}})});
    EXPECT_EQ(got.as_map().begin()->second, Value(3.0)) << type;
  }
  // Exact sums across ranks: 1e16 + 1 - 1e16 is 1, not 0.
  const OldErrorSum a{exact_words({1e16, 1.0}), 1, 0, 1};
  const OldErrorSum b{exact_words({1.0, 1.0}), 1, 0, 1};
  const OldErrorSum c{exact_words({-1e16, 1.0}), 1, 0, 1};
  EXPECT_EQ(compute_states(
                *make_metric("RegressionMAE", {}),
                {from_old("RegressionMAE", {}, a), from_old("RegressionMAE", {}, OldErrorSum{}),
                 from_old("RegressionMAE", {}, b), from_old("RegressionMAE", {}, c)})
                .at("mae"),
            Value(1.0 / 3.0));
}

// tokenizer auto: the language is that of the dataset's first prediction, so of the first rank
// that has samples, whatever the later ranks' first samples are (first()).
TEST(StateMerge, FirstRankWithSamplesDecidesTheLanguage) {
  const auto dataset = [](bool cjk_first) {
    std::vector<std::string> pred = {"the cat is on the mat", "猫坐在垫子上",
                                     "there is a big tree near the park here"};
    std::vector<std::string> refs = {"a cat is on the mat", "猫在垫子上",
                                     "a big tree is growing near the park here"};
    if (cjk_first) std::swap(pred[0], pred[1]), std::swap(refs[0], refs[1]);
    Batch b;
    b.set_text("pred", Text::from_strings(pred));
    b.set_text("refs", Text::from_strings(refs));
    return b;
  };
  for (const char* type : {"BLEU", "ROUGE"}) {
    const auto make = [&](const char* tok) {
      return [type, tok] { return make_metric(type, {{"tokenizer", tok}}); };
    };
    for (const bool cjk_first : {true, false}) {
      const Batch d = dataset(cjk_first);
      const Value cn = run_ranks(make("cn"), d, contiguous_shards(d.size(), 1));
      const Value en = run_ranks(make("en"), d, contiguous_shards(d.size(), 1));
      ASSERT_FALSE(same_bits(cn, en)) << type << ": the data does not tell the languages apart";
      const Value& want = cjk_first ? cn : en;
      for (int ranks : {2, 3, 4}) {
        // Rank 0 without samples (its empty batch added): the next rank decides.
        const Value got =
            run_ranks(make("auto"), d, contiguous_shards(d.size(), ranks, 0), {1, true});
        EXPECT_TRUE(same_bits(got, want))
            << type << ", " << ranks << " ranks, rank 0 empty, " << (cjk_first ? "CJK" : "English")
            << " first: " << got.to_json() << " vs " << want.to_json();
        const Value even =
            run_ranks(make("auto"), d, contiguous_shards(d.size(), ranks), {1, false});
        EXPECT_TRUE(same_bits(even, want)) << type << ", " << ranks << " ranks";
      }
    }
  }
}

// ---- inconsistent and corrupt states ---------------------------------------------------------

std::shared_ptr<Metric> fed(const std::string& type, const Batch& b) {
  auto m = make_metric(type, {});
  if (b.size() > 0) m->add(b);
  return m;
}

Batch regression_batch(std::int64_t outputs, bool weighted) {
  Batch b;
  std::vector<double> v(static_cast<std::size_t>(2 * outputs));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  const std::vector<std::int64_t> shape =
      outputs == 1 ? std::vector<std::int64_t>{2} : std::vector<std::int64_t>{2, outputs};
  b.set("target", Tensor::from_vector<double>(v, shape));
  for (auto& x : v) x += 0.5;
  b.set("pred", Tensor::from_vector<double>(v, shape));
  if (weighted) b.set("sample_weight", Tensor::from_vector<double>({1.0, 2.0}));
  return b;
}

// Ranks that read data of different shapes, or weight their samples differently, cannot be
// merged: an input error (exit 2), whether or not a rank without samples lies between them.
TEST(StateMerge, RegressionRanksThatDisagreeAreAnInputError) {
  for (const char* type : {"RegressionMAE", "RegressionMSE", "RMSE", "R2"}) {
    const auto make = [&] { return make_metric(type, {}); };
    const auto empty = make();
    // Consistent ranks, one without samples among them, merge.
    EXPECT_NO_THROW(compute_states(*make(), {fed(type, regression_batch(2, true)), empty,
                                             fed(type, regression_batch(2, true))}));
    for (const bool gap : {false, true}) {
      std::vector<std::shared_ptr<Metric>> outputs{fed(type, regression_batch(1, false))};
      std::vector<std::shared_ptr<Metric>> weights{fed(type, regression_batch(3, false))};
      if (gap) outputs.push_back(empty), weights.push_back(empty);
      outputs.push_back(fed(type, regression_batch(2, false)));
      weights.push_back(fed(type, regression_batch(3, true)));
      EXPECT_HAS(error_of<InputError>([&] { compute_states(*make(), outputs); }),
                 "disagrees with an earlier rank");
      EXPECT_HAS(error_of<InputError>([&] { compute_states(*make(), weights); }),
                 "disagrees with an earlier rank");
    }
  }
}

/// `old` with the exact sums' word `at` set to `v`.
OldErrorSum with_word(OldErrorSum old, std::size_t at, std::int64_t v) {
  old.words[at] = v;
  return old;
}

// A saved or received state whose exact sums are not normalized accumulators (words that could
// overflow int64 when added), or not as many as the outputs say, or sizes that do not fit
// together: RuntimeError, on one rank and on several, first or last; never a crash. (Sums and
// samples on a rank that says it has no outputs are caught on a rank alone only: merged with a
// rank that has outputs, or fed a batch, they look like that rank's / batch's.)
TEST(StateMerge, CorruptRegressionStatesAreARuntimeError) {
  const OldErrorSum good{exact_words({3.0, 2.0}), 1, 0, 2};
  const std::vector<OldErrorSum> corrupt = {
      with_word(good, 5, -1),
      with_word(good, 0, std::int64_t{1} << 32),
      with_word(good, ExactSum::kWords - 1, std::numeric_limits<std::int64_t>::max()),
      with_word(good, ExactSum::kWords + 3, std::numeric_limits<std::int64_t>::min()),
      OldErrorSum{exact_words({3.0}), 1, 0, 2},            // 1 accumulator for 1 output + weight
      OldErrorSum{exact_words({3.0, 2.0, 1.0}), 1, 0, 2},  // 3
      OldErrorSum{exact_words({3.0, 2.0}), -1, -1, 2},     // sums and samples but no outputs
      OldErrorSum{PackedVector<std::int64_t>{1, 2, 3}, 1, 0, 2},  // not whole accumulators
  };
  for (const char* type : {"RegressionMAE", "RegressionMSE", "RMSE"}) {
    for (std::size_t k = 0; k < corrupt.size(); ++k) {
      const auto bad = [&] { return from_old(type, {}, corrupt[k]); };
      const auto ok = [&] { return from_old(type, {}, good); };
      EXPECT_HAS(error_of<RuntimeError>([&] { bad()->compute_local(); }), "corrupt")
          << type << " " << k;
      EXPECT_HAS(error_of<RuntimeError>([&] { compute_states(*make_metric(type, {}), {bad()}); }),
                 "corrupt")
          << type << " " << k;
      if (k == 6) continue;
      EXPECT_HAS(error_of<RuntimeError>([&] {
                   compute_states(*make_metric(type, {}), {bad(), ok()});
                 }),
                 "corrupt")
          << type << " " << k;
      EXPECT_HAS(error_of<RuntimeError>([&] {
                   compute_states(*make_metric(type, {}), {ok(), bad()});
                 }),
                 "corrupt")
          << type << " " << k;
      // Restored, then fed a batch of its one output.
      EXPECT_HAS(error_of<RuntimeError>([&] { bad()->add(regression_batch(1, false)); }), "corrupt")
          << type << " " << k;
    }
  }
}

TEST(StateMerge, CorruptR2StatesAreARuntimeError) {
  const PackedVector<double> four{1, 2, 3, 4};
  const std::vector<OldR2> corrupt = {
      OldR2{four, four, {}, 0, 0},    // zero outputs (was a division by zero)
      OldR2{four, four, {}, -1, -1},  // values but no outputs
      OldR2{four, PackedVector<double>{1, 2, 3}, {}, 1, 0},  // pred and target differ
      OldR2{four, four, {}, 3, 0},                           // 4 values of 3 outputs
      OldR2{four, four, PackedVector<double>{1}, 1, 1},      // 1 weight for 4 samples
      OldR2{four, four, {}, 1, -1},                          // weighting unknown: no weights
  };
  for (std::size_t k = 0; k < corrupt.size(); ++k) {
    const auto bad = [&] { return from_old("R2", {}, corrupt[k]); };
    EXPECT_HAS(error_of<RuntimeError>([&] { bad()->compute_local(); }), "corrupt") << k;
    EXPECT_HAS(error_of<RuntimeError>([&] { compute_states(*make_metric("R2", {}), {bad()}); }),
               "corrupt")
        << k;
  }
}

// Counts that are negative, or whose total reaches 2^62, and per-sample values that do not match
// the sample count: RuntimeError (the base class checks the counts of every `sum` field). On
// several ranks the counts are summed before rank 0 sees them: a negative count is caught when
// the sum is still negative (the later rank adds nothing to it here).
TEST(StateMerge, CorruptTextStatesAreARuntimeError) {
  const std::int64_t big = std::int64_t{1} << 61;
  const std::vector<OldWordAccuracy> counts = {{-1, 0, 0, 2}, {0, 0, 0, -3}, {big, big, 0, 2}};
  const Value::Map modes{{"mode", Value::Array{"exact"}}};
  for (const auto& c : counts) {
    EXPECT_HAS(error_of<RuntimeError>([&] { from_old("WordAccuracy", modes, c)->compute_local(); }),
               "corrupt");
    EXPECT_HAS(error_of<RuntimeError>([&] {
                 compute_states(*make_metric("WordAccuracy", modes),
                                {from_old("WordAccuracy", modes, c),
                                 from_old("WordAccuracy", modes, OldWordAccuracy{0, 0, 0, 1})});
               }),
               "corrupt");
  }
  const Value::Map rl{{"rouge_keys", "L"}, {"tokenizer", "en"}};
  for (const OldRouge& r : {OldRouge{PackedVector<double>{1, 1, 1}, -1, 2},
                            OldRouge{PackedVector<double>{1, 1, 1, 1}, -1, 1}}) {
    EXPECT_HAS(error_of<RuntimeError>([&] { from_old("ROUGE", rl, r)->compute_local(); }),
               "scores for");
    EXPECT_HAS(error_of<RuntimeError>(
                   [&] { compute_states(*make_metric("ROUGE", rl), {from_old("ROUGE", rl, r)}); }),
               "scores for");
  }
  // Counters of another size than n_gram fixes: refused when restored (check_restored).
  const Value::Map one{{"n_gram", 1}, {"tokenizer", "en"}};
  EXPECT_HAS(
      error_of<RuntimeError>([&] {
        from_old("BLEU", one, OldBleu{PackedVector<std::int64_t>{4, 4, 2}, -1, 2})->compute_local();
      }),
      "the saved state is corrupt (state field 0): 3 counts where this metric's parameters "
      "make 4");
}

// ExactSums::merge: the same words as one accumulator over all the values, whatever the split;
// an empty side takes the other's.
TEST(ExactSums, MergeIsExactAndTakesTheOtherSideWhenEmpty) {
  const std::vector<double> xs = {1e16, 3.25, -1e16, 1e-300, 7.0, -2.5e10, 2.5e10, 0.125};
  ExactSum whole;
  for (const double x : xs) whole.add(x);
  whole.normalize();
  for (std::size_t cut = 0; cut <= xs.size(); ++cut) {
    ExactSum a, b;
    for (std::size_t i = 0; i < xs.size(); ++i) (i < cut ? a : b).add(xs[i]);
    a.normalize();
    b.normalize();
    ExactSums left(a.words().begin(), a.words().end()), right(b.words().begin(), b.words().end());
    ExactSums merged;
    merged.merge(ExactSums{});
    merged.merge(left);
    merged.merge(ExactSums{});
    merged.merge(right);
    EXPECT_TRUE(
        std::equal(merged.begin(), merged.end(), whole.words().begin(), whole.words().end()))
        << cut;
  }
  // Different numbers of accumulators: recorded, not merged (the caller tells why).
  ExactSums one(ExactSum::kWords, 0), two(2 * ExactSum::kWords, 0);
  one[0] = 5;
  two[0] = 7;
  one.merge(two);
  EXPECT_TRUE(one.mismatched());
  EXPECT_EQ(one.size(), ExactSum::kWords);
  EXPECT_EQ(one[0], 5);
  EXPECT_FALSE(two.mismatched());
  ExactSums bad(ExactSum::kWords, 0);
  bad[3] = -1;
  EXPECT_HAS(error_of<RuntimeError>([&] { one.merge(bad); }), "corrupt");
  EXPECT_HAS(error_of<RuntimeError>([&] { bad.merge(one); }), "corrupt");
}

}  // namespace
}  // namespace tally::test
