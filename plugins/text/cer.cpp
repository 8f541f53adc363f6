// CER: corpus character error rate, jiwer.cer(reference, hypothesis) of jiwer 4.0.0 on the list
// of pairs (see edit_rate.hpp for the formula).
//
// Characters are Unicode code points (not bytes) after jiwer's cer_default transforms: Strip
// (str.strip), then ReduceToListOfListOfChars (list(s): inner spaces count as characters).
//
// Example: gt ['héllo'], pred ['hallo'] -> 1 edit / 5 characters -> {cer: 0.2}.
#include <string>
#include <string_view>
#include <vector>

#include "edit_rate.hpp"

namespace tally::text {
namespace {

struct Chars {
  void operator()(std::string_view s, std::string&, std::vector<std::string_view>& out) const {
    code_points(py_strip(s), out);
  }
};

class Cer final : public EditRate<Chars> {
 public:
  explicit Cer(const Params& p) : EditRate<Chars>(p, "CER", "cer") {}
};

}  // namespace

ComponentInfo cer_info() {
  return metric<Cer>(
      "CER",
      "Corpus character error rate over Unicode code points: total Levenshtein distance / total "
      "reference characters (jiwer 4.0.0 jiwer.cer with its default transforms). Key cer.",
      {}, edit_rate_inputs(), {},
      {{"cer", Better::Lower, Plot::None, "character error rate (may exceed 1)"}});
}
TALLY_COMPONENT(cer_info)

}  // namespace tally::text
