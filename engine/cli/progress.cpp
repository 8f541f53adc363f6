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

std::string seconds_text(double seconds);

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto s = static_cast<long long>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

// A step's time: "0.04 s", "20.3 s", "2:05".
std::string seconds_text(double seconds) {
  if (seconds < 10) return fmt::format("{:.2f} s", seconds);
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  return duration_text(seconds);
}

}  // namespace

Progress::Progress(std::int64_t total, int world_size, bool tty, bool forced, std::FILE* out)
    : total_(std::max<std::int64_t>(total, 0)),
      world_size_(world_size),
      tty_(tty),
      forced_(forced),
      out_(out) {}

Progress::~Progress() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
  }
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

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

std::string Progress::step_title(const RunStep& step) {
  switch (step.kind) {
    case RunStep::Kind::syncing:
      return step.world_size > 1 ? fmt::format("syncing the states of {} ranks", step.world_size)
                                 : "";
    case RunStep::Kind::computing:
      return fmt::format("computing '{}' ({}/{})", step.name, step.index + 1, step.count);
    case RunStep::Kind::computed:
      return fmt::format("computed '{}' ({}/{}) in {}", step.name, step.index + 1, step.count,
                         seconds_text(step.seconds));
    case RunStep::Kind::writing:
      return "writing the outputs";
  }
  return "";
}

std::string Progress::step_line(const RunStep& step, double seconds) {
  std::string title = step_title(step);
  if (title.empty() || step.kind == RunStep::Kind::computed) return title;
  return fmt::format("{}  {}", title, duration_text(seconds));
}

std::string Progress::computed_line(const std::vector<std::pair<std::string, double>>& times) {
  double all = 0;
  for (const auto& t : times) all += t.second;
  if (times.size() == 1)
    return fmt::format("computed '{}' in {}", times[0].first, seconds_text(all));
  auto slowest = times;
  std::stable_sort(slowest.begin(), slowest.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  constexpr std::size_t kNamed = 5;
  std::string named;
  for (std::size_t i = 0; i < slowest.size() && i < kNamed; ++i)
    named +=
        fmt::format("{}{} {}", i ? ", " : "", slowest[i].first, seconds_text(slowest[i].second));
  if (slowest.size() > kNamed) named += fmt::format(", {} more", slowest.size() - kNamed);
  return fmt::format("computed {} metrics in {} ({})", times.size(), seconds_text(all), named);
}

bool Progress::visible() const {
  return forced_ || drawn_ || Clock::now() - start_ >= std::chrono::milliseconds(500);
}

void Progress::set_total(std::int64_t total) {
  const std::lock_guard<std::mutex> lock(mutex_);
  total_ = std::max<std::int64_t>(total, 0);
}

void Progress::add(std::int64_t samples) {
  const std::lock_guard<std::mutex> lock(mutex_);
  done_ += samples;
  const auto now = Clock::now();
  const auto since_start = now - start_;
  // Terminal: start after half a second, then at most 10 updates a second. Pipe: once a second.
  if (!forced_ && since_start < std::chrono::milliseconds(500)) return;
  const auto every = tty_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(1000);
  if (drawn_ && now - last_ < every) return;
  draw(false);
}

void Progress::step(const RunStep& step) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  if (phase_ == Phase::reading) end_bar();
  if (step.kind == RunStep::Kind::computed) {
    times_.emplace_back(step.name, step.seconds);
    if (!tty_ && forced_) put_line(step_title(step), true);
    if (step.index + 1 >= step.count) {
      // The last metric: one closing line of every compute time, then nothing partly drawn.
      if (tty_ && visible()) put_line(computed_line(times_), true);
      phase_ = Phase::idle;
    }
    return;
  }
  phase_ = Phase::step;
  current_ = step;
  step_start_ = Clock::now();
  if (tty_) {
    if (visible()) draw_step(false);
    if (!ticker_.joinable()) ticker_ = std::thread([this] { tick(); });
  } else if (forced_) {
    put_line(step_title(step), true);  // a pipe: no running time, a line as each step starts
  }
}

void Progress::print_above(std::string_view text) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (partial_) fmt::print(out_, "\r\x1b[2K");
  fmt::print(out_, "{}", text);
  const bool was_partial = partial_;
  partial_ = false;
  if (was_partial) phase_ == Phase::reading ? draw(false) : draw_step(false);
  std::fflush(out_);
}

void Progress::finish() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (finished_) return;
  if (phase_ == Phase::reading) {
    end_bar();
  } else if (phase_ == Phase::step && current_.kind == RunStep::Kind::writing) {
    if (visible())
      put_line(fmt::format(
                   "wrote the outputs in {}",
                   seconds_text(std::chrono::duration<double>(Clock::now() - step_start_).count())),
               true);
  } else if (phase_ == Phase::step && partial_) {
    draw_step(true);  // the run failed in this step: it stays on screen
  }
  finished_ = true;
  lock.unlock();
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

void Progress::end_bar() {
  if (drawn_ || forced_) draw(true);
}

void Progress::put_line(const std::string& text, bool final) {
  if (text.empty()) return;
  if (tty_)
    fmt::print(out_, "\r\x1b[2K{}{}", text, final ? "\n" : "");
  else
    fmt::print(out_, "{}\n", text);
  std::fflush(out_);
  partial_ = tty_ && !final;
  drawn_ = true;
}

void Progress::draw_step(bool final) {
  put_line(step_line(current_, std::chrono::duration<double>(Clock::now() - step_start_).count()),
           final);
}

void Progress::draw(bool final) {
  last_ = Clock::now();
  const double seconds = std::chrono::duration<double>(last_ - start_).count();
  put_line(line(done_, total_, seconds, world_size_, tty_), final);
}

// A terminal's ticker: the step in progress redrawn with its time so far, five times a second.
void Progress::tick() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!finished_) {
    wake_.wait_for(lock, std::chrono::milliseconds(200));
    if (!finished_ && phase_ == Phase::step && visible()) draw_step(false);
  }
}

}  // namespace tally
