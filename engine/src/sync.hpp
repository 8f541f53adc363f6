// The sync protocol (DESIGN.md, "The sync protocol"): the fixed-size header every rank sends
// first, and the checks every rank makes on the gathered headers. Every rank sees the same
// headers, so every rank reaches the same verdict and issues the same next collective.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tally/dist_backend.hpp"

namespace tally::sync {

inline constexpr std::uint32_t kMagic = 0x544C5931;  // "TLY1"

/// Fixed layout, little-endian, 48 bytes.
struct Header {
  std::uint32_t magic = kMagic;
  std::uint32_t protocol = 0;
  std::uint64_t fingerprint = 0;
  std::int64_t samples = 0;        // samples this rank added (held-back sample included)
  std::int64_t dataset_size = -1;  // compute(dataset_size), or -1
  std::int32_t status = 0;         // 0: ok; otherwise the exit code of this rank's failure
  std::uint32_t reserved = 0;
  std::int64_t reduced = 0;  // int64 counts this rank reduces to rank 0 (ReducibleMetrics)
};
static_assert(sizeof(Header) == 48);

/// The headers of every rank, in rank order.
std::vector<Header> exchange_headers(DistBackend& backend, const Header& mine);

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
inline constexpr std::uint32_t kStartMagic = 0x544C5953;  // "TLYS"

/// Fixed layout, little-endian, 48 bytes.
struct StartHeader {
  std::uint32_t magic = kStartMagic;
  std::uint32_t protocol = 0;
  std::uint64_t fingerprint = 0;         // the metrics configuration (as Header::fingerprint)
  std::uint64_t layout_fingerprint = 0;  // of Reader::layout()
  std::int64_t total_samples = -1;       // Reader::total_samples(); -1 without a reader
  std::int32_t status = 0;               // 0: ok; otherwise the exit code of this rank's failure
  std::uint32_t reserved = 0;
  std::uint64_t reserved2 = 0;
};
static_assert(sizeof(StartHeader) == 48);

/// What this rank brings to the start exchange.
struct StartRecord {
  StartHeader header;
  std::string message;  // this rank's failure, when header.status != 0
  std::string layout;   // Reader::layout()
};

/// Exchanges the start records (one fixed-size all-gather; a second one, of the texts, only when
/// a rank failed or the data differ) and returns what every rank must then throw, or nothing.
/// Every rank reaches the same verdict.
std::optional<Verdict> exchange_start(DistBackend& backend, const StartRecord& mine);

/// FNV-1a, 64-bit: a fingerprint of the metrics configuration, not a security hash.
std::uint64_t fingerprint(std::string_view canonical);

}  // namespace tally::sync
