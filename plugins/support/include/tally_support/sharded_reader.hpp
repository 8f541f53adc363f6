// The skeleton every built-in reader shares: the `batch_size` parameter, the shard check, and
// serving this rank's contiguous block [begin, end) of the samples (tally::ShardRange) as batches
// of up to batch_size consecutive samples. A reader derived from ShardedReader reads its
// parameters and its data in its constructor, calls set_samples() once it knows the dataset's
// size, and implements read_batch(begin, end): next(), total_samples() and shard_samples() are
// this class's.
//
//   class MyReader final : public tally::support::ShardedReader {
//    public:
//     MyReader(const tally::Params& params, const tally::ShardInfo& shard) {
//       read_batch_size(params);
//       tally::support::check_shard("my", shard);
//       ...open the data...
//       set_samples(total, shard);
//     }
//     std::vector<std::string> fields() const override { ... }
//    protected:
//     tally::Batch read_batch(std::int64_t begin, std::int64_t end) override { ... }
//   };
//
// Part of the plugin-support library (plugins/support): built in the tally tree and linked by the
// plugins that use it; not part of the SDK a plugin must use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/reader.hpp"

namespace tally::support {

/// ConfigError "<reader> reader: invalid shard: rank R of world size W" unless
/// 0 <= rank < world_size.
void check_shard(std::string_view reader, const ShardInfo& shard);

/// The `batch_size` parameter's schema: an Int with default `def`, documented by `doc`.
ParamSpec batch_size_param(std::string doc, std::int64_t def);

/// The names of a reader's fields: f.name of each element of `fields`.
template <class Fields>
std::vector<std::string> field_names(const Fields& fields) {
  std::vector<std::string> names;
  for (const auto& f : fields) names.push_back(f.name);
  return names;
}

class ShardedReader : public Reader {
 public:
  std::int64_t total_samples() const final { return total_; }
  std::int64_t shard_samples() const final { return range_.size(); }
  /// before_next(), then read_batch() over the next up to batch_size samples of the shard, or
  /// nullopt when the shard is done.
  std::optional<Batch> next() final;

 protected:
  /// Reads `batch_size` from `params`: ConfigError naming the parameter unless it is at least 1.
  void read_batch_size(const Params& params);
  /// The dataset holds `total` samples: this rank serves ShardRange::of(total, shard), from its
  /// beginning.
  void set_samples(std::int64_t total, const ShardInfo& shard);

  std::int64_t batch_size() const noexcept { return batch_size_; }
  const ShardRange& shard_range() const noexcept { return range_; }

  /// The batch of samples [begin, end) of the dataset: inside this rank's shard, and
  /// 1 <= end - begin <= batch_size().
  virtual Batch read_batch(std::int64_t begin, std::int64_t end) = 0;
  /// Called first in every next(), also the one that finds the shard done (the npy reader checks
  /// there that no file was truncated while it was read). Does nothing by default.
  virtual void before_next() {}

 private:
  std::int64_t batch_size_ = 0;
  std::int64_t total_ = 0;
  ShardRange range_;
  std::int64_t next_ = 0;
};

}  // namespace tally::support
