// WER: corpus word error rate, jiwer.wer(reference, hypothesis) of jiwer 4.0.0 on the list of
// pairs (see edit_rate.hpp for the formula).
//
// Words are jiwer's wer_default transforms: RemoveMultipleSpaces (re.sub(r'\s\s+', ' ', s): a run
// of two or more whitespace characters becomes one space; a single tab stays), Strip (str.strip),
// ReduceToListOfListOfWords (s.split(' '), empty words dropped).
//
// Example: gt ['hello world', 'the cat sat'], pred ['hello there world', 'the cat']
//   -> 2 edits / 5 reference words -> {wer: 0.4}.
#include <string>
#include <string_view>
#include <vector>

#include "edit_ops.hpp"
#include "edit_rate.hpp"

namespace tally::text {
namespace {

class Wer final : public EditRate<JiwerWords> {
 public:
  explicit Wer(const Params& p) : EditRate<JiwerWords>(p, "WER", "wer") {}
};

}  // namespace

ComponentInfo wer_info() {
  return metric<Wer>(
      "WER",
      "Corpus word error rate: total word-level Levenshtein distance / total reference words "
      "(jiwer 4.0.0 jiwer.wer with its default transforms). Key wer.",
      {}, edit_rate_inputs(), {},
      {{"wer", Better::Lower, Plot::None, "word error rate (may exceed 1)"}});
}
TALLY_COMPONENT(wer_info)

}  // namespace tally::text
