// The torchmetrics-named metrics of the text plugin (plugins/text: CHRFScore,
// TranslationEditRate, EditDistance, ExtendedEditDistance, MatchErrorRate, WordInfoLost,
// WordInfoPreserved, SQuAD), loaded as the real libtally_text.so through the Registry: values
// against sacrebleu, jiwer and torchmetrics on 1 to 7 ranks, the documented examples, and bad
// inputs.
//
// Expected values come from tests/reference/expected_text_torchmetrics.json, written by
// tests/reference/text_torchmetrics.py (each case records its exact reference call and the
// library versions), unless a test says otherwise.
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

const Json& expected_file() {
  return expected_json("tests/reference/expected_text_torchmetrics.json");
}

/// A .jsonl file of the test data as a batch: each key is a text field (a string: one per
/// sample; a list: the list), ignoring numbers.
Batch load_jsonl(const std::string& relative) {
  std::ifstream in(source_path(relative));
  if (!in) throw std::runtime_error("cannot open " + relative);
  std::vector<std::string> names;
  std::vector<std::vector<std::vector<std::string>>> columns;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const Json row = Json::parse(line);
    if (names.empty()) {
      for (const auto& [k, v] : row.items())
        if (v.is_string() || v.is_array()) names.push_back(k);
      columns.resize(names.size());
    }
    for (std::size_t c = 0; c < names.size(); ++c) {
      const Json& v = row.at(names[c]);
      std::vector<std::string> strings;
      if (v.is_string()) strings.push_back(v.get<std::string>());
      if (v.is_array())
        for (const auto& s : v) strings.push_back(s.get<std::string>());
      columns[c].push_back(std::move(strings));
    }
  }
  Batch b;
  for (std::size_t c = 0; c < names.size(); ++c) b.set_text(names[c], Text::from_lists(columns[c]));
  return b;
}

Batch pairs(const std::vector<std::string>& preds, const std::vector<std::string>& target) {
  Batch b;
  b.set_text("preds", Text::from_strings(preds));
  b.set_text("target", Text::from_strings(target));
  return b;
}

Batch with_refs(const std::vector<std::string>& preds,
                const std::vector<std::vector<std::string>>& target) {
  Batch b;
  b.set_text("preds", Text::from_strings(preds));
  b.set_text("target", Text::from_lists(target));
  return b;
}

/// The runs of run_all_rank_counts here: 1, 2, 3, 4 and 7 ranks in one batch and in batches of
/// 7, and an empty middle rank (the default sweep's third batch size left out: TER's shifts and
/// EED's tables are slow without optimisation, and the batch size cannot matter to a per-sample
/// accumulation beyond 1 vs many).
const RankSweep kSweep{{std::int64_t{1} << 30, 7}, 16, 0};

// ---- values against the references, 1..7 ranks --------------------------------------------------

class TorchmetricsTextCase : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map in expected_text_torchmetrics.json (sacrebleu 2.6.0,
// jiwer 4.0.0 or torchmetrics 1.9.0; the call is the case's "call").
TEST_P(TorchmetricsTextCase, MatchesReferenceOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  check_case(c, load_jsonl(c.at("data").get<std::string>()), GetParam(), kSweep);
  print_rel_diffs("the reference");
}

INSTANTIATE_TEST_SUITE_P(Text, TorchmetricsTextCase,
                         ::testing::ValuesIn(case_names(expected_file())), param_name);

// Expected: section "example" of expected_text_torchmetrics.json (the data of
// configs/examples/text_torchmetrics.yaml). One rank here: tests/integration/test_examples.cpp
// runs the config under mpirun on 1 to 4 ranks and in several batch sizes, bit for bit.
TEST(TorchmetricsTextExample, MatchesReferences) {
  const Json& ex = expected_file().at("example");
  const Batch raw = load_jsonl(ex.at("data").get<std::string>());
  EXPECT_EQ(raw.size(), ex.at("samples").get<std::int64_t>());
  Batch mt;
  mt.set_text("preds", raw.text("translation"));
  mt.set_text("target", raw.text("references"));
  Batch asr;
  asr.set_text("preds", raw.text("transcript"));
  asr.set_text("target", raw.text("spoken"));
  const Json& res = ex.at("results");
  for (const char* type : {"CHRFScore", "TranslationEditRate", "ExtendedEditDistance"})
    expect_matches(run_single(type, {}, mt), res.at(type), std::string("example.") + type, type);
  for (const char* type : {"MatchErrorRate", "WordInfoLost", "WordInfoPreserved", "EditDistance"})
    expect_matches(run_single(type, {}, asr), res.at(type), std::string("example.") + type, type);
  print_rel_diffs("the reference");
}

// ---- the documented examples
// ----------------------------------------------------------------------

// Expected: torchmetrics 1.9.0's docstring examples (CHRFScore tensor(0.8640), TER
// tensor(0.1538), EditDistance 3 / 5 / 3.5, EED tensor(0.3078)), to the digits they print, and the
// full values sacrebleu / torchmetrics (float64) / jiwer give for them, recorded here.
TEST(TorchmetricsTextDocExamples, MatchDocstrings) {
  const Batch mt =
      with_refs({"the cat is on the mat"}, {{"there is a cat on the mat", "a cat is on the mat"}});
  EXPECT_EQ(run_single("CHRFScore", {}, mt).at("chrf_score").as_double(), 0.8640464626240438);
  EXPECT_EQ(run_single("TranslationEditRate", {}, mt).at("translation_edit_rate").as_double(),
            0.15384615384615385);
  EXPECT_EQ(run_single("EditDistance", {}, pairs({"rain"}, {"shine"})).at("edit_distance"),
            Value(3.0));
  EXPECT_EQ(run_single("EditDistance", {{"substitution_cost", 2}}, pairs({"rain"}, {"shine"}))
                .at("edit_distance"),
            Value(5.0));
  EXPECT_EQ(run_single("EditDistance", {}, pairs({"rain", "lnaguaeg"}, {"shine", "language"}))
                .at("edit_distance"),
            Value(3.5));
  const Value none = run_single("EditDistance", {{"reduction", "none"}},
                                pairs({"rain", "lnaguaeg"}, {"shine", "language"}));
  EXPECT_EQ(none.at("edit_distance"), Value(Value::Array{Value(3), Value(4)}));
  EXPECT_EQ(run_single("ExtendedEditDistance", {},
                       with_refs({"this is the prediction", "here is an other sample"},
                                 {{"this is the reference"}, {"here is another one"}}))
                .at("extended_edit_distance")
                .as_double(),
            0.30776307858253227);
  const Batch asr = pairs({"hello there world", "the cat"}, {"hello world", "the cat sat"});
  EXPECT_EQ(run_single("MatchErrorRate", {}, asr).at("match_error_rate").as_double(),
            0.3333333333333333);
  EXPECT_EQ(run_single("WordInfoLost", {}, asr).at("word_information_lost").as_double(),
            0.3599999999999999);
  EXPECT_EQ(run_single("WordInfoPreserved", {}, asr).at("word_information_preserved").as_double(),
            0.6400000000000001);
  // torchmetrics.functional.text.squad on these: {'exact_match': 50.0, 'f1': 83.3333}.
  const Value sq = run_single(
      "SQuAD", {}, with_refs({"the Big  cat!", "a dog"}, {{"big cat"}, {"a black dog", "cat"}}));
  EXPECT_EQ(sq.at("exact_match").as_double(), 0.5);
  EXPECT_NEAR(sq.at("f1").as_double(), 0.8333333333333333, 1e-15);
}

// Expected (by hand, jiwer's rules): an empty reference corpus gives MER 0 / WIP 1 when the
// hypotheses are empty too, else MER 1 / WIP 0; an empty hypothesis corpus gives WIP 0.
TEST(TorchmetricsTextEdgeCases, JiwerEmptyCorpora) {
  EXPECT_EQ(run_single("MatchErrorRate", {}, pairs({""}, {""})).at("match_error_rate"), Value(0.0));
  EXPECT_EQ(
      run_single("WordInfoPreserved", {}, pairs({""}, {" "})).at("word_information_preserved"),
      Value(1.0));
  EXPECT_EQ(run_single("MatchErrorRate", {}, pairs({"a"}, {""})).at("match_error_rate"),
            Value(1.0));
  EXPECT_EQ(run_single("WordInfoLost", {}, pairs({""}, {"a b"})).at("word_information_lost"),
            Value(1.0));
  // sacrebleu: an empty reference and a non-empty hypothesis give TER 1 (score 100).
  EXPECT_EQ(
      run_single("TranslationEditRate", {}, with_refs({"a b"}, {{""}})).at("translation_edit_rate"),
      Value(1.0));
  EXPECT_EQ(
      run_single("TranslationEditRate", {}, with_refs({""}, {{""}})).at("translation_edit_rate"),
      Value(0.0));
  // SQuAD: both answers normalise to nothing: exact match, F1 1 (torchmetrics).
  const Value sq = run_single("SQuAD", {}, with_refs({"The"}, {{"a ..."}}));
  EXPECT_EQ(sq.at("exact_match"), Value(1.0));
  EXPECT_EQ(sq.at("f1"), Value(1.0));
}

// ---- bad inputs
// ----------------------------------------------------------------------------------

const char* const kAll[] = {
    "CHRFScore",      "TranslationEditRate", "EditDistance",      "ExtendedEditDistance",
    "MatchErrorRate", "WordInfoLost",        "WordInfoPreserved", "SQuAD"};

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(TorchmetricsTextBadInput, NamesMetricFieldSampleAndProblem) {
  for (const char* type : kAll) {
    SCOPED_TRACE(type);
    const std::string owner = std::string("metric '") + type + "'";
    Batch missing;
    missing.set_text("preds", Text::from_strings({"a"}));
    std::string e = input_error(type, {}, missing);
    EXPECT_TRUE(contains(e, owner) && contains(e, "field 'target' is missing")) << e;

    Batch tensor;
    tensor.set("preds", Tensor::from_vector(std::vector<std::int64_t>{1, 2}));
    tensor.set_text("target", Text::from_strings({"a", "b"}));
    e = input_error(type, {}, tensor);
    EXPECT_TRUE(contains(e, owner) && contains(e, "field 'preds' must be a text field")) << e;

    Batch two;
    two.set_text("preds", Text::from_lists({{"a"}, {"b", "c"}}));
    two.set_text("target", Text::from_lists({{"a"}, {"b"}}));
    e = input_error(type, {}, two);
    EXPECT_TRUE(contains(e, "field 'preds' sample 1: expected exactly 1 string, found 2")) << e;

    Batch no_refs;
    no_refs.set_text("preds", Text::from_strings({"a", "b"}));
    no_refs.set_text("target", Text::from_lists({{"a"}, {}}));
    e = input_error(type, {}, no_refs);
    EXPECT_TRUE(contains(e, "field 'target' sample 1: expected")) << e;

    e = input_error(type, {}, pairs({"ok", std::string("caf\xC3", 4)}, {"ok", "café"}));
    EXPECT_TRUE(contains(e, "field 'preds' sample 1: string 0 is not valid UTF-8")) << e;

    e = input_error(type, {}, pairs({}, {}));
    EXPECT_TRUE(contains(e, owner) && contains(e, "no samples")) << e;

    EXPECT_EQ(input_error(type, {}, pairs({"a b", "c"}, {"a c", "c d"})), "");
  }
  // One reference per sample where several are allowed is fine; several where one is expected
  // are not.
  for (const char* type : {"EditDistance", "MatchErrorRate", "WordInfoLost", "WordInfoPreserved"}) {
    const std::string e = input_error(type, {}, with_refs({"a"}, {{"a", "b"}}));
    EXPECT_TRUE(contains(e, "field 'target' sample 0: expected exactly 1 string, found 2"))
        << type << ": " << e;
  }
}

TEST(TorchmetricsTextBadConfig, NamesParameter) {
  EXPECT_TRUE(
      contains(config_error("EditDistance", {{"substitution_cost", -1}}), "substitution_cost"));
  EXPECT_TRUE(contains(config_error("EditDistance", {{"reduction", "max"}}), "reduction"));
  EXPECT_TRUE(contains(config_error("CHRFScore", {{"n_char_order", 0}}), "n_char_order"));
  EXPECT_TRUE(contains(config_error("CHRFScore", {{"n_word_order", -1}}), "n_word_order"));
  EXPECT_TRUE(contains(config_error("CHRFScore", {{"beta", -1.0}}), "beta"));
  EXPECT_TRUE(contains(config_error("ExtendedEditDistance", {{"language", "de"}}), "language"));
  EXPECT_TRUE(contains(config_error("ExtendedEditDistance", {{"rho", -0.5}}), "rho"));
  EXPECT_TRUE(contains(config_error("TranslationEditRate", {{"normalise", true}}), "normalise"));
  EXPECT_EQ(config_error("CHRFScore", {{"n_word_order", 0}, {"eps_smoothing", false}}), "");
}

// A pair long enough to need the size guards is refused with a message, not a hang.
TEST(TorchmetricsTextBadInput, BoundsLongPairs) {
  const std::string long_text(40000, 'x');
  const std::string e =
      input_error("ExtendedEditDistance", {}, with_refs({long_text}, {{long_text + "y"}}));
  EXPECT_TRUE(contains(e, "too long for EED")) << e;
}

}  // namespace
}  // namespace tally::test
