// The text plugin (plugins/text), loaded as the real libtally_text.so through the Registry:
// values against mmeval, sacrebleu and jiwer, independence from the number of ranks, and bad
// inputs.
//
// Expected values come from tests/reference/expected_text.json, written by
// tests/reference/text.py (the library versions and, for each value, the exact call are
// recorded in the file), unless a test says otherwise.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

const Json& expected_file() { return expected_json("tests/reference/expected_text.json"); }

/// A .jsonl file of the test data as a batch: each key maps to a text field (a string: one per
/// sample; a list: the list). Nested objects are read with dotted names ("ocr.pred").
Batch load_jsonl(const std::string& relative) {
  std::ifstream in(source_path(relative));
  if (!in) throw std::runtime_error("cannot open " + relative);
  std::vector<std::string> names;
  std::vector<std::vector<std::vector<std::string>>> columns;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const Json row = Json::parse(line);
    std::vector<std::pair<std::string, Json>> flat;
    for (const auto& [k, v] : row.items()) {
      if (v.is_object())
        for (const auto& [k2, v2] : v.items()) flat.emplace_back(k + "." + k2, v2);
      else
        flat.emplace_back(k, v);
    }
    if (names.empty()) {
      for (const auto& [k, v] : flat) names.push_back(k);
      columns.resize(names.size());
    }
    for (std::size_t c = 0; c < names.size(); ++c) {
      const Json& v = flat.at(c).second;
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

/// The runs of run_all_rank_counts here: the default ones, and the first rank empty (its empty
/// batch added) in batches of 7: the language of tokenizer auto comes from the next rank.
const RankSweep kSweep{{std::int64_t{1} << 30, 16, 5}, 16, 7};

// ---- values against the references, 1..7 ranks ------------------------------------------------

class ReferenceCase : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map in expected_text.json (mmeval 0.2.1, sacrebleu 2.6.0 or
// jiwer 4.0.0; the call for each key is in the case's "calls" map).
TEST_P(ReferenceCase, MatchesReferenceOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  check_case(c, load_jsonl(c.at("data").get<std::string>()), GetParam(), kSweep);
  print_rel_diffs("the reference");
}

INSTANTIATE_TEST_SUITE_P(Text, ReferenceCase, ::testing::ValuesIn(case_names(expected_file())),
                         param_name);

// Expected: section "example" of expected_text.json (the data of configs/examples/text.yaml).
TEST(TextExample, MatchesReferences) {
  const Json& ex = expected_file().at("example");
  const Batch raw = load_jsonl(ex.at("data").get<std::string>());
  EXPECT_EQ(raw.size(), ex.at("samples").get<std::int64_t>());
  // The first reference of each sample as the single ground truth of WER and CER.
  std::vector<std::string> first;
  const Text& refs = raw.text("references");
  for (std::int64_t i = 0; i < refs.size(); ++i) first.push_back(refs[i][0]);
  Batch b;
  b.set_text("pred", raw.text("hypothesis"));
  b.set_text("refs", raw.text("references"));
  b.set_text("gt", Text::from_strings(first));
  Batch ocr;
  ocr.set_text("pred", raw.text("ocr.pred"));
  ocr.set_text("gt", raw.text("ocr.gt"));
  const Json& res = ex.at("results");
  expect_matches(run_all_rank_counts("BLEU", {}, b, {}, kSweep), res.at("BLEU"), "example.BLEU",
                 "BLEU");
  expect_matches(run_all_rank_counts("BLEU", {{"convention", "sacrebleu"}}, b, {}, kSweep),
                 res.at("sacreBLEU"), "example.sacreBLEU", "BLEU");
  expect_matches(run_all_rank_counts("ROUGE", {}, b, {}, kSweep), res.at("ROUGE"), "example.ROUGE",
                 "ROUGE");
  expect_matches(run_all_rank_counts("WER", {}, b, {}, kSweep), res.at("WER"), "example.WER",
                 "WER");
  expect_matches(run_all_rank_counts("CER", {}, b, {}, kSweep), res.at("CER"), "example.CER",
                 "CER");
  expect_matches(
      run_all_rank_counts("WordAccuracy",
                          {{"mode", Value::Array{"exact", "ignore_case", "ignore_case_symbol"}}},
                          ocr, {}, kSweep),
      res.at("WordAccuracy"), "example.WordAccuracy", "WordAccuracy");
  expect_matches(run_all_rank_counts("CharRecallPrecision", {}, ocr, {}, kSweep),
                 res.at("CharRecallPrecision"), "example.CharRecallPrecision",
                 "CharRecallPrecision");
  print_rel_diffs("the reference");
}

// ---- the examples of mmeval's docstrings
// ---------------------------------------------------------

Batch pairs(const std::vector<std::string>& pred, const std::vector<std::string>& gt) {
  Batch b;
  b.set_text("pred", Text::from_strings(pred));
  b.set_text("gt", Text::from_strings(gt));
  return b;
}

// Expected: the examples in the docstrings of mmeval 0.2.1's BLEU, ROUGE, WordAccuracy and
// CharRecallPrecision.
TEST(TextDocExamples, MatchMmevalDocstrings) {
  Batch mt;
  mt.set_text("pred", Text::from_strings(
                          {"the cat is on the mat", "There is a big tree near the park here"}));
  mt.set_text("refs", Text::from_lists(
                          {{"a cat is on the mat"}, {"A big tree is growing near the park here"}}));
  EXPECT_NEAR(run_single("BLEU", {}, mt).at("bleu").as_double(), 0.5226045319355426, 1e-15);
  EXPECT_NEAR(run_single("BLEU", {{"smooth", true}}, mt).at("bleu").as_double(), 0.566315716093867,
              1e-15);
  Batch one;
  one.set_text("pred", Text::from_strings({"the cat is on the mat"}));
  one.set_text("refs", Text::from_lists({{"a cat is on the mat"}}));
  const Value r = run_single("ROUGE", {{"rouge_keys", "L"}}, one);
  EXPECT_NEAR(r.at("rougeL_fmeasure").as_double(), 5.0 / 6.0, 1e-15);
  const Value w = run_single("WordAccuracy",
                             {{"mode", Value::Array{"exact", "ignore_case", "ignore_case_symbol"}}},
                             pairs({"hello", "hello", "hello"}, {"hello", "HELLO", "$HELLO$"}));
  EXPECT_EQ(w.at("accuracy").as_double(), 1.0 / 3.0);
  EXPECT_EQ(w.at("ignore_case_accuracy").as_double(), 2.0 / 3.0);
  EXPECT_EQ(w.at("ignore_case_symbol_accuracy").as_double(), 1.0);
  const Value c = run_single("CharRecallPrecision", {}, pairs({"helL", "HEL"}, {"hello", "HELLO"}));
  EXPECT_EQ(c.at("recall").as_double(), 0.6);
  EXPECT_EQ(c.at("precision").as_double(), 0.8571428571428571);
  const Value cu = run_single("CharRecallPrecision", {{"letter_case", "upper"}},
                              pairs({"helL", "HEL"}, {"hello", "HELLO"}));
  EXPECT_EQ(cu.at("recall").as_double(), 0.7);
  EXPECT_EQ(cu.at("precision").as_double(), 1.0);
}

// ---- the bit-parallel edit distance against the textbook DP -------------------------------------

std::int64_t naive_distance(const std::u32string& a, const std::u32string& b) {
  std::vector<std::int64_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<std::int64_t>(j);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<std::int64_t>(i);
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string utf8(const std::u32string& s) {
  std::string out;
  for (const char32_t c : s) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else {  // the test alphabet stays below U+0800
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// Expected: a plain O(n*m) dynamic programme over code points, computed here, on random strings
// of 0 to 300 characters (1 to 5 blocks of 64) over small alphabets (many matches).
TEST(TextEditDistance, CerEqualsTheTextbookDistance) {
  std::mt19937 rng(12345);
  const std::u32string alphabet = U"abcdé\u03a3x";
  for (int trial = 0; trial < 300; ++trial) {
    const auto len = [&](int max) { return std::uniform_int_distribution<int>(0, max)(rng); };
    std::u32string a, b;
    const int la = len(trial < 100 ? 70 : 300), lb = len(trial < 100 ? 70 : 300);
    const auto pick = [&] {
      return alphabet[std::uniform_int_distribution<std::size_t>(0, alphabet.size() - 1)(rng)];
    };
    for (int i = 0; i < la; ++i) a += pick();
    for (int i = 0; i < lb; ++i) b += pick();
    const Value got = run_single("CER", {}, pairs({utf8(b)}, {utf8(a)}));
    const std::int64_t d = naive_distance(a, b);
    const double want =
        a.empty() ? static_cast<double>(d) : static_cast<double>(d) / static_cast<double>(a.size());
    ASSERT_EQ(got.at("cer").as_double(), want) << "trial " << trial << ": " << la << " x " << lb;
  }
}

// ---- bad inputs ---------------------------------------------------------------------------------

TEST(TextBadInput, NamesFieldSampleAndProblem) {
  Batch ok;
  ok.set_text("pred", Text::from_strings({"a b", "c d"}));
  ok.set_text("refs", Text::from_lists({{"a b"}, {"c"}}));

  Batch missing;
  missing.set_text("pred", Text::from_strings({"a"}));
  EXPECT_NE(input_error("BLEU", {}, missing).find("field 'refs' is missing"), std::string::npos)
      << input_error("BLEU", {}, missing);

  Batch tensor;
  tensor.set("pred", Tensor::from_vector(std::vector<std::int64_t>{1, 2}));
  tensor.set_text("refs", Text::from_lists({{"a"}, {"b"}}));
  EXPECT_NE(input_error("ROUGE", {}, tensor).find("field 'pred' must be a text field"),
            std::string::npos);

  Batch two;
  two.set_text("pred", Text::from_lists({{"a"}, {"b", "c"}}));
  two.set_text("gt", Text::from_lists({{"a"}, {"b"}}));
  EXPECT_NE(input_error("WER", {}, two)
                .find("field 'pred' sample 1: expected exactly 1 string, "
                      "found 2"),
            std::string::npos)
      << input_error("WER", {}, two);

  Batch no_refs;
  no_refs.set_text("pred", Text::from_strings({"a", "b"}));
  no_refs.set_text("refs", Text::from_lists({{"a"}, {}}));
  EXPECT_NE(input_error("BLEU", {}, no_refs)
                .find("field 'refs' sample 1: expected at least 1 string, found 0"),
            std::string::npos);

  Batch bad_utf8 = pairs({"ok", std::string("caf\xC3", 4)}, {"ok", "café"});
  EXPECT_NE(input_error("CER", {}, bad_utf8).find("sample 1: string 0 is not valid UTF-8"),
            std::string::npos)
      << input_error("CER", {}, bad_utf8);

  Batch empty;
  empty.set_text("pred", Text::from_strings({}));
  empty.set_text("gt", Text::from_strings({}));
  for (const char* type : {"WER", "CER", "WordAccuracy", "CharRecallPrecision"})
    EXPECT_NE(input_error(type, {}, empty).find("no samples"), std::string::npos) << type;
  Batch empty_mt;
  empty_mt.set_text("pred", Text::from_strings({}));
  empty_mt.set_text("refs", Text::from_lists({}));
  for (const char* type : {"BLEU", "ROUGE"})
    EXPECT_NE(input_error(type, {}, empty_mt).find("no samples"), std::string::npos) << type;

  EXPECT_EQ(input_error("BLEU", {}, ok), "");
  EXPECT_EQ(input_error("ROUGE", {}, ok), "");
}

TEST(TextBadConfig, NamesParameter) {
  EXPECT_NE(config_error("ROUGE", {{"rouge_keys", Value::Array{1, 10}}}).find("rouge_keys"),
            std::string::npos);
  EXPECT_NE(config_error("ROUGE", {{"use_stemmer", true}}).find("use_stemmer"), std::string::npos);
  EXPECT_NE(config_error("BLEU", {{"ngram_weights", Value::Array{0.5, 0.5}}})
                .find("has 2 weights, n_gram is 4"),
            std::string::npos);
  EXPECT_NE(config_error("BLEU", {{"smooth_method", "floor"}}).find("convention: sacrebleu"),
            std::string::npos);
  EXPECT_NE(config_error("BLEU", {{"convention", "sacrebleu"}, {"smooth", true}})
                .find("convention: mmeval"),
            std::string::npos);
  EXPECT_NE(
      config_error("BLEU", {{"convention", "sacrebleu"}, {"tokenizer", "cn"}}).find("tokenizer"),
      std::string::npos);
  EXPECT_NE(config_error("BLEU", {{"tokenizer", "13a"}}).find("tokenizer"), std::string::npos);
  EXPECT_NE(config_error("BLEU", {{"n_gram", 0}}).find("n_gram"), std::string::npos);
  EXPECT_NE(config_error("WordAccuracy", {{"invalid_symbol", "[a-"}}).find("invalid_symbol"),
            std::string::npos);
  EXPECT_NE(config_error("WordAccuracy", {{"mode", "fuzzy"}}).find("mode"), std::string::npos);
  EXPECT_EQ(
      config_error(
          "BLEU", {{"convention", "sacrebleu"}, {"smooth_method", "floor"}, {"smooth_value", 0.2}}),
      "");
}

}  // namespace
}  // namespace tally::test
