#include "tally/stats/gate.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace tally::stats {

std::string_view to_string(Verdict v) noexcept {
  switch (v) {
    case Verdict::regressed:
      return "regressed";
    case Verdict::within_noise:
      return "within noise";
    case Verdict::improved:
      return "improved";
    case Verdict::undetermined:
      break;
  }
  return "undetermined";
}

GateDecision decide(double difference, double p_two_sided, const GateOptions& o) {
  if (!(o.alpha > 0 && o.alpha < 1))
    throw std::invalid_argument("tally::stats::decide: alpha must lie in (0, 1), got " +
                                std::to_string(o.alpha));
  if (!(o.min_effect >= 0))
    throw std::invalid_argument("tally::stats::decide: min_effect must be >= 0, got " +
                                std::to_string(o.min_effect));
  GateDecision d;
  d.change = o.direction == Direction::higher_is_better ? difference : -difference;
  d.p_value = p_two_sided;
  if (!std::isfinite(d.change) || !std::isfinite(p_two_sided)) {
    d.verdict = Verdict::undetermined;
    return d;
  }
  d.significant = p_two_sided < o.alpha;
  if (d.significant && d.change < -o.min_effect)
    d.verdict = Verdict::regressed;
  else if (d.significant && d.change > o.min_effect)
    d.verdict = Verdict::improved;
  else
    d.verdict = Verdict::within_noise;
  return d;
}

GateDecision decide(const PairedSummary& paired, const GateOptions& o) {
  return decide(paired.difference.estimate, paired.p_two_sided, o);
}

}  // namespace tally::stats
