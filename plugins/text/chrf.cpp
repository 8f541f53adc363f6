// CHRFScore: corpus chrF / chrF++ (character n-gram F-score, plus word n-grams), as sacrebleu
// 2.6.0's sacrebleu.metrics.CHRF computes its corpus score, as a fraction (score / 100).
//
// Per sample, each string lowercased (`lowercase`), its characters (Unicode code points, all
// whitespace removed unless `whitespace`) and its words (str.split(), a leading or trailing ASCII
// punctuation mark split off a word of two or more characters). For each reference and each
// order n (characters 1..n_char_order, then words 1..n_word_order) the statistics
//   hyp_n = number of hypothesis n-grams (0 when the reference has no n-gram of that order),
//   ref_n = number of reference n-grams,  match_n = sum over n-grams min(count_hyp, count_ref);
// the sample keeps those of its best reference (the first with the highest sentence score).
// Over the corpus the statistics are summed, and with P_n = match_n / hyp_n, R_n = match_n /
// ref_n (1e-16 when the denominator is 0), b = beta^2:
//   eps_smoothing true:  chrF = mean over orders of (1 + b) P_n R_n / (b P_n + R_n)
//   eps_smoothing false: chrF = (1 + b) P R / (b P + R), P and R the means of P_n and R_n over the
//                        orders with hyp_n > 0 and ref_n > 0 (sacrebleu's default)
//
// Defaults are torchmetrics 1.9.0's CHRFScore (n_char_order 6, n_word_order 2: chrF++, beta 2),
// and eps_smoothing true, which is how torchmetrics averages. torchmetrics' own values differ
// from sacrebleu's (and tally's) where it deviates from it: it counts hypothesis n-grams when the
// reference has none, keeps all-zero statistics when no reference scores above 0 (an empty
// hypothesis: its reference n-grams are not counted), removes only ' ' (not tabs or other
// whitespace) between characters, and takes P_n = 0 when hyp_n = 0. On sane data they agree to
// 1e-15; on the test data with empty hypotheses and references, chrF differs by up to 4%
// (tests/reference/expected_text_torchmetrics.json, "cross_check").
//
// convention torchmetrics (what tally.torchmetrics.CHRFScore sets) computes torchmetrics 1.9.0's
// value instead (torchmetrics.functional.text.chrf: _chrf_score_update, _calculate_fscore): the
// hypothesis n-grams always counted; the best reference the first whose sentence score is above
// the best so far, starting from 0 (none: only the hypothesis n-grams count); the characters of
// str.strip() with ' ' removed; P_n = 0 when hyp_n = 0 and R_n = 0 when ref_n = 0, and
//   chrF = mean over orders of (1 + b) P_n R_n / max(b P_n + R_n, 1e-16).
//
// Example: preds ['the cat is on the mat'], target [['there is a cat on the mat', 'a cat is on
//   the mat']] -> {chrf_score: 0.8640464626240438} (torchmetrics' docstring: tensor(0.8640)).
//
// State: int64 statistics (3 per order, and the sample count), summed across ranks: exact on any
// number of ranks.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "edit_ops.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/state.hpp"

namespace tally::text {
namespace {

struct ChrfState {
  PackedVector<std::int64_t> stats;  // [order][hyp, ref, match]
  std::int64_t n = 0;
  TALLY_STATE(sum(stats), sum(n))
};

bool chrf_punct(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u >= 33 && u <= 47) || (u >= 58 && u <= 64) || (u >= 91 && u <= 96) ||
         (u >= 123 && u <= 126);
}

class ChrfScore final : public TypedMetric<ChrfState> {
 public:
  explicit ChrfScore(const Params& p)
      : check_(p.owner_or("CHRFScore")),
        n_char_(p.get_size("n_char_order", 1, 1024)),
        n_word_(p.get_size("n_word_order", 0, 1024)),
        beta_(p.get_double("beta")),
        lowercase_(p.get_bool("lowercase")),
        whitespace_(p.get_bool("whitespace")),
        eps_smoothing_(p.get_bool("eps_smoothing")),
        torchmetrics_(p.get_string("convention") == "torchmetrics") {
    if (!(beta_ >= 0.0) || !std::isfinite(beta_))
      p.fail("beta", "must be a finite number >= 0, got " + std::to_string(beta_));
    order_ = static_cast<std::size_t>(n_char_ + n_word_);
  }

 protected:
  ChrfState initial_state() const override {
    ChrfState s;
    s.stats.assign(3 * order_, 0);
    return s;
  }

  void update(ChrfState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Text& pred = single_text(batch, kPreds, check_, state.n);
    const Text& refs = reference_lists(batch, kTarget, check_, state.n);
    same_size(pred, kPreds, refs, kTarget, check_);
    for (std::int64_t i = 0; i < pred.size(); ++i) {
      const std::size_t k = refs[i].size();
      chars_.start(1 + k);
      words_.start(1 + k);
      prepare(pred[i][0], 0);
      for (std::size_t r = 0; r < k; ++r) prepare(refs[i][r], r + 1);
      chars_.intern();
      words_.intern();
      sample_.assign(k * 3 * order_, 0);
      count(chars_, n_char_, 0, k);
      count(words_, n_word_, static_cast<std::size_t>(n_char_), k);
      add_best(state, k);
    }
    state.n += pred.size();
  }

  // The statistics of sample's best reference (of k) into the state.
  void add_best(ChrfState& state, std::size_t k) {
    std::size_t best = k;
    double best_f = torchmetrics_ ? 0.0 : -1.0;
    for (std::size_t r = 0; r < k; ++r) {
      const double f = f_score(sample_.data() + r * 3 * order_);
      if (f > best_f) best_f = f, best = r;
    }
    if (best == k) {  // torchmetrics: no reference above 0 -> the hypothesis n-grams only
      if (k == 0) return;
      for (std::size_t i = 0; i < order_; ++i) state.stats[3 * i] += sample_[3 * i];
      return;
    }
    const std::int64_t* s = sample_.data() + best * 3 * order_;
    for (std::size_t j = 0; j < 3 * order_; ++j) state.stats[j] += s[j];
  }

  Value compute(const ChrfState& all) const override {
    if (all.stats.size() != 3 * order_)
      check_.fail_runtime(std::string("the state holds ") + std::to_string(all.stats.size()) +
                          " statistics, expected " + std::to_string(3 * order_));
    if (all.n == 0) check_.fail("no samples");
    Value out = Value::map();
    out.set("chrf_score", f_score(all.stats.data()) / 100.0);
    return out;
  }

 private:
  // The characters and the words of `s` into slot `slot` of chars_ and words_.
  void prepare(std::string_view s, std::size_t slot) {
    std::string& text = words_.buffer(slot);
    text = lowercase_ ? py_lower(s) : std::string(s);
    auto& w = words_.tokens(slot);
    w.clear();
    split_.clear();
    py_split(text, split_);
    for (const auto word : split_) {
      cps_.clear();
      code_points(word, cps_);
      if (cps_.size() > 1 && chrf_punct(word.back())) {
        w.push_back(word.substr(0, word.size() - 1));
        w.push_back(word.substr(word.size() - 1));
      } else if (cps_.size() > 1 && chrf_punct(word.front())) {
        w.push_back(word.substr(0, 1));
        w.push_back(word.substr(1));
      } else {
        w.push_back(word);
      }
    }
    std::string& line = chars_.buffer(slot);
    if (whitespace_) {
      line = text;
    } else if (torchmetrics_) {  // str.strip().replace(" ", "")
      line.clear();
      if (!split_.empty()) {
        const char* first = split_.front().data();
        const char* last = split_.back().data() + split_.back().size();
        for (const char* q = first; q != last; ++q)
          if (*q != ' ') line.push_back(*q);
      }
    } else {
      line.clear();
      for (const auto word : split_) line.append(word);
    }
    auto& c = chars_.tokens(slot);
    c.clear();
    code_points(line, c);
  }

  // Statistics of orders 1..max of `seqs` (slot 0 the hypothesis) at order offset `first`.
  void count(SampleNgrams& seqs, std::int64_t max, std::size_t first, std::size_t k) {
    for (std::int64_t n = 1; n <= max; ++n) {
      const auto a = static_cast<std::size_t>(seqs.order(static_cast<int>(n)));
      hyp_.assign(a, 0);
      used_.assign(a, 0);
      const auto& h = seqs.level(0);
      for (const auto id : h) ++hyp_[static_cast<std::size_t>(id)];
      for (std::size_t r = 0; r < k; ++r) {
        const auto& lv = seqs.level(r + 1);
        std::int64_t match = 0;
        for (const auto id : lv) {
          const auto u = static_cast<std::size_t>(id);
          if (used_[u] < hyp_[u]) ++used_[u], ++match;
        }
        for (const auto id : lv) used_[static_cast<std::size_t>(id)] = 0;
        std::int64_t* s =
            sample_.data() + r * 3 * order_ + 3 * (first + static_cast<std::size_t>(n - 1));
        s[0] = lv.empty() && !torchmetrics_ ? 0 : static_cast<std::int64_t>(h.size());
        s[1] = static_cast<std::int64_t>(lv.size());
        s[2] = match;
      }
    }
  }

  // torchmetrics' _calculate_fscore (in percent).
  double f_score_torchmetrics(const std::int64_t* stats) const {
    const double b = beta_ * beta_;
    double sum = 0.0;
    for (std::size_t i = 0; i < order_; ++i) {
      const std::int64_t n_hyp = stats[3 * i], n_ref = stats[3 * i + 1], n_match = stats[3 * i + 2];
      const double p = n_hyp > 0 ? static_cast<double>(n_match) / static_cast<double>(n_hyp) : 0.0;
      const double r = n_ref > 0 ? static_cast<double>(n_match) / static_cast<double>(n_ref) : 0.0;
      sum += (1 + b) * p * r / std::max(b * p + r, 1e-16);
    }
    return 100 * sum / static_cast<double>(order_);
  }

  // sacrebleu's CHRF._compute_f_score (in percent).
  double f_score(const std::int64_t* stats) const {
    if (torchmetrics_) return f_score_torchmetrics(stats);
    const double eps = 1e-16;
    double score = 0.0, avg_prec = 0.0, avg_rec = 0.0;
    std::int64_t effective_order = 0;
    const double factor = std::pow(beta_, 2.0);
    for (std::size_t i = 0; i < order_; ++i) {
      const std::int64_t n_hyp = stats[3 * i], n_ref = stats[3 * i + 1], n_match = stats[3 * i + 2];
      const double prec =
          n_hyp > 0 ? static_cast<double>(n_match) / static_cast<double>(n_hyp) : eps;
      const double rec =
          n_ref > 0 ? static_cast<double>(n_match) / static_cast<double>(n_ref) : eps;
      const double denom = factor * prec + rec;
      score += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
      if (n_hyp > 0 && n_ref > 0) {
        avg_prec += prec;
        avg_rec += rec;
        ++effective_order;
      }
    }
    if (eps_smoothing_) return 100 * score / static_cast<double>(order_);
    if (effective_order == 0) {
      avg_prec = avg_rec = 0.0;
    } else {
      avg_prec /= static_cast<double>(effective_order);
      avg_rec /= static_cast<double>(effective_order);
    }
    if (avg_prec + avg_rec != 0.0) {
      score = (1 + factor) * avg_prec * avg_rec;
      score /= ((factor * avg_prec) + avg_rec);
      return 100 * score;
    }
    return 0.0;
  }

  InputChecker check_;
  std::int64_t n_char_, n_word_;
  double beta_;
  bool lowercase_, whitespace_, eps_smoothing_, torchmetrics_;
  std::size_t order_ = 0;

  // Scratch, kept between samples.
  SampleNgrams chars_, words_;
  std::vector<std::string_view> split_, cps_;
  std::vector<std::int64_t> sample_, hyp_, used_;
};

}  // namespace

ComponentInfo chrf_score_info() {
  return metric<ChrfScore>(
      "CHRFScore",
      "Corpus chrF++ / chrF: character (and word) n-gram F-beta score over summed statistics, "
      "sacrebleu's corpus score as a fraction; defaults are torchmetrics' CHRFScore (chrF++, "
      "beta 2) with eps_smoothing true (torchmetrics' averaging). Key chrf_score. Integer "
      "statistics: exact on any number of ranks. Reference: sacrebleu 2.6.0 "
      "sacrebleu.metrics.CHRF(char_order=n_char_order, word_order=n_word_order, beta, lowercase, "
      "whitespace, eps_smoothing).corpus_score(preds, target streams).score / 100.",
      {param("n_char_order", ParamType::Int,
             "Largest character n-gram order (sacrebleu's char_order).")
           .def(6),
       param("n_word_order", ParamType::Int,
             "Largest word n-gram order: 2 is chrF++, 0 is chrF (sacrebleu's word_order).")
           .def(2),
       param("beta", ParamType::Float, "The weight of recall against precision (F-beta).").def(2.0),
       param("lowercase", ParamType::Bool, "Lowercase (Python's str.lower) before counting.")
           .def(false),
       param("whitespace", ParamType::Bool, "Keep whitespace characters in the character n-grams.")
           .def(false),
       param("eps_smoothing", ParamType::Bool,
             "sacrebleu's eps_smoothing: true averages the per-order F-scores (chrF++.py, NLTK, "
             "Moses, torchmetrics); false takes the F-score of the mean precision and recall over "
             "the effective orders (sacrebleu's default).")
           .def(true),
       param("convention", ParamType::String,
             "sacrebleu: sacrebleu 2.6.0's corpus chrF; torchmetrics: torchmetrics 1.9.0's "
             "CHRFScore, which counts differently where references are short or empty (see the "
             "plugin's source; eps_smoothing is then not read).")
           .def("sacrebleu")
           .choices({"sacrebleu", "torchmetrics"})},
      {InputSpec{kPreds, "Hypotheses: one string per sample.", true},
       InputSpec{kTarget, "References: one or more strings per sample.", true}},
      {"CHRF", "chrF"},
      {{"chrf_score", Better::Higher, Plot::None, "corpus chrF(++), a fraction in [0, 1]"}});
}
TALLY_COMPONENT(chrf_score_info)

}  // namespace tally::text
