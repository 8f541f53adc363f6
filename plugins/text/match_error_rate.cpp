// MatchErrorRate: corpus match error rate, jiwer.mer(reference, hypothesis) of jiwer 4.0.0 on
// the list of pairs: (S + D + I) / (H + S + D + I) over the corpus (word_info.hpp has the counts,
// the edge cases, the state and how torchmetrics' MatchErrorRate differs).
//
// Example: target ['hello world', 'the cat sat'], preds ['hello there world', 'the cat']
//   -> H 4, S 0, D 1, I 1 -> {match_error_rate: 0.3333333333333333}.
#include "word_info.hpp"

namespace tally::text {

ComponentInfo match_error_rate_info() {
  using Mer = WordInfo<WordInfoKind::Mer>;
  return metric<Mer>(
      "MatchErrorRate",
      "Corpus match error rate (S + D + I) / (H + S + D + I) of the word alignment, jiwer's counts "
      "(jiwer.process_words with its default transforms). Key match_error_rate. Integer counts: "
      "exact on any number of ranks. Reference: jiwer 4.0.0 jiwer.mer(target, preds); "
      "with convention torchmetrics, torchmetrics 1.9.0's MatchErrorRate: the sum of word edit "
      "distances / the sum of max(N, P) (str.split() words).",
      {word_info_convention_param()}, word_info_inputs(), {"MER"},
      {{"match_error_rate", Better::Lower, Plot::None, "match error rate, in [0, 1]"}});
}
TALLY_COMPONENT(match_error_rate_info)

}  // namespace tally::text
