// WordInfoLost: corpus word information lost, jiwer.wil(reference, hypothesis) of jiwer 4.0.0 on
// the list of pairs: 1 - (H / N) * (H / P) over the corpus (word_info.hpp has the counts, the
// edge cases, the state and how torchmetrics' WordInfoLost differs).
//
// Example: target ['hello world', 'the cat sat'], preds ['hello there world', 'the cat']
//   -> H 4, N 5, P 5 -> {word_information_lost: 0.3599999999999999}.
#include "word_info.hpp"

namespace tally::text {

ComponentInfo word_info_lost_info() {
  return metric<WordInfo<WordInfoKind::Wil>>(
      "WordInfoLost",
      "Corpus word information lost 1 - (H / N) * (H / P) of the word alignment, jiwer's counts "
      "(jiwer.process_words with its default transforms). Key word_information_lost. Integer "
      "counts: exact on any number of ranks. Reference: jiwer 4.0.0 jiwer.wil(target, preds); with "
      "convention torchmetrics, torchmetrics 1.9.0's WordInfoLost 1 - (E / N) * (E / P), E = sum "
      "of edit distances - sum of max(N, P) (str.split() words).",
      {word_info_convention_param()}, word_info_inputs(), {"WIL"},
      {{"word_information_lost", Better::Lower, Plot::None, "word information lost, in [0, 1]"}});
}
TALLY_COMPONENT(word_info_lost_info)

}  // namespace tally::text
