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

#include "edit_rate.hpp"

namespace tally::text {
namespace {

struct Words {
  void operator()(std::string_view s, std::string& buf, std::vector<std::string_view>& out) const {
    std::u32string cps;
    decode_utf8(s, cps);
    buf.clear();
    for (std::size_t i = 0; i < cps.size();) {
      if (py_isspace(cps[i]) && i + 1 < cps.size() && py_isspace(cps[i + 1])) {
        while (i < cps.size() && py_isspace(cps[i])) ++i;
        buf += ' ';
      } else {
        append_utf8(cps[i++], buf);
      }
    }
    const std::string_view stripped = py_strip(buf);
    std::size_t start = 0;
    for (std::size_t i = 0; i <= stripped.size(); ++i) {
      if (i == stripped.size() || stripped[i] == ' ') {
        if (i > start) out.push_back(stripped.substr(start, i - start));
        start = i + 1;
      }
    }
  }
};

class Wer final : public EditRate<Words> {
 public:
  explicit Wer(const Params& p) : EditRate<Words>(p, "WER", "wer") {}
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

}  // namespace tally::text
