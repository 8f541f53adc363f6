// The per-unit recorder behind output.records and intervals: (private to libtally)
// shadow metrics that take each sample alone, and the gathering of every rank's records to rank 0
// (tally/records.hpp, docs/significance.md).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <msgpack.hpp>

#include "tally/collectives.hpp"
#include "tally/records.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/metric.hpp"

namespace tally {

/// Field names whose values identify a sample (a reader's image id), in the order they are
/// looked for; the first that a batch holds as a 1-D integer tensor enters the sample hash.
inline constexpr const char* kIdFields[] = {"img_id", "image_id", "sample_id", "id"};

/// One rank's per-unit records, as it takes its samples.
class UnitRecorder {
 public:
  struct Slot {
    std::string label;
    std::string type;
    Value parameters;
    std::shared_ptr<Metric> shadow;  ///< a second instance of the metric (same factory, params)
    std::vector<std::pair<std::string, std::string>> inputs;  ///< metric input -> data field
  };
  explicit UnitRecorder(std::vector<Slot> slots);

  /// Every sample of `batch` (as the reader gave it: the metrics' inputs are renamed here), one
  /// at a time, into every shadow metric. Throws what a metric throws (prefixed by its label).
  void record(const Batch& batch);
  /// Clears every record (Evaluator::reset).
  void clear();
  std::int64_t units() const noexcept { return units_; }

  /// This rank's records, packed for the gather to rank 0.
  void pack(msgpack::sbuffer& out) const;
  /// Rank 0: every rank's packed records in rank order, concatenated (dataset order), with the
  /// sample hash. RuntimeError naming the rank whose payload does not fit.
  Records merge(const std::vector<std::span<const std::byte>>& ranks) const;

 private:
  struct Kept {
    std::size_t summed = 0;
    bool gathers = false;
    std::vector<std::uint64_t> offsets{0};
    std::vector<std::uint32_t> index;
    std::vector<std::int64_t> count;
    std::vector<std::uint64_t> gathered_offsets{0};
    msgpack::sbuffer gathered;
    std::vector<std::int64_t> sums;  // reused for each unit's write_sums()
  };
  std::vector<Slot> slots_;
  std::vector<Kept> kept_;
  std::int64_t units_ = 0;
  std::string id_field_;  // empty: none seen (yet)
  std::vector<std::int64_t> ids_;
};

}  // namespace tally
