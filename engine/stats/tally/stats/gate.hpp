// The regression gate's verdict on one metric from a paired comparison of a baseline run (a) and
// a candidate run (b).
//
// change = (b - a) if higher is better, (a - b) if lower is better: positive is better.
//   regressed     p_two_sided < alpha  and  change < -min_effect
//   improved      p_two_sided < alpha  and  change > +min_effect
//   within_noise  otherwise: not significant at alpha, or significant but no larger than
//                 min_effect (GateDecision::significant tells which)
//   undetermined  change or p-value not finite (e.g. a metric that is NaN on a run, or every
//                 resample dropped): the gate must not read it as a pass
// The test is two-sided at alpha, so under H0 (no difference) `regressed` comes out with
// probability about alpha / 2 and `improved` about alpha / 2. min_effect (>= 0, in the metric's own
// units, e.g. 0.005 for half a point of accuracy) makes a significant but smaller change pass.
// The p-value is the paired bootstrap's p_two_sided (bootstrap.hpp) or, for accuracy-like
// metrics, McNemar's exact p-value (mcnemar.hpp): decide() takes either.
#pragma once

#include <cstddef>
#include <string_view>

#include "tally/stats/bootstrap.hpp"

namespace tally::stats {

enum class Direction { higher_is_better, lower_is_better };
enum class Verdict { regressed, within_noise, improved, undetermined };

/// "regressed", "within noise", "improved", "undetermined".
std::string_view to_string(Verdict v) noexcept;

struct GateOptions {
  double alpha = 0.05;  ///< significance level, in (0, 1)
  Direction direction = Direction::higher_is_better;
  double min_effect = 0.0;  ///< >= 0, the smallest change that counts, in the metric's units
};

struct GateDecision {
  Verdict verdict = Verdict::undetermined;
  double change = 0;         ///< the signed change, positive is better (see above)
  double p_value = 1;        ///< the two-sided p-value the decision used
  bool significant = false;  ///< p_value < alpha
};

/// The verdict from the difference b - a and a two-sided p-value. Throws std::invalid_argument
/// for alpha outside (0, 1) or a negative or NaN min_effect.
GateDecision decide(double difference_b_minus_a, double p_two_sided, const GateOptions& options);

/// The verdict for one statistic of a paired bootstrap (its difference estimate and p_two_sided).
GateDecision decide(const PairedSummary& paired, const GateOptions& options);

}  // namespace tally::stats
