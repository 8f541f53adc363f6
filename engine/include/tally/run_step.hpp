// The steps of a run after its data is read (the sync, each metric's compute, the outputs), as
// Evaluator::compute and tally::run report them to a progress display.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace tally {

/// What a run does after its data is read, step by step, for a progress display (compute()'s
/// `on_step`, called on rank 0 only; tally run's progress bar). `syncing`: the states of
/// `world_size` ranks are exchanged; `computing`: metric `index` (from 0) of `count`, labelled
/// `name`, starts; `computed`: it finished after `seconds`; `writing`: tally::run writes the
/// outputs (the results file, the reports), never compute().
struct RunStep {
  enum class Kind { syncing, computing, computed, writing };
  Kind kind = Kind::syncing;
  std::string name;
  std::size_t index = 0, count = 0;
  double seconds = 0.0;
  int world_size = 1;
};
using RunStepFn = std::function<void(const RunStep&)>;

}  // namespace tally
