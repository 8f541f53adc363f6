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
  for (std::size_t r = 0; r < headers.size(); ++r) {
    const auto& h = headers[r];
    const int rank = static_cast<int>(r);
    if (h.magic != kMagic)
      bad_magic.push_back(rank);
    else if (h.protocol != h0.protocol)
      bad_protocol.push_back(rank);
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

std::uint64_t fingerprint(std::string_view canonical) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : canonical) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace tally::sync
