// The collective watchdog (backends/common/watchdog.hpp) that bounds every blocking MPI call:
// arming and disarming from the calling thread while the watchdog thread looks must never fire
// early and must be free of data races (this test runs under the tsan preset too); a call still
// armed after the timeout ends the process with exit code 1 and one line naming the rank and the
// call.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "watchdog.hpp"

namespace {

using tally::Watchdog;

TEST(Watchdog, ManyShortCallsNeverFire) {
  // A 50 ms timeout polled every 2.5 ms, against 200,000 arm/disarm pairs of a few ns each: the
  // watchdog thread reads the arming time while this thread rewrites it.
  Watchdog w("test rank 0 of 1", 0.05);
  for (int i = 0; i < 200000; ++i) {
    Watchdog::Scope s(w, (i % 2) != 0 ? "MPI_Allgather" : "MPI_Bcast");
  }
  // Disarmed, it waits as long as it is left alone.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  SUCCEED();
}

TEST(Watchdog, CallsShorterThanTheTimeoutNeverFire) {
  Watchdog w("test rank 0 of 1", 2.0);
  for (int i = 0; i < 5; ++i) {
    Watchdog::Scope s(w, "MPI_Gatherv");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  SUCCEED();
}

TEST(WatchdogDeathTest, AHungCallEndsTheProcessNamingTheRankAndTheCall) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog w("mpi backend: rank 3 of 4", 0.1);
        w.arm("MPI_Allgatherv");
        std::this_thread::sleep_for(std::chrono::seconds(5));
        w.disarm();
      },
      ::testing::ExitedWithCode(1),
      "mpi backend: rank 3 of 4: MPI_Allgatherv did not complete within 0.1 s "
      "\\(backend.timeout\\)");
}

TEST(WatchdogDeathTest, ARearmedCallGetsAFreshDeadline) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Each call lasts a quarter of the timeout, and back to back they run for 1.5 timeouts: the
  // deadline follows the call, not the first arming. The process then exits 0 on its own.
  EXPECT_EXIT(
      {
        Watchdog w("mpi backend: rank 0 of 2", 1.0);
        for (int i = 0; i < 6; ++i) {
          w.arm("MPI_Bcast");
          std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
        w.disarm();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// A call may carry its own deadline (the engine's CallOptions::timeout): shorter than the
// default, it ends the process after its own time, and the message says whose deadline it was;
// the next call without one is back on the default.
TEST(WatchdogDeathTest, ACallsOwnDeadlineReplacesTheDefault) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog w("mpi backend: rank 1 of 2", 0.4);
        w.arm("all_gather_object (sync payload): MPI_Allgatherv", 0.1);
        std::this_thread::sleep_for(std::chrono::seconds(5));
        w.disarm();
      },
      ::testing::ExitedWithCode(1),
      "mpi backend: rank 1 of 2: all_gather_object \\(sync payload\\): MPI_Allgatherv did not "
      "complete within 0.1 s \\(this call's deadline\\)");
  // A longer deadline than the default: a call lasting 1.5 defaults passes.
  EXPECT_EXIT(
      {
        Watchdog w("mpi backend: rank 0 of 2", 0.2);
        w.arm("run_on_root: MPI_Recv", 2.0);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        w.disarm();
        w.arm("MPI_Bcast");  // back on the default
        std::this_thread::sleep_for(std::chrono::seconds(5));
      },
      ::testing::ExitedWithCode(1),
      "MPI_Bcast did not complete within 0.2 s \\(backend.timeout\\)");
}

}  // namespace
