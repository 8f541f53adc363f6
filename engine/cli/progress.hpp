// The progress display of `tally run` on rank 0: while the shard is read, a bar (samples done of
// this rank's shard, samples/s, ETA); then a line for each step after it (the sync, each metric's
// compute, the outputs), so that a run never sits at 100% and falls silent while AUROC computes.
// On a terminal it redraws one line at most 10 times a second, and only once the run has taken
// half a second (short runs stay quiet); a thread of its own redraws the step in progress with its
// time so far, and a last line says how long each metric took. Asked for on a pipe (--progress),
// it writes a bar line at most once a second and one line at each step. A final line always
// closes what was drawn.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "tally/run_step.hpp"

namespace tally {

class Progress {
 public:
  using Clock = std::chrono::steady_clock;

  /// `total`: samples in this rank's shard (Reader::shard_samples). `tty`: `out` is a terminal.
  /// `forced`: draw from the start even when short (--progress). `world_size` > 1 labels the bar
  /// "rank 0" (it counts rank 0's shard only).
  Progress(std::int64_t total, int world_size, bool tty, bool forced, std::FILE* out = stderr);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress();

  /// The samples the bar counts to, once the read knows them (a resume that reshards changes
  /// them); the samples added so far stay.
  void set_total(std::int64_t total);
  void add(std::int64_t samples);
  /// A step after the read (any thread): ends the bar, then shows the step.
  void step(const RunStep& step);
  /// Prints `text` (whole lines) above the line being redrawn, which is then drawn again.
  void print_above(std::string_view text);
  /// Draws the last state and ends the line (when anything was drawn). Idempotent.
  void finish();

  /// The text of one bar update (no carriage return, no newline), for tests.
  static std::string line(std::int64_t done, std::int64_t total, double seconds, int world_size,
                          bool unicode);
  /// What a step is ("computing 'auroc' (2/3)", "computed 'auroc' (2/3) in 20.3 s"); "" for a
  /// step that shows none (the sync of a world of one). A pipe's line for the step.
  static std::string step_title(const RunStep& step);
  /// A terminal's line of a step in progress, `seconds` into it ("computing 'auroc' (2/3)  0:12").
  static std::string step_line(const RunStep& step, double seconds);
  /// The closing line of the computes: "computed 3 metrics in 21.4 s (auroc 20.3 s, ...)",
  /// slowest first, five named at most.
  static std::string computed_line(const std::vector<std::pair<std::string, double>>& times);

 private:
  enum class Phase { reading, step, idle };
  bool visible() const;
  void draw(bool final);
  void draw_step(bool final);
  void end_bar();
  void put_line(const std::string& text, bool final);
  void tick();

  std::int64_t total_;
  std::int64_t done_ = 0;
  int world_size_;
  bool tty_, forced_;
  std::FILE* out_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_{};
  bool drawn_ = false, finished_ = false;
  // After the read: the step shown, since when, and each metric's compute time.
  Phase phase_ = Phase::reading;
  RunStep current_;
  Clock::time_point step_start_{};
  bool partial_ = false;  // a line without its newline is on the terminal
  std::vector<std::pair<std::string, double>> times_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread ticker_;  // a terminal's redraws of the step in progress
};

}  // namespace tally
