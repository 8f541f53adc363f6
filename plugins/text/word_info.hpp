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
// alignment has no deletion or no insertion). On the test data (tests/reference/
// expected_text_torchmetrics.json, "cross_check") MER differs by 3e-3 relative, WIL by 5%, WIP
// by 4%.
//
// State: int64 totals (H, S, D, I, N, P, samples), summed across ranks: exact on any number of
// ranks.
#pragma once

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
  TALLY_STATE(sum(hits), sum(subs), sum(dels), sum(ins), sum(ref_words), sum(hyp_words), sum(n))
};

enum class WordInfoKind { Mer, Wil, Wip };

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

  explicit WordInfo(const Params& p) : check_(p.owner_or(kType)) {}

 protected:
  void update(WordInfoState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Text& pred = single_text(batch, kPreds, check_, state.n);
    const Text& gt = single_text(batch, kTarget, check_, state.n);
    same_size(pred, kPreds, gt, kTarget, check_);
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

  Value compute(const WordInfoState& t) const override {
    if (t.n == 0) check_.fail("no samples");
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
};

}  // namespace tally::text
