// Evaluator::read_all with a `checkpoint:` section (docs/checkpoint.md), as a ReadPolicy of the
// one read loop (Evaluator::Impl::read_shards): rank 0 decides what to resume, every rank
// restores its shard's state and skips what it had read, and every `every_n_batches` the ranks
// save their states together.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <filesystem>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "evaluator_impl.hpp"
#include "file_io.hpp"
#include "msgpack_bounds.hpp"
#include "msgpack_spans.hpp"
#include "sync.hpp"
#include "tally/sdk/version.hpp"

namespace tally {

namespace fs = std::filesystem;

namespace {

Value unpack_value(std::span<const std::byte> bytes, const char* what) {
  Value v;
  try {
    unpack_bounded(bytes, /*reference_bins=*/false).get().convert(v);
  } catch (const std::exception& e) {
    throw RuntimeError(fmt::format("checkpoint: {} is not valid: {}", what, e.what()));
  }
  return v;
}

std::span<const std::byte> bytes_of(const msgpack::sbuffer& b) {
  return std::as_bytes(std::span(b.data(), b.size()));
}

std::int64_t as_count(std::size_t n) { return static_cast<std::int64_t>(n); }

}  // namespace

checkpoint::Expected Evaluator::Impl::expectation() const {
  checkpoint::Expected e;
  e.world_size = backend->world_size();
  const std::string canonical = fmt::format(
      "backend {}\ndata {}\n{}", backend_name,
      data_canonical.empty() ? "(a reader the caller made)" : data_canonical, metrics_canonical);
  e.config_fingerprint = fmt::format("{:016x}", sync::fingerprint(canonical));
  const auto add_plugin = [&](const std::string& name, const std::string& version) {
    if (std::none_of(e.plugins.begin(), e.plugins.end(),
                     [&](const auto& p) { return p.first == name; }))
      e.plugins.emplace_back(name, version);
  };
  for (const auto& m : metrics) add_plugin(m.component->plugin_name, m.component->plugin_version);
  if (data_plugin) add_plugin(data_plugin->first, data_plugin->second);
  return e;
}

// Rank 0, before anything is read: the checkpoint to resume (validated against this run), or a
// clean folder for a fresh run. Throws what every rank must then throw.
Value Evaluator::Impl::choose_checkpoint(Reader& reader, const ReadOptions& options,
                                         const checkpoint::Expected& expected) {
  namespace ck = checkpoint;
  const CheckpointConfig& cc = *config.checkpoint;
  Value d = Value::map();
  d.set("status", 0);
  d.set("step", -1);
  std::string note;
  std::error_code ec;
  fs::create_directories(cc.dir, ec);
  if (ec)
    throw RuntimeError(fmt::format("{}: cannot create the checkpoint folder '{}': {}", cc.where,
                                   cc.dir.string(), ec.message()));
  const auto steps = ck::list_steps(cc.dir);
  std::optional<std::int64_t> chosen;
  if (options.resume) {
    std::vector<std::string> partial;
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      if (it->complete) {
        chosen = it->step;
        break;
      }
      partial.push_back(it->path.filename().string());
    }
    const std::string ignored =
        partial.empty() ? std::string()
                        : fmt::format("; ignoring {}: no {} (the run stopped while writing {})",
                                      fmt::join(partial, ", "), ck::kMetadataName,
                                      partial.size() == 1 ? "it" : "them");
    if (chosen) {
      const fs::path step_dir = cc.dir / ck::step_name(*chosen);
      const fs::path meta_path = step_dir / ck::kMetadataName;
      const std::string text =
          ck::read_bytes(meta_path, "checkpoint metadata", kCheckpointMetadataMaxBytes);
      const auto m = ck::Metadata::parse(text, meta_path);
      if (m.step != *chosen)
        throw InputError(fmt::format("checkpoint {}: step expected {} (its folder), found {}",
                                     meta_path.string(), *chosen, m.step));
      ck::check(m, expected, meta_path);
      const auto total = reader.total_samples();
      if (m.dataset_samples != total)
        throw InputError(fmt::format(
            "checkpoint {}: dataset size expected {} samples (the data now), found {}: the data "
            "changed since it was written",
            meta_path.string(), total, m.dataset_samples));
      // A missing or truncated shard is found here, once, for every rank; its checksum is
      // checked by the rank that reads it.
      for (const auto& rec : m.shards) {
        const fs::path file = step_dir / rec.file;
        const auto size = fs::file_size(file, ec);
        if (ec)
          throw InputError(fmt::format(
              "checkpoint {}: shard {} expected (the metadata lists it), found none: {}",
              meta_path.string(), file.string(), ec.message()));
        if (size != rec.size)
          throw InputError(fmt::format(
              "checkpoint shard {}: size expected {} bytes ({}), found {}: the shard is "
              "truncated or corrupt",
              file.string(), rec.size, ck::kMetadataName, size));
      }
      std::int64_t read = 0;
      for (const auto n : m.samples) read += n;
      d.set("step", *chosen);
      d.set("metadata", text);
      note = fmt::format("checkpoint: resuming from {} (step {}: {} of {} samples read){}",
                         step_dir.string(), m.step, read, total, ignored);
    } else {
      note = fmt::format("checkpoint: no complete checkpoint in {}{}: starting from the beginning",
                         cc.dir.string(), ignored);
    }
  }
  // A fresh run replaces the checkpoints of an earlier run; a resumed one drops the incomplete
  // ones the interrupted run left after the checkpoint it continues.
  std::size_t replaced = 0;
  for (const auto& st : steps) {
    if (chosen && st.step <= *chosen) continue;
    fs::remove(st.path / ck::kMetadataName, ec);  // first: a half-removed folder is incomplete
    if (!ec) fs::remove_all(st.path, ec);
    if (ec)
      throw RuntimeError(fmt::format("checkpoint: cannot remove the old checkpoint {}: {}",
                                     st.path.string(), ec.message()));
    if (st.complete) ++replaced;
  }
  if (!options.resume && replaced > 0)
    note = fmt::format(
        "checkpoint: starting over: removed {} checkpoint{} of an earlier run from {} (tally run "
        "--resume continues from the last one)",
        replaced, replaced == 1 ? "" : "s", cc.dir.string());
  d.set("notice", note);
  return d;
}

// Every metric's state from what save_states() packed, [0, [state...]]; InputError prefixed by
// `where` when it is not that or a metric cannot read its part (the metrics before it are then
// restored already: the caller resets or fails).
void Evaluator::Impl::restore_states(const msgpack::object& o, ByteSpan bytes,
                                     const std::string& where) {
  if (o.type != msgpack::type::ARRAY || o.via.array.size != 2 ||
      o.via.array.ptr[0].type != msgpack::type::POSITIVE_INTEGER ||
      o.via.array.ptr[0].via.u64 != 0 || o.via.array.ptr[1].type != msgpack::type::ARRAY ||
      o.via.array.ptr[1].via.array.size != metrics.size())
    throw InputError(fmt::format("{}: expected the states of {} metrics, found something else",
                                 where, metrics.size()));
  const std::vector<ByteSpan> parts = msgpack_payload_items(bytes);
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    try {
      metrics[i].metric->restore(parts[i]);
    } catch (const StateFormatError&) {
      throw InputError(fmt::format(
          "{}: metric '{}' cannot read its saved state (expected the state its plugin packs)",
          where, metrics[i].label));
    } catch (const Error& e) {  // the state reads, but no run of this metric could have saved it
      throw InputError(fmt::format("{}: metric '{}' cannot read its saved state: {}", where,
                                   metrics[i].label, e.what()));
    } catch (const std::exception&) {
      throw InputError(fmt::format(
          "{}: metric '{}' cannot read its saved state (expected the state its plugin packs)",
          where, metrics[i].label));
    }
  }
}

// This rank: loads its metric states from its shard of `m` and reads again the batches it had
// read, keeping only the held-back sample. Returns the batches read; a reading failure is
// recorded (the caller stops); a shard that cannot be used throws.
std::int64_t Evaluator::Impl::restore(Reader& reader, const checkpoint::Metadata& m,
                                      const ReadOptions& options) {
  namespace ck = checkpoint;
  const CheckpointConfig& cc = *config.checkpoint;
  const int me = backend->rank();
  const auto r = static_cast<std::size_t>(me);
  const fs::path step_dir = cc.dir / ck::step_name(m.step);
  const fs::path meta_path = step_dir / ck::kMetadataName;
  const fs::path file = step_dir / m.shards[r].file;
  const std::string bytes = ck::read_bytes(file, "checkpoint shard", kCheckpointShardMaxBytes);
  ck::verify(bytes, m.shards[r], file, meta_path);
  const auto shard = ck::Shard::parse(bytes, file);
  if (shard.rank != me || shard.step != m.step || shard.samples != m.samples[r] ||
      shard.batches != m.batches[r])
    throw InputError(fmt::format(
        "checkpoint shard {}: expected rank {} at step {} after {} samples in {} batches ({}), "
        "found rank {} at step {} after {} samples in {} batches",
        file.string(), me, m.step, m.samples[r], m.batches[r], ck::kMetadataName, shard.rank,
        shard.step, shard.samples, shard.batches));

  // The metric states, packed as the sync protocol packs them: [0, [state...]].
  msgpack::object_handle h;
  const auto states = std::as_bytes(std::span(shard.payload.data(), shard.payload.size()));
  try {
    h = unpack_bounded(states, /*reference_bins=*/true);
  } catch (const std::exception& e) {
    throw InputError(fmt::format("checkpoint shard {}: the metric states are not valid msgpack: {}",
                                 file.string(), e.what()));
  }
  restore_states(h.get(), states, "checkpoint shard " + file.string());

  const auto total = reader.total_samples();
  if (total != m.dataset_samples)
    throw InputError(fmt::format(
        "checkpoint {}: dataset size expected {} samples (the data now), found {}: the data "
        "changed since it was written",
        meta_path.string(), total, m.dataset_samples));
  held.reset();
  samples = 0;
  bool failed = false;
  const bool stable = is_stable(&reader);
  for (std::int64_t k = 0; k < shard.batches; ++k) {
    auto b = next_batch(reader, failed);
    if (failed) return k;
    if (!b)
      throw InputError(fmt::format(
          "checkpoint shard {}: samples read expected {} in {} batches, found the data of rank {} "
          "ends after {} in {} batches: the data changed since it was written",
          file.string(), shard.samples, shard.batches, me, samples, k));
    const auto n = b->size();
    if (n > 0) {
      if (hold_last) held = last_sample(*b, stable);
      samples += n;
    }
    if (options.on_batch) options.on_batch(n);
  }
  if (samples != shard.samples)
    throw InputError(fmt::format(
        "checkpoint shard {}: samples read expected {} in {} batches, found {}: the data changed "
        "since it was written",
        file.string(), shard.samples, shard.batches, samples));
  return shard.batches;
}

/// Reading with checkpoints: rank 0 decides what to resume (decide), every rank restores its
/// shard's state and skips what it had read (resume), then rounds: every rank reads up to
/// `every_n_batches` batches and writes its shard; once every shard is written, rank 0 writes the
/// metadata that completes the checkpoint (save). Ranks whose shard is done keep taking part until
/// every shard is done.
class Evaluator::Impl::ReadCheckpointed final : public ReadPolicy {
 public:
  ReadCheckpointed(Impl& s, Reader* reader, const ReadOptions& options)
      : s_(s),
        cc_(*s.config.checkpoint),
        reader_(reader),
        options_(options),
        b_(s.collectives()),
        world_(b_.world_size()),
        me_(b_.rank()),
        expected_(s.expectation()) {}

  bool decide() override;
  bool resume(std::int64_t& batches) override;
  std::int64_t round_batches() const override { return cc_.every_n_batches; }
  // Not read ahead: the batches are read as they always were, one round at a time.
  bool read_ahead() const override { return false; }
  void round(const std::function<void()>& read,
             const std::atomic<std::uint64_t>& /*progress*/) override {
    read();
  }
  bool save(bool done, std::int64_t batches) override;

 private:
  /// This rank's shard of `step`, written (its crc32 and size in the result), unless it failed.
  Value write_shard(std::int64_t batches);
  /// Rank 0, once every rank wrote its shard of step_: the metadata that completes it.
  void write_metadata(const std::vector<Value>& recs);

  Impl& s_;
  const CheckpointConfig& cc_;
  Reader* reader_;
  const ReadOptions& options_;
  Collectives& b_;
  const int world_;
  const int me_;
  const checkpoint::Expected expected_;
  Value decision_;
  std::int64_t step_ = 0;
};

// 1. Rank 0 picks the checkpoint to resume (or clears the folder for a fresh run) and tells
// every rank; a refusal fails every rank alike, before anything is read.
bool Evaluator::Impl::ReadCheckpointed::decide() {
  msgpack::sbuffer out;
  if (me_ == 0) {
    Value d = Value::map();
    d.set("status", -1);  // rank 0 failed already: compute() reports it on every rank
    if (!s_.error && reader_ != nullptr) {
      try {
        d = s_.choose_checkpoint(*reader_, options_, expected_);
      } catch (const Error& e) {
        d = Value::map();
        d.set("status", e.exit_code());
        d.set("message", e.what());
      } catch (const std::exception& e) {
        d = Value::map();
        d.set("status", 1);
        d.set("message", fmt::format("checkpoint: {}", e.what()));
      }
    }
    msgpack::pack(out, d);
  }
  decision_ = unpack_value(b_.broadcast_object(bytes_of(out), 0, {"checkpoint decision"}),
                           "rank 0's checkpoint decision");
  const auto status = decision_.at("status").as_int();
  if (status > 0) throw_error(static_cast<int>(status), decision_.at("message").as_string());
  return status >= 0;
}

// 2. Every rank restores its own shard; the ranks agree before any goes on.
bool Evaluator::Impl::ReadCheckpointed::resume(std::int64_t& batches) {
  namespace ck = checkpoint;
  const std::int64_t from = decision_.at("step").as_int();
  batches = 0;
  Value mine = Value::map();
  int kind = 0;  // 0 ok, 1 this rank failed before (recorded), 2 its shard cannot be used
  if (s_.error || reader_ == nullptr) {
    kind = 1;
  } else if (from >= 0) {
    try {
      const auto meta_path = cc_.dir / ck::step_name(from) / ck::kMetadataName;
      const auto m = ck::Metadata::parse(decision_.at("metadata").as_string(), meta_path);
      batches = s_.restore(*reader_, m, options_);
      step_ = m.step;
      if (s_.error) kind = 1;
    } catch (const Error& e) {
      kind = 2;
      mine.set("code", e.exit_code());
      mine.set("message", e.what());
    } catch (const std::exception& e) {
      kind = 2;
      mine.set("code", 1);
      mine.set("message", fmt::format("checkpoint: {}", e.what()));
    }
  }
  mine.set("kind", kind);
  msgpack::sbuffer packed_status;
  msgpack::pack(packed_status, mine);
  const auto all = b_.all_gather_object(bytes_of(packed_status), {"checkpoint status"});
  std::optional<std::pair<int, std::string>> refusal;
  bool stop = false;
  for (int r = 0; r < world_; ++r) {
    const Value v = unpack_value(all[static_cast<std::size_t>(r)], "a rank's restore status");
    const auto k = v.at("kind").as_int();
    if (k == 2 && !refusal) {
      const auto& msg = v.at("message").as_string();
      refusal.emplace(static_cast<int>(v.at("code").as_int()),
                      world_ > 1 ? fmt::format("rank {}: {}", r, msg) : msg);
    }
    stop = stop || k != 0;
  }
  if (refusal) throw_error(refusal->first, refusal->second);
  // Said once every rank has restored its shard: "resuming from" is then true.
  if (const Value* note = decision_.find("notice");
      me_ == 0 && options_.on_notice && note != nullptr && !note->as_string().empty())
    options_.on_notice(note->as_string());
  return !stop;
}

Value Evaluator::Impl::ReadCheckpointed::write_shard(std::int64_t batches) {
  namespace ck = checkpoint;
  Value rec = Value::map();
  if (s_.error) return rec;
  s_.recording("checkpoint: ", [&] {
    ck::Shard shard;
    shard.rank = me_;
    shard.step = step_;
    shard.samples = s_.samples;
    shard.batches = batches;
    msgpack::sbuffer payload;
    s_.save_states(payload);
    shard.payload.assign(payload.data(), payload.size());
    const std::string bytes = shard.serialize();
    const fs::path step_dir = cc_.dir / ck::step_name(step_);
    ck::make_dir(step_dir);
    write_file_atomic(step_dir / ck::shard_name(me_), bytes, "checkpoint shard");
    rec.set("crc32", static_cast<std::int64_t>(ck::crc32_of(bytes)));
    rec.set("size", as_count(bytes.size()));
  });
  return rec;
}

void Evaluator::Impl::ReadCheckpointed::write_metadata(const std::vector<Value>& recs) {
  namespace ck = checkpoint;
  s_.recording("checkpoint: ", [&] {
    ck::Metadata m;
    m.tally_version = kVersion;
    m.protocol = kProtocolVersion;
    m.step = step_;
    m.every_n_batches = cc_.every_n_batches;
    m.world_size = world_;
    m.config_fingerprint = expected_.config_fingerprint;
    m.plugins = expected_.plugins;
    m.dataset_samples = reader_->total_samples();
    for (int r = 0; r < world_; ++r) {
      const auto& v = recs[static_cast<std::size_t>(r)];
      m.samples.push_back(v.at("samples").as_int());
      m.batches.push_back(v.at("batches").as_int());
      m.shards.push_back({ck::shard_name(r), static_cast<std::uint32_t>(v.at("crc32").as_int()),
                          static_cast<std::uint64_t>(v.at("size").as_int())});
    }
    write_file_atomic(cc_.dir / ck::step_name(step_) / ck::kMetadataName, m.to_json(),
                      "checkpoint metadata");
    for (const auto& problem : ck::prune(cc_.dir, step_))
      if (options_.on_notice) options_.on_notice(fmt::format("checkpoint: {}", problem));
  });
}

// 3. After each round: this rank's shard, every rank's record, and rank 0's metadata.
bool Evaluator::Impl::ReadCheckpointed::save(bool done, std::int64_t batches) {
  step_ += cc_.every_n_batches;
  Value rec = write_shard(batches);
  rec.set("failed", s_.error.has_value());
  rec.set("done", done);
  rec.set("samples", s_.samples);
  rec.set("batches", batches);
  msgpack::sbuffer packed_rec;
  msgpack::pack(packed_rec, rec);
  std::vector<Value> recs;
  {
    const auto all = b_.all_gather_object(bytes_of(packed_rec), {"checkpoint round"});
    for (int r = 0; r < world_; ++r)
      recs.push_back(unpack_value(all[static_cast<std::size_t>(r)], "a rank's checkpoint record"));
  }
  // A rank failed: no checkpoint for this step (its shards stay incomplete), and compute()
  // reports the failure on every rank.
  if (std::any_of(recs.begin(), recs.end(),
                  [](const Value& v) { return v.at("failed").as_bool(); }))
    return false;
  if (me_ == 0) write_metadata(recs);
  return !std::all_of(recs.begin(), recs.end(),
                      [](const Value& v) { return v.at("done").as_bool(); });
}

std::unique_ptr<ReadPolicy> Evaluator::Impl::checkpointed_reading(Reader* reader,
                                                                  const ReadOptions& options) {
  return std::make_unique<ReadCheckpointed>(*this, reader, options);
}

// ---- a host program's checkpoint of this rank's state ---------------------------------------
//
// save_state() / load_state() (Python's state_dict()), docs/checkpoint.md "A host program's
// state": a header, the payload, and a CRC-32 of everything before it, little-endian:
//
//   [0, 22)        "tally-evaluator-state\n"
//   [22, 26)       u32 format version (2)
//   [26, 34)       u64 payload bytes
//   [34, 34 + n)   payload: msgpack [metrics fingerprint, samples, [0, [state...]]]
//   [34 + n, +4)   u32 zlib CRC-32 of bytes [0, 34 + n)
//
// load_state checks the size and the CRC before anything is unpacked, then what the payload
// says. Format 1 (tally 0.x before issue 32: a bare msgpack array, no checksum) is refused.

namespace {

constexpr std::string_view kStateMagic = "tally-evaluator-state\n";
constexpr std::uint32_t kStateVersion = 2;
constexpr std::size_t kStateHeader = kStateMagic.size() + 4 + 8;
constexpr std::size_t kStateTrailer = 4;

static_assert(std::endian::native == std::endian::little, "the state header is little-endian");

template <class T>
void append_le(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

template <class T>
T read_le(std::string_view bytes, std::size_t at) {
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof(T));
  return v;
}

// The payload of a state whose header, size and checksum hold; InputError otherwise.
std::string_view checked_payload(std::string_view bytes) {
  const auto fail = [&](const std::string& what) {
    throw InputError(fmt::format("load_state: {}", what));
  };
  // Format 1: msgpack fixarray(5), then the magic without its newline as a str.
  constexpr std::string_view v1 = "\x95\xb5tally-evaluator-state";
  if (bytes.starts_with(v1))
    fail(
        "the state was saved by an older tally (state format 1, without a checksum); this tally "
        "reads format 2: finish the epoch with the tally that saved it, or start it over");
  if (bytes.size() < kStateHeader + kStateTrailer || !bytes.starts_with(kStateMagic))
    fail(fmt::format("the {} bytes are not a saved evaluator state (save_state / state_dict())",
                     bytes.size()));
  const auto declared = read_le<std::uint64_t>(bytes, kStateMagic.size() + 4);
  const std::size_t held = bytes.size() - kStateHeader - kStateTrailer;
  if (declared != held)
    fail(fmt::format(
        "the state is corrupt: its header declares {} payload bytes, it holds {} (truncated or "
        "extended since it was saved)",
        declared, held));
  const auto stored = read_le<std::uint32_t>(bytes, bytes.size() - kStateTrailer);
  const auto computed = checkpoint::crc32_of(bytes.substr(0, bytes.size() - kStateTrailer));
  if (stored != computed)
    fail(fmt::format(
        "the state is corrupt: CRC-32 expected {:08x} (saved with it), found {:08x}: its bytes "
        "changed since it was saved",
        stored, computed));
  if (const auto v = read_le<std::uint32_t>(bytes, kStateMagic.size()); v != kStateVersion)
    fail(fmt::format("state format version expected {}, found {} (saved by another tally)",
                     kStateVersion, v));
  return bytes.substr(kStateHeader, held);
}

}  // namespace

std::string Evaluator::save_state() const {
  const auto& s = *impl_;
  if (s.error) throw_error(s.error->first, s.error->second);
  if (s.held)
    throw ConfigError(
        "save_state: with a padded sampler the last sample added is held back until compute() "
        "knows whether it is padding; save the state between epochs (after compute() or "
        "reset())");
  msgpack::sbuffer payload;
  msgpack::packer<msgpack::sbuffer> p(payload);
  p.pack_array(3);
  p.pack(s.fingerprint);
  p.pack(s.samples);
  s.save_states(payload);  // the third element, in place
  std::string out;
  out.reserve(kStateHeader + payload.size() + kStateTrailer);
  out.append(kStateMagic);
  append_le<std::uint32_t>(out, kStateVersion);
  append_le<std::uint64_t>(out, payload.size());
  out.append(payload.data(), payload.size());
  append_le<std::uint32_t>(out, checkpoint::crc32_of(out));
  return out;
}

void Evaluator::load_state(std::string_view bytes) {
  auto& s = *impl_;
  const auto fail = [](const std::string& what) {
    throw InputError(fmt::format("load_state: {}", what));
  };
  const std::string_view payload = checked_payload(bytes);
  msgpack::object_handle h;
  const auto packed = std::as_bytes(std::span(payload.data(), payload.size()));
  try {
    h = unpack_bounded(packed, /*reference_bins=*/true);
  } catch (const std::exception& e) {
    fail(fmt::format("the state's payload is not valid msgpack: {}", e.what()));
  }
  const auto& o = h.get();
  const auto* a = o.type == msgpack::type::ARRAY ? o.via.array.ptr : nullptr;
  if (a == nullptr || o.via.array.size != 3)
    fail("the state's payload is not [fingerprint, samples, states]");
  if (a[0].type != msgpack::type::POSITIVE_INTEGER || a[0].via.u64 != s.fingerprint)
    fail(
        "the state was saved by an evaluator of other metrics (labels, types, parameters or "
        "plugin versions differ from this one's)");
  if (a[1].type != msgpack::type::POSITIVE_INTEGER || a[1].via.u64 > INT64_MAX)
    fail("the state's sample count is not a count");
  // All or nothing: a state that fails part-way leaves this evaluator reset, not half-loaded.
  reset();
  try {
    s.restore_states(a[2], msgpack_array_items(packed, 0)[2], "load_state");
  } catch (const Error&) {
    reset();
    throw;
  }
  s.samples = static_cast<std::int64_t>(a[1].via.u64);
}

}  // namespace tally
