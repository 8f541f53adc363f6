// The library API: a C++ program builds an Evaluator from YAML text (or a file), feeds batches in
// its own loop, and calls compute() on every rank:
//
//   auto ev = tally::Evaluator::from_yaml(R"(
//     backend: {type: mpi}
//     metrics: [{type: Accuracy, topk: [1, 5]}]
//   )");
//   for (auto& batch : my_shard) ev.add(batch);       // this rank's samples, in dataset order
//   tally::Results r = ev.compute(dataset_size);      // same Results on every rank
//   double top1 = r.metrics.at("Accuracy").at("top1").as_double();
//
// compute() is collective: every rank must call it, whatever happened before. An exception from
// add() is remembered, and the next compute() fails on every rank with that message instead of
// leaving the other ranks waiting.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tally/batch.hpp"
#include "tally/dist_backend.hpp"
#include "tally/export.hpp"
#include "tally/plugin.hpp"
#include "tally/reader.hpp"
#include "tally/settings.hpp"
#include "tally/value.hpp"

namespace tally {

struct RunInfo {
  std::string config;
  std::string backend;
  int world_size = 1;
  std::int64_t samples = 0;
  double wall_seconds = 0;
  /// Metric label -> the metric's type (its component name): a results file says what produced
  /// each key, so `tally compare` can read the metrics' ResultSpecs (directions, plots).
  std::vector<std::pair<std::string, std::string>> types;
  /// Plugin name -> version, for the plugins whose metrics ran.
  std::vector<std::pair<std::string, std::string>> plugins;
};

struct Results {
  /// label -> map of result keys (DESIGN.md, "Results JSON").
  Value metrics = Value::map();
  RunInfo run;
  /// Metric label -> the ResultSpecs its metric declares (directions, plots), for comparisons and
  /// reports. Filled by Evaluator::compute(); not part of the results JSON (run.types names each
  /// label's metric type instead), so a Results read back from a file has none.
  std::vector<std::pair<std::string, std::vector<ResultSpec>>> specs;
  /// The results JSON document: {"results": ..., "run": ...}, pretty-printed.
  std::string to_json() const;
};

struct EvaluatorOptions {
  /// "KEY=VALUE" overrides, as `tally run --set`.
  std::vector<std::string> overrides;
  /// Use this backend instead of creating the config's (the host program owns it).
  std::shared_ptr<DistBackend> backend;
  /// Check everything but create no backend (tally validate): rank 0 of world size 1.
  bool validate_only = false;
  /// The host feeds add() from a sampler that pads every rank's shard to one size by repeating
  /// samples (PyTorch's DistributedSampler, mmengine's DefaultSampler): each rank then holds its
  /// last sample back until the next add() or compute(), so that compute(dataset_size) can drop
  /// the padding (the last sample of each of the last padded_total - dataset_size ranks). Without
  /// it, every sample is added at once, and compute(dataset_size) below the samples added is an
  /// error. tally's own readers (read_all) never pad.
  bool padded_sampler = false;
};

/// How read_all() reads a shard.
struct ReadOptions {
  /// Continue from the last complete checkpoint of the config's `checkpoint:` section (tally run
  /// --resume); with none there, start from the beginning (and say so through on_notice).
  bool resume = false;
  /// Called after each batch read, with its number of samples (a progress bar).
  std::function<void(std::int64_t)> on_batch;
  /// Called on rank 0 with one-line notices about checkpoints ("resuming from ...").
  std::function<void(const std::string&)> on_notice;
};

class TALLY_API Evaluator {
 public:
  /// YAML text; relative data paths resolve against `base_dir`, `source` names it in messages.
  static Evaluator from_yaml(const std::string& yaml_text, EvaluatorOptions options = {},
                             const std::string& source = "<yaml>",
                             const std::filesystem::path& base_dir = {});
  static Evaluator from_file(const std::filesystem::path& config, EvaluatorOptions options = {});
  /// On a rank of several where the config could not even be read (so from_file threw before it
  /// had a backend): an evaluator that only takes part in the collectives, over `backend`, so
  /// that read_all() (or compute()) fails every rank with this rank's error instead of leaving
  /// the others waiting. With a world size above 1, from_yaml() itself records a failure that
  /// comes after its backend is up (a metric that cannot be made) the same way instead of
  /// throwing it.
  static Evaluator failed(std::shared_ptr<DistBackend> backend, int exit_code,
                          const std::string& message);
  /// After from_file(config, options) threw on one rank of several: when the config asks for the
  /// mpi backend (read as leniently as possible: the last `backend.type=` of options.overrides,
  /// else the file's backend.type), an evaluator that only fails, as failed() above, over an mpi
  /// backend made with its defaults from the built-in plugins, so that the other ranks fail with
  /// this rank's error. nullopt when the type is another or unknown, or no mpi backend can be had.
  static std::optional<Evaluator> join_as_failed(const std::filesystem::path& config,
                                                 const EvaluatorOptions& options, int exit_code,
                                                 const std::string& message);

  Evaluator(Evaluator&&) noexcept;
  Evaluator& operator=(Evaluator&&) noexcept;
  ~Evaluator();

  int rank() const;
  int world_size() const;
  const std::string& backend_name() const;
  /// Where the config asks for the results JSON (output.json), if anywhere.
  std::optional<std::filesystem::path> output_json() const;
  /// The config's `output:` section.
  OutputPaths outputs() const;
  /// The config's `regression:` section, if any.
  const std::optional<RegressionSettings>& regression() const;
  /// Whether the config has a `checkpoint:` section (read_all() writes checkpoints).
  bool has_checkpoint() const;

  /// The config's data reader over this rank's shard; checks that it provides every field the
  /// metrics read. ConfigError when the config has no `data:` section.
  std::shared_ptr<Reader> make_reader() const;

  /// Accumulates one batch of this rank's samples into every metric.
  void add(const Batch& batch);
  /// Reads `reader` (from make_reader(), not read from yet) to its end through add(). Collective:
  /// first every rank says whether it set up and what data it reads (Reader::total_samples() and
  /// Reader::layout()); a rank that failed, or that reads other data, fails every rank here with
  /// one message naming it, before any shard is read (InputError or ConfigError for exit code 2,
  /// RuntimeError otherwise). Errors
  /// reading or in a metric are remembered, as add() does, for compute() to report on every rank.
  /// A null `reader` means this rank could not open its shard and has recorded why.
  ///
  /// With a `checkpoint:` section it is collective (every rank calls it): every
  /// `every_n_batches` batches each rank writes its metric states and position, and rank 0 then
  /// writes the metadata that completes the checkpoint (docs/checkpoint.md). With
  /// `options.resume` it first restores the last complete checkpoint and skips the samples
  /// already read. A checkpoint that cannot be resumed (corrupt, written by another number of
  /// ranks, another config or other plugin versions) throws ConfigError or InputError on every
  /// rank alike, before anything is read.
  void read_all(Reader* reader, const ReadOptions& options = {});
  /// Remembers a failure that happened outside add() (reading data, say): compute() will fail on
  /// every rank with it. `exit_code` 2 for input errors, 1 otherwise.
  void record_error(int exit_code, const std::string& message);

  /// Collective. Syncs every metric's state, computes on rank 0, broadcasts; every rank returns
  /// the same Results. With `dataset_size`, drops the samples a distributed sampler padded: with
  /// PyTorch's DistributedSampler (and mmengine's DefaultSampler), each of the last
  /// (padded_total - dataset_size) ranks holds one padded sample as its last.
  Results compute(std::optional<std::int64_t> dataset_size = std::nullopt);
  /// Collective: returns when every rank has called it (no-op without a backend).
  void barrier();
  /// Clears every metric's local state (a new epoch).
  void reset();

 private:
  struct Impl;
  explicit Evaluator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tally
