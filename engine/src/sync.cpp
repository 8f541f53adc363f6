#include "sync.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "error_codes.hpp"
#include "msgpack_bounds.hpp"
#include "msgpack_spans.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/version.hpp"

namespace tally::sync {

static_assert(std::endian::native == std::endian::little, "the sync header is little-endian");

std::vector<Header> exchange_headers(Collectives& backend, const Header& mine) {
  std::vector<Header> all(static_cast<std::size_t>(backend.world_size()));
  backend.all_gather_fixed(std::as_bytes(std::span(&mine, 1)),
                           std::as_writable_bytes(std::span(all)), {"sync header"});
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

namespace {

// The texts of the start exchange's second call: length-prefixed parts (u32 length, bytes).
void put_part(std::string& out, std::string_view part) {
  const auto n = static_cast<std::uint32_t>(part.size());
  char len[4];
  std::memcpy(len, &n, 4);
  out.append(len, 4);
  out.append(part);
}

// The parts of another rank's text; a length past the end is cut at the end (never read past).
std::vector<std::string> parts_of(std::span<const std::byte> bytes) {
  std::vector<std::string> parts;
  const auto* p = reinterpret_cast<const char*>(bytes.data());
  std::size_t at = 0;
  while (bytes.size() - at >= 4) {
    std::uint32_t len = 0;
    std::memcpy(&len, p + at, 4);
    at += 4;
    const std::size_t n = std::min<std::size_t>(len, bytes.size() - at);
    parts.emplace_back(p + at, n);
    at += n;
  }
  return parts;
}

std::string settings_text(const std::vector<std::pair<std::string, std::string>>& settings) {
  std::string text;
  for (const auto& [name, value] : settings) {
    put_part(text, name);
    put_part(text, value);
  }
  return text;
}

// A setting's value for a message: quoted, cut to 160 bytes; "not set" when absent.
std::string shown_setting(const std::optional<std::string>& value) {
  if (!value) return "not set";
  if (value->size() <= 160) return fmt::format("'{}'", *value);
  std::size_t cut = 160;
  while (cut > 0 && (static_cast<unsigned char>((*value)[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("'{}...'", value->substr(0, cut));
}

// The verdict on settings that differ: rank `r` (the first that differs) against rank 0, from
// their parts (message, layout, then name, value pairs); `others` are the ranks that differ.
Verdict settings_verdict(int r, const std::vector<std::string>& mine,
                         const std::vector<std::string>& ref, const std::vector<int>& others) {
  const auto value_of = [](const std::vector<std::string>& parts, const std::string& name) {
    for (std::size_t i = 2; i + 1 < parts.size(); i += 2)
      if (parts[i] == name) return std::optional<std::string>(parts[i + 1]);
    return std::optional<std::string>();
  };
  std::string name;
  std::optional<std::string> a, b;
  for (const auto* parts : {&ref, &mine}) {
    for (std::size_t i = 2; i + 1 < parts->size() && name.empty(); i += 2) {
      a = value_of(mine, (*parts)[i]);
      b = value_of(ref, (*parts)[i]);
      if (a != b) name = (*parts)[i];
    }
  }
  const std::string also =
      others.size() > 1 ? fmt::format(" (ranks {} differ from rank 0)", fmt::join(others, ", "))
                        : std::string();
  if (name.empty())  // the same settings in another order: not written by this tally
    return Verdict{2, fmt::format("start failed: rank {}'s settings differ from rank 0's{}: every "
                                  "rank must run with the same settings; nothing was read",
                                  r, also)};
  return Verdict{
      2, fmt::format("start failed: rank {}'s {} is {}, rank 0's is {}{}: every rank must give "
                     "the same outputs and the settings that decide what the ranks do together; "
                     "nothing was read or written",
                     r, name, shown_setting(a), shown_setting(b), also)};
}

// Every later collective is split into transport calls by the chunk size (backend.chunk_bytes),
// the rest of this exchange too, so the ranks agree on it first, in calls of one byte a rank:
// within any rank's chunk, none being below the world size. Ranks that differ all go on with the
// smallest, so that the calls that report the failure match, and fail (exit 2).
std::optional<Verdict> agree_on_chunk(Collectives& backend) {
  const auto world = static_cast<std::size_t>(backend.world_size());
  if (world == 1) return std::nullopt;
  const std::uint64_t mine = backend.chunk_bytes();
  std::vector<std::uint64_t> all(world);
  backend.set_chunk_bytes(world);
  try {
    backend.all_gather_fixed(std::as_bytes(std::span(&mine, 1)),
                             std::as_writable_bytes(std::span(all)), {"chunk sizes"});
  } catch (...) {
    backend.set_chunk_bytes(mine);
    throw;
  }
  backend.set_chunk_bytes(*std::min_element(all.begin(), all.end()));
  const auto other = std::find_if(all.begin(), all.end(), [&](auto c) { return c != all[0]; });
  if (other == all.end()) return std::nullopt;
  return Verdict{2,
                 fmt::format("start failed: rank {}'s backend.chunk_bytes is {}, rank 0's is {}: "
                             "every rank must split its collectives alike; nothing was read or "
                             "written",
                             other - all.begin(), *other, all[0])};
}

}  // namespace

std::optional<Verdict> exchange_start(Collectives& backend, const StartRecord& mine) {
  const int world = backend.world_size();
  if (auto chunk = agree_on_chunk(backend)) return chunk;
  const std::string settings = settings_text(mine.settings);
  StartHeader header = mine.header;
  header.settings_fingerprint = fingerprint(settings);
  std::vector<StartHeader> all(static_cast<std::size_t>(world));
  backend.all_gather_fixed(std::as_bytes(std::span(&header, 1)),
                           std::as_writable_bytes(std::span(all)), {"start record"});
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
  // Only ranks that set up: a failed rank's fingerprint, settings and data say nothing.
  std::vector<int> bad_fingerprint;
  std::vector<int> bad_settings;
  std::vector<int> bad_total;
  std::vector<int> bad_layout;
  if (failed.empty()) {
    const auto& h0 = all.front();
    for (int r = 1; r < world; ++r) {
      const auto& h = all[static_cast<std::size_t>(r)];
      if (h.fingerprint != h0.fingerprint)
        bad_fingerprint.push_back(r);
      else if (h.settings_fingerprint != h0.settings_fingerprint)
        bad_settings.push_back(r);
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
  if (failed.empty() && bad_layout.empty() && bad_settings.empty()) return std::nullopt;

  // Every rank saw the same headers, so every rank makes this second call, or none does.
  std::string text;
  put_part(text, mine.message);
  put_part(text, mine.layout);
  text += settings;
  const auto texts = backend.all_gather_object(std::as_bytes(std::span(text)), {"start messages"});
  const auto part = [&](int r, bool message) {
    auto parts = parts_of(texts[static_cast<std::size_t>(r)]);
    parts.resize(std::max<std::size_t>(parts.size(), 2));
    return parts[message ? 0 : 1];
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
  if (!bad_settings.empty()) {
    const int r = bad_settings.front();
    return settings_verdict(r, parts_of(texts[static_cast<std::size_t>(r)]), parts_of(texts[0]),
                            bad_settings);
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

// ---- the sync ---------------------------------------------------------------------------------

namespace {

/// The local counts of every metric into `counts`, checked so that their sum over `world` ranks
/// is exact: each count >= 0, all of a rank's counts together < 2^62 / world (then every sum of
/// sums stays under 2^62, as the metrics' own checks require). A corrupt restored state fails
/// here, on its rank, instead of wrapping in the reduction.
void write_counts(const std::vector<MetricEntry>& metrics, const Plan& plan,
                  std::span<std::int64_t> counts, int world) {
  const std::int64_t limit = (std::int64_t{1} << 62) / world;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    if (plan.sizes[i] == 0) continue;
    const auto mine = counts.subspan(plan.offsets[i], plan.sizes[i]);
    const auto where = fmt::format("metric '{}'", metrics[i].label);
    try {
      metrics[i].metric->write_sums(mine);
    } catch (const std::exception& e) {
      throw RuntimeError(fmt::format("{}: {}", where, e.what()));
    }
    for (const std::int64_t c : mine) {
      if (c < 0)
        throw RuntimeError(fmt::format(
            "{}: a count of its state is negative ({}): the state is corrupt", where, c));
      if (__builtin_add_overflow(total, c, &total) || total >= limit)
        throw RuntimeError(fmt::format(
            "{}: this rank's counts add up to 2^62 / {} ranks or more: their sum over the ranks "
            "would not be exact",
            where, world));
    }
  }
}

/// This rank's payload: [0, [gathered part or nil, ...]], one entry a metric.
void pack_payload(msgpack::sbuffer& payload, const std::vector<MetricEntry>& metrics,
                  const Plan& plan) {
  msgpack::packer<msgpack::sbuffer> packer(payload);
  packer.pack_array(2);
  packer.pack(0);
  packer.pack_array(static_cast<std::uint32_t>(metrics.size()));
  SbufferSink sink(payload);
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    if (plan.local || !plan.gathers[i])
      packer.pack_nil();
    else
      metrics[i].metric->pack_gathered(sink);
  }
}

/// Rank 0: the results of every metric from every rank's payload and the summed counts.
Value compute_results(const std::vector<MetricEntry>& metrics, const Plan& plan,
                      const GatheredObjects& gathered, std::span<const std::int64_t> counts,
                      const RunStepFn& on_step) {
  const auto world = gathered.size();
  std::vector<msgpack::object_handle> handles(world);
  for (std::size_t r = 0; r < world; ++r) {
    const auto bytes = gathered[r];
    try {
      // Bins are referenced in place: large numeric state is read straight from the buffer.
      handles[r] = unpack_bounded(bytes, /*reference_bins=*/true);
    } catch (const std::exception& e) {
      throw RuntimeError(
          fmt::format("sync failed: the payload of rank {} ({} bytes) is not valid msgpack: {}", r,
                      bytes.size(), e.what()));
    }
    const auto& obj = handles[r].get();
    if (obj.type != msgpack::type::ARRAY || obj.via.array.size != 2 ||
        obj.via.array.ptr[0].type != msgpack::type::POSITIVE_INTEGER)
      throw RuntimeError(
          fmt::format("sync failed: the payload of rank {} is not a tally state payload", r));
    const auto status = obj.via.array.ptr[0].via.u64;
    const auto& body = obj.via.array.ptr[1];
    if (status != 0) {
      const std::string msg =
          body.type == msgpack::type::STR ? body.as<std::string>() : "(no message)";
      throw_error(static_cast<int>(status), world > 1 ? fmt::format("rank {}: {}", r, msg) : msg,
                  {.rank = static_cast<int>(r)});
    }
    if (body.type != msgpack::type::ARRAY || body.via.array.size != metrics.size())
      throw RuntimeError(fmt::format("sync failed: rank {} sent {} metric states, expected {}", r,
                                     body.type == msgpack::type::ARRAY ? body.via.array.size : 0,
                                     metrics.size()));
  }
  // Each metric's part of each payload, as the bytes it packed (checked whole above).
  std::vector<std::vector<ByteSpan>> parts(world);
  if (!plan.local)
    for (std::size_t r = 0; r < world; ++r) parts[r] = msgpack_payload_items(gathered[r]);
  Value results = Value::map();
  std::vector<Bytes> states;
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    const std::string prefix = fmt::format("metric '{}'", metrics[i].label);
    RunStep step{.kind = RunStep::Kind::computing,
                 .name = metrics[i].label,
                 .index = i,
                 .count = metrics.size(),
                 .world_size = static_cast<int>(world)};
    if (on_step) on_step(step);
    const auto began = std::chrono::steady_clock::now();
    try {
      Metric& metric = *metrics[i].metric;
      if (plan.local) {
        results.set(metrics[i].label, metric.compute_local());
      } else {
        states.clear();
        if (plan.gathers[i])
          for (std::size_t r = 0; r < world; ++r) states.push_back(parts[r][i]);
        results.set(metrics[i].label,
                    metric.compute_synced(states, counts.subspan(plan.offsets[i], plan.sizes[i])));
      }
    } catch (const StateFormatError&) {
      throw RuntimeError(fmt::format("{}: a rank sent a state this metric cannot read", prefix),
                         ErrorContext{.owner = prefix, .metric = metrics[i].label});
    } catch (const Error& e) {
      rethrow_with(e, {.metric = metrics[i].label},
                   e.context().owner.empty() ? fmt::format("{}: {}", prefix, e.what()) : e.what());
    }
    step.kind = RunStep::Kind::computed;
    step.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    if (on_step) on_step(step);
  }
  return results;
}

}  // namespace

Plan plan(const std::vector<MetricEntry>& metrics, int world) {
  Plan p;
  p.local = world == 1;
  for (const auto& m : metrics) {
    const std::size_t size = p.local ? 0 : m.metric->summed_size();
    p.offsets.push_back(p.counts);
    p.sizes.push_back(size);
    p.gathers.push_back(!p.local && m.metric->gathers());
    p.counts += size;
  }
  return p;
}

namespace {

// The phases of run(), in order; every rank runs each of them, making the same collectives.

/// How each state travels: plan(), or, on a rank that failed (already, or planning), a plan that
/// sums and gathers nothing (this rank reports its failure in its header's status instead).
Plan route_of(Request& request, int world) {
  const auto& metrics = request.metrics;
  try {
    Plan route = plan(metrics, world);
    if (!request.error) return route;
  } catch (const std::exception& e) {
    if (!request.error) request.error = Failure::of(e);
  }
  Plan route;
  route.local = world == 1;
  route.offsets.assign(metrics.size(), 0);
  route.sizes.assign(metrics.size(), 0);
  route.gathers.assign(metrics.size(), false);
  return route;
}

/// Every rank's header, checked: the number of summed counts is in it, so that every rank knows
/// that every rank sums as many before any rank does.
std::vector<Header> agreed_headers(Collectives& backend, const Request& request,
                                   const Plan& route) {
  Header mine;
  mine.reduced = static_cast<std::int64_t>(route.counts);
  mine.protocol = kProtocolVersion;
  mine.fingerprint = request.fingerprint;
  mine.samples = request.samples;
  mine.dataset_size = request.dataset_size.value_or(-1);
  mine.status = request.error ? request.error->exit_code : 0;
  mine.flags = request.padded_sampler ? kHoldsLast : 0;
  auto headers = exchange_headers(backend, mine);
  if (auto verdict = check_headers(headers)) throw_error(verdict->exit_code, verdict->message);
  return headers;
}

/// When a rank failed: gathers every rank's message (an empty one from ranks that did not fail)
/// and throws the first failed rank's on every rank. Returns when none failed.
void throw_any_failure(Collectives& backend, const std::vector<Header>& headers,
                       const Request& request) {
  if (std::none_of(headers.begin(), headers.end(), [](const auto& h) { return h.status != 0; }))
    return;
  const int world = backend.world_size();
  const std::string msg = request.error ? request.error->message : std::string();
  const auto msgs = backend.all_gather_object(std::as_bytes(std::span(msg)), {"sync errors"});
  std::vector<int> failed;
  for (int r = 0; r < world; ++r)
    if (headers[static_cast<std::size_t>(r)].status != 0) failed.push_back(r);
  const auto first = static_cast<std::size_t>(failed.front());
  const auto bytes = msgs[first];
  std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (world > 1) {
    text = fmt::format("rank {}: {}", failed.front(), text);
    if (failed.size() > 1)
      text +=
          fmt::format(" (ranks {} failed too)", fmt::join(failed.begin() + 1, failed.end(), ", "));
  }
  // The failed rank knows where its failure happened; the others learn its text and rank.
  ErrorContext context;
  if (failed.front() == backend.rank() && request.error) context = request.error->context;
  context.rank = failed.front();
  throw_error(headers[first].status, text, std::move(context));
}

/// The samples of the dataset, and whether this rank drops its last sample as a sampler's padding.
struct Padding {
  std::int64_t total = 0;
  bool drop_last = false;
};

/// Padding from a distributed sampler: the last sample of each of the last `excess` ranks.
Padding padding_of(const std::vector<Header>& headers, std::optional<std::int64_t> dataset_size,
                   int world, int me) {
  Padding p;
  for (const auto& h : headers) p.total += h.samples;
  if (!dataset_size) return p;
  const std::int64_t size = *dataset_size;
  const std::int64_t excess = p.total - size;
  const bool even = std::all_of(headers.begin(), headers.end(),
                                [&](const auto& h) { return h.samples == headers[0].samples; });
  if (size < 0 || excess < 0 || excess >= world || (excess > 0 && !even)) {
    std::vector<std::int64_t> counts;
    for (const auto& h : headers) counts.push_back(h.samples);
    throw InputError(
        fmt::format("compute(dataset_size={}): the ranks added {} samples "
                    "({} per rank); a distributed sampler pads the dataset to "
                    "equal shards with fewer than world_size ({}) extra samples, "
                    "so these counts cannot come from a dataset of that size",
                    size, p.total, fmt::join(counts, ", "), world));
  }
  if (excess > 0 && !std::all_of(headers.begin(), headers.end(),
                                 [](const auto& h) { return (h.flags & kHoldsLast) != 0; }))
    throw InputError(fmt::format(
        "compute(dataset_size={}): the ranks added {} samples, {} more than the dataset; a "
        "sampler's padding is dropped only where the evaluator was told the sampler pads "
        "(EvaluatorOptions::padded_sampler = true on every rank), so that each rank holds its "
        "last sample back",
        size, p.total, excess));
  p.drop_last = me >= world - excess;
  p.total = size;
  return p;
}

/// This rank's fused payload and its summed counts (see run()).
struct Packed {
  msgpack::sbuffer payload;
  std::vector<std::int64_t> counts;
};

// Each rank packs the gathered part of every metric's state into one fused payload:
// [0, [state...]], or [exit code, message] when this rank failed while finishing (its held
// sample was bad, say): it still takes part in the reduction and the gather, and rank 0
// reports the failure to every rank. In a world of one the states stay where they are.
Packed pack_states(Request& request, const Plan& route, bool drop_last, int world) {
  Packed p;
  p.counts.assign(route.counts, 0);
  try {
    if (request.finish) request.finish(drop_last);
    pack_payload(p.payload, request.metrics, route);
    write_counts(request.metrics, route, p.counts, world);
  } catch (const std::exception& e) {
    const auto* te = dynamic_cast<const Error*>(&e);
    p.payload.clear();
    msgpack::pack(p.payload, std::make_tuple(te ? te->exit_code() : 1, std::string(e.what())));
    std::fill(p.counts.begin(), p.counts.end(), 0);
  }
  return p;
}

// Rank 0 computes; every rank gets what it computed, or its error. The others wait for it as
// long as it is alive and computing, whatever backend.timeout says (run_on_root).
Outcome compute_and_share(Collectives& backend, const Request& request, const Plan& route,
                          const GatheredObjects& gathered, std::span<const std::int64_t> counts,
                          std::int64_t total) {
  msgpack::sbuffer reply;
  const auto compute_and_pack = [&] {
    Value out = Value::map();
    out.set("status", 0);
    try {
      out.set("results",
              compute_results(request.metrics, route, gathered, counts, request.on_step));
    } catch (const Error& e) {
      out.set("status", e.exit_code());
      out.set("message", e.what());
    } catch (const std::exception& e) {
      out.set("status", 1);
      out.set("message", fmt::format("rank 0 failed while computing: {}", e.what()));
    }
    out.set("samples", total);
    out.set(
        "wall_seconds",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - request.start).count());
    msgpack::pack(reply, out);
  };
  backend.run_on_root(0, compute_and_pack, {"rank 0 computing the results"});
  const auto answer = backend.broadcast_object(std::as_bytes(std::span(reply.data(), reply.size())),
                                               0, {"results"});
  Value out;
  try {
    unpack_bounded(answer, /*reference_bins=*/false).get().convert(out);
  } catch (const std::exception& e) {
    throw RuntimeError(
        fmt::format("sync failed: rank {} could not read the results rank 0 broadcast: {}",
                    backend.rank(), e.what()));
  }
  if (const auto code = out.at("status").as_int(); code != 0)
    throw_error(static_cast<int>(code), out.at("message").as_string());
  return Outcome{out.at("results"), out.at("samples").as_int(), out.at("wall_seconds").as_double()};
}

}  // namespace

Outcome run(Collectives& backend, Request request) {
  const int world = backend.world_size();
  if (request.on_step) {
    RunStep step;  // Kind::syncing
    step.count = request.metrics.size();
    step.world_size = world;
    request.on_step(step);
  }
  const Plan route = route_of(request, world);
  const auto headers = agreed_headers(backend, request, route);
  throw_any_failure(backend, headers, request);
  const Padding padding = padding_of(headers, request.dataset_size, world, backend.rank());
  Packed packed = pack_states(request, route, padding.drop_last, world);
  // The counts, summed at rank 0: one state's worth there, whatever the world size. Every rank
  // holds the same number (the headers agreed), so every rank makes the same calls.
  if (!packed.counts.empty()) backend.reduce(packed.counts, ReduceOp::sum, 0, {"sync counts"});
  // The other states, to rank 0 only: the other ranks never hold everyone's state.
  const auto gathered = backend.gather_object(
      std::as_bytes(std::span(packed.payload.data(), packed.payload.size())), 0, {"sync payload"});
  return compute_and_share(backend, request, route, gathered, packed.counts, padding.total);
}

}  // namespace tally::sync
