// The text plugin: BLEU, ROUGE, WordAccuracy, CharRecallPrecision, WER and CER (mmeval's,
// sacrebleu's and jiwer's), and the torchmetrics-named CHRFScore, TranslationEditRate,
// EditDistance, ExtendedEditDistance, MatchErrorRate, WordInfoLost, WordInfoPreserved and SQuAD.
// Each metric lives in its own file with its formula and reference.
#include <vector>

#include "common.hpp"
#include "edit_ops.hpp"
#include "tally/sdk/plugin.hpp"

namespace {

std::vector<tally::ComponentInfo> text_components() {
  return {tally::text::bleu_info(),
          tally::text::rouge_info(),
          tally::text::word_accuracy_info(),
          tally::text::char_recall_precision_info(),
          tally::text::wer_info(),
          tally::text::cer_info(),
          tally::text::chrf_score_info(),
          tally::text::translation_edit_rate_info(),
          tally::text::edit_distance_info(),
          tally::text::extended_edit_distance_info(),
          tally::text::match_error_rate_info(),
          tally::text::word_info_lost_info(),
          tally::text::word_info_preserved_info(),
          tally::text::squad_info()};
}

}  // namespace

TALLY_PLUGIN("text", "0.1.0", text_components)
