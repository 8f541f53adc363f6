// The plugin-support library (plugins/support): the readers' skeleton (tally::support::
// ShardedReader: batch_size, the shard check, serving ShardRange in batches), first on a reader
// written here, then on every built-in reader loaded through the registry (npy, jsonl, png_masks,
// images, coco_json, on the example data under configs/examples/data): every world size from 1
// to 4 and every rank read the same samples, in dataset order, in batches of at most batch_size,
// up to batch_size = INT64_MAX (where `begin + batch_size` overflowed in two readers before).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/reader.hpp"
#include "tally_support/sharded_reader.hpp"

namespace {

namespace fs = std::filesystem;
using tally::ShardInfo;
using tally::Value;

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// ---- a reader written on the skeleton ---------------------------------------------------------

/// Sample i holds the value i (field "x", int64 [n]). Counts its before_next() calls.
class CountingReader final : public tally::support::ShardedReader {
 public:
  CountingReader(const tally::Params& params, const ShardInfo& shard, std::int64_t total) {
    read_batch_size(params);
    tally::support::check_shard("counting", shard);
    set_samples(total, shard);
  }
  std::vector<std::string> fields() const override { return {"x"}; }
  int before_next_calls = 0;

 protected:
  tally::Batch read_batch(std::int64_t begin, std::int64_t end) override {
    EXPECT_LT(begin, end);
    EXPECT_LE(end - begin, batch_size());
    EXPECT_GE(begin, shard_range().begin);
    EXPECT_LE(end, shard_range().end);
    std::vector<std::int64_t> xs;
    for (std::int64_t i = begin; i < end; ++i) xs.push_back(i);
    tally::Batch b;
    b.set("x", tally::Tensor::from_vector(xs));
    return b;
  }
  void before_next() override { ++before_next_calls; }
};

tally::Params batch_params(std::int64_t batch_size) {
  return tally::Params("data", Value::Map{{"batch_size", Value(static_cast<long>(batch_size))}});
}

TEST(PluginSupportShardedReader, EveryWorldReadsEverySampleOnceInOrder) {
  for (const std::int64_t total : {0, 1, 5, 17}) {
    for (int world = 1; world <= 7; ++world) {
      for (const std::int64_t bs :
           {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, total, total + 1, kMax - 1, kMax}) {
        if (bs < 1) continue;
        std::vector<std::int64_t> seen;
        std::int64_t shards = 0;
        for (int rank = 0; rank < world; ++rank) {
          CountingReader r(batch_params(bs), {rank, world}, total);
          EXPECT_EQ(r.total_samples(), total);
          shards += r.shard_samples();
          std::int64_t in_shard = 0;
          int batches = 0;
          while (auto b = r.next()) {
            ++batches;
            ASSERT_GE(b->size(), 1);
            ASSERT_LE(b->size(), bs);
            const auto* x = b->tensor("x").data_as<std::int64_t>();
            seen.insert(seen.end(), x, x + b->size());
            in_shard += b->size();
          }
          EXPECT_EQ(in_shard, r.shard_samples());
          // Done stays done; before_next() ran on every call, the ones at the end too.
          EXPECT_FALSE(r.next().has_value());
          EXPECT_EQ(r.before_next_calls, batches + 2);
        }
        EXPECT_EQ(shards, total);
        std::vector<std::int64_t> want(static_cast<std::size_t>(total));
        for (std::int64_t i = 0; i < total; ++i) want[static_cast<std::size_t>(i)] = i;
        EXPECT_EQ(seen, want) << "total " << total << ", world " << world << ", batch " << bs;
      }
    }
  }
}

TEST(PluginSupportShardedReader, BatchSizeBelowOneIsAConfigErrorNamingIt) {
  for (const std::int64_t bs : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{-4096},
                                std::numeric_limits<std::int64_t>::min()}) {
    try {
      CountingReader r(batch_params(bs), {}, 3);
      ADD_FAILURE() << "batch_size " << bs << " was accepted";
    } catch (const tally::ConfigError& e) {
      EXPECT_EQ(std::string(e.what()),
                "data: parameter 'batch_size' must be at least 1, got " + std::to_string(bs));
    }
  }
}

TEST(PluginSupportShardedReader, InvalidShardIsAConfigErrorNamingReaderRankAndWorld) {
  for (const ShardInfo s : {ShardInfo{-1, 2}, ShardInfo{2, 2}, ShardInfo{5, 3}, ShardInfo{0, 0},
                            ShardInfo{0, -1}, ShardInfo{std::numeric_limits<int>::min(), 4}}) {
    try {
      tally::support::check_shard("counting", s);
      ADD_FAILURE() << "rank " << s.rank << " of " << s.world_size << " was accepted";
    } catch (const tally::ConfigError& e) {
      EXPECT_EQ(std::string(e.what()), "counting reader: invalid shard: rank " +
                                           std::to_string(s.rank) + " of world size " +
                                           std::to_string(s.world_size));
    }
    EXPECT_THROW(
        {
          CountingReader r(batch_params(4), s, 3);
          (void)r;
        },
        tally::ConfigError);
  }
  EXPECT_NO_THROW(tally::support::check_shard("counting", {3, 4}));
}

TEST(PluginSupportShardedReader, FieldNamesAndBatchSizeSchema) {
  struct F {
    std::string name;
  };
  EXPECT_EQ(tally::support::field_names(std::vector<F>{{"a"}, {"b"}}),
            (std::vector<std::string>{"a", "b"}));
  const tally::ParamSpec p = tally::support::batch_size_param("rows per batch", 64);
  EXPECT_EQ(p.name, "batch_size");
  EXPECT_EQ(p.type, tally::ParamType::Int);
  EXPECT_EQ(p.doc, "rows per batch");
  EXPECT_EQ(p.default_value.as_int(), 64);
}

// ---- the built-in readers ---------------------------------------------------------------------

/// One string per sample that holds every field's bytes (dense row, ragged tensor or strings),
/// to compare what different shardings and batch sizes read.
std::vector<std::string> signatures(const tally::Batch& b) {
  std::vector<std::string> out(static_cast<std::size_t>(b.size()));
  // A sample's dtype, shape and bytes (a dense field's describe() would name the batch's size).
  const auto bytes = [](const tally::Tensor& t, std::size_t skip, const void* p, std::size_t n) {
    std::string s = tally::dtype_name(t.dtype());
    for (std::size_t d = skip; d < t.shape().size(); ++d) s += " " + std::to_string(t.shape()[d]);
    return s + ":" + std::string(static_cast<const char*>(p), n) + "|";
  };
  for (const auto& [name, field] : b.fields()) {
    for (std::int64_t i = 0; i < b.size(); ++i) {
      std::string& s = out[static_cast<std::size_t>(i)];
      s += name + "=";
      if (const auto* t = std::get_if<tally::Tensor>(&field)) {
        const std::size_t row = t->nbytes() / static_cast<std::size_t>(t->size(0));
        s += bytes(*t, 1, static_cast<const char*>(t->data()) + static_cast<std::size_t>(i) * row,
                   row);
      } else if (const auto* r = std::get_if<tally::Batch::Ragged>(&field)) {
        const tally::Tensor& x = (*r)[static_cast<std::size_t>(i)];
        s += bytes(x, 0, x.data(), x.nbytes());
      } else {
        for (const auto& str : std::get<tally::Text>(field)[i]) s += str + "\x1f";
        s += "|";
      }
    }
  }
  return out;
}

struct ReaderCase {
  std::string type;
  Value::Map params;  // without batch_size
};

std::vector<ReaderCase> reader_cases() {
  const fs::path data = fs::path(TALLY_SOURCE_DIR) / "configs/examples/data";
  const auto path = [&](const char* p) { return Value((data / p).string()); };
  return {
      {"npy",
       {{"fields", Value(Value::Map{{"pred", path("regression/pred.npy")},
                                    {"target", path("regression/target.npy")}})}}},
      {"jsonl", {{"path", path("detection/boxes_val2014_40.jsonl")}}},
      {"png_masks",
       {{"fields",
         Value(Value::Map{{"pred", path("segmentation/pred")}, {"gt", path("segmentation/gt")}})}}},
      {"images", {{"fields", Value(Value::Map{{"img", path("restoration/gt")}})}}},
      {"coco_json",
       {{"annotations", path("detection/instances_val2014_40.json")},
        {"results", path("detection/results_val2014_40.json")}}},
  };
}

std::shared_ptr<tally::Reader> open_reader(const ReaderCase& c, std::int64_t batch_size,
                                           ShardInfo s) {
  Value::Map p = c.params;
  p.emplace_back("batch_size", Value(static_cast<long>(batch_size)));
  return tally::test::make_reader(c.type, p, s);
}

TEST(PluginSupportBuiltInReaders, EveryWorldAndBatchSizeReadsTheSameSamples) {
  for (const ReaderCase& c : reader_cases()) {
    SCOPED_TRACE(c.type);
    std::vector<std::string> want;
    auto whole = open_reader(c, kMax, {});
    const std::int64_t total = whole->total_samples();
    while (auto b = whole->next()) {
      const auto s = signatures(*b);
      want.insert(want.end(), s.begin(), s.end());
    }
    ASSERT_GT(total, 1);
    ASSERT_EQ(static_cast<std::int64_t>(want.size()), total);
    for (int world = 1; world <= 4; ++world) {
      for (const std::int64_t bs : {std::int64_t{1}, std::int64_t{3}, total, kMax - 1, kMax}) {
        std::vector<std::string> got;
        for (int rank = 0; rank < world; ++rank) {
          auto r = open_reader(c, bs, {rank, world});
          EXPECT_EQ(r->total_samples(), total);
          std::int64_t in_shard = 0;
          while (auto b = r->next()) {
            ASSERT_GE(b->size(), 1);
            ASSERT_LE(b->size(), bs);
            in_shard += b->size();
            const auto s = signatures(*b);
            got.insert(got.end(), s.begin(), s.end());
          }
          EXPECT_EQ(in_shard, r->shard_samples());
          EXPECT_FALSE(r->next().has_value());
        }
        EXPECT_TRUE(got == want) << "world " << world << ", batch_size " << bs;
      }
    }
  }
}

TEST(PluginSupportBuiltInReaders, InvalidShardAndBatchSizeMessagesAreTheReaders) {
  for (const ReaderCase& c : reader_cases()) {
    SCOPED_TRACE(c.type);
    for (const ShardInfo s : {ShardInfo{2, 2}, ShardInfo{-1, 3}, ShardInfo{0, 0}}) {
      try {
        open_reader(c, 4, s);
        ADD_FAILURE() << "rank " << s.rank << " of " << s.world_size << " was accepted";
      } catch (const tally::ConfigError& e) {
        EXPECT_EQ(std::string(e.what()), c.type + " reader: invalid shard: rank " +
                                             std::to_string(s.rank) + " of world size " +
                                             std::to_string(s.world_size));
      }
    }
    for (const std::int64_t bs : {std::int64_t{0}, std::int64_t{-7}}) {
      try {
        open_reader(c, bs, {});
        ADD_FAILURE() << "batch_size " << bs << " was accepted";
      } catch (const tally::ConfigError& e) {
        EXPECT_EQ(std::string(e.what()),
                  "data: parameter 'batch_size' must be at least 1, got " + std::to_string(bs));
      }
    }
  }
}

}  // namespace
