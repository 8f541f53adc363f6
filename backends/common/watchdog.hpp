// A deadline for blocking collectives that have none of their own (MPI's). The backend arms the
// watchdog before a collective and disarms it after; if a collective is still running when its
// deadline passes, another rank is hung, dead or far slower, and this rank can neither finish nor
// cancel the call: the watchdog thread prints one line naming the rank, the call and the timeout,
// then ends the process with exit code 1. The launcher (mpirun) sees the non-zero exit and stops
// the remaining ranks, so no rank waits forever and none is left behind.
//
// Blocking calls stay blocking (full speed). Arming and disarming are two atomic stores and a
// clock read: no lock, no system call, no wake-up of the watchdog thread, which would otherwise
// take a core from a rank busy-polling in MPI on every collective (measured: 8x the time of a
// 1 KiB all-gather on 2 ranks, bench/RESULTS.md). The thread wakes every timeout / 20 (at most
// every 0.5 s, at least every 1 ms) to look, so a hung call is ended between timeout and
// timeout + 5% (+ 0.5 s at most). A call may carry its own deadline (arm(call, timeout_s)); the
// thread still wakes at the pace set by the default timeout, so a call's deadline much shorter
// than the default is noticed up to timeout / 20 (0.5 s at most) late.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <mutex>
#include <string>
#include <thread>

namespace tally {

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;

  /// `who` prefixes the message ("mpi backend: rank 2 of 4"). `grace_s`: this rank waits that
  /// much longer before it gives up: when every rank waits for one hung peer, the one with no
  /// grace (the lowest rank) prints and exits first and the launcher stops the rest before they
  /// print, so the hang is reported once.
  Watchdog(std::string who, double timeout_s, double grace_s = 0)
      : who_(std::move(who)),
        timeout_s_(timeout_s),
        grace_s_(grace_s),
        timeout_ns_(to_ns(timeout_s + grace_s)),
        period_(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(std::clamp(timeout_s / 20.0, 1e-3, 0.5)))) {
    thread_ = std::thread([this] { watch(); });
  }
  ~Watchdog() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Arms the deadline for `call` (kept as a pointer: it must stay valid and unchanged until
  /// disarm()). `timeout_s` > 0: this call's own deadline (the engine's CallOptions::timeout);
  /// 0: the watchdog's default. One thread arms.
  void arm(const char* call, double timeout_s = 0) {
    call_.store(call, std::memory_order_relaxed);
    const bool own = timeout_s > 0;
    call_timeout_s_.store(own ? timeout_s : timeout_s_, std::memory_order_relaxed);
    call_own_.store(own, std::memory_order_relaxed);
    deadline_ns_.store(own ? to_ns(timeout_s + grace_s_) : timeout_ns_, std::memory_order_relaxed);
    // 0 means disarmed; a steady clock reading in ns is never 0 after boot, but keep it >= 1.
    armed_at_ns_.store(std::max<std::int64_t>(1, now_ns()), std::memory_order_release);
  }
  void disarm() { armed_at_ns_.store(0, std::memory_order_release); }

  /// Arms for the lifetime of a scope.
  class Scope {
   public:
    Scope(Watchdog& w, const char* call, double timeout_s = 0) : w_(w) { w_.arm(call, timeout_s); }
    ~Scope() { w_.disarm(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Watchdog& w_;
  };

 private:
  static std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
        .count();
  }
  static std::int64_t to_ns(double s) {
    const double ns = s * 1e9;
    return ns >= 9.2e18 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(ns);
  }

  void watch() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, period_);
      if (stop_) break;
      const std::int64_t at = armed_at_ns_.load(std::memory_order_acquire);
      if (at == 0 || now_ns() - at <= deadline_ns_.load(std::memory_order_relaxed)) continue;
      // Still the same call (a later one has a later arming time)?
      if (armed_at_ns_.load(std::memory_order_acquire) != at) continue;
      std::fprintf(
          stderr,
          "tally: error: %s: %s did not complete within %g s (%s): another rank is "
          "hung, dead or far slower; this rank stops\n",
          who_.c_str(), call_.load(std::memory_order_relaxed),
          call_timeout_s_.load(std::memory_order_relaxed),
          call_own_.load(std::memory_order_relaxed) ? "this call's deadline" : "backend.timeout");
      std::fflush(stderr);
      ::_exit(1);
    }
  }

  std::string who_;
  double timeout_s_;
  double grace_s_;
  std::int64_t timeout_ns_;
  Clock::duration period_;
  std::atomic<std::int64_t> armed_at_ns_{0};
  // The armed call's deadline (ns after arming, grace included), its timeout for the message, and
  // whether it was the call's own: written before armed_at_ns_ (release), read after it (acquire).
  std::atomic<std::int64_t> deadline_ns_{0};
  std::atomic<double> call_timeout_s_{0};
  std::atomic<bool> call_own_{false};
  std::atomic<const char*> call_{""};
  std::mutex mu_;  // guards stop_ (the thread's sleep)
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tally
