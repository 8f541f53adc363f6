// EditDistance: the character-level Levenshtein distance of each (preds, target) pair, as
// torchmetrics 1.9.0's torchmetrics.text.EditDistance computes it, reduced over the samples:
//   mean: sum d / samples (a float), sum: sum d (an integer), none: d of each sample.
// d is torchmetrics' _LevenshteinEditDistance(target)(preds) (sacrebleu's beam-limited table:
// BeamEditDistance in edit_ops.hpp) over Unicode code points, insertions and deletions costing 1
// and substitutions `substitution_cost`. The beam makes d larger than the true distance when the
// best alignment strays more than 25 characters off the pseudo-diagonal (torchmetrics' value, kept
// on purpose). nltk.edit_distance, which torchmetrics names as similar, has no beam.
//
// Example: preds ['rain'], target ['shine'] -> {edit_distance: 3.0}; substitution_cost: 2 -> 5.0.
//
// State: int64 sums (distances, samples) summed across ranks, and with reduction none the
// per-sample distances, gathered in rank order (= dataset order): exact on any number of ranks.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "edit_ops.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/state.hpp"

namespace tally::text {
namespace {

struct EditDistanceState {
  std::int64_t total = 0, n = 0;
  PackedVector<std::int64_t> per_sample;  // reduction none only
  TALLY_STATE(sum(total), sum(n), concat(per_sample))
};

class EditDistance final : public TypedMetric<EditDistanceState> {
 public:
  explicit EditDistance(const Params& p)
      : check_(p.owner_or("EditDistance")),
        reduction_(p.get_string("reduction")),
        lev_(p.get_int("substitution_cost")) {
    if (p.get_int("substitution_cost") < 0)
      p.fail("substitution_cost", "must be a non-negative integer, got " +
                                      std::to_string(p.get_int("substitution_cost")));
  }

 protected:
  void update(EditDistanceState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Text& pred = single_text(batch, kPreds, check_, state.n);
    const Text& gt = single_text(batch, kTarget, check_, state.n);
    same_size(pred, kPreds, gt, kTarget, check_);
    for (std::int64_t i = 0; i < pred.size(); ++i) {
      tok_p_.clear();
      tok_g_.clear();
      code_points(pred[i][0], tok_p_);
      code_points(gt[i][0], tok_g_);
      interner_.clear();
      interner_.ids_of(tok_p_, ids_p_);
      interner_.ids_of(tok_g_, ids_g_);
      const std::int64_t d = lev_.distance(ids_p_, ids_g_);
      state.total += d;
      if (reduction_ == "none") state.per_sample.push_back(d);
    }
    state.n += pred.size();
  }

  Value compute(const EditDistanceState& s) const override {
    if (s.n == 0) check_.fail("no samples");
    Value out = Value::map();
    if (reduction_ == "mean") {
      out.set("edit_distance", static_cast<double>(s.total) / static_cast<double>(s.n));
    } else if (reduction_ == "sum") {
      out.set("edit_distance", Value(static_cast<long long>(s.total)));
    } else {
      if (static_cast<std::int64_t>(s.per_sample.size()) != s.n)
        check_.fail_runtime(std::string("the state holds ") + std::to_string(s.per_sample.size()) +
                            " distances for " + std::to_string(s.n) + " samples");
      Value::Array a;
      for (const auto d : s.per_sample) a.push_back(Value(static_cast<long long>(d)));
      out.set("edit_distance", Value(std::move(a)));
    }
    return out;
  }

 private:
  InputChecker check_;
  std::string reduction_;
  BeamEditDistance lev_;
  std::vector<std::string_view> tok_p_, tok_g_;
  std::vector<std::int32_t> ids_p_, ids_g_;
  Interner interner_;
};

}  // namespace

ComponentInfo edit_distance_info() {
  return metric<EditDistance>(
      "EditDistance",
      "Character-level Levenshtein distance of each (preds, target) pair over Unicode code "
      "points, with torchmetrics' beam-limited table, reduced by mean, sum or none. Key "
      "edit_distance. Integer sums: exact on any number of ranks. Reference: torchmetrics 1.9.0 "
      "torchmetrics.text.EditDistance(substitution_cost, reduction).update(preds, target).",
      {param("substitution_cost", ParamType::Int,
             "The cost of substituting one character for another (insertions and deletions cost "
             "1).")
           .def(1),
       param("reduction", ParamType::String,
             "mean (a float), sum (an integer) or none (the distance of every sample).")
           .def("mean")
           .choices({"mean", "sum", "none"})},
      {InputSpec{kPreds, "Predicted texts: one string per sample.", true},
       InputSpec{kTarget, "Reference texts: one string per sample.", true}},
      {"Levenshtein"},
      {{"edit_distance", Better::Lower, Plot::None,
        "edit distance: per-sample mean, sum, or one per sample"}});
}
TALLY_COMPONENT(edit_distance_info)

}  // namespace tally::text
