// Checkpoint files (docs/checkpoint.md), after torch.distributed.checkpoint's roles: every rank
// is a StorageWriter of its own shard file, and the coordinator (rank 0) writes the metadata file
// last, which alone marks a checkpoint complete. This file holds the formats and the file
// operations; the protocol (who writes what when, and how the ranks agree) is in evaluator.cpp.
//
//   <checkpoint.dir>/step-0000000012/shard-00000.bin   rank 0's shard
//   <checkpoint.dir>/step-0000000012/shard-00001.bin   ...
//   <checkpoint.dir>/step-0000000012/metadata.json     written last, atomically
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tally/sdk/reader.hpp"

namespace tally::checkpoint {

/// The version of the shard and metadata formats below (2: each shard says which samples its
/// state covers and what of its part of the data is still to come, so that a checkpoint resumes
/// on another number of ranks). Format 1 (one state per rank over a prefix of its block) is read
/// too: it is the format 2 checkpoint whose ranks each cover a prefix of their block.
inline constexpr std::int64_t kFormatVersion = 2;
inline constexpr const char* kMetadataName = "metadata.json";
inline constexpr const char* kShardMagic = "tally-checkpoint-shard";
/// Complete checkpoints kept: the newest and the one before it.
inline constexpr std::size_t kKeep = 2;

/// "step-0000000012": the folder of the checkpoint taken after `step` batches.
std::string step_name(std::int64_t step);
/// "shard-00003.bin": the shard file of `rank`.
std::string shard_name(int rank);

/// zlib's CRC-32 of `bytes`.
std::uint32_t crc32_of(std::string_view bytes);

/// Creates the folder `dir` if it is missing (another rank may create it at the same time) and
/// makes its entry durable (fsync of the parent). RuntimeError on failure.
void make_dir(const std::filesystem::path& dir);
/// The whole file, at most `max_bytes` (file_io.hpp's limits). InputError naming the file when it
/// cannot be read (missing, not a regular file, too large).
std::string read_bytes(const std::filesystem::path& path, std::string_view what,
                       std::uint64_t max_bytes);

/// A range [begin, end) of dataset samples.
struct Span {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end - begin; }
  bool operator==(const Span&) const = default;
};

/// What a rank still has to fold into its state, in dataset order after what its state covers:
/// a metric state saved by an earlier run (its bytes in the rank's shard), or samples to read,
/// with the reader of `origin` (the rank and world size whose contiguous block holds them).
struct Pending {
  enum class Kind { State, Read };
  Kind kind = Kind::Read;
  Span span;
  ShardInfo origin;  // Read only: the reader block (rank of world size) the samples lie in
};

/// A state saved by an earlier run that this rank has not folded in yet, kept in its shard.
struct PendingState {
  Span span;
  std::string payload;  // [0, [state of each metric]], as Shard::payload
};

/// One rank's shard: its position in its part of the data and its metric states, packed exactly
/// as the sync protocol packs them ([0, [state, ...]]).
struct Shard {
  int rank = 0;
  std::int64_t step = 0;
  std::int64_t samples = 0;  // samples this rank has read from its reader (held-back one included)
  std::int64_t batches = 0;  // batches it has read
  std::string payload;       // the sync payload: msgpack [0, [state of each metric]]
  Span covers;               // format 2: the samples `payload` holds (format 1: unknown, {0, 0})
  std::vector<PendingState> states;  // format 2: saved states still to fold, in dataset order

  /// msgpack: ["tally-checkpoint-shard", 2, rank, step, samples, batches, bin payload,
  /// covers begin, covers end, [[begin, end, bin payload], ...]] (format 1: the first 7).
  std::string serialize() const;
  /// InputError naming `file` when the bytes are not a shard of this format.
  static Shard parse(std::string_view bytes, const std::filesystem::path& file);
};

struct ShardRecord {
  std::string file;  // shard_name(rank), relative to the step folder
  std::uint32_t crc32 = 0;
  std::uint64_t size = 0;
  Span covers;                   // format 2: the samples the shard's state holds
  std::vector<Pending> pending;  // format 2: what follows them, in dataset order
};

/// The metadata file: what the checkpoint is and what it must match to be resumed.
struct Metadata {
  std::int64_t format = kFormatVersion;
  std::string tally_version;
  std::int64_t protocol = 0;
  std::int64_t step = 0;
  std::int64_t every_n_batches = 0;
  int world_size = 0;
  std::string config_fingerprint;                            // 16 hex digits
  std::vector<std::pair<std::string, std::string>> plugins;  // name -> version
  std::int64_t dataset_samples = 0;
  std::vector<std::int64_t> samples;  // per rank
  std::vector<std::int64_t> batches;  // per rank
  std::vector<ShardRecord> shards;    // per rank

  /// JSON; its last key, metadata_crc32, is the CRC-32 of the compact JSON of the keys before it.
  std::string to_json() const;
  /// InputError naming `file` when the text is not valid metadata (not JSON, a missing or
  /// ill-typed key, a wrong metadata_crc32, per-rank lists that do not have world_size entries).
  static Metadata parse(std::string_view text, const std::filesystem::path& file);
};

/// One step of a rank's plan on resume: fold a saved state in (`shard`'s live state when
/// `index` is -1, else its index-th pending state), or read samples.
struct Item {
  Pending::Kind kind = Pending::Kind::Read;
  Span span;
  ShardInfo origin;  // Read
  int shard = 0;     // State: the shard that holds it
  int index = -1;    // State: -1 the shard's live state, else its pending state `index`
};

/// Every state and read range of `m`, in dataset order (format 1: each rank's state, then the
/// rest of its block; `held`: the run holds back its last sample, which format 1 counted in
/// `samples` but not in the state). InputError naming `file` when they do not tile
/// [0, dataset_samples) or a read range leaves its origin's block.
std::vector<std::vector<Item>> items_of(const Metadata& m, bool held,
                                        const std::filesystem::path& file);

/// Rank `rank` of `world`'s part of the items (items_of, per shard): on as many ranks as wrote
/// them, each rank its own shard's; on another number, the items in dataset order cut into
/// `world` contiguous groups of (nearly) equal samples to read, read ranges split where a group
/// ends, saved states whole.
std::vector<Item> plan(const std::vector<std::vector<Item>>& per_shard, int world, int rank);

/// What a checkpoint must match to be resumed by this run.
struct Expected {
  int world_size = 1;
  std::string config_fingerprint;
  std::vector<std::pair<std::string, std::string>> plugins;
};

/// ConfigError (one line: the file, what was expected and what was found) when `m` was written by
/// another tally version, other plugin versions or another config (another number of ranks is
/// fine: plan() hands its parts out anew).
void check(const Metadata& m, const Expected& expected, const std::filesystem::path& file);

/// InputError naming the shard file when `bytes` do not have the size and CRC-32 `record` gives.
void verify(std::string_view bytes, const ShardRecord& record, const std::filesystem::path& file,
            const std::filesystem::path& metadata_file);

/// A step folder in the checkpoint folder.
struct StepDir {
  std::int64_t step = 0;
  std::filesystem::path path;
  bool complete = false;  // its metadata file exists
};
/// The step folders of `dir`, oldest first; nothing when `dir` does not exist.
std::vector<StepDir> list_steps(const std::filesystem::path& dir);

/// After the checkpoint of `step` is complete: removes the complete checkpoints older than the
/// kKeep newest, and the incomplete ones older than `step` (newer ones may be in the making).
/// Returns a message for each folder that could not be removed.
std::vector<std::string> prune(const std::filesystem::path& dir, std::int64_t step);

}  // namespace tally::checkpoint
