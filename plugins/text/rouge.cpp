// ROUGE: ROUGE-N and ROUGE-L precision, recall and F-measure, averaged over the samples.
//
// Formula. Per sample and rouge key, against each reference:
//   ROUGE-N: hits = sum_g min(count_pred(g), count_ref(g)) over n-grams g; P = hits / #pred
//            n-grams, R = hits / #ref n-grams
//   ROUGE-L: hits = the total size of difflib.SequenceMatcher(None, pred, ref)'s matching blocks
//            (mmeval's choice: not always the longest common subsequence); P = hits / len(pred),
//            R = hits / len(ref)
//   F = 2 P R / (P + R); all three 0 when hits is 0 or a side has no tokens.
// Several references: `accumulate: best` takes the largest F, P and R separately, `avg` their
// means. The result is each value's mean over ALL samples of the dataset.
//
// Reference: mmeval.metrics.ROUGE (mmeval 0.2.1) run on the whole dataset in one process; keys
// rouge{key}_fmeasure, rouge{key}_precision, rouge{key}_recall for each key in rouge_keys.
// Tokens ('en'): re.sub(r'[^a-z0-9]+', ' ', text.lower()).split() (with lowercase: false,
// [^A-Za-z0-9]); ('cn'): one token per character, unchanged. `tokenizer: auto` picks 'cn' when
// the dataset's first prediction holds a character in U+4E00..U+9FA5, as mmeval does on its
// first add() call.
// Differences from mmeval, on purpose:
//   - mmeval divides the sums by the number of results on the local rank (len(self._results)),
//     which is wrong once results are gathered from several ranks; tally divides by the number
//     of samples in the dataset, as mmeval does in one process.
//   - use_stemmer (nltk's Porter stemmer) and a custom normalizer are not supported.
//
// Example (mmeval's doc): pred ['the cat is on the mat'], refs [['a cat is on the mat']],
// rouge_keys L -> {rougeL_fmeasure: 0.8333, rougeL_precision: 0.8333, rougeL_recall: 0.8333}.
//
// State: the per-sample (F, P, R) of every key as float64 (with tokenizer auto, for both
// tokenizations), concatenated across ranks in rank order and summed on rank 0 in dataset order:
// the same bits on any number of ranks; the sample count, summed; with tokenizer auto, the
// language of the rank's first sample, merged as the first rank's that has one.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "common.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/state.hpp"

namespace tally::text {
namespace {

struct RougeState {
  PackedVector<double> scores;  // per sample: [sets][keys][F, P, R]
  std::int64_t first_lang = -1;
  std::int64_t n = 0;
  TALLY_STATE(concat(scores), first(first_lang, -1), sum(n))
};

struct Prf {
  double f = 0.0, p = 0.0, r = 0.0;
};

Prf prf(std::int64_t matches, std::int64_t pred_len, std::int64_t ref_len) {
  if (matches == 0) return {};
  const double p = static_cast<double>(matches) / static_cast<double>(pred_len);
  const double r = static_cast<double>(matches) / static_cast<double>(ref_len);
  return {2 * p * r / (p + r), p, r};
}

enum class Lang { Auto, En, Cn };

class Rouge final : public TypedMetric<RougeState> {
 public:
  explicit Rouge(const Params& p) : check_(p.owner_or("ROUGE")) {
    const Value& keys = p.get("rouge_keys");
    const auto add_key = [&](const Value& k) {
      if (k.is_int() && k.as_int() >= 1 && k.as_int() <= 9) {
        keys_.push_back(static_cast<int>(k.as_int()));
      } else if (k.is_string() && k.as_string() == "L") {
        keys_.push_back(0);
      } else if (k.is_string() && k.as_string().size() == 1 && k.as_string()[0] >= '1' &&
                 k.as_string()[0] <= '9') {
        keys_.push_back(k.as_string()[0] - '0');
      } else {
        p.fail("rouge_keys", "expects L or 1 to 9 (or a list of them), found " + k.to_json());
      }
    };
    if (keys.is_array()) {
      for (const auto& k : keys.as_array()) add_key(k);
    } else {
      add_key(keys);
    }
    if (keys_.empty()) p.fail("rouge_keys", "must name at least one key");
    for (const int k : keys_) max_n_ = std::max(max_n_, k);
    accumulate_best_ = p.get_string("accumulate") == "best";
    lowercase_ = p.get_bool("lowercase");
    if (p.get_bool("use_stemmer"))
      p.fail("use_stemmer", "is not supported (nltk's Porter stemmer is not ported)");
    const std::string tok = p.get_string("tokenizer");
    lang_ = tok == "auto" ? Lang::Auto : tok == "en" ? Lang::En : Lang::Cn;
    sets_ = lang_ == Lang::Auto ? 2 : 1;
  }

 protected:
  void update(RougeState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Text& pred = single_text(batch, kPred, check_, state.n);
    const Text& refs = reference_lists(batch, kRefs, check_, state.n);
    same_size(pred, kPred, refs, kRefs, check_);
    const std::size_t per_set = keys_.size() * 3;
    for (std::int64_t i = 0; i < pred.size(); ++i) {
      const std::string& hyp = pred[i][0];
      if (state.n + i == 0 && lang_ == Lang::Auto) state.first_lang = has_cjk(hyp) ? 1 : 0;
      const std::size_t at = state.scores.size();
      state.scores.resize(at + sets_ * per_set);
      if (lang_ == Lang::Auto) {
        score_sample(hyp, refs[i], false, state.scores.data() + at);
        score_sample(hyp, refs[i], true, state.scores.data() + at + per_set);
      } else {
        score_sample(hyp, refs[i], lang_ == Lang::Cn, state.scores.data() + at);
      }
    }
    state.n += pred.size();
  }

  Value compute(const RougeState& all) const override {
    const std::size_t per_set = keys_.size() * 3;
    if (all.scores.size() != static_cast<std::size_t>(all.n) * sets_ * per_set)
      check_.fail_runtime(std::string("the state holds ") + std::to_string(all.scores.size()) +
                          " scores for " + std::to_string(all.n) + " samples");
    if (all.n == 0) check_.fail("no samples");
    const std::size_t offset = lang_ == Lang::Auto && all.first_lang == 1 ? per_set : 0;
    std::vector<double> sums(per_set, 0.0);
    for (std::int64_t i = 0; i < all.n; ++i) {
      const double* row =
          all.scores.data() + static_cast<std::size_t>(i) * sets_ * per_set + offset;
      for (std::size_t k = 0; k < per_set; ++k) sums[k] += row[k];
    }
    Value out = Value::map();
    const auto total = static_cast<double>(all.n);
    for (std::size_t k = 0; k < keys_.size(); ++k) {
      const std::string name = keys_[k] == 0 ? "rougeL" : "rouge" + std::to_string(keys_[k]);
      out.set(name + "_fmeasure", sums[3 * k] / total);
      out.set(name + "_precision", sums[3 * k + 1] / total);
      out.set(name + "_recall", sums[3 * k + 2] / total);
    }
    return out;
  }

 private:
  // mmeval's _normalize_and_tokenize into slot `slot`.
  void tokenize(std::string_view s, bool cn, std::size_t slot) {
    auto& out = seqs_.tokens(slot);
    out.clear();
    if (cn) {
      code_points(s, out);
      return;
    }
    // Runs of [a-z0-9] in text.lower() (or of [A-Za-z0-9]): what re.sub(..., ' ') then split()
    // leaves.
    std::string& buf = seqs_.buffer(slot);
    buf = lowercase_ ? py_lower(s) : std::string(s);
    std::size_t start = 0;
    bool in = false;
    for (std::size_t i = 0; i <= buf.size(); ++i) {
      const char ch = i < buf.size() ? buf[i] : ' ';
      const bool keep = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                        (!lowercase_ && ch >= 'A' && ch <= 'Z');
      if (keep && !in) start = i, in = true;
      if (!keep && in) {
        out.push_back(std::string_view(buf).substr(start, i - start));
        in = false;
      }
    }
  }

  void score_sample(const std::string& hyp, std::span<const std::string> refs, bool cn,
                    double* out) {
    seqs_.start(1 + refs.size());
    tokenize(hyp, cn, 0);
    for (std::size_t k = 0; k < refs.size(); ++k) tokenize(refs[k], cn, k + 1);
    seqs_.intern();
    // scores_[key][ref]
    per_ref_.assign(keys_.size() * refs.size(), Prf{});
    for (std::size_t k = 0; k < keys_.size(); ++k) {
      if (keys_[k] != 0) continue;
      for (std::size_t r = 0; r < refs.size(); ++r) {
        const auto& a = seqs_.ids(0);
        const auto& b = seqs_.ids(r + 1);
        if (a.empty() || b.empty()) continue;
        per_ref_[k * refs.size() + r] =
            prf(matcher_.matched(a, b, seqs_.token_alphabet()), static_cast<std::int64_t>(a.size()),
                static_cast<std::int64_t>(b.size()));
      }
    }
    for (int n = 1; n <= max_n_; ++n) {
      const std::int32_t alphabet = seqs_.order(n);
      bool wanted = false;
      for (const int key : keys_) wanted |= key == n;
      if (!wanted) continue;
      const auto a = static_cast<std::size_t>(alphabet);
      pred_count_.assign(a, 0);
      ref_count_.assign(a, 0);
      const auto& lp = seqs_.level(0);
      for (const auto id : lp) ++pred_count_[static_cast<std::size_t>(id)];
      for (std::size_t r = 0; r < refs.size(); ++r) {
        const auto& lv = seqs_.level(r + 1);
        Prf score;
        if (!lp.empty() && !lv.empty()) {
          for (const auto id : lv) ++ref_count_[static_cast<std::size_t>(id)];
          std::int64_t hits = 0;
          for (const auto id : lv) {
            auto& rc = ref_count_[static_cast<std::size_t>(id)];
            hits += std::min(rc, pred_count_[static_cast<std::size_t>(id)]);
            rc = 0;
          }
          score =
              prf(hits, static_cast<std::int64_t>(lp.size()), static_cast<std::int64_t>(lv.size()));
        }
        for (std::size_t k = 0; k < keys_.size(); ++k)
          if (keys_[k] == n) per_ref_[k * refs.size() + r] = score;
      }
    }
    for (std::size_t k = 0; k < keys_.size(); ++k) {
      const Prf* s = per_ref_.data() + k * refs.size();
      Prf acc;
      if (accumulate_best_) {
        acc = s[0];
        for (std::size_t r = 1; r < refs.size(); ++r) {
          acc.f = std::max(acc.f, s[r].f);
          acc.p = std::max(acc.p, s[r].p);
          acc.r = std::max(acc.r, s[r].r);
        }
      } else {
        // Python's sum() from int 0, then / len.
        for (std::size_t r = 0; r < refs.size(); ++r) acc.f += s[r].f;
        for (std::size_t r = 0; r < refs.size(); ++r) acc.p += s[r].p;
        for (std::size_t r = 0; r < refs.size(); ++r) acc.r += s[r].r;
        const auto len = static_cast<double>(refs.size());
        acc = {acc.f / len, acc.p / len, acc.r / len};
      }
      out[3 * k] = acc.f;
      out[3 * k + 1] = acc.p;
      out[3 * k + 2] = acc.r;
    }
  }

  std::vector<int> keys_;  // 0 = L
  int max_n_ = 0;
  bool accumulate_best_ = true;
  bool lowercase_ = true;
  Lang lang_ = Lang::Auto;
  std::size_t sets_ = 1;
  InputChecker check_;

  SampleNgrams seqs_;
  std::vector<std::int64_t> pred_count_, ref_count_;
  std::vector<Prf> per_ref_;
  SequenceMatcher matcher_;
};

}  // namespace

ComponentInfo rouge_info() {
  return metric<Rouge>(
      "ROUGE",
      "ROUGE-N (1..9) and ROUGE-L precision, recall and F-measure, averaged over all samples "
      "(mmeval.metrics.ROUGE, without its division by the local result count). Keys "
      "rouge{key}_fmeasure, rouge{key}_precision, rouge{key}_recall.",
      {param("rouge_keys", ParamType::Any, "L and/or 1..9: one key or a list.")
           .def(Value::Array{Value(1), Value(2), Value("L")}),
       param("accumulate", ParamType::String,
             "Several references: best (largest F, P and R, each on its own) or avg (means).")
           .def("best")
           .choices({"best", "avg"}),
       param("lowercase", ParamType::Bool,
             "Lowercase before keeping [a-z0-9] runs ('en' tokens); false keeps [A-Za-z0-9].")
           .def(true),
       param("tokenizer", ParamType::String,
             "auto ('cn' when the dataset's first prediction holds a character in "
             "U+4E00..U+9FA5, else 'en'), en (normalized words), cn (one token per character).")
           .def("auto")
           .choices({"auto", "en", "cn"}),
       param("use_stemmer", ParamType::Bool, "Not supported (mmeval: nltk's Porter stemmer).")
           .def(false)},
      {InputSpec{kPred, "Predictions: a text field, one string per sample.", true},
       InputSpec{kRefs, "References: a text field, one or more strings per sample.", true}},
      {}, {{"rouge*", Better::Higher, Plot::None, "mean over the samples, a fraction"}});
}
TALLY_COMPONENT(rouge_info)

}  // namespace tally::text
