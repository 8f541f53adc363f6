// The text plugin: BLEU, ROUGE, WordAccuracy, CharRecallPrecision, WER and CER (mmeval's,
// sacrebleu's and jiwer's), and the torchmetrics-named CHRFScore, TranslationEditRate,
// EditDistance, ExtendedEditDistance, MatchErrorRate, WordInfoLost, WordInfoPreserved and SQuAD.
// Each metric lives in its own file with its formula and reference.
// Each component registers itself in its own file (TALLY_COMPONENT); they are listed in the
// order of the sources in CMakeLists.txt.
#include "tally/sdk/plugin.hpp"

TALLY_PLUGIN("text", "0.1.0")
