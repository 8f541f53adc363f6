// What MatchErrorRate, WordInfoLost and WordInfoPreserved share: jiwer 4.0.0's
// jiwer.process_words counts. Per pair (reference g, hypothesis p), after jiwer's wer_default
// transform (JiwerWords), the hits H, substitutions S, deletions D and insertions I of the
// alignment rapidfuzz.distance.Levenshtein.opcodes(g, p) picks (RapidfuzzAlignment: among the
// optimal alignments, the hits depend on which one), summed over the corpus, with N = H + S + D
// reference words and P = H + S + I hypothesis words:
//   MER = (S + D + I) / (H + S + D + I)          WIP = (H / N) * (H / P)       WIL = 1 - WIP
// and jiwer's edge cases: N = 0 gives MER 0 and WIP 1 when P = 0, else MER 1 and WIP 0; P = 0
// (N > 0) gives WIP 0.
//
// torchmetrics 1.9.0 (MatchErrorRate, WordInfoLost, WordInfoPreserved) differs: it splits with
// str.split(), and takes the edit distance C and max(N, P) per pair instead of an alignment:
// MER = sum C / sum max(N, P), and H = max(N, P) - C (which is the hits only when an optimal
// alignment has no deletion or no insertion):
//   MER = sum C / sum max(N, P)    WIP = (E / sum N) * (E / sum P), E = sum C - sum max(N, P)
//   WIL = 1 - WIP
// (torchmetrics.functional.text.mer / wil / wip: _mer_update, _wil_update, _wip_update). On the
// test data (tests/reference/expected_text_torchmetrics.json, "cross_check") MER differs from
// jiwer's by 3e-3 relative, WIL by 5%, WIP by 4%. The parameter `convention` picks: jiwer (the
// default) or torchmetrics (what tally.torchmetrics' drop-in classes set).
//
// State: int64 totals (H, S, D, I, N, P, C, sum max(N, P), samples), summed across ranks: exact
// on any number of ranks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "edit_ops.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/state.hpp"

namespace tally::text {

struct WordInfoState {
  std::int64_t hits = 0, subs = 0, dels = 0, ins = 0, ref_words = 0, hyp_words = 0, n = 0;
  // The torchmetrics convention's: edit distances and max(N, P), summed over the pairs.
  std::int64_t edits = 0, longest = 0;
  TALLY_STATE(sum(hits), sum(subs), sum(dels), sum(ins), sum(ref_words), sum(hyp_words), sum(n),
              sum(edits), sum(longest))
};

enum class WordInfoKind { Mer, Wil, Wip };

/// `convention`: jiwer's counts (default) or torchmetrics' (see the file comment).
inline ParamSpec word_info_convention_param() {
  return param("convention", ParamType::String,
               "jiwer: jiwer 4.0.0's alignment counts after its default transforms (jiwer.mer / "
               "wil / wip); torchmetrics: torchmetrics 1.9.0's, str.split() words and the edit "
               "distance against max(N, P) per pair (torchmetrics.text.MatchErrorRate / "
               "WordInfoLost / WordInfoPreserved).")
      .def("jiwer")
      .choices({"jiwer", "torchmetrics"});
}

inline std::vector<InputSpec> word_info_inputs() {
  return {InputSpec{kPreds, "Transcriptions (hypotheses): one string per sample.", true},
          InputSpec{kTarget, "References: one string per sample.", true}};
}

template <WordInfoKind K>
class WordInfo final : public TypedMetric<WordInfoState> {
 public:
  static constexpr const char* kType = K == WordInfoKind::Mer   ? "MatchErrorRate"
                                       : K == WordInfoKind::Wil ? "WordInfoLost"
                                                                : "WordInfoPreserved";
  static constexpr const char* kKey = K == WordInfoKind::Mer   ? "match_error_rate"
                                      : K == WordInfoKind::Wil ? "word_information_lost"
                                                               : "word_information_preserved";

  explicit WordInfo(const Params& p)
      : check_(p.owner_or(kType)), torchmetrics_(p.get_string("convention") == "torchmetrics") {}

 protected:
  void update(WordInfoState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Text& pred = single_text(batch, kPreds, check_, state.n);
    const Text& gt = single_text(batch, kTarget, check_, state.n);
    same_size(pred, kPreds, gt, kTarget, check_);
    if (torchmetrics_) {
      update_torchmetrics(state, pred, gt);
      return;
    }
    for (std::int64_t i = 0; i < pred.size(); ++i) {
      tok_g_.clear();
      tok_p_.clear();
      JiwerWords{}(gt[i][0], buf_g_, tok_g_);
      JiwerWords{}(pred[i][0], buf_p_, tok_p_);
      interner_.clear();
      interner_.ids_of(tok_g_, ids_g_);
      interner_.ids_of(tok_p_, ids_p_);
      const EditCounts c = align_.count(ids_g_, ids_p_, interner_.size());
      const auto n_g = static_cast<std::int64_t>(ids_g_.size());
      state.hits += n_g - c.substitutions - c.deletions;
      state.subs += c.substitutions;
      state.dels += c.deletions;
      state.ins += c.insertions;
      state.ref_words += n_g;
      state.hyp_words += static_cast<std::int64_t>(ids_p_.size());
    }
    state.n += pred.size();
  }

  /// torchmetrics' counts: str.split() words, their edit distance C and max(N, P) per pair.
  void update_torchmetrics(WordInfoState& state, const Text& pred, const Text& gt) {
    for (std::int64_t i = 0; i < pred.size(); ++i) {
      tok_g_.clear();
      tok_p_.clear();
      py_split(gt[i][0], tok_g_);
      py_split(pred[i][0], tok_p_);
      interner_.clear();
      interner_.ids_of(tok_g_, ids_g_);
      interner_.ids_of(tok_p_, ids_p_);
      const auto n_g = static_cast<std::int64_t>(ids_g_.size());
      const auto n_p = static_cast<std::int64_t>(ids_p_.size());
      state.edits += levenshtein_.distance(ids_p_, ids_g_, interner_.size());
      state.longest += std::max(n_g, n_p);
      state.ref_words += n_g;
      state.hyp_words += n_p;
    }
    state.n += pred.size();
  }

  /// torchmetrics' formulas (a zero denominator gives NaN there too: 0/0).
  double compute_torchmetrics(const WordInfoState& t) const {
    const auto d = [](std::int64_t x) { return static_cast<double>(x); };
    if (K == WordInfoKind::Mer) return d(t.edits) / d(t.longest);
    const double e = d(t.edits - t.longest);
    const double wip = (e / d(t.ref_words)) * (e / d(t.hyp_words));
    return K == WordInfoKind::Wip ? wip : 1.0 - wip;
  }

  Value compute(const WordInfoState& t) const override {
    if (t.n == 0) check_.fail("no samples");
    if (torchmetrics_) {
      Value out = Value::map();
      out.set(kKey, compute_torchmetrics(t));
      return out;
    }
    const auto d = [](std::int64_t x) { return static_cast<double>(x); };
    double mer = 0.0, wip = 0.0;
    if (t.ref_words == 0) {
      mer = t.hyp_words == 0 ? 0.0 : 1.0;
      wip = t.hyp_words == 0 ? 1.0 : 0.0;
    } else {
      mer = d(t.subs + t.dels + t.ins) / d(t.hits + t.subs + t.dels + t.ins);
      wip = t.hyp_words >= 1 ? (d(t.hits) / d(t.ref_words)) * (d(t.hits) / d(t.hyp_words)) : 0.0;
    }
    Value out = Value::map();
    out.set(kKey, K == WordInfoKind::Mer ? mer : K == WordInfoKind::Wip ? wip : 1.0 - wip);
    return out;
  }

 private:
  InputChecker check_;
  std::string buf_g_, buf_p_;
  std::vector<std::string_view> tok_g_, tok_p_;
  std::vector<std::int32_t> ids_g_, ids_p_;
  Interner interner_;
  RapidfuzzAlignment align_;
  Levenshtein levenshtein_;
  bool torchmetrics_ = false;
};

}  // namespace tally::text
