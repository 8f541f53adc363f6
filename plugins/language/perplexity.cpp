// Perplexity: exp of the mean negative log-likelihood of the target tokens.
//
// Formula. For sample i with logits x [L, V] and targets y [L], over the tokens t whose target is
// not in ignore_labels:
//   log p_t = (x_t,y_t - m_t) - log(sum_v exp(x_t,v - m_t)),  m_t = max_v x_t,v
//   nll_i   = -sum_t log p_t,  n_i = the number of such tokens
//   perplexity = exp(sum_i nll_i / sum_i n_i)     (0 when no token counts, as mmeval)
// computed in float64 whatever the logits' dtype; the per-sample sums nll_i use numpy's pairwise
// order and are added in dataset order at compute, so the result is the same bit for bit on any
// number of ranks.
//
// Reference: mmeval.metrics.Perplexity (mmeval 0.2.1, perplexity.py, the NumPy branch; modified
// from torchmetrics' Perplexity), which takes softmax over the vocabulary then the log. Key:
// "perplexity". mmeval has no other parameter than ignore_labels (no use_label or similar).
// Differences from mmeval, on purpose:
//   - the log-softmax is formed directly (log of the normaliser subtracted), not as
//     log(softmax): equal to mmeval's to about 1e-15 relative, but a probability that
//     underflows in softmax (a logit more than ~745 below the row's maximum) gives a finite
//     log p here and log(0) = -inf (perplexity inf) in mmeval;
//   - float32 logits are evaluated in float64; mmeval computes them in float32 (so it differs
//     from this by float32 rounding, ~1e-6). The tests compare with mmeval on the logits cast
//     to float64.
//   - no samples at all is an error (mmeval returns 0); samples whose tokens are all ignored
//     give 0, as mmeval.
//
// Example: logits [[0, 0], [0, 0]] (one sample of 2 tokens, vocabulary 2), targets [0, 1]
//   -> {"perplexity": 2.0}
//
// State: per sample nll_i (float64) and n_i (int64), concatenated in rank order (= dataset
// order) at a sync, and the sample count, summed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tally/sdk/input.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/numpy_math.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"

namespace tally::language {
namespace {

constexpr const char* kLogits = "pred_logits";
constexpr const char* kTargets = "gt_tokens";

struct PerplexityState {
  std::int64_t n = 0;
  PackedVector<double> nll;           // [n]
  PackedVector<std::int64_t> tokens;  // [n]
  TALLY_STATE(sum(n), concat(nll), concat(tokens))
};

class Perplexity final : public TypedMetric<PerplexityState> {
 public:
  explicit Perplexity(const Params& p) : check_(p.owner_or("Perplexity")) {
    if (p.has("ignore_labels")) ignore_ = p.get_int_list("ignore_labels");
  }

 protected:
  void update(PerplexityState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    // Accumulated apart and appended at the end: a batch that fails leaves the state as it was.
    PerplexityState local;
    local.n = state.n;
    update_into(local, batch);
    state.nll.insert(state.nll.end(), local.nll.begin(), local.nll.end());
    state.tokens.insert(state.tokens.end(), local.tokens.begin(), local.tokens.end());
    state.n = local.n;
  }

  void update_into(PerplexityState& state, const Batch& batch) const {
    if (!batch.has(kLogits)) check_.tensor(batch, kLogits);  // the "missing field" message
    if (!batch.has(kTargets)) check_.tensor(batch, kTargets);
    const bool ragged = batch.is_ragged(kLogits);
    if (ragged != batch.is_ragged(kTargets))
      check_.fail(kTargets,
                  fmt::format("must be {} like '{}'", ragged ? "ragged" : "dense", kLogits));
    if (ragged) {
      const auto& xs = batch.ragged(kLogits);
      const auto& ys = batch.ragged(kTargets);
      for (std::size_t i = 0; i < xs.size(); ++i) {
        const std::int64_t s = state.n + static_cast<std::int64_t>(i);
        const Tensor& x = xs[i];
        const Tensor& y = ys[i];
        check_sample(x, y, s, false);
        add_sample(state, x, y, 0, s);
      }
      state.n += static_cast<std::int64_t>(xs.size());
      return;
    }
    const Tensor& x = check_.tensor(batch, kLogits);
    const Tensor& y = check_.tensor(batch, kTargets);
    check_sample(x, y, state.n, true);
    const std::int64_t n = x.size(0);
    for (std::int64_t i = 0; i < n; ++i) add_sample(state, x, y, i, state.n + i);
    state.n += n;
  }

  Value compute(const PerplexityState& all) const override {
    if (all.nll.size() != static_cast<std::size_t>(all.n) || all.tokens.size() != all.nll.size())
      tally::throw_owned<RuntimeError>(check_.owner(), "the state is inconsistent");
    if (all.n == 0) check_.fail("no samples");
    double total = 0.0;
    std::int64_t count = 0;
    for (std::size_t i = 0; i < all.nll.size(); ++i) {
      total += all.nll[i];
      if (__builtin_add_overflow(count, all.tokens[i], &count))
        tally::throw_owned<RuntimeError>(check_.owner(), "the state is corrupt: a count overflows");
    }
    Value out = Value::map();
    out.set("perplexity", count != 0 ? std::exp(total / static_cast<double>(count)) : 0.0);
    return out;
  }

 private:
  /// Dense: logits [N, L, V] and targets [N, L]; ragged: one sample's [L, V] and [L].
  void check_sample(const Tensor& x, const Tensor& y, std::int64_t sample, bool dense) const {
    const std::string where = dense ? std::string() : fmt::format("sample {}: ", sample);
    if (!is_floating(x.dtype()))
      check_.fail(kLogits, where + "must hold float32 or float64 logits, got " + x.describe());
    if (!is_integral(y.dtype()))
      check_.fail(kTargets, where + "must hold integer token ids, got " + y.describe());
    const std::int64_t xd = dense ? 3 : 2;
    if (x.dim() != xd)
      check_.fail(kLogits, where + fmt::format("must be {}, got {}", dense ? "[N, L, V]" : "[L, V]",
                                               x.describe()));
    if (y.dim() != xd - 1 || y.size(0) != x.size(0) || (dense && y.size(1) != x.size(1)))
      check_.fail(kTargets, where + fmt::format("must be {} = [{}] like '{}' {}, got {}",
                                                dense ? "[N, L]" : "[L]",
                                                dense ? fmt::format("{}, {}", x.size(0), x.size(1))
                                                      : fmt::format("{}", x.size(0)),
                                                kLogits, x.describe(), y.describe()));
    if (x.size(-1) < 1) check_.fail(kLogits, where + "has an empty vocabulary: " + x.describe());
  }

  bool ignored(std::int64_t label) const {
    return std::find(ignore_.begin(), ignore_.end(), label) != ignore_.end();
  }

  /// Adds sample `row` of x (or the whole x when it is one ragged sample) to the state.
  void add_sample(PerplexityState& state, const Tensor& x, const Tensor& y, std::int64_t row,
                  std::int64_t sample) const {
    const std::int64_t v = x.size(-1), l = x.size(-2);
    std::vector<double> logp;
    logp.reserve(static_cast<std::size_t>(l));
    std::vector<double> shifted(static_cast<std::size_t>(v));
    visit_floating(x, [&](const auto* xs) {
      visit_integral(y, [&](const auto* ys) {
        for (std::int64_t t = 0; t < l; ++t) {
          const auto label = static_cast<std::int64_t>(ys[row * l + t]);
          if (ignored(label)) continue;
          if (label < 0 || label >= v)
            check_.fail(kTargets, fmt::format("sample {} token {}: id {} is outside [0, {}) (and "
                                              "not in ignore_labels)",
                                              sample, t, label, v));
          const auto* r = xs + (row * l + t) * v;
          double m = -std::numeric_limits<double>::infinity();
          for (std::int64_t c = 0; c < v; ++c) {
            const auto xc = static_cast<double>(r[c]);
            if (std::isnan(xc) || xc == std::numeric_limits<double>::infinity())
              check_.fail(kLogits, fmt::format("sample {} token {}: logit {} is {}", sample, t, c,
                                               std::isnan(xc) ? "NaN" : "+inf"));
            m = std::max(m, xc);
          }
          if (m == -std::numeric_limits<double>::infinity())
            check_.fail(kLogits, fmt::format("sample {} token {}: every logit is -inf", sample, t));
          for (std::int64_t c = 0; c < v; ++c)
            shifted[static_cast<std::size_t>(c)] = std::exp(static_cast<double>(r[c]) - m);
          const double z = numpy::sum(shifted);
          logp.push_back((static_cast<double>(r[label]) - m) - std::log(z));
        }
      });
    });
    const auto cnt = static_cast<std::int64_t>(logp.size());
    state.nll.push_back(-numpy::sum(logp));
    state.tokens.push_back(cnt);
  }

  InputChecker check_;
  std::vector<std::int64_t> ignore_;
};

ComponentInfo perplexity_info() {
  return with_results(
      metric<Perplexity>(
          "Perplexity",
          "Perplexity of a language model: exp of the mean negative log-likelihood of the target "
          "tokens under the softmax of the logits (log-softmax in float64), tokens whose target is "
          "in ignore_labels left out. mmeval's Perplexity; key perplexity, lower is better.",
          {param("ignore_labels", ParamType::IntList,
                 "Target ids that do not count (padding, e.g. -100); an integer or a list. Any "
                 "other target must lie in [0, V).")
               .optional()
               .nullable()},
          {InputSpec{kLogits,
                     "Logits [N, L, V] (or ragged: one [L_i, V] per sample), float32 or float64; "
                     "softmax over V gives the token probabilities. No NaN or +inf.",
                     true},
           InputSpec{kTargets, "Target token ids [N, L] (or ragged [L_i]), any integer dtype.",
                     true}}),
      {{"perplexity", Better::Lower, Plot::None, "exp(mean token NLL)"}});
}
TALLY_COMPONENT(perplexity_info)

}  // namespace
}  // namespace tally::language

TALLY_PLUGIN("language", "0.1.0")
