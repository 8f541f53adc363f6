#include "checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <msgpack.hpp>
#include <nlohmann/json.hpp>

#include "msgpack_bounds.hpp"
#include "tally/file_io.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/version.hpp"

namespace tally::checkpoint {

namespace fs = std::filesystem;

std::string step_name(std::int64_t step) { return fmt::format("step-{:010}", step); }

std::string shard_name(int rank) { return fmt::format("shard-{:05}.bin", rank); }

std::uint32_t crc32_of(std::string_view bytes) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const auto* p = reinterpret_cast<const Bytef*>(bytes.data());
  std::size_t left = bytes.size();
  while (left > 0) {  // zlib takes lengths as uInt: feed it at most 1 GiB at a time
    const auto n = static_cast<uInt>(std::min<std::size_t>(left, std::size_t{1} << 30));
    crc = ::crc32(crc, p, n);
    p += n;
    left -= n;
  }
  return static_cast<std::uint32_t>(crc);
}

namespace {

fs::path folder_of(const fs::path& p) {
  return p.parent_path().empty() ? fs::path(".") : p.parent_path();
}

[[noreturn]] void corrupt(const fs::path& file, const std::string& what) {
  throw InputError(fmt::format("checkpoint file {} is corrupt: {}", file.string(), what));
}

}  // namespace

void make_dir(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0) {
    const int err = errno;
    std::error_code ec;
    if (err != EEXIST || !fs::is_directory(dir, ec))
      throw RuntimeError(
          fmt::format("cannot create the folder '{}': {}", dir.string(), std::strerror(err)));
    return;
  }
  fsync_dir(folder_of(dir.lexically_normal()));
}

std::string read_bytes(const fs::path& path, std::string_view what, std::uint64_t max_bytes) {
  return read_whole_file(path, what, max_bytes);
}

// ---- shard
// ---------------------------------------------------------------------------------------

std::string Shard::serialize() const {
  msgpack::sbuffer out;
  msgpack::packer<msgpack::sbuffer> p(out);
  const auto bin = [&](const std::string& bytes) {
    p.pack_bin(static_cast<std::uint32_t>(bytes.size()));
    p.pack_bin_body(bytes.data(), static_cast<std::uint32_t>(bytes.size()));
  };
  p.pack_array(10);
  p.pack(std::string_view(kShardMagic));
  p.pack(kFormatVersion);
  p.pack(rank);
  p.pack(step);
  p.pack(samples);
  p.pack(batches);
  bin(payload);
  p.pack(covers.begin);
  p.pack(covers.end);
  p.pack_array(static_cast<std::uint32_t>(states.size()));
  for (const auto& st : states) {
    p.pack_array(3);
    p.pack(st.span.begin);
    p.pack(st.span.end);
    bin(st.payload);
  }
  return std::string(out.data(), out.size());
}

namespace {

std::int64_t count_of(const msgpack::object& x, const fs::path& file, const char* what) {
  if (x.type != msgpack::type::POSITIVE_INTEGER || x.via.u64 > INT64_MAX)
    corrupt(file, fmt::format("{} is not a count", what));
  return static_cast<std::int64_t>(x.via.u64);
}

std::string bin_of(const msgpack::object& x, const fs::path& file, const char* what) {
  if (x.type != msgpack::type::BIN) corrupt(file, fmt::format("{} is not a msgpack bin", what));
  return std::string(x.via.bin.ptr, x.via.bin.size);
}

Span span_of(const msgpack::object& b, const msgpack::object& e, const fs::path& file,
             const char* what) {
  const Span s{count_of(b, file, what), count_of(e, file, what)};
  if (s.end < s.begin) corrupt(file, fmt::format("{} ends before it begins", what));
  return s;
}

// Format 2's entries after the payload: what the state covers and the saved states to come.
void parse_v2_tail(Shard& s, const msgpack::object* a, const fs::path& file) {
  s.covers = span_of(a[7], a[8], file, "the samples its state covers");
  if (a[9].type != msgpack::type::ARRAY) corrupt(file, "the pending states are not an array");
  for (std::uint32_t i = 0; i < a[9].via.array.size; ++i) {
    const auto& x = a[9].via.array.ptr[i];
    if (x.type != msgpack::type::ARRAY || x.via.array.size != 3)
      corrupt(file, "a pending state is not [begin, end, states]");
    const auto* y = x.via.array.ptr;
    s.states.push_back({span_of(y[0], y[1], file, "a pending state's samples"),
                        bin_of(y[2], file, "a pending state")});
  }
}

}  // namespace

Shard Shard::parse(std::string_view bytes, const fs::path& file) {
  msgpack::object_handle h;
  try {
    h = unpack_bounded(std::as_bytes(std::span(bytes.data(), bytes.size())),
                       /*reference_bins=*/false);
  } catch (const std::exception& e) {
    corrupt(file, fmt::format("not a msgpack shard ({})", e.what()));
  }
  const auto& o = h.get();
  if (o.type != msgpack::type::ARRAY || (o.via.array.size != 7 && o.via.array.size != 10))
    corrupt(file, "expected a shard (a msgpack array of 7 or 10 entries)");
  const auto* a = o.via.array.ptr;
  const auto str_is = [](const msgpack::object& x, std::string_view s) {
    return x.type == msgpack::type::STR && std::string_view(x.via.str.ptr, x.via.str.size) == s;
  };
  if (!str_is(a[0], kShardMagic)) corrupt(file, fmt::format("expected the tag '{}'", kShardMagic));
  const auto f = count_of(a[1], file, "the format version");
  if (f != 1 && f != kFormatVersion)
    throw InputError(fmt::format(
        "checkpoint file {}: format version expected 1 or {}, found {} (written by another tally)",
        file.string(), kFormatVersion, f));
  if ((f == 1) != (o.via.array.size == 7))
    corrupt(file, fmt::format("a format {} shard of {} entries", f, o.via.array.size));
  Shard s;
  const auto rank = count_of(a[2], file, "the rank");
  if (rank > INT32_MAX) corrupt(file, "the rank is out of range");
  s.rank = static_cast<int>(rank);
  s.step = count_of(a[3], file, "the step");
  s.samples = count_of(a[4], file, "the sample count");
  s.batches = count_of(a[5], file, "the batch count");
  s.payload = bin_of(a[6], file, "the metric states");
  if (f == kFormatVersion) parse_v2_tail(s, a, file);
  return s;
}

namespace {

// A pair [a, b] of counts, a <= b: a Span in the metadata.
Span json_span(const nlohmann::ordered_json& v, const std::string& what, const fs::path& file) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer() ||
      v[0].get<std::int64_t>() < 0 || v[1].get<std::int64_t>() < v[0].get<std::int64_t>())
    corrupt(file,
            fmt::format("'{}' expects [begin, end], 0 <= begin <= end, found {}", what, v.dump()));
  return {v[0].get<std::int64_t>(), v[1].get<std::int64_t>()};
}

// Format 2's covers and pending of one shard record.
void parse_layout(ShardRecord& s, const nlohmann::ordered_json& v, const std::string& where,
                  const fs::path& file) {
  if (!v.contains("covers") || !v.contains("pending") || !v["pending"].is_array())
    corrupt(file, fmt::format("{} expects covers and pending (format 2)", where));
  s.covers = json_span(v["covers"], where + ".covers", file);
  std::size_t k = 0;
  for (const auto& p : v["pending"]) {
    const std::string at = fmt::format("{}.pending[{}]", where, k++);
    Pending x;
    if (p.is_object() && p.size() == 1 && p.contains("state")) {
      x.kind = Pending::Kind::State;
      x.span = json_span(p["state"], at + ".state", file);
    } else if (p.is_object() && p.size() == 2 && p.contains("read") && p.contains("origin")) {
      x.span = json_span(p["read"], at + ".read", file);
      const auto o = json_span(p["origin"], at + ".origin", file);
      if (o.end < 1 || o.end > INT32_MAX || o.begin >= o.end)
        corrupt(file, fmt::format("'{}.origin' expects [rank, world size], rank < world size", at));
      x.origin = {static_cast<int>(o.begin), static_cast<int>(o.end)};
    } else {
      corrupt(file, fmt::format("'{}' expects {{state: [b, e]}} or {{read: [b, e], origin: [rank, "
                                "world size]}}, found {}",
                                at, p.dump()));
    }
    s.pending.push_back(x);
  }
}

}  // namespace

// ---- metadata
// ------------------------------------------------------------------------------------

std::string Metadata::to_json() const {
  nlohmann::ordered_json j;
  j["format"] = "tally-checkpoint";
  j["format_version"] = format;
  j["tally_version"] = tally_version;
  j["protocol"] = protocol;
  j["step"] = step;
  j["every_n_batches"] = every_n_batches;
  j["world_size"] = world_size;
  j["config_fingerprint"] = config_fingerprint;
  auto ps = nlohmann::ordered_json::object();
  for (const auto& [name, version] : plugins) ps[name] = version;
  j["plugins"] = ps;
  j["dataset_samples"] = dataset_samples;
  j["samples"] = samples;
  j["batches"] = batches;
  auto shs = nlohmann::ordered_json::array();
  for (const auto& s : shards) {
    auto pending = nlohmann::ordered_json::array();
    for (const auto& p : s.pending) {
      if (p.kind == Pending::Kind::State)
        pending.push_back({{"state", {p.span.begin, p.span.end}}});
      else
        pending.push_back({{"read", {p.span.begin, p.span.end}},
                           {"origin", {p.origin.rank, p.origin.world_size}}});
    }
    shs.push_back({{"file", s.file},
                   {"crc32", fmt::format("{:08x}", s.crc32)},
                   {"size", s.size},
                   {"covers", {s.covers.begin, s.covers.end}},
                   {"pending", pending}});
  }
  j["shards"] = shs;
  const std::string body = j.dump();
  j["metadata_crc32"] = fmt::format("{:08x}", crc32_of(body));
  return j.dump(2) + "\n";
}

Metadata Metadata::parse(std::string_view text, const fs::path& file) {
  // nlohmann's parser ends the text at a NUL byte, and the checksum covers what it parsed: a NUL
  // (never in JSON text) would let anything after it pass unchecked.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    corrupt(file, fmt::format("a NUL byte at offset {} (JSON text has none)", nul));
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    corrupt(file, fmt::format("not valid JSON ({})", e.what()));
  }
  if (!j.is_object()) corrupt(file, "expected a JSON object");
  if (!j.contains("metadata_crc32") || !j["metadata_crc32"].is_string())
    corrupt(file, "no metadata_crc32");
  const std::string stored = j["metadata_crc32"].get<std::string>();
  j.erase("metadata_crc32");
  const std::string computed = fmt::format("{:08x}", crc32_of(j.dump()));
  if (stored != computed)
    corrupt(file, fmt::format("metadata_crc32 expected {}, found {}", stored, computed));

  const auto get = [&](const char* key) -> const nlohmann::ordered_json& {
    if (!j.contains(key)) corrupt(file, fmt::format("no '{}'", key));
    return j[key];
  };
  const auto count = [&](const nlohmann::ordered_json& v, const std::string& what) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
      corrupt(file, fmt::format("'{}' expects a count, found {}", what, v.dump()));
    return v.get<std::int64_t>();
  };
  const auto text_of = [&](const char* key) {
    const auto& v = get(key);
    if (!v.is_string()) corrupt(file, fmt::format("'{}' expects a string", key));
    return v.get<std::string>();
  };
  if (text_of("format") != "tally-checkpoint") corrupt(file, "not a tally checkpoint");
  Metadata m;
  m.format = count(get("format_version"), "format_version");
  if (m.format != 1 && m.format != kFormatVersion)
    throw InputError(fmt::format(
        "checkpoint file {}: format version expected 1 or {}, found {} (written by another tally)",
        file.string(), kFormatVersion, m.format));
  m.tally_version = text_of("tally_version");
  m.protocol = count(get("protocol"), "protocol");
  m.step = count(get("step"), "step");
  m.every_n_batches = count(get("every_n_batches"), "every_n_batches");
  const auto world = count(get("world_size"), "world_size");
  if (world < 1 || world > INT32_MAX) corrupt(file, "'world_size' is out of range");
  m.world_size = static_cast<int>(world);
  m.config_fingerprint = text_of("config_fingerprint");
  const auto& ps = get("plugins");
  if (!ps.is_object()) corrupt(file, "'plugins' expects an object");
  for (const auto& [name, version] : ps.items()) {
    if (!version.is_string()) corrupt(file, fmt::format("plugins.{} expects a version", name));
    m.plugins.emplace_back(name, version.get<std::string>());
  }
  m.dataset_samples = count(get("dataset_samples"), "dataset_samples");
  const auto per_rank = [&](const char* key) {
    const auto& v = get(key);
    if (!v.is_array() || v.size() != static_cast<std::size_t>(m.world_size))
      corrupt(file, fmt::format("'{}' expects {} entries, one per rank", key, m.world_size));
    return v;
  };
  for (const auto& v : per_rank("samples")) m.samples.push_back(count(v, "samples"));
  for (const auto& v : per_rank("batches")) m.batches.push_back(count(v, "batches"));
  int r = 0;
  for (const auto& v : per_rank("shards")) {
    if (!v.is_object() || !v.contains("file") || !v["file"].is_string() || !v.contains("crc32") ||
        !v["crc32"].is_string() || !v.contains("size"))
      corrupt(file, fmt::format("shards[{}] expects {{file, crc32, size}}", r));
    ShardRecord s;
    s.file = v["file"].get<std::string>();
    if (s.file != shard_name(r))
      corrupt(file,
              fmt::format("shards[{}].file expected '{}', found '{}'", r, shard_name(r), s.file));
    const auto crc = v["crc32"].get<std::string>();
    char* end = nullptr;
    const auto parsed = std::strtoul(crc.c_str(), &end, 16);
    if (crc.size() != 8 || end != crc.c_str() + crc.size())
      corrupt(file, fmt::format("shards[{}].crc32 expects 8 hex digits", r));
    s.crc32 = static_cast<std::uint32_t>(parsed);
    s.size = static_cast<std::uint64_t>(count(v["size"], fmt::format("shards[{}].size", r)));
    if (m.format >= 2) parse_layout(s, v, fmt::format("shards[{}]", r), file);
    m.shards.push_back(std::move(s));
    ++r;
  }
  return m;
}

void check(const Metadata& m, const Expected& e, const fs::path& file) {
  const auto refuse = [&](const std::string& what) {
    throw ConfigError(fmt::format("checkpoint {}: {}", file.string(), what));
  };
  if (m.tally_version != kVersion)
    refuse(fmt::format(
        "tally version expected {}, found {}: resume with the tally that wrote it, or start over "
        "without --resume",
        kVersion, m.tally_version));
  if (m.protocol != kProtocolVersion)
    refuse(
        fmt::format("sync protocol version expected {}, found {}", kProtocolVersion, m.protocol));
  for (const auto& plugin : e.plugins) {
    const auto it = std::find_if(m.plugins.begin(), m.plugins.end(),
                                 [&](const auto& p) { return p.first == plugin.first; });
    if (it == m.plugins.end())
      refuse(fmt::format("plugin '{}' expected (this run loads version {}), found none",
                         plugin.first, plugin.second));
    if (it->second != plugin.second)
      refuse(fmt::format("plugin '{}' version expected {} (this run), found {}", plugin.first,
                         plugin.second, it->second));
  }
  if (m.config_fingerprint != e.config_fingerprint)
    refuse(fmt::format(
        "config fingerprint expected {} (this run), found {}: the data, metrics or backend type "
        "changed since it was written",
        e.config_fingerprint, m.config_fingerprint));
}

void verify(std::string_view bytes, const ShardRecord& record, const fs::path& file,
            const fs::path& metadata_file) {
  if (bytes.size() != record.size)
    throw InputError(fmt::format(
        "checkpoint shard {}: size expected {} bytes ({}), found {}: the shard is truncated or "
        "corrupt",
        file.string(), record.size, metadata_file.filename().string(), bytes.size()));
  if (const auto crc = crc32_of(bytes); crc != record.crc32)
    throw InputError(fmt::format(
        "checkpoint shard {}: crc32 expected {:08x} ({}), found {:08x}: the shard is corrupt",
        file.string(), record.crc32, metadata_file.filename().string(), crc));
}

std::vector<StepDir> list_steps(const fs::path& dir) {
  std::vector<StepDir> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() != 15 || !name.starts_with("step-") ||
        !std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    std::error_code ec2;
    if (!e.is_directory(ec2)) continue;
    StepDir s;
    s.step = std::stoll(name.substr(5));
    s.path = e.path();
    s.complete = fs::exists(e.path() / kMetadataName, ec2);
    out.push_back(std::move(s));
  }
  if (ec)
    throw RuntimeError(
        fmt::format("cannot list the checkpoint folder '{}': {}", dir.string(), ec.message()));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return out;
}

std::vector<std::string> prune(const fs::path& dir, std::int64_t step) {
  std::vector<std::string> problems;
  const auto steps = list_steps(dir);
  std::size_t kept = 0;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (it->step > step) continue;
    bool remove = false;
    if (it->complete)
      remove = ++kept > kKeep;
    else
      remove = it->step < step;
    if (!remove) continue;
    std::error_code ec;
    // The metadata first: a folder half removed is an incomplete checkpoint, never a corrupt one.
    fs::remove(it->path / kMetadataName, ec);
    if (!ec) fs::remove_all(it->path, ec);
    if (ec)
      problems.push_back(
          fmt::format("cannot remove the old checkpoint {}: {}", it->path.string(), ec.message()));
  }
  return problems;
}

// ---- the plan of a resume
// -------------------------------------------------------------------------

namespace {

// Format 1: each rank's state covers the first samples of its block (the held-back sample read
// but not in the state), and the rest of its block is to be read.
std::vector<Item> format1_items(const Metadata& m, int r, bool held, const fs::path& file) {
  const auto block = ShardRange::of(m.dataset_samples, ShardInfo{r, m.world_size});
  const auto read = m.samples[static_cast<std::size_t>(r)];
  if (read > block.size())
    corrupt(file, fmt::format("rank {} read {} samples of a block of {}", r, read, block.size()));
  const auto in_state = read - (held && read > 0 ? 1 : 0);
  std::vector<Item> out;
  if (in_state > 0)
    out.push_back({Pending::Kind::State, {block.begin, block.begin + in_state}, {}, r, -1});
  if (block.begin + in_state < block.end)
    out.push_back({Pending::Kind::Read,
                   {block.begin + in_state, block.end},
                   ShardInfo{r, m.world_size},
                   r,
                   -1});
  return out;
}

std::vector<Item> format2_items(const ShardRecord& s, int r) {
  std::vector<Item> out;
  if (s.covers.size() > 0) out.push_back({Pending::Kind::State, s.covers, {}, r, -1});
  int k = 0;
  for (const auto& p : s.pending) {
    if (p.kind == Pending::Kind::State)
      out.push_back({p.kind, p.span, {}, r, k++});
    else if (p.span.size() > 0)
      out.push_back({p.kind, p.span, p.origin, r, -1});
  }
  return out;
}

}  // namespace

std::vector<std::vector<Item>> items_of(const Metadata& m, bool held, const fs::path& file) {
  std::vector<std::vector<Item>> out;
  std::int64_t at = 0;
  for (int r = 0; r < m.world_size; ++r) {
    auto items = m.format == 1 ? format1_items(m, r, held, file)
                               : format2_items(m.shards[static_cast<std::size_t>(r)], r);
    for (const auto& it : items) {
      if (it.span.begin != at)
        corrupt(file, fmt::format("shards[{}] holds samples [{}, {}), expected samples from {} on "
                                  "(where the shards before it end)",
                                  r, it.span.begin, it.span.end, at));
      if (it.kind == Pending::Kind::Read) {
        const auto& o = it.origin;
        const auto block = o.world_size >= 1 && o.rank >= 0 && o.rank < o.world_size
                               ? ShardRange::of(m.dataset_samples, o)
                               : ShardRange{0, -1};
        if (it.span.begin < block.begin || it.span.end > block.end)
          corrupt(file, fmt::format("shards[{}] reads samples [{}, {}) with the reader of rank {} "
                                    "of {}, whose block is [{}, {})",
                                    r, it.span.begin, it.span.end, o.rank, o.world_size,
                                    block.begin, block.end));
      }
      at = it.span.end;
    }
    out.push_back(std::move(items));
  }
  if (at != m.dataset_samples)
    corrupt(file, fmt::format("the shards hold samples [0, {}), expected [0, {}) (every sample)",
                              at, m.dataset_samples));
  return out;
}

std::vector<Item> plan(const std::vector<std::vector<Item>>& per_shard, int world, int rank) {
  if (static_cast<int>(per_shard.size()) == world) return per_shard[static_cast<std::size_t>(rank)];
  // Every item in dataset order, reads of one origin that meet made one.
  std::vector<Item> all;
  for (const auto& items : per_shard)
    for (const auto& it : items) {
      if (!all.empty() && it.kind == Pending::Kind::Read && all.back().kind == it.kind &&
          all.back().origin.rank == it.origin.rank &&
          all.back().origin.world_size == it.origin.world_size &&
          all.back().span.end == it.span.begin)
        all.back().span.end = it.span.end;
      else
        all.push_back(it);
    }
  std::int64_t unread = 0;
  for (const auto& it : all)
    if (it.kind == Pending::Kind::Read) unread += it.span.size();
  // This rank's share of the samples to read, counted in the order they come: [lo, hi).
  const auto w = static_cast<std::int64_t>(world);
  const auto lo = unread * rank / w, hi = unread * (rank + 1) / w;
  std::vector<Item> mine;
  std::int64_t q = 0;  // samples to read before the item
  for (const auto& it : all) {
    if (it.kind == Pending::Kind::State) {
      // A state goes to the rank whose share holds the next sample to read (the last rank when
      // none follows).
      if ((q >= lo && q < hi) || (q >= unread && rank == world - 1)) mine.push_back(it);
      continue;
    }
    const auto from = std::max(q, lo), to = std::min(q + it.span.size(), hi);
    if (from < to) {
      Item piece = it;
      piece.span = {it.span.begin + (from - q), it.span.begin + (to - q)};
      mine.push_back(piece);
    }
    q += it.span.size();
  }
  return mine;
}

}  // namespace tally::checkpoint
