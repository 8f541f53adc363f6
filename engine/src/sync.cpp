#include "sync.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tally/version.hpp"

namespace tally::sync {

static_assert(std::endian::native == std::endian::little, "the sync header is little-endian");

std::vector<Header> exchange_headers(DistBackend& backend, const Header& mine) {
  std::vector<Header> all(static_cast<std::size_t>(backend.world_size()));
  backend.all_gather_fixed(std::as_bytes(std::span(&mine, 1)),
                           std::as_writable_bytes(std::span(all)));
  return all;
}

namespace {
std::string rank_list(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}
}  // namespace

std::optional<Verdict> check_headers(const std::vector<Header>& headers) {
  const Header& h0 = headers.front();
  std::vector<int> bad_magic;
  std::vector<int> bad_protocol;
  std::vector<int> bad_fingerprint;
  std::vector<int> bad_reduced;
  // The first rank that did not fail: the reference for the reduced counts.
  const auto ok0 =
      std::find_if(headers.begin(), headers.end(), [](const Header& h) { return h.status == 0; });
  std::vector<int> bad_size;
  // A rank that failed (while setting up, say, with no metrics at all) is reported by the caller:
  // its fingerprint and counts say nothing.
  const bool any_failed =
      ok0 == headers.end() ||
      std::any_of(headers.begin(), headers.end(), [](const Header& h) { return h.status != 0; });
  for (std::size_t r = 0; r < headers.size(); ++r) {
    const auto& h = headers[r];
    const int rank = static_cast<int>(r);
    if (h.magic != kMagic)
      bad_magic.push_back(rank);
    else if (h.protocol != h0.protocol)
      bad_protocol.push_back(rank);
    else if (any_failed)
      continue;
    else if (h.fingerprint != h0.fingerprint)
      bad_fingerprint.push_back(rank);
    else if (h.status == 0 && h.reduced != ok0->reduced)
      bad_reduced.push_back(rank);  // a rank that failed reports its failure instead
    else if (h.dataset_size != h0.dataset_size)
      bad_size.push_back(rank);
  }
  if (!bad_magic.empty())
    return Verdict{
        1,
        fmt::format("sync failed: {} sent a header that is not a tally sync header (is every rank "
                    "running tally?)",
                    rank_list(bad_magic))};
  if (!bad_protocol.empty())
    return Verdict{
        1,
        fmt::format("sync failed: {} use{} sync protocol version {}, rank 0 uses {} (mixed tally "
                    "versions)",
                    rank_list(bad_protocol), bad_protocol.size() == 1 ? "s" : "",
                    headers[static_cast<std::size_t>(bad_protocol[0])].protocol, h0.protocol)};
  if (!bad_fingerprint.empty())
    return Verdict{
        2, fmt::format(
               "sync failed: {} {} a different metrics configuration from rank 0 (fingerprint "
               "{:016x}, rank 0 has {:016x}): every rank must run the same metrics with the "
               "same parameters and plugin versions",
               rank_list(bad_fingerprint), bad_fingerprint.size() == 1 ? "has" : "have",
               headers[static_cast<std::size_t>(bad_fingerprint[0])].fingerprint, h0.fingerprint)};
  if (!bad_reduced.empty())
    return Verdict{
        1,
        fmt::format(
            "sync failed: {} would reduce {} counts to rank 0, rank {} would reduce {}: with the "
            "same metrics configuration, a metric plugin's reduced_size() must not "
            "depend on anything but its parameters",
            rank_list(bad_reduced), headers[static_cast<std::size_t>(bad_reduced[0])].reduced,
            ok0 - headers.begin(), ok0->reduced)};
  if (!bad_size.empty())
    return Verdict{
        2,
        fmt::format("sync failed: {} passed dataset_size {} to compute(), rank 0 passed {}",
                    rank_list(bad_size),
                    headers[static_cast<std::size_t>(bad_size[0])].dataset_size, h0.dataset_size)};
  return std::nullopt;
}

std::optional<Verdict> exchange_start(DistBackend& backend, const StartRecord& mine) {
  const int world = backend.world_size();
  std::vector<StartHeader> all(static_cast<std::size_t>(world));
  backend.all_gather_fixed(std::as_bytes(std::span(&mine.header, 1)),
                           std::as_writable_bytes(std::span(all)));
  std::vector<int> bad_magic;
  std::vector<int> bad_protocol;
  std::vector<int> failed;
  for (int r = 0; r < world; ++r) {
    const auto& h = all[static_cast<std::size_t>(r)];
    if (h.magic != kStartMagic)
      bad_magic.push_back(r);
    else if (h.protocol != all.front().protocol)
      bad_protocol.push_back(r);
    else if (h.status != 0)
      failed.push_back(r);
  }
  if (!bad_magic.empty())
    return Verdict{1, fmt::format("start failed: {} sent a record that is not tally's start "
                                  "record (is every rank running the same tally, at the same "
                                  "step?)",
                                  rank_list(bad_magic))};
  if (!bad_protocol.empty())
    return Verdict{
        1,
        fmt::format("start failed: {} use{} sync protocol version {}, rank 0 uses {} (mixed "
                    "tally versions)",
                    rank_list(bad_protocol), bad_protocol.size() == 1 ? "s" : "",
                    all[static_cast<std::size_t>(bad_protocol[0])].protocol, all.front().protocol)};
  // Only ranks that set up: a failed rank's fingerprint and data say nothing.
  std::vector<int> bad_fingerprint;
  std::vector<int> bad_total;
  std::vector<int> bad_layout;
  if (failed.empty()) {
    const auto& h0 = all.front();
    for (int r = 1; r < world; ++r) {
      const auto& h = all[static_cast<std::size_t>(r)];
      if (h.fingerprint != h0.fingerprint)
        bad_fingerprint.push_back(r);
      else if (h.total_samples != h0.total_samples)
        bad_total.push_back(r);
      else if (h.layout_fingerprint != h0.layout_fingerprint)
        bad_layout.push_back(r);
    }
  }
  if (!bad_fingerprint.empty())
    return Verdict{
        2, fmt::format(
               "start failed: {} {} a different metrics configuration from rank 0 (fingerprint "
               "{:016x}, rank 0 has {:016x}): every rank must run the same metrics with the "
               "same parameters and plugin versions",
               rank_list(bad_fingerprint), bad_fingerprint.size() == 1 ? "has" : "have",
               all[static_cast<std::size_t>(bad_fingerprint[0])].fingerprint,
               all.front().fingerprint)};
  if (!bad_total.empty()) {
    std::vector<std::string> sizes;
    for (const auto& h : all) sizes.push_back(std::to_string(h.total_samples));
    return Verdict{
        2, fmt::format("start failed: {} read{} a dataset of {} samples, rank 0 reads {} (samples "
                       "per rank: {}): every rank must read the same data, each its own shard of "
                       "it; nothing was read",
                       rank_list(bad_total), bad_total.size() == 1 ? "s" : "",
                       all[static_cast<std::size_t>(bad_total[0])].total_samples,
                       all.front().total_samples, fmt::join(sizes, ", "))};
  }
  if (failed.empty() && bad_layout.empty()) return std::nullopt;

  // Every rank saw the same headers, so every rank makes this second call, or none does.
  std::string text(4, '\0');
  const auto n = static_cast<std::uint32_t>(mine.message.size());
  std::memcpy(text.data(), &n, 4);
  text += mine.message;
  text += mine.layout;
  const auto texts = backend.all_gather_object(std::as_bytes(std::span(text)));
  const auto part = [&](int r, bool message) {
    const auto bytes = texts[static_cast<std::size_t>(r)];
    const auto* p = reinterpret_cast<const char*>(bytes.data());
    std::uint32_t len = 0;
    if (bytes.size() >= 4) std::memcpy(&len, p, 4);
    const std::size_t body = bytes.size() >= 4 ? bytes.size() - 4 : 0;
    const std::size_t m = std::min<std::size_t>(len, body);
    return message ? std::string(p + 4, m) : std::string(p + 4 + m, body - m);
  };
  if (!failed.empty()) {
    const int first = failed.front();
    std::string msg = part(first, true);
    if (msg.empty()) msg = "(no message)";
    // Every rank failed alike (the same bad config everywhere): one message, no rank to name.
    const bool alike = static_cast<int>(failed.size()) == world &&
                       std::all_of(failed.begin(), failed.end(), [&](int r) {
                         return all[static_cast<std::size_t>(r)].status ==
                                    all[static_cast<std::size_t>(first)].status &&
                                part(r, true) == part(first, true);
                       });
    if (world > 1 && !alike) {
      msg = fmt::format("rank {}: {}", first, msg);
      if (failed.size() > 1)
        msg += fmt::format(" (ranks {} failed too)",
                           fmt::join(failed.begin() + 1, failed.end(), ", "));
    }
    return Verdict{all[static_cast<std::size_t>(first)].status, msg};
  }
  const int r = bad_layout.front();
  return Verdict{
      2,
      fmt::format("start failed: {} read{} data of another layout than rank 0 (rank {}: {{{}}}, "
                  "rank 0: {{{}}}): every rank must read the same data, each its own shard of it; "
                  "nothing was read",
                  rank_list(bad_layout), bad_layout.size() == 1 ? "s" : "", r, part(r, false),
                  part(0, false))};
}

std::uint64_t fingerprint(std::string_view canonical) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : canonical) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace tally::sync
