// The records file (tally/records.hpp): packing, reading back with bounds checks, and replaying a
// metric on reweighted units.
#include "tally/records.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <mutex>

#include <fmt/format.h>
#include <zlib.h>

#include "file_io.hpp"
#include "msgpack_bounds.hpp"
#include "msgpack_spans.hpp"
#include "tally/file_io.hpp"
#include "tally/sdk/error.hpp"

namespace tally {

static_assert(std::endian::native == std::endian::little,
              "the records file stores raw little-endian arrays");

namespace {

template <class T>
void pack_raw(Packer& p, const std::vector<T>& v) {
  const auto bytes = v.size() * sizeof(T);
  p.pack_bin(static_cast<std::uint32_t>(bytes));
  p.pack_bin_body(reinterpret_cast<const char*>(v.data()), static_cast<std::uint32_t>(bytes));
}

void check_bin_size(std::size_t bytes, const std::string& what) {
  if (bytes > std::numeric_limits<std::uint32_t>::max())
    throw RuntimeError(fmt::format(
        "records: {} takes {} bytes, more than a msgpack bin holds (4 GiB)", what, bytes));
}

struct RecordsReader {
  const std::string& source;

  [[noreturn]] void bad(const std::string& what) const {
    throw InputError(fmt::format("{}: not a valid tally records file: {}", source, what));
  }

  const msgpack::object& field(const msgpack::object& map, std::string_view key,
                               const std::string& where) const {
    if (map.type != msgpack::type::MAP) bad(fmt::format("{} is not a map", where));
    for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
      const auto& kv = map.via.map.ptr[i];
      if (kv.key.type == msgpack::type::STR &&
          std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == key)
        return kv.val;
    }
    bad(fmt::format("{} has no '{}'", where, key));
  }
  std::string str(const msgpack::object& o, std::string_view key, const std::string& where) const {
    const auto& v = field(o, key, where);
    if (v.type != msgpack::type::STR) bad(fmt::format("{}.{} is not a string", where, key));
    return std::string(v.via.str.ptr, v.via.str.size);
  }
  std::uint64_t uint(const msgpack::object& o, std::string_view key,
                     const std::string& where) const {
    const auto& v = field(o, key, where);
    if (v.type != msgpack::type::POSITIVE_INTEGER)
      bad(fmt::format("{}.{} is not an integer >= 0", where, key));
    return v.via.u64;
  }
  template <class T>
  std::vector<T> raw(const msgpack::object& o, std::string_view key,
                     const std::string& where) const {
    const auto& v = field(o, key, where);
    if (v.type != msgpack::type::BIN) bad(fmt::format("{}.{} is not a bin", where, key));
    if (v.via.bin.size % sizeof(T) != 0)
      bad(fmt::format("{}.{} holds {} bytes, not a whole number of {}-byte values", where, key,
                      v.via.bin.size, sizeof(T)));
    std::vector<T> out(v.via.bin.size / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), v.via.bin.ptr, v.via.bin.size);
    return out;
  }

  void check_offsets(const std::vector<std::uint64_t>& offsets, std::uint64_t units,
                     std::uint64_t end, const std::string& what) const {
    // units + 1 wraps at 2^64 - 1: compared as offsets.size() - 1 (an empty bin is no offsets).
    if (offsets.empty() || offsets.size() - 1 != units)
      bad(fmt::format("{} has {} entries, expected units + 1 = {} (units is {})", what,
                      offsets.size(), units == UINT64_MAX ? "2^64" : std::to_string(units + 1),
                      units));
    if (offsets.front() != 0) bad(fmt::format("{} does not start at 0", what));
    for (std::size_t u = 0; u < units; ++u)
      if (offsets[u + 1] < offsets[u]) bad(fmt::format("{} decreases at unit {}", what, u));
    if (offsets.back() != end)
      bad(fmt::format("{} ends at {}, the data holds {}", what, offsets.back(), end));
  }
};

}  // namespace

const MetricRecords* Records::find(std::string_view label) const {
  for (const auto& m : metrics)
    if (m.label == label) return &m;
  return nullptr;
}

namespace {

/// The records themselves: a msgpack map (the top of tally/records.hpp).
std::string pack_inner(const Records& records) {
  msgpack::sbuffer buf;
  Packer p(buf);
  p.pack_map(7);
  p.pack("format");
  p.pack(std::string(kRecordsFormat));
  p.pack("version");
  p.pack(kRecordsVersion);
  p.pack("tally_version");
  p.pack(records.tally_version);
  p.pack("units");
  p.pack(records.units);
  p.pack("sample_hash");
  p.pack(records.sample_hash);
  p.pack("sample_hash_of");
  p.pack(records.sample_hash_of);
  p.pack("metrics");
  p.pack_array(static_cast<std::uint32_t>(records.metrics.size()));
  for (const auto& m : records.metrics) {
    const std::string what = fmt::format("metric '{}'", m.label);
    check_bin_size(m.offsets.size() * 8, what + " offsets");
    check_bin_size(m.count.size() * 8, what + " counts");
    check_bin_size(m.gathered.size(), what + " gathered bytes");
    p.pack_map(9);
    p.pack("label");
    p.pack(m.label);
    p.pack("type");
    p.pack(m.type);
    p.pack("parameters");
    p.pack(m.parameters);
    p.pack("summed_size");
    p.pack(m.summed_size);
    p.pack("offsets");
    pack_raw(p, m.offsets);
    p.pack("index");
    pack_raw(p, m.index);
    p.pack("count");
    pack_raw(p, m.count);
    p.pack("gathered_offsets");
    if (m.gathers)
      pack_raw(p, m.gathered_offsets);
    else
      p.pack_nil();
    p.pack("gathered");
    if (m.gathers) {
      p.pack_bin(static_cast<std::uint32_t>(m.gathered.size()));
      p.pack_bin_body(m.gathered.data(), static_cast<std::uint32_t>(m.gathered.size()));
    } else {
      p.pack_nil();
    }
  }
  return std::string(buf.data(), buf.size());
}

/// zlib's deflate of `bytes` (RFC 1950), in pieces of at most 1 GiB (zlib counts in uInt).
std::string deflate_all(std::string_view bytes, int level) {
  z_stream z{};
  if (deflateInit(&z, level) != Z_OK) throw RuntimeError("records: zlib cannot start deflate");
  // Records compress about tenfold: start at an eighth of the input, double when full.
  std::string out(std::max<std::size_t>(bytes.size() / 8, 4096), '\0');
  std::size_t in_done = 0, out_done = 0;
  int rc = Z_OK;
  do {
    const std::size_t in_n = std::min<std::size_t>(bytes.size() - in_done, 1u << 30);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + in_done));
    z.avail_in = static_cast<uInt>(in_n);
    const bool last = in_done + in_n == bytes.size();
    do {
      if (out_done == out.size()) out.resize(out.size() * 2);
      const std::size_t out_n = std::min<std::size_t>(out.size() - out_done, 1u << 30);
      z.next_out = reinterpret_cast<Bytef*>(out.data() + out_done);
      z.avail_out = static_cast<uInt>(out_n);
      rc = deflate(&z, last ? Z_FINISH : Z_NO_FLUSH);
      out_done += out_n - z.avail_out;
    } while (z.avail_out == 0 && rc != Z_STREAM_END);
    in_done += in_n;
  } while (in_done < bytes.size());
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw RuntimeError("records: zlib deflate failed");
  out.resize(out_done);
  return out;
}

/// zlib's inflate of `bytes` into exactly `size` bytes; false when the stream is not valid zlib,
/// is cut short, holds another size, or has bytes after its end. The output grows with what the
/// stream gives (64 MiB at a time, within a reservation of `size` that moves nothing): a size the
/// data does not hold costs only what the data inflates to, and inflating stops at `size` bytes.
bool inflate_exactly(std::string_view bytes, std::string& out, std::size_t size) {
  out.clear();
  out.reserve(size);
  out.resize(std::min<std::size_t>(size, 64 * kMiB));
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return false;
  std::size_t in_done = 0, out_done = 0;
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (out_done == out.size() && out.size() < size)
      out.resize(std::min<std::size_t>(size, out.size() + 64 * kMiB));
    const std::size_t in_n = std::min<std::size_t>(bytes.size() - in_done, 1u << 30);
    const std::size_t out_n = std::min<std::size_t>(out.size() - out_done, 1u << 30);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + in_done));
    z.avail_in = static_cast<uInt>(in_n);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + out_done);
    z.avail_out = static_cast<uInt>(out_n);
    rc = inflate(&z, Z_NO_FLUSH);
    in_done += in_n - z.avail_in;
    out_done += out_n - z.avail_out;
    if (rc == Z_BUF_ERROR && (in_n == 0 || out_n == 0)) break;  // out of input or of room
    if (rc == Z_BUF_ERROR) rc = Z_OK;
  }
  inflateEnd(&z);
  return rc == Z_STREAM_END && out_done == size && in_done == bytes.size();
}

/// The records file's deflate level: zlib's 1, its fastest (the records of 1 M Accuracy samples:
/// docs/significance.md, "Measured cost").
constexpr int kDeflateLevel = 1;

}  // namespace

// The file: an outer msgpack map {"format": "tally-records", "version": 2, "compression": "zlib",
// "size": N, "data": bin} whose data is the zlib stream (RFC 1950) of the N-byte inner map
// (pack_inner, "version": 2 as well).
std::string pack_records(const Records& records) {
  const std::string inner = pack_inner(records);
  if (inner.size() > kRecordsMaxBytes)
    throw RuntimeError(
        fmt::format("records: {} of per-sample records, more than a records file holds ({}): "
                    "record fewer samples or metrics",
                    format_size(inner.size()), format_size(kRecordsMaxBytes)));
  const std::string data = deflate_all(inner, kDeflateLevel);
  check_bin_size(data.size(), "the compressed records");
  msgpack::sbuffer buf;
  Packer p(buf);
  p.pack_map(5);
  p.pack("format");
  p.pack(std::string(kRecordsFormat));
  p.pack("version");
  p.pack(kRecordsVersion);
  p.pack("compression");
  p.pack("zlib");
  p.pack("size");
  p.pack(static_cast<std::uint64_t>(inner.size()));
  p.pack("data");
  p.pack_bin(static_cast<std::uint32_t>(data.size()));
  p.pack_bin_body(data.data(), static_cast<std::uint32_t>(data.size()));
  return std::string(buf.data(), buf.size());
}

namespace {

/// `bytes` as one msgpack map whose "format" is the records' (both the file and the records map
/// inside it start so); its version.
std::uint64_t open_document(std::string_view bytes, const RecordsReader& r,
                            msgpack::object_handle& h) {
  try {
    h = unpack_bounded(std::as_bytes(std::span(bytes.data(), bytes.size())),
                       /*reference_bins=*/true);
  } catch (const std::exception& e) {
    r.bad(fmt::format("not one msgpack document ({} bytes): {}", bytes.size(), e.what()));
  }
  const msgpack::object& root = h.get();
  if (root.type != msgpack::type::MAP) r.bad("the document is not a map");
  if (r.str(root, "format", "the document") != kRecordsFormat)
    r.bad(fmt::format("format is not '{}'", kRecordsFormat));
  return r.uint(root, "version", "the document");
}

Records unpack_inner(std::string_view bytes, const std::string& source, std::uint64_t version) {
  const RecordsReader r{source};
  msgpack::object_handle h;
  if (const auto v = open_document(bytes, r, h); v != version)
    r.bad(fmt::format("the records inside are version {}, the file says {}", v, version));
  const msgpack::object& root = h.get();
  Records out;
  out.tally_version = r.str(root, "tally_version", "the document");
  out.units = r.uint(root, "units", "the document");
  out.sample_hash = r.uint(root, "sample_hash", "the document");
  out.sample_hash_of = r.str(root, "sample_hash_of", "the document");
  const auto& ms = r.field(root, "metrics", "the document");
  if (ms.type != msgpack::type::ARRAY) r.bad("metrics is not an array");
  for (std::uint32_t i = 0; i < ms.via.array.size; ++i) {
    const auto& o = ms.via.array.ptr[i];
    const std::string where = fmt::format("metrics[{}]", i);
    MetricRecords m;
    m.label = r.str(o, "label", where);
    m.type = r.str(o, "type", where);
    try {
      r.field(o, "parameters", where).convert(m.parameters);
    } catch (const std::exception&) {
      r.bad(where + ".parameters is not a map of values");
    }
    if (!m.parameters.is_map()) r.bad(where + ".parameters is not a map");
    m.summed_size = r.uint(o, "summed_size", where);
    if (m.summed_size > std::numeric_limits<std::uint32_t>::max())
      r.bad(where + ".summed_size is too large");
    const std::string label = fmt::format("{} ('{}')", where, m.label);
    m.offsets = r.raw<std::uint64_t>(o, "offsets", where);
    m.index = r.raw<std::uint32_t>(o, "index", where);
    m.count = r.raw<std::int64_t>(o, "count", where);
    if (m.index.size() != m.count.size())
      r.bad(fmt::format("{}: {} indices but {} counts", label, m.index.size(), m.count.size()));
    r.check_offsets(m.offsets, out.units, m.index.size(), label + ".offsets");
    for (std::size_t j = 0; j < m.index.size(); ++j) {
      if (m.index[j] >= m.summed_size)
        r.bad(fmt::format("{}: count index {} is not below summed_size {}", label, m.index[j],
                          m.summed_size));
      if (m.count[j] < 0) r.bad(fmt::format("{}: a count is negative ({})", label, m.count[j]));
    }
    const auto& go = r.field(o, "gathered_offsets", where);
    m.gathers = go.type != msgpack::type::NIL;
    if (m.gathers) {
      m.gathered_offsets = r.raw<std::uint64_t>(o, "gathered_offsets", where);
      const auto& g = r.field(o, "gathered", where);
      if (g.type != msgpack::type::BIN) r.bad(label + ".gathered is not a bin");
      m.gathered.assign(g.via.bin.ptr, g.via.bin.size);
      r.check_offsets(m.gathered_offsets, out.units, m.gathered.size(),
                      label + ".gathered_offsets");
    } else {
      m.gathered_offsets.assign(out.units + 1, 0);
    }
    for (const auto& earlier : out.metrics)
      if (earlier.label == m.label) r.bad(fmt::format("two metrics labelled '{}'", m.label));
    out.metrics.push_back(std::move(m));
  }
  return out;
}

}  // namespace

Records unpack_records(std::string_view bytes, const std::string& source) {
  const RecordsReader r{source};
  std::uint64_t version = 0;
  std::string inner;
  {
    msgpack::object_handle h;
    version = open_document(bytes, r, h);
    const msgpack::object& root = h.get();
    if (version != kRecordsVersion)
      r.bad(fmt::format("version {}, this tally reads version {}", version, kRecordsVersion));
    if (r.str(root, "compression", "the document") != "zlib") r.bad("compression is not 'zlib'");
    const std::uint64_t size = r.uint(root, "size", "the document");
    const auto& data = r.field(root, "data", "the document");
    if (data.type != msgpack::type::BIN) r.bad("data is not a bin");
    // The size is checked against what the data can hold (zlib expands at most 1032:1) before
    // anything is allocated.
    if (size > kRecordsMaxBytes)
      r.bad(fmt::format("size {} is more than a records file holds ({})", size,
                        format_size(kRecordsMaxBytes)));
    if (size > std::uint64_t{1032} * data.via.bin.size + 64)
      r.bad(fmt::format("size {} cannot come from {} compressed bytes", size, data.via.bin.size));
    if (!inflate_exactly(std::string_view(data.via.bin.ptr, data.via.bin.size), inner,
                         static_cast<std::size_t>(size)))
      r.bad(
          fmt::format("the zlib data ({} bytes) does not inflate to the {} bytes the file says "
                      "(truncated or corrupt)",
                      data.via.bin.size, size));
  }
  return unpack_inner(inner, source, version);
}

Records read_records(const std::filesystem::path& path) {
  const std::string bytes = read_whole_file(path, "records", kRecordsMaxBytes);
  return unpack_records(bytes, path.string());
}

// ---- replay -----------------------------------------------------------------------------------

struct UnitReplay::Decoded {
  std::once_flag once;
  std::unique_ptr<DecodedStates> states;
};

UnitReplay::UnitReplay(const MetricRecords& records)
    : records_(&records), decoded_(std::make_unique<Decoded>()) {
  if (!records.gathers) return;
  const auto n = records.units();
  units_.reserve(n);
  msgpack::zone zone;  // the check only: the metric reads the bytes
  for (std::size_t u = 0; u < n; ++u) {
    const auto bytes = records.gathered_of(u);
    const auto span = std::as_bytes(std::span(bytes.data(), bytes.size()));
    try {
      (void)unpack_bounded(zone, span, /*reference_bins=*/true);
      units_.push_back(span);
      if (u % 4096 == 4095) zone.clear();
    } catch (const std::exception& e) {
      throw InputError(
          fmt::format("records of metric '{}': unit {}'s gathered state is not "
                      "valid msgpack: {}",
                      records.label, u, e.what()));
    }
  }
}
UnitReplay::UnitReplay(UnitReplay&&) noexcept = default;

void check_replayable(const MetricRecords& records, const Metric& metric,
                      const std::string& source) {
  // Before anything of summed_size is allocated: a file declaring 2^32 - 1 counts for a metric
  // that sums 3 would cost 32 GiB per replay.
  const std::uint64_t sums = metric.summed_size();
  if (records.summed_size != sums || records.gathers != metric.gathers())
    throw InputError(fmt::format(
        "{}: not a valid tally records file: metric '{}' ({}): {}, but a metric of its type and "
        "parameters {}",
        source, records.label, records.type,
        records.summed_size != sums
            ? fmt::format("summed_size is {}", records.summed_size)
            : std::string(records.gathers ? "gathered_offsets is a bin" : "gathered is nil"),
        records.summed_size != sums
            ? fmt::format("sums {} counts", sums)
            : std::string(metric.gathers() ? "gathers its state" : "gathers nothing")));
}
UnitReplay::~UnitReplay() = default;

Value UnitReplay::compute(const Metric& metric, std::span<const std::uint32_t> weights) const {
  const auto& r = *records_;
  const auto n = r.units();
  check_replayable(r, metric, "the records");
  if (weights.size() != n)
    throw RuntimeError(
        fmt::format("records of metric '{}': {} weights for {} units", r.label, weights.size(), n));
  std::vector<std::int64_t> sums(r.summed_size, 0);
  for (std::size_t u = 0; u < n; ++u) {
    const std::uint32_t w = weights[u];
    if (w == 0) continue;
    for (auto j = r.offsets[u]; j < r.offsets[u + 1]; ++j) {
      std::int64_t add = 0;
      if (__builtin_mul_overflow(r.count[j], static_cast<std::int64_t>(w), &add) ||
          __builtin_add_overflow(sums[r.index[j]], add, &sums[r.index[j]]))
        throw RuntimeError(
            fmt::format("records of metric '{}': a weighted count overflows", r.label));
    }
  }
  if (!r.gathers) return metric.compute_synced({}, sums);
  return metric.compute_weighted(decoded(metric), weights, sums);
}

const DecodedStates& UnitReplay::decoded(const Metric& metric) const {
  std::call_once(decoded_->once, [&] { decoded_->states = metric.decode_gathered(units_); });
  return *decoded_->states;
}

Value UnitReplay::compute(const Metric& metric) const {
  const std::vector<std::uint32_t> ones(records_->units(), 1);
  return compute(metric, ones);
}

namespace {
void flatten_into(const Value& v, const std::string& prefix,
                  std::vector<std::pair<std::string, double>>& out) {
  if (v.is_number()) {
    out.emplace_back(prefix, v.as_double());
  } else if (v.is_map()) {
    for (const auto& [k, sub] : v.as_map())
      flatten_into(sub, prefix.empty() ? k : prefix + "." + k, out);
  }
}
}  // namespace

std::vector<std::pair<std::string, double>> flatten_scalars(const Value& results) {
  std::vector<std::pair<std::string, double>> out;
  if (results.is_map()) flatten_into(results, "", out);
  return out;
}

}  // namespace tally
