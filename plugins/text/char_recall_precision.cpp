// CharRecallPrecision: character-level recall and precision of recognised text.
//
// Formula. For sample i, after the optional case change (Python's upper()/lower()) and removing
// the characters invalid_symbol matches from prediction p and ground truth g:
//   tp_i = the total size of difflib.SequenceMatcher(None, p, g)'s matching blocks (code points)
//   recall = sum tp_i / max(sum len(g), 1),  precision = sum tp_i / max(sum len(p), 1)
//
// Reference: mmeval.metrics.CharRecallPrecision (mmeval 0.2.1). Its keys are `recall` and
// `precision` (mmocr's CharMetric calls them char_recall / char_precision; tally keeps mmeval's).
//
// Example (mmeval's doc): pred ['helL', 'HEL'], gt ['hello', 'HELLO'] -> {recall: 0.6,
// precision: 0.8571428571428571}; letter_case upper -> {recall: 0.7, precision: 1.0}.
//
// State: int64 totals (ground-truth characters, predicted characters, true positives, samples),
// each summed across ranks.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/state.hpp"

namespace tally::text {
namespace {

struct CharState {
  std::int64_t gt = 0, pred = 0, tp = 0, n = 0;
  TALLY_STATE(sum(gt), sum(pred), sum(tp), sum(n))
};

class CharRecallPrecision final : public TypedMetric<CharState> {
 public:
  explicit CharRecallPrecision(const Params& p) : check_(p.owner_or("CharRecallPrecision")) {
    const std::string lc = p.get_string("letter_case");
    upper_ = lc == "upper";
    lower_ = lc == "lower";
    filter_ = symbol_filter(p);
  }

 protected:
  void update(CharState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Text& pred = single_text(batch, kPred, check_, state.n);
    const Text& gt = single_text(batch, kGt, check_, state.n);
    same_size(pred, kPred, gt, kGt, check_);
    for (std::int64_t i = 0; i < pred.size(); ++i) {
      std::string p = pred[i][0], g = gt[i][0];
      if (upper_) p = py_upper(p), g = py_upper(g);
      if (lower_) p = py_lower(p), g = py_lower(g);
      const std::string vp = filter_->remove(p), vg = filter_->remove(g);
      chars_p_.clear();
      chars_g_.clear();
      code_points(vp, chars_p_);
      code_points(vg, chars_g_);
      interner_.clear();
      interner_.ids_of(chars_p_, ids_p_);
      interner_.ids_of(chars_g_, ids_g_);
      state.gt += static_cast<std::int64_t>(ids_g_.size());
      state.pred += static_cast<std::int64_t>(ids_p_.size());
      state.tp += matcher_.matched(ids_p_, ids_g_, interner_.size());
    }
    state.n += pred.size();
  }

  Value compute(const CharState& t) const override {
    if (t.n == 0) check_.fail("no samples");
    const auto tp = static_cast<double>(t.tp);
    Value out = Value::map();
    out.set("recall", tp / std::max(static_cast<double>(t.gt), 1.0));
    out.set("precision", tp / std::max(static_cast<double>(t.pred), 1.0));
    return out;
  }

 private:
  bool upper_ = false, lower_ = false;
  std::unique_ptr<SymbolFilter> filter_;
  InputChecker check_;
  std::vector<std::string_view> chars_p_, chars_g_;
  std::vector<std::int32_t> ids_p_, ids_g_;
  Interner interner_;
  SequenceMatcher matcher_;
};

}  // namespace

ComponentInfo char_recall_precision_info() {
  return metric<CharRecallPrecision>(
      "CharRecallPrecision",
      "Character-level recall and precision of recognised text "
      "(mmeval.metrics.CharRecallPrecision; matches by difflib.SequenceMatcher). Keys recall, "
      "precision (mmeval's names).",
      {param("letter_case", ParamType::String, "unchanged, upper or lower (Python's case mapping).")
           .def("unchanged")
           .choices({"unchanged", "upper", "lower"}),
       param("invalid_symbol", ParamType::String,
             "A regular expression (ICU syntax, like Python's re for character classes) whose "
             "matches are removed before matching.")
           .def(kDefaultInvalidSymbol)},
      {InputSpec{kPred, "Predicted text: one string per sample.", true},
       InputSpec{kGt, "Ground-truth text: one string per sample.", true}},
      {}, {{"*", Better::Higher, Plot::None, "a fraction of characters"}});
}
TALLY_COMPONENT(char_recall_precision_info)

}  // namespace tally::text
