// See store_wait.hpp.
#include "store_wait.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "tally/sdk/error.hpp"

namespace tally_store {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string seconds_text(milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

// The heartbeat thread of a working rank: adds 1 to its counter every `every` (only when
// `progress` moved since the last beat, when there is a progress counter) until stopped. A store
// that stops answering ends the beats: the waiting ranks then report this rank as silent, or fail
// on the store themselves.
class Heartbeat {
 public:
  Heartbeat(const WaitCall& call, std::string key, milliseconds every,
            const std::atomic<std::uint64_t>* progress)
      : client_(call.address, call.rank, call.timeout, call.who),
        key_(std::move(key)),
        every_(every),
        progress_(progress),
        thread_([this] { run(); }) {}
  ~Heartbeat() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  void run() {
    std::uint64_t last = progress_ != nullptr ? progress_->load() : 0;
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, every_, [this] { return stop_; })) {
      lock.unlock();
      bool alive = true;
      if (progress_ != nullptr) {
        const std::uint64_t now = progress_->load();
        alive = now != last;
        last = now;
      }
      try {
        if (alive) client_.add(key_, 1);
      } catch (const std::exception&) {
        return;  // the store is gone: the others find out from the store or from the silence
      }
      lock.lock();
    }
  }

  TcpStoreClient client_;
  std::string key_;
  milliseconds every_;
  const std::atomic<std::uint64_t>* progress_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once every member above is ready
};

}  // namespace

void work_and_wait(const WaitCall& call, int root, const std::function<void()>& work,
                   const std::atomic<std::uint64_t>* progress) {
  const bool working = root < 0 || root == call.rank;
  const std::string base = call.prefix + "wait/" + std::to_string(call.seq) + "/";
  const auto beat_key = [&](int r) { return base + "beat/" + std::to_string(r); };
  const auto done_key = [&](int r) { return base + "done/" + std::to_string(r); };
  const milliseconds every = std::max(call.timeout / 4, milliseconds(1));

  std::exception_ptr failure;
  if (working) {
    const Heartbeat beats(call, beat_key(call.rank), every, root < 0 ? progress : nullptr);
    try {
      work();
    } catch (...) {
      failure = std::current_exception();
    }
  }
  TcpStoreClient store(call.address, call.rank, call.timeout, call.who);
  if (working) {
    store.set(done_key(call.rank), {});
    store.add(base + "done", 1);  // a round trip: the SET above has reached the store
  }

  // The other working ranks, until each is done or silent for `timeout`.
  std::vector<int> pending;
  for (int r = 0; r < call.world_size; ++r)
    if (r != call.rank && (root < 0 || r == root)) pending.push_back(r);
  const auto expected = static_cast<std::int64_t>(root < 0 ? call.world_size : 1);
  struct Seen {
    std::int64_t beats = -1;
    Clock::time_point since;
  };
  std::vector<Seen> seen(pending.size(), Seen{-1, Clock::now()});
  Clock::time_point next_look = Clock::now();
  milliseconds pause(2);
  const milliseconds longest_pause = std::clamp(every / 2, milliseconds(1), milliseconds(250));
  while (!pending.empty()) {
    if (store.add(base + "done", 0) >= expected) break;  // one request while all goes well
    const Clock::time_point now = Clock::now();
    if (now >= next_look) {  // each working rank's own state, every `every / 2`
      next_look = now + std::max(every / 2, milliseconds(1));
      for (std::size_t i = 0; i < pending.size();) {
        const int r = pending[i];
        if (store.check(std::span<const std::string>(std::vector<std::string>{done_key(r)}))) {
          pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
          seen.erase(seen.begin() + static_cast<std::ptrdiff_t>(i));
          continue;
        }
        const std::int64_t b = store.add(beat_key(r), 0);
        if (b != seen[i].beats) {
          seen[i] = {b, now};
        } else if (now - seen[i].since > call.timeout) {
          throw tally::RuntimeError(
              call.who + call.what + ": rank " + std::to_string(r) +
              " showed no sign of life for " + seconds_text(call.timeout) + " (backend.timeout) " +
              (root < 0 ? "while reading its shard (no batch read in that time)"
                        : "while computing the results") +
              ": it hangs, was stopped, or its host is unreachable");
        }
        ++i;
      }
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, longest_pause);
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace tally_store
