// tally::WorkAndWait (tally/sdk/dist_backend.hpp) over the job's TCP store, for backends whose
// transport has deadlines but no way to tell a live rank at work from a dead one (gloo): while
// ranks work between collectives (reading their shards; rank 0 computing the results), a thread
// of each working rank adds to its heartbeat counter in the store every timeout / 4 (while
// reading, only when a batch was read since the last beat, so a rank stuck inside one batch falls
// silent), and says when it is done. The other ranks poll the store until every working rank is
// done, and give up, naming the rank, when one shows no sign of life for `timeout`. The work
// itself may take as long as it takes. Plain C++ and POSIX: tested in
// tests/unit/test_tcp_store.cpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "tcp_store.hpp"

namespace tally_store {

/// One work_and_wait call, the same on every rank except `rank`.
struct WaitCall {
  StoreAddress address;  // the job's store (a client is made per call, one more for heartbeats)
  std::string prefix;    // the backend's key prefix (JobStore::prefix())
  int rank = 0;
  int world_size = 1;
  /// Counts the backend's work_and_wait calls: every rank makes the same calls in the same order,
  /// so the keys of one call never meet another's.
  std::uint64_t seq = 0;
  /// How long a working rank may stay silent, and the bound on every store request.
  std::chrono::milliseconds timeout{600000};
  /// Message prefix: "gloo backend: rank 1 of 4: ".
  std::string who;
  /// The engine's name of the call: "run_on_every_rank (reading shards)".
  std::string what;
};

/// Collective over the store. `root` >= 0: rank `root` runs `work` while the others wait;
/// `root` == -1: every rank runs `work`, then waits for the others; a working rank shows life by
/// incrementing `*progress` (null: every beat counts). An exception from `work` is rethrown on its
/// rank once it has said it is done (the others are released, and fail in the next collective
/// where the engine tells them). tally::RuntimeError naming the silent rank when one falls silent
/// for `timeout`, or the store when it cannot be reached.
void work_and_wait(const WaitCall& call, int root, const std::function<void()>& work,
                   const std::atomic<std::uint64_t>* progress);

}  // namespace tally_store
