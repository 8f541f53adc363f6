// Collectives::reduce under test: values that differ by rank and by position (negative ones and
// values past 2^32 among them, so a misplaced or truncated value shows), and the element-wise
// result every root must hold.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tally/collectives.hpp"

namespace tally::test {

inline std::int64_t reduce_input(int rank, std::size_t i) {
  return static_cast<std::int64_t>((i * 2654435761u + static_cast<std::size_t>(rank) * 40503u) %
                                   100003u) -
         50000 + (i % 5 == 0 ? std::int64_t{1} << 40 : 0);
}

/// Reduces `n` values of reduce_input with `op` to `root` over collectives `b` and, on the root,
/// checks every value against the same operation done here over every rank's inputs.
inline void check_reduce(Collectives& b, std::size_t n, ReduceOp op, int root) {
  std::vector<std::int64_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = reduce_input(b.rank(), i);
  b.reduce(v, op, root);
  if (b.rank() != root) return;
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t want = reduce_input(0, i);
    for (int r = 1; r < b.world_size(); ++r) {
      const std::int64_t x = reduce_input(r, i);
      want = op == ReduceOp::sum   ? want + x
             : op == ReduceOp::min ? std::min(want, x)
                                   : std::max(want, x);
    }
    ASSERT_EQ(v[i], want) << "value " << i << " of " << n << ", root " << root << ", op "
                          << static_cast<int>(op);
  }
}

}  // namespace tally::test
