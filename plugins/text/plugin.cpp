// The text plugin: BLEU, ROUGE, WordAccuracy, CharRecallPrecision, WER and CER. Each metric
// lives in its own file with its formula and reference.
#include <vector>

#include "common.hpp"
#include "tally/plugin.hpp"

namespace {

std::vector<tally::ComponentInfo> text_components() {
  return {tally::text::bleu_info(),          tally::text::rouge_info(),
          tally::text::word_accuracy_info(), tally::text::char_recall_precision_info(),
          tally::text::wer_info(),           tally::text::cer_info()};
}

}  // namespace

TALLY_PLUGIN("text", "0.1.0", text_components)
