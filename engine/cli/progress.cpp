#include "progress.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tally {

namespace {

std::string rate_text(double per_second) {
  if (per_second >= 1e9) return fmt::format("{:.2f} G", per_second / 1e9);
  if (per_second >= 1e6) return fmt::format("{:.2f} M", per_second / 1e6);
  if (per_second >= 1e3) return fmt::format("{:.1f} k", per_second / 1e3);
  return fmt::format("{:.0f}", per_second);
}

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto s = static_cast<long long>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

Progress::Progress(std::int64_t total, int world_size, bool tty, bool forced, std::FILE* out)
    : total_(std::max<std::int64_t>(total, 0)),
      world_size_(world_size),
      tty_(tty),
      forced_(forced),
      out_(out) {}

std::string Progress::line(std::int64_t done, std::int64_t total, double seconds, int world_size,
                           bool unicode) {
  constexpr int kWidth = 28;
  const double frac =
      total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0)
                : 1.0;
  const int full = static_cast<int>(frac * kWidth);
  std::string bar;
  for (int i = 0; i < kWidth; ++i) bar += i < full ? (unicode ? "█" : "#") : (unicode ? "░" : ".");
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0.0;
  const double eta = rate > 0 ? static_cast<double>(total - done) / rate : -1.0;
  return fmt::format("{}[{}] {:3.0f}%  {}/{} samples  {} samples/s  {} {}",
                     world_size > 1 ? "rank 0 " : "", bar, frac * 100, done, total, rate_text(rate),
                     done >= total ? "elapsed" : "ETA",
                     done >= total ? duration_text(seconds) : duration_text(eta));
}

void Progress::add(std::int64_t samples) {
  done_ += samples;
  const auto now = Clock::now();
  const auto since_start = now - start_;
  // Terminal: start after half a second, then at most 10 updates a second. Pipe: once a second.
  if (!forced_ && since_start < std::chrono::milliseconds(500)) return;
  const auto every = tty_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(1000);
  if (drawn_ && now - last_ < every) return;
  draw(false);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (drawn_ || forced_) draw(true);
}

void Progress::draw(bool final) {
  last_ = Clock::now();
  const double seconds = std::chrono::duration<double>(last_ - start_).count();
  const std::string text = line(done_, total_, seconds, world_size_, tty_);
  if (tty_)
    fmt::print(out_, "\r\x1b[2K{}{}", text, final ? "\n" : "");
  else
    fmt::print(out_, "{}\n", text);
  std::fflush(out_);
  drawn_ = true;
}

}  // namespace tally
