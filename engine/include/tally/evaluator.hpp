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
//
// A host program on several ranks also has local_rank(), rank_zero_only(f) and typed object
// collectives (all_gather, gather, broadcast) on the evaluator's backend; one with its own MPI
// communicator gives it through tally::mpi_backend(comm) (tally/mpi.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tally/value_msgpack.hpp"

#include "tally/collectives.hpp"
#include "tally/records.hpp"
#include "tally/run_step.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/dist_backend.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/export.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/reader.hpp"
#include "tally/sdk/value.hpp"
#include "tally/settings.hpp"

namespace tally {

struct Records;

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
  /// label -> map of result keys (docs/architecture.md, "Results JSON").
  Value metrics = Value::map();
  RunInfo run;
  /// Metric label -> the ResultSpecs its metric declares (directions, plots), for comparisons and
  /// reports. Filled by Evaluator::compute(); not part of the results JSON (run.types names each
  /// label's metric type instead), so a Results read back from a file has none.
  std::vector<std::pair<std::string, std::vector<ResultSpec>>> specs;
  /// With an `intervals:` section: {label: {key: {"low", "high", "standard_error"}}, ...,
  /// "confidence", "method", "resamples", "seed"} (docs/significance.md); null otherwise.
  Value intervals;
  /// With output.records or intervals, on rank 0: every sample's records (tally/records.hpp;
  /// pack_records() gives the file's bytes). Null on the other ranks and without them.
  std::shared_ptr<const Records> records;
  /// The results JSON document: {"results": ..., "intervals": ..., "run": ...}, pretty-printed.
  std::string to_json() const;
};

struct EvaluatorOptions {
  /// "KEY=VALUE" overrides, as `tally run --set`.
  std::vector<std::string> overrides;
  /// from_yaml's text is a serialized mapping (Python's dict config): messages locate a value by
  /// its key path from `source`, config['metrics'][0]['top_k'], not by a line and column of text
  /// the user never saw.
  bool locate_by_key_path = false;
  /// Use this backend instead of creating the config's (the host program owns it).
  std::shared_ptr<DistBackend> backend;
  /// Check everything but create no backend (tally validate): rank 0 of world size 1.
  bool validate_only = false;
  /// The host feeds add() from a sampler that pads every rank's shard to one size by repeating
  /// samples (PyTorch's DistributedSampler, mmengine's DefaultSampler): each rank then holds its
  /// last sample back until the next add() or compute(), so that compute(dataset_size) can drop
  /// the padding (the last sample of each of the last padded_total - dataset_size ranks). Without
  /// it, every sample is added at once, and compute(dataset_size) below the samples added is an
  /// error. tally's own readers (read_all) never pad. The held sample's CPU memory is copied;
  /// CUDA memory is held as a view, so a host feeding GPU tensors leaves the last one it added
  /// unchanged until the next add() or compute() (a model's output tensor is).
  bool padded_sampler = false;
};

/// A backend of `type` ("auto": the one the launcher's variables ask for, as in a config) made by
/// the registry from `params` (checked against the backend's schema, defaults filled in, as a
/// config's `backend:` section), for EvaluatorOptions::backend: the host program owns it and may
/// give it to several evaluators in turn. `plugin_paths` as a config's plugins.paths
/// (TALLY_PLUGIN_PATH and the built-in plugins are searched after them). A host program with its
/// own MPI communicator uses tally::mpi_backend(comm) (tally/mpi.hpp).
TALLY_API std::shared_ptr<DistBackend> make_backend(
    const std::string& type, const Value::Map& params = {},
    const std::vector<std::filesystem::path>& plugin_paths = {});

namespace detail {
/// The object of `rank` (msgpack bytes) as a T; RuntimeError naming `call` and the rank when the
/// bytes are not one msgpack object convertible to T (the ranks passed different types).
template <class T>
T unpack_object(std::span<const std::byte> bytes, int rank, std::string_view call) {
  std::string why;
  try {
    std::size_t offset = 0;
    const msgpack::object_handle h =
        msgpack::unpack(reinterpret_cast<const char*>(bytes.data()), bytes.size(), offset);
    if (offset == bytes.size()) return h.get().as<T>();
    why = std::to_string(bytes.size() - offset) + " bytes follow the first object";
  } catch (const std::exception& e) {
    why = e.what();
  }
  throw RuntimeError(std::string(call) + ": rank " + std::to_string(rank) + "'s object (" +
                     std::to_string(bytes.size()) +
                     " bytes) cannot be unpacked as the type this rank asked for: " + why +
                     " (every rank must pass an object of the same type)");
}

inline std::span<const std::byte> bytes_of(const msgpack::sbuffer& b) {
  return std::as_bytes(std::span(b.data(), b.size()));
}
}  // namespace detail

/// How read_all() reads a shard.
struct ReadOptions {
  /// Continue from the last complete checkpoint of the config's `checkpoint:` section (tally run
  /// --resume); with none there, start from the beginning (and say so through on_notice).
  bool resume = false;
  /// Called after each batch read, with its number of samples (a progress bar).
  std::function<void(std::int64_t)> on_batch;
  /// Called once this rank's part of the data is known, before its first batch, with the samples
  /// on_batch will count in all: the reader's shard, or, resuming a checkpoint on another number
  /// of ranks, the samples of this rank's plan (the states it folds and the samples it reads).
  std::function<void(std::int64_t)> on_shard;
  /// Called on rank 0 with one-line notices about checkpoints ("resuming from ...").
  std::function<void(const std::string&)> on_notice;
  /// The caller's own settings that every rank must give alike, as (name, value): its output
  /// paths, say, or a flag that changes what the ranks do together ("--output", "--resume").
  /// The start exchange compares them with the config's (every output path, intervals,
  /// regression, checkpoint, the backend's deadlines) before any shard is read: a rank that
  /// differs from rank 0 fails every rank with exit 2 naming it, the setting and both values.
  std::vector<std::pair<std::string, std::string>> settings;
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
  /// With backend.type auto: the backend it chose and the launcher variables it chose it from,
  /// "gloo (RANK=0, WORLD_SIZE=4, MASTER_ADDR=10.0.0.1, MASTER_PORT=29500 (torchrun))"; else empty.
  const std::string& backend_choice() const;
  /// Where the config asks for the results JSON (output.json), if anywhere.
  std::optional<std::filesystem::path> output_json() const;
  /// The config's `output:` section.
  OutputPaths outputs() const;
  /// The config's `regression:` section, if any.
  const std::optional<RegressionSettings>& regression() const;
  /// Whether the config has a `checkpoint:` section (read_all() writes checkpoints).
  bool has_checkpoint() const;
  /// Whether the config has a `data:` section (make_reader() can make a reader).
  bool has_data() const;

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
  /// (padded_total - dataset_size) ranks holds one padded sample as its last. `on_step` is told
  /// each step on rank 0 (the sync, each metric's compute with its time), possibly from another
  /// thread of this call, as it happens.
  Results compute(std::optional<std::int64_t> dataset_size = std::nullopt,
                  const RunStepFn& on_step = {});
  /// Collective, after compute() of a run that kept per-sample records (output.records,
  /// intervals, or regression.baseline_records): rank 0 reads the baseline's records file and
  /// runs the paired tests of every metric (tally::paired_tests, docs/significance.md) against
  /// this run's records; every rank returns the same tests, or throws the same error (InputError
  /// for a missing or foreign records file, records of other samples).
  std::vector<MetricPairedTests> paired_tests(const Results& results,
                                              const std::filesystem::path& baseline_records,
                                              const PairedTestSettings& settings);
  /// Collective: returns when every rank has called it (no-op without a backend).
  void barrier();
  /// Clears every metric's local state (a new epoch).
  void reset();
  /// This rank's accumulated state (every metric's state and the number of samples added), as
  /// bytes for load_state() of an evaluator built from the same metrics (a checkpoint of a host
  /// program's loop: Python's state_dict()). Not collective. Throws the error add() recorded, if
  /// any; ConfigError with a padded sampler while a sample is held back (it may be padding, which
  /// only compute(dataset_size) can tell): save between epochs there.
  std::string save_state() const;
  /// Replaces this rank's state with one save_state() returned. InputError when the bytes are not
  /// such a state, or are one of other metrics (labels, types, parameters, plugin versions).
  void load_state(std::string_view bytes);
  /// Replaces this rank's state with several save_state()s merged, in the order given, as if
  /// their samples had been added one after the other (Metric::merge_saved): how the states of N
  /// ranks resume on M (Python's load_state_dict of every rank's state_dict). All or nothing:
  /// a state that fails leaves this evaluator reset. Errors as load_state's.
  void load_states(std::span<const std::string_view> states);

  // ---- for host programs on several ranks --------------------------------------------------
  /// This rank's place among the ranks on its host, 0 .. (ranks here) - 1 in rank order: what
  /// picks this rank's GPU. Not collective. The backend's where it knows it (mpi: its
  /// communicator split by shared memory, so right on a host program's own communicator too);
  /// else 0 in a world of one; else the launcher's variables (OMPI_COMM_WORLD_LOCAL_RANK,
  /// LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID) of a launcher whose rank and world size are the
  /// backend's. RuntimeError when none says.
  int local_rank() const;
  /// Runs `f` on rank 0 only; returns whether it ran. Not collective (as Lightning's and
  /// mmengine's rank_zero_only): the other ranks return at once without waiting for rank 0 --
  /// call barrier() after it where they must. An exception from `f` leaves rank 0 alone; where
  /// the other ranks go on to a collective, catch it and record_error() it, so that compute()
  /// fails every rank with it instead of leaving them waiting until the backend's timeout.
  template <class F>
  bool rank_zero_only(F&& f) {
    if (rank() != 0) return false;
    std::forward<F>(f)();
    return true;
  }
  /// Collective: every rank's `object`, in rank order, on every rank. T is anything msgpack packs
  /// and converts back (numbers, strings, std::vector, std::map, std::tuple, std::optional, a
  /// struct with MSGPACK_DEFINE), of any size; it travels on the evaluator's backend through the
  /// engine's collectives (tally/collectives.hpp: in rounds of at most the backend's chunk_bytes,
  /// under its timeout). RuntimeError naming the rank whose object does not unpack as T (the
  /// ranks passed different types), on every rank that unpacks it.
  template <class T>
  std::vector<T> all_gather(const T& object) {
    msgpack::sbuffer packed;
    msgpack::pack(packed, object);
    Collectives* c = collectives_if_any();
    if (c == nullptr) return {detail::unpack_object<T>(detail::bytes_of(packed), 0, kAllGather)};
    const GatheredObjects got = c->all_gather_object(detail::bytes_of(packed), {kAllGather});
    std::vector<T> out;
    out.reserve(got.size());
    for (std::size_t r = 0; r < got.size(); ++r)
      out.push_back(detail::unpack_object<T>(got[r], static_cast<int>(r), kAllGather));
    return out;
  }
  /// Collective: every rank's `object`, in rank order, on rank `root`; an empty vector on the
  /// other ranks (their memory and traffic stay their own object's where the backend has a
  /// rooted gather, as mpi has). Errors as all_gather(), on `root`.
  template <class T>
  std::vector<T> gather(const T& object, int root = 0) {
    msgpack::sbuffer packed;
    msgpack::pack(packed, object);
    Collectives* c = collectives_if_any();
    if (c == nullptr) {
      if (root != 0)
        throw ConfigError(std::string(kGather) + ": root rank " + std::to_string(root) +
                          " is outside [0, 1)");
      return {detail::unpack_object<T>(detail::bytes_of(packed), 0, kGather)};
    }
    const GatheredObjects got = c->gather_object(detail::bytes_of(packed), root, {kGather});
    std::vector<T> out;
    out.reserve(got.size());
    for (std::size_t r = 0; r < got.size(); ++r)
      out.push_back(detail::unpack_object<T>(got[r], static_cast<int>(r), kGather));
    return out;
  }
  /// Collective: rank `src`'s `object` on every rank (the other ranks' `object` is not sent).
  /// Errors as all_gather().
  template <class T>
  T broadcast(const T& object, int src = 0) {
    msgpack::sbuffer packed;
    if (rank() == src) msgpack::pack(packed, object);
    Collectives* c = collectives_if_any();
    if (c == nullptr) {
      if (src != 0)
        throw ConfigError(std::string(kBroadcast) + ": source rank " + std::to_string(src) +
                          " is outside [0, 1)");
      return detail::unpack_object<T>(detail::bytes_of(packed), 0, kBroadcast);
    }
    const auto got = c->broadcast_object(detail::bytes_of(packed), src, {kBroadcast});
    return detail::unpack_object<T>(got, src, kBroadcast);
  }
  /// The engine's byte-level collectives over this evaluator's backend (tally/collectives.hpp),
  /// the ones compute() uses; ConfigError for an evaluator without a backend (validate_only).
  Collectives& collectives();

 private:
  static constexpr std::string_view kAllGather = "Evaluator::all_gather";
  static constexpr std::string_view kGather = "Evaluator::gather";
  static constexpr std::string_view kBroadcast = "Evaluator::broadcast";
  /// The collectives over the backend; nullptr without one (validate_only: a world of one).
  Collectives* collectives_if_any();
  struct Impl;
  explicit Evaluator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tally
