// Reader: a data-reader plugin. It serves this rank's shard of the dataset as batches. Shards are
// contiguous blocks in dataset order: rank r reads samples [r*N/W, (r+1)*N/W), so rank order is
// dataset order and a rank may have no samples at all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/export.hpp"

namespace tally {

struct ShardInfo {
  int rank = 0;
  int world_size = 1;
};

/// The contiguous block [begin, end) of `total` samples that `rank` of `world_size` reads.
struct ShardRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  static ShardRange of(std::int64_t total, ShardInfo shard) {
    const auto w = static_cast<std::int64_t>(shard.world_size);
    const auto r = static_cast<std::int64_t>(shard.rank);
    // total * r fits: totals are far below 2^63 / 2^16 ranks.
    return {total * r / w, total * (r + 1) / w};
  }
  std::int64_t size() const { return end - begin; }
};

class TALLY_API Reader {
 public:
  virtual ~Reader();
  /// The names of the fields every batch carries.
  virtual std::vector<std::string> fields() const = 0;
  /// Samples in the whole dataset.
  virtual std::int64_t total_samples() const = 0;
  /// Samples in this rank's shard.
  virtual std::int64_t shard_samples() const = 0;
  /// The next batch of this rank's shard, or nullopt when the shard is done.
  virtual std::optional<Batch> next() = 0;
  /// The layout every rank must agree on before any shard is read: each field's dtype and
  /// per-sample shape, as text ("pred_scores: float32 [10]; gt_labels: int64 []"). Ranks reading
  /// the same data return the same text; the engine compares it, and total_samples(), across
  /// ranks before reading, so a rank that reads other data fails every rank instead of reading
  /// an overlapping shard. Empty (the default): nothing to compare beyond total_samples().
  virtual std::string layout() const;
};

/// Optional interface (a marker) of a reader whose batches are views of memory that nothing
/// writes while a view of it lives, a read-only memory map say, kept alive by the views
/// themselves. The engine then keeps a view of the sample it holds back at the end of each batch
/// instead of a copy: with one image per batch that copy was every byte read. Found with
/// dynamic_cast: the plugin ABI is unchanged.
class TALLY_API StableBatchReader {
 public:
  virtual ~StableBatchReader();
};

}  // namespace tally
