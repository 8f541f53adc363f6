// TranslationEditRate: corpus TER (Snover et al., 2006), as sacrebleu 2.6.0's
// sacrebleu.metrics.TER computes its corpus score (a near-exact reimplementation of Tercom), as
// a fraction (score / 100):
//   TER = sum over samples of the fewest edits to its best reference
//         / sum over samples of the mean length of its references
// (1 when the references are all empty and some hypothesis is not, 0 when both are empty).
// Each string is rstrip()ped and tokenized by sacrebleu's TercomTokenizer (tercom_tokenize:
// lowercase unless `lowercase` is false, the optional `normalize` and `no_punctuation` rules, and
// with `asian_support` the CJK ranges split to characters and CJK punctuation removed), then
// split on whitespace. Edits: Tercom's greedy block shifts (a shift counts 1; spans of at most 10
// words moved at most 50 positions, the candidate that lowers the edit distance most, then the
// longest, the earliest; at most 1000 candidates per sentence) plus the beam-limited Levenshtein
// distance of the shifted hypothesis (BeamEditDistance, edit_ops.hpp).
//
// torchmetrics 1.9.0's TranslationEditRate (parameters named as here) returns TER as a
// fraction too, but it differs from sacrebleu: it shifts the reference towards the hypothesis
// (its arguments are swapped), counts 0 edits for an empty hypothesis, and tries spans of at most
// 9 words; on the test data it differs by up to 19% (tests/reference/
// expected_text_torchmetrics.json, "cross_check"). tally follows sacrebleu.
//
// Example (torchmetrics' docstring): preds ['the cat is on the mat'], target [['there is a cat
//   on the mat', 'a cat is on the mat']] -> {translation_edit_rate: 0.15384615384615385}.
//
// State: the total edits and the sample count (int64, summed) and the sum of the mean reference
// lengths in an exact accumulator (ExactSums, merged exactly): the same bits on any number of
// ranks.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "edit_ops.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/state.hpp"

namespace tally::text {
namespace {

constexpr std::int64_t kMaxShiftSize = 10;
constexpr std::int64_t kMaxShiftDist = 50;
constexpr std::int64_t kMaxShiftCandidates = 1000;

struct TerState {
  std::int64_t edits = 0, n = 0;
  ExactSums ref_len;
  TALLY_STATE(sum(edits), sum(n), merge(ref_len))
};

using Words = std::vector<std::int32_t>;
using Op = BeamEditDistance::Op;

/// sacrebleu's lib_ter: translation_edit_rate and its _shift.
class Tercom {
 public:
  std::int64_t edits(const Words& hyp, const Words& ref) {
    if (ref.empty()) return static_cast<std::int64_t>(hyp.size());
    ed_.reset();
    std::int64_t shifts = 0, checked = 0;
    input_ = hyp;
    while (true) {
      const std::int64_t delta = shift(input_, ref, checked);
      if (checked >= kMaxShiftCandidates) break;
      if (delta <= 0) break;
      ++shifts;
      input_.swap(best_words_);
    }
    return shifts + ed_.traced(input_, ref, trace_);
  }

 private:
  // One round of _shift: the best shift of `h` (kept in best_words_) and its gain.
  std::int64_t shift(const Words& h, const Words& r, std::int64_t& checked) {
    const std::int64_t pre = ed_.traced(h, r, trace_);
    // trace_to_alignment of the flipped trace: rows are h, so a deletion consumes a hypothesis
    // word (an insertion once flipped) and an insertion a reference word.
    align_.clear();
    ref_err_.clear();
    hyp_err_.clear();
    std::int64_t pos_h = -1;
    for (const Op op : trace_) {
      if (op == Op::kNop || op == Op::kSub) {
        ++pos_h;
        align_.push_back(pos_h);
        const int e = op == Op::kSub ? 1 : 0;
        hyp_err_.push_back(e);
        ref_err_.push_back(e);
      } else if (op == Op::kDel) {
        ++pos_h;
        hyp_err_.push_back(1);
      } else {
        align_.push_back(pos_h);
        ref_err_.push_back(1);
      }
    }
    const auto n_h = static_cast<std::int64_t>(h.size());
    const auto n_r = static_cast<std::int64_t>(r.size());
    bool have = false;
    std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t> best{};
    const auto errors = [](const std::vector<int>& e, std::int64_t from, std::int64_t len) {
      int s = 0;
      for (std::int64_t k = from; k < from + len && k < static_cast<std::int64_t>(e.size()); ++k)
        s += e[static_cast<std::size_t>(k)];
      return s;
    };
    bool stop = false;
    for (std::int64_t sh = 0; sh < n_h && !stop; ++sh) {
      for (std::int64_t sr = 0; sr < n_r && !stop; ++sr) {
        if (std::abs(sr - sh) > kMaxShiftDist) continue;
        std::int64_t len = 0;
        while (len < kMaxShiftSize &&
               h[static_cast<std::size_t>(sh + len)] == r[static_cast<std::size_t>(sr + len)]) {
          ++len;
          // One (sh, sr, len) candidate span.
          if (errors(hyp_err_, sh, len) != 0 && errors(ref_err_, sr, len) != 0) {
            const std::int64_t a = align_[static_cast<std::size_t>(sr)];
            if (!(sh <= a && a < sh + len)) {
              std::int64_t prev_idx = -1;
              for (std::int64_t off = -1; off < len; ++off) {
                std::int64_t idx = 0;
                if (sr + off == -1) {
                  idx = 0;
                } else if (sr + off >= 0 && sr + off < static_cast<std::int64_t>(align_.size())) {
                  idx = align_[static_cast<std::size_t>(sr + off)] + 1;
                } else {
                  break;
                }
                if (idx == prev_idx) continue;
                prev_idx = idx;
                perform_shift(h, sh, len, idx, shifted_);
                const std::int64_t gain = pre - ed_.traced(shifted_, r, scratch_trace_);
                ++checked;
                const auto cand = std::make_tuple(gain, len, -sh, -idx);
                if (!have || cand > best) {
                  have = true;
                  best = cand;
                  best_words_ = shifted_;
                }
              }
            }
            if (checked >= kMaxShiftCandidates) stop = true;
          } else if (checked >= kMaxShiftCandidates) {
            stop = true;
          }
          if (stop) break;
          if (n_h == sh + len || n_r == sr + len) break;
        }
      }
    }
    if (!have) return 0;
    return std::get<0>(best);
  }

  // sacrebleu's _perform_shift (Python slices, clamped).
  static void perform_shift(const Words& w, std::int64_t start, std::int64_t length,
                            std::int64_t target, Words& out) {
    const auto n = static_cast<std::int64_t>(w.size());
    const auto slice = [&](std::int64_t a, std::int64_t b) {
      a = std::clamp<std::int64_t>(a, 0, n);
      b = std::clamp<std::int64_t>(b, 0, n);
      if (b > a) out.insert(out.end(), w.begin() + a, w.begin() + b);
    };
    out.clear();
    if (target < start) {
      slice(0, target);
      slice(start, start + length);
      slice(target, start);
      slice(start + length, n);
    } else if (target > start + length) {
      slice(0, start);
      slice(start + length, target);
      slice(start, start + length);
      slice(target, n);
    } else {
      slice(0, start);
      slice(start + length, length + target);
      slice(start, start + length);
      slice(length + target, n);
    }
  }

  BeamEditDistance ed_;
  Words input_, best_words_, shifted_;
  std::vector<Op> trace_, scratch_trace_;
  std::vector<std::int64_t> align_;
  std::vector<int> ref_err_, hyp_err_;
};

class TranslationEditRate final : public TypedMetric<TerState> {
 public:
  explicit TranslationEditRate(const Params& p) : check_(p.owner_or("TranslationEditRate")) {
    opts_.normalized = p.get_bool("normalize");
    opts_.no_punct = p.get_bool("no_punctuation");
    opts_.case_sensitive = !p.get_bool("lowercase");
    opts_.asian_support = p.get_bool("asian_support");
  }

 protected:
  TerState initial_state() const override {
    TerState s;
    ExactSum zero;
    zero.normalize();
    s.ref_len.assign(zero.words().begin(), zero.words().end());
    return s;
  }

  void update(TerState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Text& pred = single_text(batch, kPreds, check_, state.n);
    const Text& refs = reference_lists(batch, kTarget, check_, state.n);
    same_size(pred, kPreds, refs, kTarget, check_);
    ExactSum total;
    total.merge(state.ref_len.data());
    for (std::int64_t i = 0; i < pred.size(); ++i) {
      // The interner views the token strings: each keeps its own buffer for the sample.
      interner_.clear();
      if (bufs_.size() < refs[i].size() + 1) bufs_.resize(refs[i].size() + 1);
      words(pred[i][0], bufs_[0], hyp_);
      std::int64_t best = INT64_MAX, lengths = 0;
      for (std::size_t k = 0; k < refs[i].size(); ++k) {
        words(refs[i][k], bufs_[k + 1], ref_);
        best = std::min(best, tercom_.edits(hyp_, ref_));
        lengths += static_cast<std::int64_t>(ref_.size());
      }
      state.edits += best;
      total.add(static_cast<double>(lengths) / static_cast<double>(refs[i].size()));
    }
    total.normalize();
    std::copy(total.words().begin(), total.words().end(), state.ref_len.begin());
    state.n += pred.size();
  }

  Value compute(const TerState& s) const override {
    if (s.n == 0) check_.fail("no samples");
    if (s.ref_len.size() != ExactSum::kWords || s.ref_len.mismatched())
      check_.fail_runtime(std::string("the state's reference lengths are corrupt"));
    ExactSum total;
    total.merge(s.ref_len.data());
    const double ref_len = total.value();
    double score = 0.0;
    if (ref_len > 0)
      score = static_cast<double>(s.edits) / ref_len;
    else if (s.edits > 0)
      score = 1.0;
    Value out = Value::map();
    out.set("translation_edit_rate", 100 * score / 100.0);
    return out;
  }

 private:
  void words(std::string_view s, std::string& buf, Words& ids) {
    buf = tercom_tokenize(opts_, py_rstrip(s));
    toks_.clear();
    py_split(buf, toks_);
    interner_.ids_of(toks_, ids);
  }

  InputChecker check_;
  TercomOptions opts_;
  Interner interner_;
  Tercom tercom_;
  std::vector<std::string> bufs_;
  std::vector<std::string_view> toks_;
  Words hyp_, ref_;
};

}  // namespace

ComponentInfo translation_edit_rate_info() {
  return metric<TranslationEditRate>(
      "TranslationEditRate",
      "Corpus translation edit rate: Tercom's shifts plus edits to the best reference, over the "
      "summed mean reference lengths, sacrebleu's corpus score as a fraction. Key "
      "translation_edit_rate. Integer edits and exact sums: the same bits on any number of "
      "ranks. Reference: sacrebleu 2.6.0 sacrebleu.metrics.TER(normalized=normalize, "
      "no_punct=no_punctuation, asian_support, case_sensitive=not lowercase).corpus_score(preds, "
      "target streams).score / 100.",
      {param("normalize", ParamType::Bool,
             "Tercom's normalisation: XML entities, punctuation split off (sacrebleu's "
             "normalized).")
           .def(false),
       param("no_punctuation", ParamType::Bool,
             "Remove . , ? : ; ! \" ( ) (and CJK punctuation with asian_support).")
           .def(false),
       param("lowercase", ParamType::Bool, "Lowercase first (sacrebleu's case_sensitive: false).")
           .def(true),
       param("asian_support", ParamType::Bool,
             "With normalize, split CJK characters into words; with no_punctuation, also remove "
             "CJK and full-width punctuation.")
           .def(false)},
      {InputSpec{kPreds, "Hypotheses: one string per sample.", true},
       InputSpec{kTarget, "References: one or more strings per sample.", true}},
      {"TER"}, {{"translation_edit_rate", Better::Lower, Plot::None, "corpus TER (may exceed 1)"}});
}
TALLY_COMPONENT(translation_edit_rate_info)

}  // namespace tally::text
