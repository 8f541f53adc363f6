#include "unit_records.hpp"

#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "msgpack_bounds.hpp"
#include "msgpack_spans.hpp"
#include "sync.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/version.hpp"

namespace tally {

namespace {

/// The ids of a 1-D (or [n, 1]) integer CPU tensor as int64; false when it is not one.
bool read_ids(const Tensor& t, std::vector<std::int64_t>& out) {
  if (t.is_cuda() || !is_integral(t.dtype())) return false;
  if (!(t.dim() == 1 || (t.dim() == 2 && t.shape()[1] == 1))) return false;
  const auto n = static_cast<std::size_t>(t.shape()[0]);
  const auto take = [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data_as<T>();
    for (std::size_t i = 0; i < n; ++i) out.push_back(static_cast<std::int64_t>(p[i]));
  };
  switch (t.dtype()) {
    case DType::U8:
      take(std::uint8_t{});
      break;
    case DType::I8:
      take(std::int8_t{});
      break;
    case DType::U16:
      take(std::uint16_t{});
      break;
    case DType::I16:
      take(std::int16_t{});
      break;
    case DType::I32:
      take(std::int32_t{});
      break;
    case DType::U32:
      take(std::uint32_t{});
      break;
    case DType::I64:
      take(std::int64_t{});
      break;
    default:
      return false;
  }
  return true;
}

template <class T>
void pack_raw(Packer& p, std::span<const T> v) {
  const auto bytes = v.size() * sizeof(T);
  if (bytes > 0xFFFFFFFFull)
    throw RuntimeError(
        fmt::format("per-sample records: {} bytes on one rank, more than a msgpack "
                    "bin holds (4 GiB)",
                    bytes));
  p.pack_bin(static_cast<std::uint32_t>(bytes));
  p.pack_bin_body(reinterpret_cast<const char*>(v.data()), static_cast<std::uint32_t>(bytes));
}

template <class T>
void append_raw(const msgpack::object& o, std::vector<T>& out, const std::string& what) {
  if (o.type != msgpack::type::BIN || o.via.bin.size % sizeof(T) != 0)
    throw RuntimeError(what + " is not a bin of whole values");
  const auto n = o.via.bin.size / sizeof(T);
  const auto at = out.size();
  out.resize(at + n);
  if (n) std::memcpy(out.data() + at, o.via.bin.ptr, o.via.bin.size);
}

void hash_u64(std::uint64_t& h, std::uint64_t v) {
  for (int b = 0; b < 8; ++b) {
    h ^= (v >> (8 * b)) & 0xFF;
    h *= 0x100000001b3ULL;
  }
}

}  // namespace

UnitRecorder::UnitRecorder(std::vector<Slot> slots) : slots_(std::move(slots)) {
  kept_.resize(slots_.size());
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto& k = kept_[i];
    k.summed = slots_[i].shadow->summed_size();
    k.gathers = slots_[i].shadow->gathers();
    k.sums.assign(k.summed, 0);
  }
}

void UnitRecorder::clear() {
  for (auto& k : kept_) {
    k.offsets.assign(1, 0);
    k.index.clear();
    k.count.clear();
    k.gathered_offsets.assign(1, 0);
    k.gathered.clear();
  }
  for (auto& s : slots_) s.shadow->reset();
  units_ = 0;
  id_field_.clear();
  ids_.clear();
}

void UnitRecorder::record(const Batch& batch) {
  const auto n = batch.size();
  if (n == 0) return;
  // The sample ids: the first id field this rank sees decides (every rank reads the same layout).
  if (units_ == 0 && id_field_.empty())
    for (const char* f : kIdFields)
      if (batch.has(f) && !batch.is_ragged(f) && !batch.is_text(f)) {
        std::vector<std::int64_t> probe;
        if (read_ids(batch.tensor(f), probe)) {
          id_field_ = f;
          break;
        }
      }
  if (!id_field_.empty() && !read_ids(batch.tensor(id_field_), ids_))
    throw InputError(
        fmt::format("per-sample records: the id field '{}' is not a 1-D integer "
                    "tensor in every batch",
                    id_field_));
  for (std::size_t m = 0; m < slots_.size(); ++m) {
    auto& slot = slots_[m];
    auto& k = kept_[m];
    const Batch renamed = batch.renamed(slot.inputs);
    SbufferSink sink(k.gathered);
    try {
      for (std::int64_t i = 0; i < n; ++i) {
        Metric& shadow = *slot.shadow;
        shadow.add(renamed.slice(i, i + 1));
        if (k.summed) {
          shadow.write_sums(k.sums);
          // O(summed_size) per unit: the scan keeps the nonzero counts only.
          const std::int64_t* s = k.sums.data();
          for (std::size_t j = 0; j < k.summed; ++j)
            if (s[j] != 0) {
              if (s[j] < 0)
                throw RuntimeError(fmt::format("a count of its state is negative ({})", s[j]));
              k.index.push_back(static_cast<std::uint32_t>(j));
              k.count.push_back(s[j]);
            }
        }
        k.offsets.push_back(k.index.size());
        if (k.gathers) {
          shadow.pack_gathered(sink);
          k.gathered_offsets.push_back(k.gathered.size());
        }
        shadow.reset();
      }
    } catch (const Error& e) {
      slot.shadow->reset();
      rethrow_with(e, {.metric = slot.label},
                   e.context().owner.empty()
                       ? fmt::format("metric '{}': per-sample records: {}", slot.label, e.what())
                       : e.what());
    }
  }
  units_ += n;
}

void UnitRecorder::pack(msgpack::sbuffer& out) const {
  Packer p(out);
  p.pack_array(4);
  p.pack(static_cast<std::uint64_t>(units_));
  p.pack(id_field_);
  pack_raw<std::int64_t>(p, ids_);
  p.pack_array(static_cast<std::uint32_t>(kept_.size()));
  for (const auto& k : kept_) {
    p.pack_array(5);
    pack_raw<std::uint64_t>(p, k.offsets);
    pack_raw<std::uint32_t>(p, k.index);
    pack_raw<std::int64_t>(p, k.count);
    pack_raw<std::uint64_t>(p, k.gathered_offsets);
    pack_raw<char>(p, std::span<const char>(k.gathered.data(), k.gathered.size()));
  }
}

Records UnitRecorder::merge(const std::vector<std::span<const std::byte>>& ranks) const {
  Records out;
  out.tally_version = std::string(kVersion);
  out.metrics.resize(slots_.size());
  for (std::size_t m = 0; m < slots_.size(); ++m) {
    auto& r = out.metrics[m];
    r.label = slots_[m].label;
    r.type = slots_[m].type;
    r.parameters = slots_[m].parameters;
    r.summed_size = kept_[m].summed;
    r.gathers = kept_[m].gathers;
  }
  std::optional<std::string> seen_field;
  std::vector<std::int64_t> ids;
  bool ids_broken = false;
  for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
    const auto fail = [&](const std::string& what) -> RuntimeError {
      return RuntimeError(
          fmt::format("per-sample records: the records of rank {} are corrupt: {}", rank, what));
    };
    msgpack::object_handle h;
    try {
      h = unpack_bounded(ranks[rank], /*reference_bins=*/true);
    } catch (const std::exception& e) {
      throw fail(e.what());
    }
    const auto& o = h.get();
    if (o.type != msgpack::type::ARRAY || o.via.array.size != 4 ||
        o.via.array.ptr[0].type != msgpack::type::POSITIVE_INTEGER ||
        o.via.array.ptr[1].type != msgpack::type::STR ||
        o.via.array.ptr[3].type != msgpack::type::ARRAY ||
        o.via.array.ptr[3].via.array.size != slots_.size())
      throw fail("not a records payload of these metrics");
    const std::uint64_t n = o.via.array.ptr[0].via.u64;
    const std::string field = o.via.array.ptr[1].as<std::string>();
    const auto before = ids.size();
    try {
      append_raw(o.via.array.ptr[2], ids, "ids");
    } catch (const Error& e) {
      throw fail(e.what());
    }
    if (n > 0) {
      if (!seen_field) seen_field = field;
      if (field != *seen_field || (!field.empty() && ids.size() - before != n)) ids_broken = true;
    }
    for (std::size_t m = 0; m < slots_.size(); ++m) {
      const auto& mo = o.via.array.ptr[3].via.array.ptr[m];
      if (mo.type != msgpack::type::ARRAY || mo.via.array.size != 5)
        throw fail(fmt::format("metric {} is not 5 arrays", m));
      auto& r = out.metrics[m];
      std::vector<std::uint64_t> offsets, goffsets;
      const auto index_base = r.index.size();
      const auto gathered_base = r.gathered.size();
      try {
        append_raw(mo.via.array.ptr[0], offsets, "offsets");
        append_raw(mo.via.array.ptr[1], r.index, "index");
        append_raw(mo.via.array.ptr[2], r.count, "count");
        append_raw(mo.via.array.ptr[3], goffsets, "gathered offsets");
        const auto& g = mo.via.array.ptr[4];
        if (g.type != msgpack::type::BIN) throw RuntimeError("gathered is not a bin");
        r.gathered.append(g.via.bin.ptr, g.via.bin.size);
      } catch (const Error& e) {
        throw fail(e.what());
      }
      if (offsets.size() != n + 1 || offsets.front() != 0 ||
          offsets.back() != r.index.size() - index_base || r.index.size() != r.count.size())
        throw fail(fmt::format("metric '{}': the offsets do not fit the counts", r.label));
      if (r.gathers && (goffsets.size() != n + 1 || goffsets.front() != 0 ||
                        goffsets.back() != r.gathered.size() - gathered_base))
        throw fail(fmt::format("metric '{}': the gathered offsets do not fit", r.label));
      for (std::uint64_t u = 0; u < n; ++u) {
        if (offsets[u + 1] < offsets[u] || (r.gathers && goffsets[u + 1] < goffsets[u]))
          throw fail(fmt::format("metric '{}': offsets decrease", r.label));
        r.offsets.push_back(index_base + offsets[u + 1]);
        if (r.gathers) r.gathered_offsets.push_back(gathered_base + goffsets[u + 1]);
      }
      for (std::size_t j = index_base; j < r.index.size(); ++j)
        if (r.index[j] >= r.summed_size || r.count[j] < 0)
          throw fail(fmt::format("metric '{}': a count is out of range", r.label));
    }
    out.units += n;
  }
  std::string id_field = seen_field.value_or("");
  if (ids_broken || ids.size() != out.units) id_field.clear();
  // The sample hash: FNV-1a 64 of (dataset index[, id]) per unit, little-endian.
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::uint64_t u = 0; u < out.units; ++u) {
    hash_u64(h, u);
    if (!id_field.empty()) hash_u64(h, static_cast<std::uint64_t>(ids[u]));
  }
  out.sample_hash = h;
  out.sample_hash_of = id_field.empty() ? "dataset index" : "dataset index, " + id_field;
  for (auto& r : out.metrics)
    if (!r.gathers) {
      r.gathered_offsets.assign(out.units + 1, 0);
      r.gathered.clear();
    }
  return out;
}

}  // namespace tally
