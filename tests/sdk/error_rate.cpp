// ExampleErrorRate: an out-of-tree metric plugin, written against the installed SDK only.
//
//   error_rate = #{i : argmax(pred_scores[i]) != gt_labels[i]} / N
//
// plus the errors per true class. The state is two integer counts per class, so the result is
// exactly the same on any number of ranks; declared `sum` in TALLY_STATE, the counts are summed
// to rank 0 (MPI_Reduce) at sync instead of gathered.
#include <cstdint>
#include <string>
#include <vector>

#include <tally/sdk/plugin.hpp>  // TALLY_PLUGIN, TypedMetric and their types (or tally/sdk.hpp)

namespace {

struct State {
  tally::PackedVector<std::int64_t> errors;  // per true class
  tally::PackedVector<std::int64_t> seen;    // per true class
  TALLY_STATE(sum(errors), sum(seen))        // counts: summed across ranks, not gathered
};

class ExampleErrorRate : public tally::TypedMetric<State> {
 public:
  explicit ExampleErrorRate(const tally::Params& p) : classes_(p.get_int("num_classes")) {
    if (classes_ < 1) p.fail("num_classes", "must be at least 1");
  }

 protected:
  State initial_state() const override {
    const auto k = static_cast<std::size_t>(classes_);
    return State{tally::PackedVector<std::int64_t>(k, 0), tally::PackedVector<std::int64_t>(k, 0)};
  }

  void update(State& s, const tally::Batch& batch) override {
    const tally::Tensor& scores = batch.tensor("pred_scores");
    const tally::Tensor& labels = batch.tensor("gt_labels");
    if (scores.dtype() != tally::DType::F32 || scores.dim() != 2 || scores.size(1) != classes_)
      throw tally::InputError("metric 'ExampleErrorRate': field 'pred_scores' must be f32[N, " +
                              std::to_string(classes_) + "], found " + scores.describe());
    if (labels.dtype() != tally::DType::I64 || labels.dim() != 1)
      throw tally::InputError(
          "metric 'ExampleErrorRate': field 'gt_labels' must be i64[N], found " +
          labels.describe());
    const float* p = scores.data_as<float>();
    const std::int64_t* y = labels.data_as<std::int64_t>();
    for (std::int64_t i = 0; i < batch.size(); ++i) {
      const float* row = p + i * classes_;
      std::int64_t best = 0;
      for (std::int64_t c = 1; c < classes_; ++c)
        if (row[c] > row[best]) best = c;
      if (y[i] < 0 || y[i] >= classes_)
        throw tally::InputError("metric 'ExampleErrorRate': field 'gt_labels' sample " +
                                std::to_string(i) + " is out of range");
      s.seen[static_cast<std::size_t>(y[i])] += 1;
      s.errors[static_cast<std::size_t>(y[i])] += best != y[i];
    }
  }

  tally::Value compute(const State& all) const override {
    std::int64_t n = 0, e = 0;
    for (std::size_t c = 0; c < all.errors.size(); ++c) {
      e += all.errors[c];
      n += all.seen[c];
    }
    if (n == 0) throw tally::InputError("metric 'ExampleErrorRate': no samples");
    tally::Value out = tally::Value::map();
    out.set("error_rate", static_cast<double>(e) / static_cast<double>(n));
    out.set("errors_per_class", tally::Value(std::vector<std::int64_t>(all.errors)));
    return out;
  }

 private:
  std::int64_t classes_;
};

tally::ComponentInfo example_error_rate() {
  return tally::metric<ExampleErrorRate>(
      "ExampleErrorRate",
      "Fraction of samples whose top-scoring class is wrong, and errors per true class",
      {tally::param("num_classes", tally::ParamType::Int, "number of classes C")},
      {{"pred_scores", "f32[N, C] class scores", true},
       {"gt_labels", "i64[N] true classes", true}});
}
TALLY_COMPONENT(example_error_rate)

}  // namespace

TALLY_PLUGIN("example_error_rate", "1.0.0")
