// What WER and CER share: corpus-level edit rates as jiwer 4.0.0 computes them. For every pair
// (reference g, hypothesis p) after jiwer's default transforms, the Levenshtein distance d(g, p)
// over tokens (words or characters); then
//   rate = sum d / sum len(g)            (jiwer: (S + D + I) / (H + S + D))
//   rate = sum d  when sum len(g) == 0  (jiwer's edge case: the number of insertions)
// State: int64 totals (edit operations, reference tokens, samples), each summed across ranks:
// exact on any number of ranks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/state.hpp"

namespace tally::text {

struct EditRateState {
  std::int64_t edits = 0, ref_tokens = 0, n = 0;
  TALLY_STATE(sum(edits), sum(ref_tokens), sum(n))
};

/// The inputs of WER and CER.
inline std::vector<InputSpec> edit_rate_inputs() {
  return {InputSpec{kPred, "Hypotheses: one string per sample.", true},
          InputSpec{kGt, "References: one string per sample.", true}};
}

/// `Tokens` is a callable (std::string_view text, std::string& buffer,
/// std::vector<std::string_view>& tokens) that applies jiwer's transforms.
template <class Tokens>
class EditRate : public TypedMetric<EditRateState> {
 public:
  EditRate(const Params& p, const char* type, const char* key)
      : key_(key), check_(p.owner_or(type)) {}

 protected:
  void update(EditRateState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Text& pred = single_text(batch, kPred, check_, state.n);
    const Text& gt = single_text(batch, kGt, check_, state.n);
    same_size(pred, kPred, gt, kGt, check_);
    for (std::int64_t i = 0; i < pred.size(); ++i) {
      tok_g_.clear();
      tok_p_.clear();
      Tokens{}(gt[i][0], buf_g_, tok_g_);
      Tokens{}(pred[i][0], buf_p_, tok_p_);
      interner_.clear();
      interner_.ids_of(tok_g_, ids_g_);
      interner_.ids_of(tok_p_, ids_p_);
      state.edits += lev_.distance(ids_g_, ids_p_, interner_.size());
      state.ref_tokens += static_cast<std::int64_t>(ids_g_.size());
    }
    state.n += pred.size();
  }

  Value compute(const EditRateState& t) const override {
    if (t.n == 0) check_.fail("no samples");
    Value out = Value::map();
    out.set(key_, t.ref_tokens == 0
                      ? static_cast<double>(t.edits)
                      : static_cast<double>(t.edits) / static_cast<double>(t.ref_tokens));
    return out;
  }

 private:
  std::string key_;
  InputChecker check_;
  std::string buf_g_, buf_p_;
  std::vector<std::string_view> tok_g_, tok_p_;
  std::vector<std::int32_t> ids_g_, ids_p_;
  Interner interner_;
  Levenshtein lev_;
};

}  // namespace tally::text
