#include "tally_support/sharded_reader.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "tally/sdk/error.hpp"

namespace tally::support {

void check_shard(std::string_view reader, const ShardInfo& shard) {
  if (shard.world_size < 1 || shard.rank < 0 || shard.rank >= shard.world_size)
    throw ConfigError(std::string(reader) + " reader: invalid shard: rank " +
                      std::to_string(shard.rank) + " of world size " +
                      std::to_string(shard.world_size));
}

ParamSpec batch_size_param(std::string doc, std::int64_t def) {
  return param("batch_size", ParamType::Int, std::move(doc)).def(def);
}

void ShardedReader::read_batch_size(const Params& params) {
  batch_size_ = params.get_int("batch_size");
  if (batch_size_ < 1)
    params.fail("batch_size", "must be at least 1, got " + std::to_string(batch_size_));
}

void ShardedReader::set_samples(std::int64_t total, const ShardInfo& shard) {
  total_ = total;
  range_ = ShardRange::of(total, shard);
  next_ = range_.begin;
}

std::optional<Batch> ShardedReader::next() {
  before_next();
  if (next_ >= range_.end) return std::nullopt;
  const std::int64_t begin = next_;
  // batch_size may be as large as INT64_MAX: begin + batch_size would overflow.
  const std::int64_t end = begin + std::min(batch_size_, range_.end - begin);
  Batch batch = read_batch(begin, end);
  next_ = end;
  return batch;
}

}  // namespace tally::support
