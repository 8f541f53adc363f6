// FleissKappa: Fleiss' kappa, the agreement of several raters who each put every sample in one
// of C categories (torchmetrics' FleissKappa).
//
// Formula. n_ik = how many raters put sample i in category k (N samples), R = max_i sum_k n_ik
// (the number of raters):
//   p_k   = sum_i n_ik / (N R)
//   P_i   = (sum_k n_ik^2 - R) / (R (R - 1)),  Pbar = mean_i P_i = (sum_ik n_ik^2 - N R) / (N R
//   ) Pe    = sum_k p_k^2 kappa = (Pbar - Pe) / (1 - Pe + 1e-5)   (torchmetrics' 1e-5 guard,
//   kept to match it) NaN with one rater or none (0/0). No samples: an InputError (torchmetrics
//   raises too).
// mode counts: ratings [N, C] integer counts n_ik (>= 0). mode probs: ratings [N, C, R] float
// scores of each rater for each category; each rater's argmax (the first of equal maxima) is
// their category.
//
// Reference: torchmetrics 1.9.0 torchmetrics.nominal.FleissKappa(mode) (float64 default dtype).
// Cross-checked (mode counts, where every sample has R ratings) against statsmodels 0.15.0
// statsmodels.stats.inter_rater.fleiss_kappa(table, method="fleiss"), which has no 1e-5 guard:
// the two differ by that term only. Known difference: torchmetrics 1.9.0's mode probs one-hot
// encodes with num_classes = R (the number of raters, ratings.shape[1] after the argmax), so it
// raises when a rater's argmax category is R or more, and otherwise gives this value (its extra
// zero columns add nothing); tally counts C categories and gives the value in every case.
//
// Example: ratings [[2, 0], [0, 2], [1, 1]], mode counts -> fleiss_kappa 0.3333266667999973
//
// State: per category the total count (int64), sum_ik n_ik^2 and N (int64, summed), R (max) and
// C (agreed by every rank with samples): fixed size, exact. C comes from the data, so the counts
// are gathered and added in rank order.
#include <cmath>
#include <limits>

#include "common.hpp"

namespace tally::nominal {
namespace {

struct FleissState {
  PackedVector<std::int64_t> totals;  // [C]
  std::int64_t squares = 0;
  std::int64_t samples = 0;
  std::int64_t raters = 0;
  std::int64_t categories = -1;
  TALLY_STATE(sum(totals), sum(squares), sum(samples), max(raters), agree(categories, -1))
};

class FleissKappa final : public TypedMetric<FleissState> {
 public:
  explicit FleissKappa(const Params& p)
      : check_(p.owner_or("FleissKappa")), probs_(p.get_string("mode") == "probs") {}

 protected:
  bool reducible() const override { return false; }

  void update(FleissState& s, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Tensor& t = check_.tensor(batch, kRatings);
    if (probs_) {
      if (t.dim() != 3 || !is_floating(t.dtype()))
        check_.fail(kRatings,
                    "must be float [N, C, R] (C categories, R raters) with mode probs, got " +
                        t.describe());
    } else if (t.dim() != 2 || !is_integral(t.dtype())) {
      check_.fail(kRatings, "must be integer [N, C] counts (C categories) with mode counts, got " +
                                t.describe());
    }
    const std::int64_t n = t.size(0), c = t.size(1);
    if (n == 0) return;
    if (c < 1) check_.fail(kRatings, "has no categories (" + t.describe() + ")");
    if (s.categories >= 0 && s.categories != c)
      check_.fail(kRatings, "has " + std::to_string(c) + " categories, earlier samples had " +
                                std::to_string(s.categories));
    if (s.totals.size() != static_cast<std::size_t>(s.categories < 0 ? 0 : s.categories) ||
        s.squares < 0 || s.samples < 0 || s.raters < 0)
      check_.fail_runtime(std::string("the restored state is corrupt"));
    s.categories = c;
    s.totals.resize(static_cast<std::size_t>(c), 0);
    row_.assign(static_cast<std::size_t>(c), 0);
    const auto add_row = [&](std::int64_t i) {
      std::int64_t raters = 0;
      for (std::int64_t k = 0; k < c; ++k) {
        const std::int64_t v = row_[static_cast<std::size_t>(k)];
        std::int64_t sq = 0;
        if (__builtin_mul_overflow(v, v, &sq) ||
            __builtin_add_overflow(s.squares, sq, &s.squares) ||
            __builtin_add_overflow(raters, v, &raters) ||
            __builtin_add_overflow(s.totals[static_cast<std::size_t>(k)], v,
                                   &s.totals[static_cast<std::size_t>(k)]))
          check_.fail(kRatings,
                      "sample " + std::to_string(s.samples + i) + ": the counts overflow int64");
      }
      s.raters = std::max(s.raters, raters);
    };
    if (!probs_) {
      visit_integral(t, [&](const auto* v) {
        for (std::int64_t i = 0; i < n; ++i) {
          for (std::int64_t k = 0; k < c; ++k) {
            const auto x = static_cast<std::int64_t>(v[i * c + k]);
            if (x < 0)
              check_.fail(kRatings, "sample " + std::to_string(s.samples + i) + ", category " +
                                        std::to_string(k) + ": a count of " + std::to_string(x) +
                                        " raters is negative");
            row_[static_cast<std::size_t>(k)] = x;
          }
          add_row(i);
        }
      });
    } else {
      const std::int64_t r = t.size(2);
      visit_floating(t, [&](const auto* v) {
        for (std::int64_t i = 0; i < n; ++i) {
          std::fill(row_.begin(), row_.end(), 0);
          for (std::int64_t j = 0; j < r; ++j) {
            // ratings[i, :, j]: rater j's scores; torch.argmax(dim=1) takes the first maximum.
            const auto* col = v + i * c * r + j;
            std::int64_t best = 0;
            for (std::int64_t k = 0; k < c; ++k) {
              if (std::isnan(col[k * r]))
                check_.fail(kRatings, "sample " + std::to_string(s.samples + i) + ", category " +
                                          std::to_string(k) + ", rater " + std::to_string(j) +
                                          ": score is NaN");
              if (col[k * r] > col[best * r]) best = k;
            }
            ++row_[static_cast<std::size_t>(best)];
          }
          add_row(i);
        }
      });
    }
    s.samples += n;
  }

  Value compute(const FleissState& s) const override {
    if (s.categories < 0 ? !(s.totals.empty() && s.samples == 0)
                         : s.totals.size() != static_cast<std::size_t>(s.categories))
      check_.fail_runtime(std::string("the state is corrupt"));
    if (s.samples == 0) check_.fail(kRatings, "has no samples: Fleiss' kappa is undefined");
    const auto n = static_cast<double>(s.samples), r = static_cast<double>(s.raters);
    // torchmetrics: counts.sum(0) / (total * num_raters), an int64 product.
    std::int64_t nr = 0;
    if (__builtin_mul_overflow(s.samples, s.raters, &nr))
      check_.fail_runtime(std::string("N x R overflows int64"));
    double pe = 0.0;
    for (const std::int64_t t : s.totals) {
      const double p = static_cast<double>(t) / static_cast<double>(nr);
      pe += p * p;
    }
    // sum_i (sum_k n_ik^2 - R) is exact in int64 (squares < 2^62, N R <= squares' bound).
    const double pbar = static_cast<double>(s.squares - nr) / (n * (r * (r - 1)));
    Value out = Value::map();
    out.set("fleiss_kappa", (pbar - pe) / (1 - pe + 1e-5));
    return out;
  }

 private:
  InputChecker check_;
  bool probs_;
  std::vector<std::int64_t> row_;
};

}  // namespace

ComponentInfo fleiss_kappa_info() {
  return with_results(
      metric<FleissKappa>(
          "FleissKappa",
          "Fleiss' kappa, the agreement of several raters over categories, from per-sample counts "
          "(mode counts) or per-rater scores (mode probs); key fleiss_kappa. Reference: "
          "torchmetrics "
          "1.9.0 torchmetrics.nominal.FleissKappa(mode).",
          {param("mode", ParamType::String,
                 "counts: ratings [N, C] integer counts of raters per category; probs: ratings [N, "
                 "C, R] float scores, each rater's argmax is their category.")
               .def("counts")
               .choices({"counts", "probs"})},
          {InputSpec{kRatings,
                     "[N, C] integer counts (mode counts) or [N, C, R] float scores (mode probs).",
                     true}}),
      {{"fleiss_kappa", Better::Higher, Plot::None, "Fleiss' kappa, at most 1"}});
}
TALLY_COMPONENT(fleiss_kappa_info)

}  // namespace tally::nominal
