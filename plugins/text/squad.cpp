// SQuAD: exact match and token F1 of extractive question answering, as torchmetrics 1.9.0's
// torchmetrics.text.SQuAD computes them (the SQuAD v1.1 evaluation logic), as fractions, in
// float64 (the SQuAD class sums in float32; its functional form, the reference, in float64):
//   normalize(s) = white_space_fix(remove_articles(remove_punc(s.lower()))) split into tokens
//   EM_i = max over the gold answers g of [normalize(pred) == normalize(g)]
//   F1_i = max over g of 2 p r / (p + r), p = common / |pred tokens|, r = common / |g tokens|
//          (common: the multiset intersection; 1 when both token lists are empty, 0 when one is)
//   exact_match = sum EM_i / samples,  f1 = sum F1_i / samples
// torchmetrics returns percentages; tally's keys are its keys as fractions in [0, 1]
// (docs/architecture.md, "Results JSON": never percent): torchmetrics' value / 100. Questions pair
// with answers by row, not by id, so there is no unanswered question. remove_punc drops
// string.punctuation (ASCII only); remove_articles replaces the words a, an, the (whole
// \b-delimited words, Python's Unicode \w) by a space; lower() is Python's full Unicode lowercase.
//
// The official SQuAD v1.1 script (evaluate-v1.1.py) differs in one case: its F1 is 0 when both
// token lists are empty (torchmetrics, like SQuAD v2.0, gives 1). On the test data that moves f1
// by 4.6% relative (tests/reference/expected_text_torchmetrics.json, "cross_check").
//
// Example: preds ['the Big  cat!', 'a dog'], target [['big cat'], ['a black dog', 'cat']]
//   -> {exact_match: 0.5, f1: 0.8333333333...}.
//
// State: the exact-match count and the sample count (int64, summed), and the sum of the
// per-sample F1 values in an exact accumulator (ExactSums, merged exactly): the same bits on any
// number of ranks.
#include <unicode/uchar.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "edit_ops.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/state.hpp"

namespace tally::text {
namespace {

struct SquadState {
  std::int64_t exact = 0, n = 0;
  ExactSums f1;
  TALLY_STATE(sum(exact), sum(n), merge(f1))
};

/// Python's str.isalnum() for one code point, or '_': what `\w` matches in a str pattern.
bool py_word_char(char32_t c) {
  if (c == U'_') return true;
  const auto u = static_cast<UChar32>(c);
  if ((U_GET_GC_MASK(u) & (U_GC_L_MASK | U_GC_N_MASK)) != 0) return true;
  return u_getIntPropertyValue(u, UCHAR_NUMERIC_TYPE) != U_NT_NONE;
}

bool ascii_punct(char32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
         (c >= 123 && c <= 126);
}

/// The tokens of SQuAD's normalize_answer(s), appended to `out` (views into `buf`).
void squad_tokens(std::string_view s, std::string& buf, std::vector<std::string_view>& out) {
  std::u32string cps, kept;
  decode_utf8(py_lower(s), cps);
  for (const char32_t c : cps)
    if (!ascii_punct(c)) kept += c;
  // remove_articles: a maximal run of word characters equal to a / an / the becomes a space.
  buf.clear();
  for (std::size_t i = 0; i < kept.size();) {
    if (!py_word_char(kept[i])) {
      append_utf8(kept[i++], buf);
      continue;
    }
    std::size_t j = i;
    while (j < kept.size() && py_word_char(kept[j])) ++j;
    const std::u32string_view run(kept.data() + i, j - i);
    if (run == U"a" || run == U"an" || run == U"the") {
      buf += ' ';
    } else {
      for (std::size_t k = i; k < j; ++k) append_utf8(kept[k], buf);
    }
    i = j;
  }
  py_split(buf, out);
}

class Squad final : public TypedMetric<SquadState> {
 public:
  explicit Squad(const Params& p)
      : check_(p.owner_or("SQuAD")), scale_(p.get_bool("percent") ? 100.0 : 1.0) {}

 protected:
  SquadState initial_state() const override {
    SquadState s;
    ExactSum zero;
    zero.normalize();
    s.f1.assign(zero.words().begin(), zero.words().end());
    return s;
  }

  void update(SquadState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Text& pred = single_text(batch, kPreds, check_, state.n);
    const Text& gold = reference_lists(batch, kTarget, check_, state.n);
    same_size(pred, kPreds, gold, kTarget, check_);
    ExactSum f1_sum;
    f1_sum.merge(state.f1.data());
    for (std::int64_t i = 0; i < pred.size(); ++i) {
      tok_p_.clear();
      squad_tokens(pred[i][0], buf_p_, tok_p_);
      bool exact = false;
      double best_f1 = 0.0;
      for (const std::string& g : gold[i]) {
        tok_g_.clear();
        squad_tokens(g, buf_g_, tok_g_);
        exact = exact || tok_p_ == tok_g_;
        best_f1 = std::max(best_f1, f1(tok_p_, tok_g_));
      }
      state.exact += exact ? 1 : 0;
      f1_sum.add(best_f1);
    }
    f1_sum.normalize();
    std::copy(f1_sum.words().begin(), f1_sum.words().end(), state.f1.begin());
    state.n += pred.size();
  }

  Value compute(const SquadState& s) const override {
    if (s.n == 0) check_.fail("no samples");
    if (s.f1.size() != ExactSum::kWords || s.f1.mismatched())
      check_.fail_runtime(std::string("the state's F1 sum is corrupt"));
    ExactSum f1_sum;
    f1_sum.merge(s.f1.data());
    Value out = Value::map();
    // percent: torchmetrics' _squad_compute, 100.0 * sum / total in that order.
    const auto n = static_cast<double>(s.n);
    out.set("exact_match", scale_ * static_cast<double>(s.exact) / n);
    out.set("f1", scale_ * f1_sum.value() / n);
    return out;
  }

 private:
  // torchmetrics' _compute_f1_score (float64).
  double f1(const std::vector<std::string_view>& p, const std::vector<std::string_view>& g) {
    if (p.empty() || g.empty()) return p.empty() && g.empty() ? 1.0 : 0.0;
    counts_.clear();
    for (const auto t : g) ++counts_[t];
    std::int64_t same = 0;
    for (const auto t : p) {
      auto it = counts_.find(t);
      if (it != counts_.end() && it->second > 0) --it->second, ++same;
    }
    if (same == 0) return 0.0;
    const double precision = 1.0 * static_cast<double>(same) / static_cast<double>(p.size());
    const double recall = 1.0 * static_cast<double>(same) / static_cast<double>(g.size());
    return (2 * precision * recall) / (precision + recall);
  }

  InputChecker check_;
  double scale_ = 1.0;
  std::string buf_p_, buf_g_;
  std::vector<std::string_view> tok_p_, tok_g_;
  std::unordered_map<std::string_view, std::int64_t> counts_;
};

}  // namespace

ComponentInfo squad_info() {
  return metric<Squad>(
      "SQuAD",
      "Exact match and token F1 of extractive QA answers against one or more gold answers each "
      "(the SQuAD v1.1 normalisation: lowercase, no ASCII punctuation, no articles), as "
      "fractions in [0, 1] (torchmetrics' percentages / 100). Keys exact_match, f1. Exact sums: "
      "the same bits on any number of ranks. Reference: torchmetrics 1.9.0 "
      "torchmetrics.functional.text.squad([{prediction_text, id}], [{answers: {text}, id}]) / "
      "100.",
      {param("percent", ParamType::Bool,
             "false: fractions in [0, 1]; true: percentages in [0, 100], as torchmetrics' SQuAD "
             "returns them (what tally.torchmetrics.SQuAD sets).")
           .def(false)},
      {InputSpec{kPreds, "Predicted answers: one string per question.", true},
       InputSpec{kTarget, "Gold answers: one or more strings per question.", true}},
      {"Squad"},
      {{"exact_match", Better::Higher, Plot::None, "fraction of exact matches, in [0, 1]"},
       {"f1", Better::Higher, Plot::None, "mean token F1, in [0, 1]"}});
}
TALLY_COMPONENT(squad_info)

}  // namespace tally::text
