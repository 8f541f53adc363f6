// WordAccuracy: the fraction of samples whose predicted text equals the ground truth.
//
// Formula. For sample i with prediction p and ground truth g:
//   exact:              p == g
//   ignore_case:        p.lower() == g.lower()
//   ignore_case_symbol: re.sub(invalid_symbol, '', p.lower()) == re.sub(invalid_symbol, '',
//                       g.lower())
// and each accuracy is the count of equal samples / N. lower() is Python's (full Unicode case
// mapping, through ICU).
//
// Reference: mmeval.metrics.WordAccuracy (mmeval 0.2.1): keys accuracy, ignore_case_accuracy,
// ignore_case_symbol_accuracy, in that order, for the modes asked for.
//
// Example (mmeval's doc): pred ['hello', 'hello', 'hello'], gt ['hello', 'HELLO', '$HELLO$'],
// mode [exact, ignore_case, ignore_case_symbol] -> {accuracy: 0.3333, ignore_case_accuracy:
// 0.6667, ignore_case_symbol_accuracy: 1.0}.
//
// State: three int64 counts and the sample count, each summed across ranks.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/state.hpp"

namespace tally::text {
namespace {

struct WordAccuracyState {
  std::int64_t exact = 0, ignore_case = 0, ignore_case_symbol = 0, n = 0;
  TALLY_STATE(sum(exact), sum(ignore_case), sum(ignore_case_symbol), sum(n))
};

class WordAccuracy final : public TypedMetric<WordAccuracyState> {
 public:
  explicit WordAccuracy(const Params& p) : check_(p.owner_or("WordAccuracy")) {
    for (const auto& m : p.get_string_list("mode")) {
      if (m == "exact")
        exact_ = true;
      else if (m == "ignore_case")
        ignore_case_ = true;
      else if (m == "ignore_case_symbol")
        ignore_case_symbol_ = true;
      else
        p.fail("mode", "expects exact, ignore_case or ignore_case_symbol, found '" + m + "'");
    }
    if (!exact_ && !ignore_case_ && !ignore_case_symbol_) p.fail("mode", "names no mode");
    filter_ = symbol_filter(p);
  }

 protected:
  void update(WordAccuracyState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Text& pred = single_text(batch, kPred, check_, state.n);
    const Text& gt = single_text(batch, kGt, check_, state.n);
    same_size(pred, kPred, gt, kGt, check_);
    for (std::int64_t i = 0; i < pred.size(); ++i) {
      const std::string& p = pred[i][0];
      const std::string& g = gt[i][0];
      if (exact_) state.exact += static_cast<std::int64_t>(p == g);
      if (ignore_case_ || ignore_case_symbol_) {
        const std::string pl = py_lower(p), gl = py_lower(g);
        state.ignore_case += static_cast<std::int64_t>(pl == gl);
        if (ignore_case_symbol_)
          state.ignore_case_symbol +=
              static_cast<std::int64_t>(filter_->remove(pl) == filter_->remove(gl));
      }
    }
    state.n += pred.size();
  }

  Value compute(const WordAccuracyState& t) const override {
    if (t.n == 0) check_.fail("no samples");
    const auto n = static_cast<double>(t.n);
    Value out = Value::map();
    if (exact_) out.set("accuracy", static_cast<double>(t.exact) / n);
    if (ignore_case_) out.set("ignore_case_accuracy", static_cast<double>(t.ignore_case) / n);
    if (ignore_case_symbol_)
      out.set("ignore_case_symbol_accuracy", static_cast<double>(t.ignore_case_symbol) / n);
    return out;
  }

 private:
  bool exact_ = false, ignore_case_ = false, ignore_case_symbol_ = false;
  std::unique_ptr<SymbolFilter> filter_;
  InputChecker check_;
};

}  // namespace

ComponentInfo word_accuracy_info() {
  return metric<WordAccuracy>(
      "WordAccuracy",
      "Word-level accuracy of recognised text (mmeval.metrics.WordAccuracy): exact, ignoring "
      "case, or ignoring case and the characters invalid_symbol matches. Keys accuracy, "
      "ignore_case_accuracy, ignore_case_symbol_accuracy.",
      {param("mode", ParamType::StringList,
             "exact, ignore_case and/or ignore_case_symbol: one or a list.")
           .def(Value::Array{Value("ignore_case_symbol")})
           .choices({"exact", "ignore_case", "ignore_case_symbol"}),
       param("invalid_symbol", ParamType::String,
             "A regular expression (ICU syntax, like Python's re for character classes) whose "
             "matches are removed in ignore_case_symbol mode.")
           .def(kDefaultInvalidSymbol)},
      {InputSpec{kPred, "Predicted text: one string per sample.", true},
       InputSpec{kGt, "Ground-truth text: one string per sample.", true}},
      {}, {{"*accuracy", Better::Higher, Plot::None, "fraction of samples read correctly"}});
}
TALLY_COMPONENT(word_accuracy_info)

}  // namespace tally::text
