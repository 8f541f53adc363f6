// BLEU: corpus-level Bilingual Evaluation Understudy, in mmeval's or sacrebleu's convention.
//
// Formula. Per sample: the hypothesis length c, a reference length r (the closest to c), and for
// n = 1..N the clipped n-gram matches m_n = sum_g min(count_hyp(g), max_ref count_ref(g)) and the
// hypothesis n-gram count t_n. Over the corpus C, R, M_n, T_n are their sums, and
//   BLEU = BP * exp(sum_n w_n log p_n),  BP = 1 if C > R else exp(1 - R / C)
// with p_n = M_n / T_n, and the two conventions differing in details:
//
//   convention: mmeval  (mmeval.metrics.BLEU, mmeval 0.2.1)
//     tokens: str.split() ('en') or one per character ('cn'); `tokenizer: auto` picks 'cn' when
//       the dataset's FIRST prediction holds a character in U+4E00..U+9FA5, as mmeval does on its
//       first add() call; closest reference: the first with the smallest |len - c|;
//     BLEU = 0 when some M_n is 0; `smooth`: p_n = (M_n + 1) / (T_n + 1) for n > 1;
//     weights `ngram_weights` (default uniform 1/N); BP = 1 only when C > R.
//   convention: sacrebleu  (sacrebleu.corpus_bleu, sacrebleu 2.6.0)
//     each segment lowercased (`lowercase`), rstrip()ped and tokenized (13a, none, intl, char);
//     closest reference: the smallest |len - c|, the shorter on ties; smooth_method exp / floor
//     / add-k / none with smooth_value; use_effective_order; uniform weights.
//
// The result `bleu` is a fraction in [0, 1] (sacrebleu's score / 100).
//
// Example (mmeval's doc): pred ['the cat is on the mat', 'There is a big tree near the park
// here'], refs [['a cat is on the mat'], ['A big tree is growing near the park here']]
//   -> {bleu: 0.5226045319355426}; with smooth: true -> 0.566315716093867.
//
// State: int64 counts (C, R, M_1..M_N, T_1..T_N; with `tokenizer: auto` one set per language)
// and the sample count, summed across ranks: exact on any number of ranks; and, with `tokenizer:
// auto`, the language of the rank's first sample, merged as the first rank's that has one (the
// first rank with samples decides, as the dataset's first prediction does in mmeval).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "common.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/numpy_math.hpp"
#include "tally/sdk/state.hpp"

namespace tally::text {
namespace {

struct BleuState {
  PackedVector<std::int64_t> counts;  // [sets][2 + 2N]
  std::int64_t first_lang = -1;       // tokenizer auto: 0 en, 1 cn, -1 no sample yet
  std::int64_t n = 0;
  TALLY_STATE(sum(counts), first(first_lang, -1), sum(n))
};

enum class Tok { Auto, En, Cn, T13a, None, Intl, Char };

class Bleu final : public TypedMetric<BleuState> {
 public:
  explicit Bleu(const Params& p) : check_(p.owner_or("BLEU")) {
    sacre_ = p.get_string("convention") == "sacrebleu";
    n_gram_ = p.get_size("n_gram", 1, 100);
    const auto only = [&](const char* name, const char* convention) {
      if (p.has(name)) p.fail(name, fmt::format("applies only to convention: {}", convention));
    };
    const std::string tok =
        p.has("tokenizer") ? p.get_string("tokenizer") : (sacre_ ? "13a" : "auto");
    if (sacre_) {
      only("smooth", "mmeval");
      only("ngram_weights", "mmeval");
      if (tok == "13a")
        tok_ = Tok::T13a;
      else if (tok == "none")
        tok_ = Tok::None;
      else if (tok == "intl")
        tok_ = Tok::Intl;
      else if (tok == "char")
        tok_ = Tok::Char;
      else
        p.fail("tokenizer", "'" + tok + "' is mmeval's; sacrebleu's are 13a, none, intl, char");
      smooth_method_ = p.has("smooth_method") ? p.get_string("smooth_method") : "exp";
      if (p.has("smooth_value")) {
        if (smooth_method_ != "floor" && smooth_method_ != "add-k")
          p.fail("smooth_value", "applies only to smooth_method floor or add-k");
        smooth_value_ = p.get_double("smooth_value");
      } else {
        smooth_value_ = smooth_method_ == "floor" ? 0.1 : 1.0;
      }
      lowercase_ = p.has("lowercase") && p.get_bool("lowercase");
      effective_order_ = p.has("use_effective_order") && p.get_bool("use_effective_order");
    } else {
      only("smooth_method", "sacrebleu");
      only("smooth_value", "sacrebleu");
      only("lowercase", "sacrebleu");
      only("use_effective_order", "sacrebleu");
      if (tok == "auto")
        tok_ = Tok::Auto;
      else if (tok == "en")
        tok_ = Tok::En;
      else if (tok == "cn" || tok == "zh")
        tok_ = Tok::Cn;
      else
        p.fail("tokenizer", "'" + tok + "' is sacrebleu's; mmeval's are auto, en, cn");
      smooth_ = p.has("smooth") && p.get_bool("smooth");
      if (p.has("ngram_weights")) {
        weights_ = p.get_double_list("ngram_weights");
        if (static_cast<std::int64_t>(weights_.size()) != n_gram_)
          p.fail("ngram_weights",
                 fmt::format("has {} weights, n_gram is {}", weights_.size(), n_gram_));
      } else {
        weights_.assign(static_cast<std::size_t>(n_gram_), 1.0 / static_cast<double>(n_gram_));
      }
    }
    sets_ = tok_ == Tok::Auto ? 2 : 1;
    width_ = 2 + 2 * static_cast<std::size_t>(n_gram_);
  }

 protected:
  BleuState initial_state() const override {
    BleuState s;
    s.counts.assign(sets_ * width_, 0);
    return s;
  }

  void update(BleuState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Text& pred = single_text(batch, kPred, check_, state.n);
    const Text& refs = reference_lists(batch, kRefs, check_, state.n);
    same_size(pred, kPred, refs, kRefs, check_);
    for (std::int64_t i = 0; i < pred.size(); ++i) {
      const std::string& hyp = pred[i][0];
      if (state.n + i == 0 && tok_ == Tok::Auto) state.first_lang = has_cjk(hyp) ? 1 : 0;
      if (tok_ == Tok::Auto) {
        add_sample(hyp, refs[i], Tok::En, state.counts.data());
        add_sample(hyp, refs[i], Tok::Cn, state.counts.data() + width_);
      } else {
        add_sample(hyp, refs[i], tok_, state.counts.data());
      }
    }
    state.n += pred.size();
  }

  Value compute(const BleuState& all) const override {
    if (all.counts.size() != sets_ * width_)
      check_.fail_runtime(std::string("the state holds ") + std::to_string(all.counts.size()) +
                          " counters, expected " + std::to_string(sets_ * width_));
    if (all.n == 0) check_.fail("no samples");
    const std::int64_t* s =
        all.counts.data() + (tok_ == Tok::Auto && all.first_lang == 1 ? width_ : 0);
    const auto N = static_cast<std::size_t>(n_gram_);
    const std::int64_t sys_len = s[0], ref_len = s[1];
    const std::int64_t* matches = s + 2;
    const std::int64_t* totals = s + 2 + N;
    Value out = Value::map();
    out.set("bleu", sacre_ ? sacrebleu_score(sys_len, ref_len, matches, totals) / 100.0
                           : mmeval_score(sys_len, ref_len, matches, totals));
    return out;
  }

 private:
  double mmeval_score(std::int64_t pred_len, std::int64_t refs_len, const std::int64_t* m,
                      const std::int64_t* t) const {
    const auto N = static_cast<std::size_t>(n_gram_);
    if (*std::min_element(m, m + N) == 0) return 0.0;
    std::vector<double> terms(N);
    for (std::size_t i = 0; i < N; ++i) {
      double p = static_cast<double>(m[i]) / static_cast<double>(t[i]);
      if (smooth_ && i > 0)
        p = (static_cast<double>(m[i]) + 1.0) / (static_cast<double>(t[i]) + 1.0);
      terms[i] = weights_[i] * std::log(p);
    }
    const double bp =
        pred_len > refs_len
            ? 1.0
            : std::exp(1.0 - static_cast<double>(refs_len) / static_cast<double>(pred_len));
    return bp * std::exp(numpy::sum(terms));
  }

  // sacrebleu's BLEU.compute_bleu, in percent.
  double sacrebleu_score(std::int64_t sys_len, std::int64_t ref_len, const std::int64_t* m,
                         const std::int64_t* t) const {
    const auto N = static_cast<std::size_t>(n_gram_);
    double bp = 1.0;
    if (sys_len < ref_len)
      bp = sys_len > 0 ? std::exp(1.0 - static_cast<double>(ref_len) / static_cast<double>(sys_len))
                       : 0.0;
    if (std::all_of(m, m + N, [](std::int64_t x) { return x == 0; })) return 0.0;
    std::vector<double> correct(m, m + N), total(t, t + N), precisions(N, 0.0);
    double smooth_mteval = 1.0;
    std::size_t eff_order = N;
    for (std::size_t k = 1; k <= N; ++k) {
      if (smooth_method_ == "add-k" && k > 1) {
        correct[k - 1] += smooth_value_;
        total[k - 1] += smooth_value_;
      }
      if (total[k - 1] == 0) break;
      if (effective_order_) eff_order = k;
      if (correct[k - 1] == 0) {
        if (smooth_method_ == "exp") {
          smooth_mteval *= 2;
          precisions[k - 1] = 100.0 / (smooth_mteval * total[k - 1]);
        } else if (smooth_method_ == "floor") {
          precisions[k - 1] = 100.0 * smooth_value_ / total[k - 1];
        }
      } else {
        precisions[k - 1] = 100.0 * correct[k - 1] / total[k - 1];
      }
    }
    double sum = 0.0;  // Python's sum() from int 0
    for (std::size_t k = 0; k < eff_order; ++k)
      sum += precisions[k] == 0.0 ? -9999999999.0 : std::log(precisions[k]);
    return bp * std::exp(sum / static_cast<double>(eff_order));
  }

  // Tokens of `s` in buffer slot `slot` (the views stay valid until the next sample).
  void tokenize(std::string_view s, Tok tok, std::size_t slot) {
    auto& out = seqs_.tokens(slot);
    out.clear();
    switch (tok) {
      case Tok::En:
        py_split(s, out);
        return;
      case Tok::Cn:
        code_points(s, out);
        return;
      case Tok::T13a:
      case Tok::None:
      case Tok::Intl:
      case Tok::Char: {
        const SacreTokenizer t = tok == Tok::T13a   ? SacreTokenizer::T13a
                                 : tok == Tok::None ? SacreTokenizer::None
                                 : tok == Tok::Intl ? SacreTokenizer::Intl
                                                    : SacreTokenizer::Char;
        std::string& buf = seqs_.buffer(slot);
        buf = lowercase_ ? sacrebleu_tokenize(t, py_rstrip(py_lower(s)))
                         : sacrebleu_tokenize(t, py_rstrip(s));
        py_split(buf, out);
        return;
      }
      case Tok::Auto:
        break;
    }
  }

  void add_sample(const std::string& hyp, std::span<const std::string> refs, Tok tok,
                  std::int64_t* out) {
    const std::size_t seqs = 1 + refs.size();
    seqs_.start(seqs);
    tokenize(hyp, tok, 0);
    for (std::size_t k = 0; k < refs.size(); ++k) tokenize(refs[k], tok, k + 1);
    seqs_.intern();
    const auto c = static_cast<std::int64_t>(seqs_.ids(0).size());
    std::int64_t best = -1, best_diff = -1;
    for (std::size_t s = 1; s < seqs; ++s) {
      const auto len = static_cast<std::int64_t>(seqs_.ids(s).size());
      const std::int64_t diff = len > c ? len - c : c - len;
      // mmeval: the first of the closest; sacrebleu: the shortest of the closest.
      if (best_diff < 0 || diff < best_diff || (sacre_ && diff == best_diff && len < best))
        best = len, best_diff = diff;
    }
    out[0] += c;
    out[1] += best;
    const auto N = static_cast<std::size_t>(n_gram_);
    for (std::size_t n = 1; n <= N; ++n) {
      const auto a = static_cast<std::size_t>(seqs_.order(static_cast<int>(n)));
      hyp_count_.assign(a, 0);
      ref_max_.assign(a, 0);
      ref_count_.assign(a, 0);
      for (const auto id : seqs_.level(0)) ++hyp_count_[static_cast<std::size_t>(id)];
      for (std::size_t s = 1; s < seqs; ++s) {
        const auto& lv = seqs_.level(s);
        for (const auto id : lv) ++ref_count_[static_cast<std::size_t>(id)];
        for (const auto id : lv) {
          auto& cnt = ref_count_[static_cast<std::size_t>(id)];
          auto& mx = ref_max_[static_cast<std::size_t>(id)];
          mx = std::max(mx, cnt);
        }
        for (const auto id : lv) ref_count_[static_cast<std::size_t>(id)] = 0;
      }
      std::int64_t matched = 0;
      for (const auto id : seqs_.level(0)) {
        auto& h = hyp_count_[static_cast<std::size_t>(id)];
        matched += std::min(h, ref_max_[static_cast<std::size_t>(id)]);
        h = 0;
      }
      out[2 + n - 1] += matched;
      out[2 + N + n - 1] += static_cast<std::int64_t>(seqs_.level(0).size());
    }
  }

  bool sacre_ = false;
  std::int64_t n_gram_ = 4;
  Tok tok_ = Tok::Auto;
  bool smooth_ = false;
  std::vector<double> weights_;
  std::string smooth_method_ = "exp";
  double smooth_value_ = 0.0;
  bool lowercase_ = false;
  bool effective_order_ = false;
  std::size_t sets_ = 1, width_ = 0;
  InputChecker check_;

  // Scratch, kept between samples.
  SampleNgrams seqs_;
  std::vector<std::int64_t> hyp_count_, ref_max_, ref_count_;
};

}  // namespace

ComponentInfo bleu_info() {
  return metric<Bleu>(
      "BLEU",
      "Corpus BLEU in mmeval's convention (mmeval.metrics.BLEU: str.split or per-character "
      "tokens, `smooth`, `ngram_weights`) or sacrebleu's (corpus_bleu: 13a/none/intl/char "
      "tokenizers, smooth_method, lowercase, effective order). Key bleu, a fraction (sacrebleu's "
      "score / 100). Integer n-gram counts: exact on any number of ranks.",
      {param("convention", ParamType::String,
             "mmeval (mmeval.metrics.BLEU 0.2.1) or sacrebleu (sacrebleu.corpus_bleu 2.6.0)")
           .def("mmeval")
           .choices({"mmeval", "sacrebleu"}),
       param("n_gram", ParamType::Int,
             "Largest n-gram order (mmeval's n_gram, sacrebleu's max_ngram_order).")
           .def(4),
       param("tokenizer", ParamType::String,
             "mmeval: auto (default: 'cn' when the dataset's first prediction holds a character "
             "in U+4E00..U+9FA5, else 'en'), en (str.split), cn (one token per character). "
             "sacrebleu: 13a (default), none, intl, char.")
           .optional()
           .choices({"auto", "en", "cn", "zh", "13a", "none", "intl", "char"}),
       param("smooth", ParamType::Bool,
             "mmeval: add-one smoothing of the n > 1 precisions. Default false.")
           .optional(),
       param("ngram_weights", ParamType::FloatList,
             "mmeval: a weight per n-gram order (n_gram of them). Default uniform 1/n_gram.")
           .optional(),
       param("smooth_method", ParamType::String, "sacrebleu: exp (default), floor, add-k, none.")
           .optional()
           .choices({"exp", "floor", "add-k", "none"}),
       param("smooth_value", ParamType::Float,
             "sacrebleu: the value of floor (default 0.1) or add-k (default 1) smoothing.")
           .optional(),
       param("lowercase", ParamType::Bool, "sacrebleu: lowercase before tokenizing. Default false.")
           .optional(),
       param("use_effective_order", ParamType::Bool,
             "sacrebleu: stop at the largest order with any hypothesis n-gram. Default false.")
           .optional()},
      {InputSpec{kPred, "Hypotheses: a text field, one string per sample.", true},
       InputSpec{kRefs, "References: a text field, one or more strings per sample.", true}},
      {}, {{"bleu", Better::Higher, Plot::None, "corpus BLEU, a fraction in [0, 1]"}});
}
TALLY_COMPONENT(bleu_info)

}  // namespace tally::text
