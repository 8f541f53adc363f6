// A deadline for blocking collectives that have none of their own (MPI's). The backend arms the
// watchdog before a collective and disarms it after; if a collective is still running when its
// deadline passes, another rank is hung, dead or far slower, and this rank can neither finish nor
// cancel the call: the watchdog thread prints one line naming the rank, the call and the timeout,
// then ends the process with exit code 1. The launcher (mpirun) sees the non-zero exit and stops
// the remaining ranks, so no rank waits forever and none is left behind.
//
// Blocking calls stay blocking (full speed); the watchdog costs one sleeping thread and a mutex
// round trip per collective.
#pragma once

#include <unistd.h>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace tally {

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;

  /// `who` prefixes the message ("mpi backend: rank 2 of 4").
  Watchdog(std::string who, double timeout_s) : who_(std::move(who)), timeout_s_(timeout_s) {
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

  /// Arms the deadline for `call` (a string literal: it is kept as a pointer).
  void arm(const char* call) {
    {
      std::lock_guard lock(mu_);
      call_ = call;
      deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(timeout_s_));
      armed_ = true;
    }
    cv_.notify_all();
  }
  void disarm() {
    std::lock_guard lock(mu_);
    armed_ = false;
  }

  /// Arms for the lifetime of a scope.
  class Scope {
   public:
    Scope(Watchdog& w, const char* call) : w_(w) { w_.arm(call); }
    ~Scope() { w_.disarm(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Watchdog& w_;
  };

 private:
  void watch() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      const auto deadline = deadline_;
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && armed_ && !stop_ &&
          deadline_ == deadline) {
        std::fprintf(stderr,
                     "tally: error: %s: %s did not complete within %g s (backend.timeout): another "
                     "rank is hung, dead or far slower; this rank stops\n",
                     who_.c_str(), call_, timeout_s_);
        std::fflush(stderr);
        ::_exit(1);
      }
    }
  }

  std::string who_;
  double timeout_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool stop_ = false;
  const char* call_ = "";
  Clock::time_point deadline_{};
  std::thread thread_;
};

}  // namespace tally
