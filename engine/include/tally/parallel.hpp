// parallel_for: the `threads` of a metric whose accumulation splits into independent parts (the
// images of a batch, say), each counted into its own scratch and merged in a fixed order, so that
// the state is the same for any number of threads. Header-only: nothing in libtally's ABI.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
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

}  // namespace tally
