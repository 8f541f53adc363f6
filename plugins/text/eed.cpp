// ExtendedEditDistance: the mean over samples of the sentence-level Extended Edit Distance
// (Stanchev, Wang and Ney, 2019) of each hypothesis against its best (lowest-scoring) reference,
// as torchmetrics 1.9.0's torchmetrics.text.ExtendedEditDistance computes it.
//
// Per pair (hypothesis h, reference r), after preprocessing ('en': rstrip, a space before each
// . ! ? and ',', whitespace runs to one space, '1 . 5' back to '1.5', 'Mr .' to 'Mr.'
// (torchmetrics' pattern: one of Dr Jr Prof Rev Gen Mr Mt Mrs Ms, a space and ANY character), 'e .
// g .' and friends back, and a space added at both ends; 'ja': rstrip and Unicode NFKC), over code
// points: a CDER-like table with rows over r and columns over h, row 0 = (0, 1, 1, ...),
//   next[i] = min(next[i-1] + deletion, row[i-1] + [h[i-1] != r[w-1]], row[i] + insertion)
// (next[0] = row[0] + 1), a visit counted at each row's first minimum, and after a space of r a
// jump: next = min(next, alpha + min(next)); then
//   EED(h, r) = min(1, (row[len h] + rho * V) / (len r + rho * V)),
// V = the visits per column, a never-visited column counting 1.
// Sample score: the minimum over its references; result: the mean over samples.
//
// Example (torchmetrics' docstring): preds ['this is the prediction', 'here is an other sample'],
//   target ['this is the reference', 'here is another one'] -> {extended_edit_distance:
//   0.30776307858253227} (torchmetrics: tensor(0.3078)).
//
// State: the sum of the sample scores in an exact accumulator (ExactSums, merged exactly) and the
// sample count: the same bits on any number of ranks. torchmetrics averages in float32 by default;
// the expected values come from it with torch's default dtype float64.
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "edit_ops.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/state.hpp"

namespace tally::text {
namespace {

struct EedState {
  std::int64_t n = 0;
  ExactSums scores;
  TALLY_STATE(sum(n), merge(scores))
};

void replace_all(std::u32string& s, std::u32string_view from, std::u32string_view to) {
  std::u32string out;
  std::size_t pos = 0;
  while (true) {
    const auto at = s.find(from, pos);
    if (at == std::u32string::npos) break;
    out.append(s, pos, at - pos);
    out.append(to);
    pos = at + from.size();
  }
  out.append(s, pos, std::u32string::npos);
  s.swap(out);
}

bool py_decimal(char32_t c) {
  return u_charType(static_cast<UChar32>(c)) == U_DECIMAL_DIGIT_NUMBER;
}

// torchmetrics' _preprocess_en, over code points.
std::u32string preprocess_en(std::string_view text) {
  std::u32string s;
  decode_utf8(py_rstrip(text), s);
  replace_all(s, U".", U" .");
  replace_all(s, U"!", U" !");
  replace_all(s, U"?", U" ?");
  replace_all(s, U",", U" ,");
  {  // re.sub(r"\s+", " ")
    std::u32string out;
    for (std::size_t i = 0; i < s.size();) {
      if (py_isspace(s[i])) {
        while (i < s.size() && py_isspace(s[i])) ++i;
        out += U' ';
      } else {
        out += s[i++];
      }
    }
    s.swap(out);
  }
  {  // re.sub(r"(\d) ([.,]) (\d)", r"\1\2\3"), left to right
    std::u32string out;
    for (std::size_t i = 0; i < s.size();) {
      if (i + 4 < s.size() && py_decimal(s[i]) && s[i + 1] == U' ' &&
          (s[i + 2] == U'.' || s[i + 2] == U',') && s[i + 3] == U' ' && py_decimal(s[i + 4])) {
        out += s[i];
        out += s[i + 2];
        out += s[i + 4];
        i += 5;
      } else {
        out += s[i++];
      }
    }
    s.swap(out);
  }
  {  // re.sub(r"(Dr|Jr|Prof|Rev|Gen|Mr|Mt|Mrs|Ms) .", r"\1."): '.' is any character but \n
    static const std::u32string_view kTitles[] = {U"Dr", U"Jr", U"Prof", U"Rev", U"Gen",
                                                  U"Mr", U"Mt", U"Mrs",  U"Ms"};
    std::u32string out;
    for (std::size_t i = 0; i < s.size();) {
      bool matched = false;
      for (const auto t : kTitles) {
        const std::size_t end = i + t.size();
        if (end + 1 < s.size() && s.compare(i, t.size(), t) == 0 && s[end] == U' ' &&
            s[end + 1] != U'\n') {
          out.append(t);
          out += U'.';
          i = end + 2;
          matched = true;
          break;
        }
      }
      if (!matched) out += s[i++];
    }
    s.swap(out);
  }
  replace_all(s, U"e . g .", U"e.g.");
  replace_all(s, U"i . e .", U"i.e.");
  replace_all(s, U"U . S .", U"U.S.");
  return U" " + s + U" ";
}

// torchmetrics' _preprocess_ja: rstrip, then NFKC.
std::u32string preprocess_ja(std::string_view text) {
  const std::string_view t = py_rstrip(text);
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfkc = icu::Normalizer2::getNFKCInstance(status);
  if (U_FAILURE(status)) throw RuntimeError("ICU: no NFKC normalizer");
  const icu::UnicodeString u = nfkc->normalize(
      icu::UnicodeString::fromUTF8(icu::StringPiece(t.data(), static_cast<std::int32_t>(t.size()))),
      status);
  if (U_FAILURE(status)) throw RuntimeError("ICU: NFKC normalisation failed");
  std::string utf8;
  u.toUTF8String(utf8);
  std::u32string s;
  decode_utf8(utf8, s);
  return s;
}

class Eed final : public TypedMetric<EedState> {
 public:
  explicit Eed(const Params& p)
      : check_(p.owner_or("ExtendedEditDistance")),
        ja_(p.get_string("language") == "ja"),
        alpha_(p.get_double("alpha")),
        rho_(p.get_double("rho")),
        deletion_(p.get_double("deletion")),
        insertion_(p.get_double("insertion")) {
    for (const char* name : {"alpha", "rho", "deletion", "insertion"}) {
      const double v = p.get_double(name);
      if (!(v >= 0.0) || !std::isfinite(v))
        p.fail(name, fmt::format("must be a non-negative finite number, got {}", v));
    }
  }

 protected:
  EedState initial_state() const override {
    EedState s;
    ExactSum zero;
    zero.normalize();
    s.scores.assign(zero.words().begin(), zero.words().end());
    return s;
  }

  void update(EedState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Text& pred = single_text(batch, kPreds, check_, state.n);
    const Text& refs = reference_lists(batch, kTarget, check_, state.n);
    same_size(pred, kPreds, refs, kTarget, check_);
    ExactSum total;
    total.merge(state.scores.data());
    for (std::int64_t i = 0; i < pred.size(); ++i) {
      const std::u32string hyp = ja_ ? preprocess_ja(pred[i][0]) : preprocess_en(pred[i][0]);
      double best = std::numeric_limits<double>::infinity();
      for (std::size_t k = 0; k < refs[i].size(); ++k) {
        const std::u32string ref = ja_ ? preprocess_ja(refs[i][k]) : preprocess_en(refs[i][k]);
        if ((hyp.size() + 1) * (ref.size() + 1) > (std::size_t{1} << 30))
          check_.fail(kTarget, fmt::format("sample {}: the pair is too long for EED ({} x {} "
                                           "characters; at most 2^30 cells)",
                                           state.n + i, hyp.size(), ref.size()));
        if (ref.empty() && rho_ == 0.0)
          check_.fail(kTarget, fmt::format("sample {}: reference {} is empty after preprocessing "
                                           "and rho is 0: EED divides by zero",
                                           state.n + i, k));
        best = std::min(best, eed(hyp, ref));
      }
      total.add(best);
    }
    total.normalize();
    std::copy(total.words().begin(), total.words().end(), state.scores.begin());
    state.n += pred.size();
  }

  Value compute(const EedState& s) const override {
    if (s.n == 0) check_.fail("no samples");
    if (s.scores.size() != ExactSum::kWords || s.scores.mismatched())
      check_.fail_runtime(std::string("the state's sum is corrupt"));
    ExactSum total;
    total.merge(s.scores.data());
    Value out = Value::map();
    out.set("extended_edit_distance", total.value() / static_cast<double>(s.n));
    return out;
  }

 private:
  // torchmetrics' _eed_function.
  double eed(const std::u32string& hyp, const std::u32string& ref) {
    const std::size_t w = hyp.size() + 1;
    visits_.assign(w, -1);
    row_.assign(w, 1.0);
    row_[0] = 0.0;
    next_.assign(w, std::numeric_limits<double>::infinity());
    const char32_t* h = hyp.data();
    for (std::size_t r = 1; r <= ref.size(); ++r) {
      // Plain pointers and comparisons: this loop is the cost of EED (and of its tests, which
      // run unoptimised under the sanitizers).
      const double* row = row_.data();
      double* next = next_.data();
      const char32_t c = ref[r - 1];
      next[0] = row[0] + 1.0;
      for (std::size_t i = 1; i < w; ++i) {
        double v = next[i - 1] + deletion_;
        const double sub = row[i - 1] + (h[i - 1] != c ? 1.0 : 0.0);
        if (sub < v) v = sub;
        const double ins = row[i] + insertion_;
        if (ins < v) v = ins;
        next[i] = v;
      }
      const std::size_t at =
          static_cast<std::size_t>(std::min_element(next_.begin(), next_.end()) - next_.begin());
      ++visits_[at];
      if (ref[r - 1] == U' ') {
        const double jump = alpha_ + next_[at];
        for (double& x : next_) x = std::min(x, jump);
      }
      row_.swap(next_);
      std::fill(next_.begin(), next_.end(), std::numeric_limits<double>::infinity());
    }
    std::int64_t v = 0;
    for (const auto x : visits_) v += x >= 0 ? x : 1;
    const double coverage = rho_ * static_cast<double>(v);
    return std::min(1.0, (row_[w - 1] + coverage) / (static_cast<double>(ref.size()) + coverage));
  }

  InputChecker check_;
  bool ja_;
  double alpha_, rho_, deletion_, insertion_;
  std::vector<std::int64_t> visits_;
  std::vector<double> row_, next_;
};

}  // namespace

ComponentInfo extended_edit_distance_info() {
  return metric<Eed>(
      "ExtendedEditDistance",
      "Mean sentence-level Extended Edit Distance (character edits, jumps at spaces, coverage "
      "penalty) of each hypothesis against its best reference. Key extended_edit_distance. Exact "
      "sums: the same bits on any number of ranks. Reference: torchmetrics 1.9.0 "
      "torchmetrics.text.ExtendedEditDistance(language, alpha, rho, deletion, "
      "insertion).update(preds, target).",
      {param("language", ParamType::String, "Preprocessing: en or ja (NFKC).")
           .def("en")
           .choices({"en", "ja"}),
       param("alpha", ParamType::Float, "The cost of a jump at a space.").def(2.0),
       param("rho", ParamType::Float, "The weight of the coverage penalty.").def(0.3),
       param("deletion", ParamType::Float, "The cost of a deletion.").def(0.2),
       param("insertion", ParamType::Float, "The cost of an insertion.").def(1.0)},
      {InputSpec{kPreds, "Hypotheses: one string per sample.", true},
       InputSpec{kTarget, "References: one or more strings per sample.", true}},
      {"EED"}, {{"extended_edit_distance", Better::Lower, Plot::None, "mean EED, in [0, 1]"}});
}
TALLY_COMPONENT(extended_edit_distance_info)

}  // namespace tally::text
