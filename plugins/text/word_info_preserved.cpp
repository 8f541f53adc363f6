// WordInfoPreserved: corpus word information preserved, jiwer.wip(reference, hypothesis) of
// jiwer 4.0.0 on the list of pairs: (H / N) * (H / P) over the corpus (word_info.hpp has the
// counts, the edge cases, the state and how torchmetrics' WordInfoPreserved differs).
//
// Example: target ['hello world', 'the cat sat'], preds ['hello there world', 'the cat']
//   -> H 4, N 5, P 5 -> {word_information_preserved: 0.6400000000000001}.
#include "word_info.hpp"

namespace tally::text {

ComponentInfo word_info_preserved_info() {
  return metric<WordInfo<WordInfoKind::Wip>>(
      "WordInfoPreserved",
      "Corpus word information preserved (H / N) * (H / P) of the word alignment, jiwer's counts "
      "(jiwer.process_words with its default transforms). Key word_information_preserved. "
      "Integer counts: exact on any number of ranks. Reference: jiwer 4.0.0 jiwer.wip(target, "
      "preds); with convention torchmetrics, torchmetrics 1.9.0's WordInfoPreserved (E / N) * "
      "(E / P), E = sum of edit distances - sum of max(N, P) (str.split() words).",
      {word_info_convention_param()}, word_info_inputs(), {"WIP"},
      {{"word_information_preserved", Better::Higher, Plot::None,
        "word information preserved, in [0, 1]"}});
}
TALLY_COMPONENT(word_info_preserved_info)

}  // namespace tally::text
