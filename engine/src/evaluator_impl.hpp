// Evaluator::Impl and what evaluator.cpp and evaluator_checkpoint.cpp share (private to
// libtally).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <msgpack.hpp>

#include "checkpoint.hpp"
#include "config.hpp"
#include "error_codes.hpp"
#include "msgpack_spans.hpp"
#include "registry.hpp"
#include "tally/collectives.hpp"
#include "tally/evaluator.hpp"
#include "tally/sdk/error.hpp"
#include "unit_records.hpp"

namespace tally {

struct MetricSlot {
  std::string label;
  const Component* component = nullptr;
  std::vector<std::pair<std::string, std::string>> inputs;  // metric input -> data field
  std::shared_ptr<Metric> metric;
  std::string where;
  Params params;  // checked, defaults filled in: the records' shadow metrics are made from them
};

/// The last sample of a batch, held back: a copy of its CPU memory, since the caller may reuse its
/// buffers for the next batch, unless the batch comes from a StableBatchReader (views of memory
/// nothing rewrites). CUDA memory is held as a view (libtally has no CUDA runtime to copy it
/// with): a host feeding GPU tensors keeps the last one unchanged until the next add() or
/// compute(), as a model's output tensor is (EvaluatorOptions::padded_sampler).
inline Batch last_sample(const Batch& batch, bool stable) {
  const auto n = batch.size();
  Batch last = batch.slice(n - 1, n);
  if (stable) return last;
  const auto own = [](const Tensor& t) { return t.is_cuda() ? t : t.clone(); };
  Batch out;
  for (const auto& [name, field] : last.fields()) {
    if (const auto* t = std::get_if<Tensor>(&field)) {
      out.set(name, own(*t));
    } else if (const auto* r = std::get_if<Batch::Ragged>(&field)) {
      Batch::Ragged copy;
      copy.reserve(r->size());
      for (const auto& x : *r) copy.push_back(own(x));
      out.set_ragged(name, std::move(copy));
    } else {
      out.set_text(name, std::get<Text>(field));  // immutable, shared: nothing to copy
    }
  }
  return out;
}

inline bool is_stable(const Reader* reader) {
  return dynamic_cast<const StableBatchReader*>(reader) != nullptr;
}

/// `message` with every "sample N" (N: a sample's number within this rank's shard, as the
/// metrics and tally/sdk/input.hpp number them) made "sample N+offset", the sample's index in the
/// dataset. "sample" must start a word and be followed by one space and the digits; a number that
/// would overflow is left as it is.
std::string dataset_samples(std::string_view message, std::int64_t offset);

/// What the one read loop (Evaluator::Impl::read_shards) calls around its reading: reading
/// straight through (ReadStraight, evaluator.cpp) or with checkpoints (checkpointed_reading,
/// evaluator_checkpoint.cpp). The loop calls decide(), resume(), then round() and save() in turn
/// until save() says stop, on every rank, whatever this rank read: every collective of a policy
/// is made in the same order on every rank (the ranks agree in save() on when to stop).
class ReadPolicy {
 public:
  virtual ~ReadPolicy() = default;
  /// Before anything is read: what to resume, agreed by every rank. false: no rank reads (a
  /// rank failed already, recorded: compute() reports it); a refusal throws on every rank.
  virtual bool decide() = 0;
  /// After decide(): this rank's state restored and the batches it had read skipped, into
  /// `batches`; false: no rank reads on (a refusal throws on every rank).
  virtual bool resume(std::int64_t& batches) = 0;
  /// After resume(): what the loop reads, `given` (the caller's reader) or what the policy reads
  /// instead (a resumed checkpoint's plan, which may read other blocks of the data).
  virtual Reader* source(Reader* given) { return given; }
  /// The most batches one round reads before save(); 0: the whole shard in one round.
  virtual std::int64_t round_batches() const = 0;
  /// Whether a StableBatchReader's next batch may be read on a thread of its own (ReadAhead)
  /// while the current one is added.
  virtual bool read_ahead() const = 0;
  /// Runs `read` (one round of this rank's reading, which adds 1 to `progress` a batch) on this
  /// rank, inside whatever collective the policy reads under.
  virtual void round(const std::function<void()>& read,
                     const std::atomic<std::uint64_t>& progress) = 0;
  /// After each round: `done` (this rank read its whole shard) and the batches it has read in
  /// all. Returns whether another round follows.
  virtual bool save(bool done, std::int64_t batches) = 0;
};

/// The backend this evaluator syncs through and the engine's collectives over it.
struct Transport {
  std::shared_ptr<DistBackend> backend;
  std::string backend_name;
  /// backend.type auto: what it chose and why ("gloo (RANK=0, ... (torchrun))"); else empty.
  std::string backend_choice;
  /// The engine's object collectives over `backend`, made on first use: their buffers are reused
  /// from one sync to the next.
  std::unique_ptr<Collectives> collectives_;
  Collectives& collectives() {
    if (!collectives_) collectives_ = std::make_unique<Collectives>(*backend);
    return *collectives_;
  }
};

/// What this rank accumulates and owns: the metrics and their states, the records' shadow
/// metrics, a padded sampler's held-back sample, the count of samples added, and the first
/// failure (kept for compute() to report on every rank). Adding, saving and restoring the
/// states are its operations; reading (read_shards and its ReadPolicy), the sync (sync::run),
/// the records (gather_records) and the checkpoints (ReadCheckpointed) work through them.
struct Accumulation {
  std::vector<MetricSlot> metrics;
  /// With output.records or intervals: every sample's contribution to every metric, taken by
  /// shadow metrics (unit_records.hpp).
  std::unique_ptr<UnitRecorder> recorder;
  // With a padded sampler (EvaluatorOptions::padded_sampler, `hold_last`), the last sample added
  // on this rank is held back until the next add() or compute(): a
  // distributed sampler's padding, when compute(dataset_size) says there is some, is always a
  // rank's last sample, and must not be counted.
  std::optional<Batch> held;
  bool hold_last = false;
  std::int64_t samples = 0;  // added on this rank, held sample included
  /// The dataset index of this rank's first sample, when read_all() reads a contiguous shard
  /// (Reader): the metrics' messages number samples within the rank ("sample 201"), and apply()
  /// adds it so that they name the sample of the dataset. 0 otherwise (samples added by the host
  /// program come in an order only it knows).
  std::int64_t shard_begin = 0;
  std::optional<Failure> error;  // this rank's first failure, reported by compute()

  // Every metric's whole state (Metric::save), for a checkpoint: [0, [state...]] (the held
  // sample is not in it).
  void save_states(msgpack::sbuffer& out) const {
    msgpack::packer<msgpack::sbuffer> packer(out);
    packer.pack_array(2);
    packer.pack(0);
    packer.pack_array(static_cast<std::uint32_t>(metrics.size()));
    SbufferSink sink(out);
    for (const auto& m : metrics) m.metric->save(sink);
  }

  /// Every metric's state from what save_states() packed (`packed`, unpacked from `bytes`);
  /// InputError prefixed by `where`.
  /// `merge`: merged into the states (Metric::merge_saved, as if its samples came after theirs)
  /// instead of replacing them.
  void restore_states(const msgpack::object& packed, ByteSpan bytes, const std::string& where,
                      bool merge = false);

  void record(int exit_code, const std::string& message) {
    if (!error) error = Failure{exit_code == 0 ? 1 : exit_code, message, {}};
  }
  void record(const std::exception& e, std::string_view prefix = {}) {
    if (!error) error = Failure::of(e, prefix);
  }

  // Runs `fn`; an exception it throws is recorded (its message after `prefix`), for compute() to
  // report on every rank. Returns whether `fn` completed.
  template <class Fn>
  bool recording(std::string_view prefix, Fn&& fn) {
    try {
      fn();
      return true;
    } catch (const std::exception& e) {
      record(e, prefix);
    }
    return false;
  }

  // The next batch of `reader`; nullopt at the end of the shard or after a failure (recorded).
  std::optional<Batch> next_batch(Reader& reader, bool& failed) {
    std::optional<Batch> b;
    failed = !recording("", [&] { b = reader.next(); });
    return b;
  }

  /// `stable`: the batch comes from a StableBatchReader.
  void add(const Batch& batch, bool stable = false);

  /// The held-back sample, if any, to the metrics (it is not padding: something follows it).
  void apply_held() {
    if (!held) return;
    Batch last = std::move(*held);
    held.reset();
    apply(last);
  }

  void apply(const Batch& batch) {
    for (auto& m : metrics) {
      try {
        m.metric->add(batch.renamed(m.inputs));
      } catch (const Error& e) {
        // Samples numbered in the dataset; the metric named unless the message names its owner.
        const std::string msg = dataset_samples(e.what(), shard_begin);
        rethrow_with(
            e, {.metric = m.label},
            e.context().owner.empty() ? fmt::format("metric '{}': {}", m.label, msg) : msg);
      }
    }
    if (recorder) recorder->record(batch);
  }
};

/// What identifies this evaluation: the fingerprint the ranks and a host state agree on, and
/// what a checkpoint's config fingerprint covers.
struct RunIdentity {
  std::uint64_t fingerprint = 0;
  // What a checkpoint's config fingerprint covers: the metrics (with their plugin versions), the
  // data (reader, its plugin version and parameters: set by make_reader) and the backend type.
  std::string metrics_canonical;
  std::string data_canonical;
  std::optional<std::pair<std::string, std::string>> data_plugin;  // name, version
};

/// The evaluator: its config and plugins, and the parts above, each owning its state.
struct Evaluator::Impl : Transport, Accumulation, RunIdentity {
  Config config;
  Registry registry;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  /// The reader of block `shard` of the config's data (ConfigError without a data: section).
  std::shared_ptr<Reader> reader_for(ShardInfo shard);

  /// The metrics of the config (from_yaml); throws on the first that cannot be made.
  void build_metrics(const std::string& source);
  /// The start exchange (sync::exchange_start): throws on every rank what one rank's failure or
  /// a disagreement on the data or on the settings (the config's agreed_settings() and the
  /// caller's `settings`) makes every rank throw.
  void agree_at_start(const Reader* reader,
                      const std::vector<std::pair<std::string, std::string>>& settings = {});
  /// The read loop: this rank's shard, batch by batch, in the rounds `policy` asks for
  /// (`reader` may be null on a rank that has none: it reads nothing, and takes part).
  void read_shards(Reader* reader, const ReadOptions& options, ReadPolicy& policy);
  /// The policy of read_all() with the config's `checkpoint:` section (evaluator_checkpoint.cpp).
  class ReadCheckpointed;
  std::unique_ptr<ReadPolicy> checkpointed_reading(Reader* reader, const ReadOptions& options);
  checkpoint::Expected expectation() const;

  /// After the sync, with a recorder: every rank's records to rank 0 (rank order = dataset
  /// order), where they are merged and the intervals computed; collective. Fills
  /// results.records (rank 0) and results.intervals (every rank).
  void gather_records(Results& results);
};

}  // namespace tally
