// parallel_for: the `threads` of a metric whose accumulation splits into independent parts (the
// images of a batch, say), each counted into its own scratch and merged in a fixed order, so that
// the state is the same for any number of threads. Header-only: nothing in libtally's ABI.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tally {

/// Runs f(i) for i in [0, n) on up to `threads` threads in contiguous blocks (block k of t holds
/// [n*k/t, n*(k+1)/t)); the caller waits. Rethrows the error of the lowest block, which is the
/// first error in index order, as a sequential loop would throw it.
template <class F>
void parallel_for(std::size_t n, int threads, F&& f) {
  const std::size_t t = std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), n);
  if (t <= 1) {
    for (std::size_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(t);
  for (std::size_t k = 0; k < t; ++k) {
    pool.emplace_back([&, k] {
      try {
        for (std::size_t i = n * k / t; i < n * (k + 1) / t; ++i) f(i);
      } catch (...) {
        errors[k] = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

/// Runs f(i) for i in [0, n) on up to `threads` threads that take the next index as they get
/// free (for parts of uneven cost: one slow part does not hold up a whole block); the caller
/// takes part. Rethrows the error of the lowest index that failed.
template <class F>
void parallel_for_dynamic(std::size_t n, int threads, F&& f) {
  const std::size_t t = std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), n);
  if (t <= 1) {
    for (std::size_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::size_t error_at = n;
  std::exception_ptr error;
  const auto run = [&] {
    for (std::size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) {
      try {
        f(i);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mutex);
        if (i < error_at) {
          error_at = i;
          error = std::current_exception();
        }
      }
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t k = 1; k < t; ++k) pool.emplace_back(run);
  run();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace tally
