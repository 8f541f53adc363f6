// The sync protocol (docs/architecture.md, "The sync protocol"): the fixed-size header every rank
// sends first, and the checks every rank makes on the gathered headers. Every rank sees the same
// headers, so every rank reaches the same verdict and issues the same next collective.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "error_codes.hpp"
#include "tally/collectives.hpp"
#include "tally/run_step.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/value.hpp"

namespace tally::sync {

inline constexpr std::uint32_t kMagic = 0x544C5931;  // "TLY1"

/// Header::flags: this rank holds its last sample back (EvaluatorOptions::padded_sampler).
inline constexpr std::uint32_t kHoldsLast = 1;

/// Fixed layout, little-endian, 48 bytes.
struct Header {
  std::uint32_t magic = kMagic;
  std::uint32_t protocol = 0;
  std::uint64_t fingerprint = 0;
  std::int64_t samples = 0;        // samples this rank added (held-back sample included)
  std::int64_t dataset_size = -1;  // compute(dataset_size), or -1
  std::int32_t status = 0;         // 0: ok; otherwise the exit code of this rank's failure
  std::uint32_t flags = 0;         // kHoldsLast: a padded sampler's last sample is held back
  std::int64_t reduced = 0;  // int64 counts this rank sums to rank 0 (the metrics' sum fields)
};
static_assert(sizeof(Header) == 48);

/// The headers of every rank, in rank order.
std::vector<Header> exchange_headers(Collectives& backend, const Header& mine);

/// What the headers say: a failure every rank must report, or nothing.
struct Verdict {
  int exit_code = 0;
  std::string message;
};
/// Checks protocol versions, fingerprints, reduced counts and dataset sizes. A rank that failed
/// (status != 0) is reported by the caller after gathering messages.
std::optional<Verdict> check_headers(const std::vector<Header>& headers);

/// The start exchange: every rank's record before any shard is read, so that a rank that failed
/// while setting up (a config, plugin or file error on that rank alone) or that would read other
/// data fails every rank at once, instead of leaving them to wait or reading overlapping shards.
/// "TLYT" since the record carries the settings' fingerprint ("TLYS" before): a rank of an older
/// tally is named as not sending tally's start record.
inline constexpr std::uint32_t kStartMagic = 0x544C5954;  // "TLYT"

/// Fixed layout, little-endian, 48 bytes.
struct StartHeader {
  std::uint32_t magic = kStartMagic;
  std::uint32_t protocol = 0;
  std::uint64_t fingerprint = 0;         // the metrics configuration (as Header::fingerprint)
  std::uint64_t layout_fingerprint = 0;  // of Reader::layout()
  std::int64_t total_samples = -1;       // Reader::total_samples(); -1 without a reader
  std::int32_t status = 0;               // 0: ok; otherwise the exit code of this rank's failure
  std::uint32_t reserved = 0;
  std::uint64_t settings_fingerprint = 0;  // of StartRecord::settings (exchange_start sets it)
};
static_assert(sizeof(StartHeader) == 48);

/// What this rank brings to the start exchange.
struct StartRecord {
  StartHeader header;
  std::string message;  // this rank's failure, when header.status != 0
  std::string layout;   // Reader::layout()
  /// The settings every rank must give alike (Config::agreed_settings, and the caller's own:
  /// ReadOptions::settings), as (name, value); one that is not set is left out.
  std::vector<std::pair<std::string, std::string>> settings;
};

/// Exchanges the start records (one fixed-size all-gather; a second one, of the texts, only when
/// a rank failed or the data or the settings differ) and returns what every rank must then
/// throw, or nothing. Every rank reaches the same verdict. Settings that differ are exit 2
/// naming the first rank that differs from rank 0, the first setting and both values.
std::optional<Verdict> exchange_start(Collectives& backend, const StartRecord& mine);

// ---- the sync: every rank's metric states to rank 0, the results back -----------------------

/// One metric of a sync.
struct MetricEntry {
  std::string label;
  Metric* metric = nullptr;
};

/// How each metric's state reaches rank 0 at one sync (the same on every rank).
struct Plan {
  /// A world of one: rank 0 computes from every metric's local state in place (compute_local).
  bool local = false;
  std::vector<std::size_t> offsets;  // per metric: its first count in the one vector of counts
  std::vector<std::size_t> sizes;    // per metric: how many counts it sums (Metric::summed_size)
  std::vector<bool> gathers;         // per metric: whether it sends a gathered part
  std::size_t counts = 0;            // in all
};
/// The plan of `metrics` for a world of `world` ranks.
Plan plan(const std::vector<MetricEntry>& metrics, int world);

/// What this rank brings to the sync.
struct Request {
  std::vector<MetricEntry> metrics;
  std::uint64_t fingerprint = 0;             // of the metrics configuration
  std::int64_t samples = 0;                  // added on this rank (a held-back sample included)
  std::optional<std::int64_t> dataset_size;  // compute(dataset_size): drop a sampler's padding
  bool padded_sampler = false;   // the last sample is held back (EvaluatorOptions::padded_sampler)
  std::optional<Failure> error;  // this rank's failure
  /// Runs before the states are packed, told whether this rank's last sample is a sampler's
  /// padding to drop (it applies the held-back sample otherwise). May throw: the failure is
  /// reported on every rank.
  std::function<void(bool drop_last)> finish;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  /// Rank 0's steps (Evaluator::compute's on_step): the sync, each metric's compute. Unset
  /// elsewhere.
  RunStepFn on_step;
};

/// What every rank gets back.
struct Outcome {
  Value results;              // label -> the metric's results
  std::int64_t samples = 0;   // in the dataset (padding dropped)
  double wall_seconds = 0.0;  // from Request::start to rank 0's compute
};

/// The sync (docs/architecture.md, "The sync protocol"): collective, on every rank of `backend`.
/// The headers are exchanged and checked; the counts of every metric are summed to rank 0
/// (DistBackend::reduce), the rest of every state gathered to rank 0 in one payload; rank 0
/// computes (run_on_root) and broadcasts the results or its error. Every rank returns the same
/// Outcome or throws the same error (InputError for exit code 2, RuntimeError otherwise): one
/// rank's failure, at any step, is every rank's.
Outcome run(Collectives& backend, Request request);

/// FNV-1a, 64-bit: a fingerprint of the metrics configuration, not a security hash.
std::uint64_t fingerprint(std::string_view canonical);

}  // namespace tally::sync
