// A progress bar for `tally run` on rank 0: samples done of this rank's shard, samples/s, ETA.
// On a terminal it redraws one line at most 10 times a second, and only once the run has taken
// half a second (short runs stay quiet). Asked for on a pipe (--progress), it writes a line at
// most once a second. A final line always closes a bar that was drawn.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

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

  void add(std::int64_t samples);
  /// Draws the last state and ends the line (when anything was drawn).
  void finish();

  /// The text of one update (no carriage return, no newline), for tests.
  static std::string line(std::int64_t done, std::int64_t total, double seconds, int world_size,
                          bool unicode);

 private:
  void draw(bool final);

  std::int64_t total_;
  std::int64_t done_ = 0;
  int world_size_;
  bool tty_, forced_;
  std::FILE* out_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_{};
  bool drawn_ = false, finished_ = false;
};

}  // namespace tally
