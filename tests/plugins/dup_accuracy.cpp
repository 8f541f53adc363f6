// A second plugin that defines the metric 'Accuracy': with the built-in classification plugin on
// the search path too, the registry must name both files.
#include "tally/sdk.hpp"

namespace {
struct Empty {
  std::int64_t n = 0;
  TALLY_STATE(sum(n))
};
class Dup : public tally::TypedMetric<Empty> {
 public:
  explicit Dup(const tally::Params&) {}

 protected:
  void update(Empty&, const tally::Batch&) override {}
  tally::Value compute(const Empty&) const override { return tally::Value::map(); }
};
}  // namespace

TALLY_PLUGIN("dup_accuracy", "0.0.1", [] {
  return std::vector<tally::ComponentInfo>{tally::metric<Dup>("Accuracy", "a duplicate", {}, {})};
})
