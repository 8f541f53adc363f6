// Evaluator::read_all with a `checkpoint:` section (docs/checkpoint.md), as a ReadPolicy of the
// one read loop (Evaluator::Impl::read_shards): rank 0 decides what to resume, every rank
// restores its shard's state and skips what it had read, and every `every_n_batches` the ranks
// save their states together.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <filesystem>
#include <map>
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

// Every metric's state from what save_states() packed, [0, [state...]]; InputError prefixed by
// `where` when it is not that or a metric cannot read its part (the metrics before it are then
// restored already: the caller resets or fails).
void Accumulation::restore_states(const msgpack::object& o, ByteSpan bytes,
                                  const std::string& where, bool merge) {
  if (o.type != msgpack::type::ARRAY || o.via.array.size != 2 ||
      o.via.array.ptr[0].type != msgpack::type::POSITIVE_INTEGER ||
      o.via.array.ptr[0].via.u64 != 0 || o.via.array.ptr[1].type != msgpack::type::ARRAY ||
      o.via.array.ptr[1].via.array.size != metrics.size())
    throw InputError(fmt::format("{}: expected the states of {} metrics, found something else",
                                 where, metrics.size()));
  const std::vector<ByteSpan> parts = msgpack_payload_items(bytes);
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    try {
      if (merge)
        metrics[i].metric->merge_saved(parts[i]);
      else
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

namespace {

namespace ck = checkpoint;

// Rank 0, before anything is read: the checkpoint to resume (validated against this run), or a
// clean folder for a fresh run. Throws what every rank must then throw.
Value choose_checkpoint(const CheckpointConfig& cc, Reader& reader, const ReadOptions& options,
                        const checkpoint::Expected& expected) {
  namespace ck = checkpoint;
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
      const std::string ranks =
          m.world_size == expected.world_size
              ? std::string()
              : fmt::format("; written by {} rank{}, its samples planned anew over {}",
                            m.world_size, m.world_size == 1 ? "" : "s", expected.world_size);
      note = fmt::format("checkpoint: resuming from {} (step {}: {} of {} samples read{}){}",
                         step_dir.string(), m.step, read, total, ranks, ignored);
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

/// One step of a rank's plan: a saved state to fold in (its bytes, and the shard file they came
/// from, for messages), or samples to read.
struct PlanItem {
  ck::Item item;
  std::string payload;  // State: [0, [state...]]
  std::string where;    // State: "checkpoint shard FILE"
};

/// The reader of a checkpointed run: this rank's plan (ck::plan) as one stream of batches. A read
/// range opens the reader of its origin's block (the caller's own reader for this rank's block of
/// this world, once; a reader made from the config's data: section otherwise), skips to the
/// range's first sample and stops at its end, cutting batches there; a saved state is folded in
/// (`fold`) when the stream reaches it, so the metrics see their samples in dataset order. No
/// reader plugin needs to seek. It knows where it is: remaining() is what a checkpoint must
/// carry.
class PlanReader final : public Reader {
 public:
  using Open = std::function<std::shared_ptr<Reader>(ShardInfo)>;
  using Fold = std::function<void(const PlanItem&, bool first)>;

  PlanReader(std::vector<PlanItem> items, Reader* own, ShardInfo me, std::int64_t total,
             std::int64_t begin, Open open, Fold fold, std::function<void(std::int64_t)> on_folded)
      : items_(std::move(items)),
        own_(own),
        me_(me),
        total_(total),
        begin_(items_.empty() ? begin : items_.front().item.span.begin),
        end_(items_.empty() ? begin : items_.back().item.span.end),
        open_(std::move(open)),
        fold_(std::move(fold)),
        on_folded_(std::move(on_folded)) {
    for (const auto& p : items_) next_.push_back(p.item.span.begin);
  }

  std::vector<std::string> fields() const override { return own_->fields(); }
  std::int64_t total_samples() const override { return total_; }
  std::int64_t shard_samples() const override { return end_ - begin_; }
  std::string layout() const override { return own_->layout(); }
  /// The first sample of this rank's part of the data (its samples are numbered from it).
  std::int64_t begin() const { return begin_; }

  /// Folds the states that come first and opens the first read range (skipping to it): what a
  /// resume must do before the ranks agree. Returns the batches skipped.
  std::int64_t start() {
    while (i_ < items_.size() && items_[i_].item.kind == ck::Pending::Kind::State) fold_next();
    if (i_ < items_.size()) open(i_);
    return skipped_;
  }

  std::optional<Batch> next() override {
    while (i_ < items_.size()) {
      const auto& it = items_[i_].item;
      if (it.kind == ck::Pending::Kind::State) {
        fold_next();
        continue;
      }
      if (cur_ == nullptr) open(i_);
      auto& next = next_[i_];
      if (next >= it.span.end) {
        close();
        ++i_;
        continue;
      }
      std::optional<Batch> b = stash_ ? std::exchange(stash_, std::nullopt) : cur_->next();
      if (!b) data_ended(it.origin, next, it.span.end);
      const auto n = b->size();
      if (n == 0) continue;
      const auto want = it.span.end - next;
      Batch out = n > want ? b->slice(0, want) : std::move(*b);
      next += out.size();
      last_ = static_cast<std::ptrdiff_t>(i_);
      touched_ = true;
      return out;
    }
    close();
    return std::nullopt;
  }

  /// What this rank has not folded into its metrics yet, in dataset order (`held`: the last
  /// sample read is held back, not in them): the checkpoint's pending, with the saved states'
  /// bytes.
  std::vector<PlanItem> remaining(bool held) const {
    std::vector<PlanItem> out;
    const bool back = held && last_ >= 0;
    const auto from = back ? static_cast<std::size_t>(last_) : i_;
    for (std::size_t k = from; k < items_.size(); ++k) {
      const auto& p = items_[k];
      if (p.item.kind == ck::Pending::Kind::State) {
        if (k >= i_) out.push_back(p);
        continue;
      }
      const auto b = next_[k] - (back && k == static_cast<std::size_t>(last_) ? 1 : 0);
      if (b >= p.item.span.end) continue;
      PlanItem rest{p.item, {}, {}};
      rest.item.span.begin = b;
      out.push_back(std::move(rest));
    }
    return out;
  }
  /// The samples the metrics hold now, given remaining().
  ck::Span covers(const std::vector<PlanItem>& remaining) const {
    return {begin_, remaining.empty() ? end_ : remaining.front().item.span.begin};
  }

 private:
  // Folds the next item, a saved state; its samples count as read for the progress (on_folded), as
  // the samples the reader skips to reach a read range do not: they are in a state folded
  // already (the items tile this rank's part of the data once).
  void fold_next() {
    auto& p = items_[i_];
    fold_(p, !touched_);
    if (on_folded_) on_folded_(p.item.span.size());
    touched_ = true;
    std::string().swap(p.payload);  // folded: its bytes are no longer needed
    ++i_;
  }

  [[noreturn]] static void data_ended(ShardInfo o, std::int64_t at, std::int64_t want) {
    throw InputError(fmt::format(
        "checkpoint: the data of rank {} of {} ends before sample {} (expected samples up to {}): "
        "the data changed since the checkpoint was written",
        o.rank, o.world_size, at, want));
  }

  // Opens the reader of item k's origin and skips to the item's first sample (a batch across it
  // is cut: its rest is the first batch served).
  void open(std::size_t k) {
    const auto& it = items_[k].item;
    const ShardInfo o = it.origin;
    const bool mine =
        own_ != nullptr && !own_used_ && o.rank == me_.rank && o.world_size == me_.world_size;
    if (mine) {
      cur_ = own_;
      own_used_ = true;
    } else {
      owned_ = open_(o);
      cur_ = owned_.get();
    }
    std::int64_t at = ShardRange::of(total_, o).begin;
    while (at < it.span.begin) {
      auto b = cur_->next();
      if (!b) data_ended(o, at, it.span.begin);
      const auto n = b->size();
      if (at + n <= it.span.begin) {
        at += n;
        ++skipped_;
        continue;
      }
      stash_ = b->slice(it.span.begin - at, n);
      at = it.span.begin;
    }
  }

  void close() {
    stash_.reset();
    cur_ = nullptr;
    owned_.reset();
  }

  std::vector<PlanItem> items_;
  std::vector<std::int64_t> next_;  // per item: its next sample to serve
  std::size_t i_ = 0;               // the item being served
  std::ptrdiff_t last_ = -1;        // the item the last batch served came from
  bool touched_ = false;            // anything folded or served yet
  Reader* own_;
  bool own_used_ = false;
  const ShardInfo me_;
  const std::int64_t total_, begin_, end_;
  Open open_;
  Fold fold_;
  std::function<void(std::int64_t)> on_folded_;
  Reader* cur_ = nullptr;
  std::shared_ptr<Reader> owned_;
  std::optional<Batch> stash_;
  std::int64_t skipped_ = 0;
};

// A pending item as it travels in a rank's checkpoint record to rank 0: [kind (0 state, 1 read),
// begin, end, origin rank, origin world size].
Value pending_value(const ck::Item& it) {
  Value v = Value::array();
  for (const std::int64_t x :
       {std::int64_t{it.kind == ck::Pending::Kind::State ? 0 : 1}, it.span.begin, it.span.end,
        std::int64_t{it.origin.rank}, std::int64_t{it.origin.world_size}})
    v.push_back(x);
  return v;
}

ck::Pending pending_of(const Value& v) {
  const auto at = [&](std::size_t i) { return v.as_array().at(i).as_int(); };
  return {at(0) == 0 ? ck::Pending::Kind::State : ck::Pending::Kind::Read,
          {at(1), at(2)},
          {static_cast<int>(at(3)), static_cast<int>(at(4))}};
}

// The shard file of rank `s` in `m`, read, checked against the metadata (size, CRC-32, rank,
// step, counts, and in format 2 what its state covers and the spans of its pending states).
ck::Shard load_shard(const fs::path& step_dir, const ck::Metadata& m, int s) {
  const auto r = static_cast<std::size_t>(s);
  const fs::path meta_path = step_dir / ck::kMetadataName;
  const fs::path file = step_dir / m.shards[r].file;
  const std::string bytes = ck::read_bytes(file, "checkpoint shard", kCheckpointShardMaxBytes);
  ck::verify(bytes, m.shards[r], file, meta_path);
  auto shard = ck::Shard::parse(bytes, file);
  if (shard.rank != s || shard.step != m.step || shard.samples != m.samples[r] ||
      shard.batches != m.batches[r])
    throw InputError(fmt::format(
        "checkpoint shard {}: expected rank {} at step {} after {} samples in {} batches ({}), "
        "found rank {} at step {} after {} samples in {} batches",
        file.string(), s, m.step, m.samples[r], m.batches[r], ck::kMetadataName, shard.rank,
        shard.step, shard.samples, shard.batches));
  if (m.format >= 2) {
    std::vector<ck::Span> states;
    for (const auto& p : m.shards[r].pending)
      if (p.kind == ck::Pending::Kind::State) states.push_back(p.span);
    std::vector<ck::Span> held;
    for (const auto& st : shard.states) held.push_back(st.span);
    if (!(shard.covers == m.shards[r].covers) || held != states)
      throw InputError(fmt::format(
          "checkpoint shard {}: expected the states of the samples {} lists for it, found others",
          file.string(), ck::kMetadataName));
  }
  return shard;
}

}  // namespace

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
  Reader* source(Reader* given) override { return plan_ ? plan_.get() : given; }

 private:
  /// This rank's part of checkpoint `m` (ck::plan), the bytes of its saved states read.
  std::vector<PlanItem> plan_of(const checkpoint::Metadata& m) const;
  /// This rank's plan: `items` (a fresh run: its own block), folded and skipped to its start.
  std::int64_t start_plan(std::vector<PlanItem> items);
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
  std::unique_ptr<PlanReader> plan_;
};

// This rank's part of checkpoint `m` on this world: its plan (ck::plan), with the bytes of every
// saved state in it read from their shards. Throws InputError when a shard cannot be used.
std::vector<PlanItem> Evaluator::Impl::ReadCheckpointed::plan_of(const ck::Metadata& m) const {
  const CheckpointConfig& cc = cc_;
  const fs::path step_dir = cc.dir / ck::step_name(m.step);
  const auto per_shard = ck::items_of(m, s_.hold_last, step_dir / ck::kMetadataName);
  std::vector<PlanItem> out;
  std::map<int, ck::Shard> shards;
  for (const auto& it : ck::plan(per_shard, world_, me_)) {
    PlanItem p{it, {}, {}};
    if (it.kind == ck::Pending::Kind::State) {
      auto found = shards.find(it.shard);
      if (found == shards.end())
        found = shards.emplace(it.shard, load_shard(step_dir, m, it.shard)).first;
      // Each of a shard's states is in the plan once: its bytes move, not copied.
      auto& sh = found->second;
      p.payload = std::move(
          it.index < 0 ? sh.payload : sh.states.at(static_cast<std::size_t>(it.index)).payload);
      p.where = "checkpoint shard " +
                (step_dir / m.shards[static_cast<std::size_t>(it.shard)].file).string();
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::int64_t Evaluator::Impl::ReadCheckpointed::start_plan(std::vector<PlanItem> items) {
  const auto total = reader_->total_samples();
  const ShardInfo me{me_, world_};
  const auto open = [this](ShardInfo o) -> std::shared_ptr<Reader> {
    if (!s_.config.data_type)
      throw ConfigError(fmt::format(
          "checkpoint: this rank resumes samples of rank {} of {}, and the reader this program "
          "made reads only its own block: resume on {} ranks, or from a config with a data: "
          "section",
          o.rank, o.world_size, o.world_size));
    return s_.reader_for(o);
  };
  const auto fold = [this](const PlanItem& p, bool first) {
    s_.apply_held();  // its sample comes before the state's
    const auto bytes = std::as_bytes(std::span(p.payload.data(), p.payload.size()));
    msgpack::object_handle h;
    try {
      h = unpack_bounded(bytes, /*reference_bins=*/true);
    } catch (const std::exception& e) {
      throw InputError(
          fmt::format("{}: the metric states are not valid msgpack: {}", p.where, e.what()));
    }
    s_.restore_states(h.get(), bytes, p.where, /*merge=*/!first);
    s_.samples += p.item.span.size();
  };
  plan_ =
      std::make_unique<PlanReader>(std::move(items), reader_, me, total,
                                   ShardRange::of(total, me).begin, open, fold, options_.on_batch);
  s_.held.reset();
  s_.samples = 0;
  const auto skipped = plan_->start();
  s_.shard_begin = plan_->begin();
  return skipped;
}

// 1. Rank 0 picks the checkpoint to resume (or clears the folder for a fresh run) and tells
// every rank; a refusal fails every rank alike, before anything is read.
bool Evaluator::Impl::ReadCheckpointed::decide() {
  msgpack::sbuffer out;
  if (me_ == 0) {
    Value d = Value::map();
    d.set("status", -1);  // rank 0 failed already: compute() reports it on every rank
    if (!s_.error && reader_ != nullptr) {
      try {
        d = choose_checkpoint(cc_, *reader_, options_, expected_);
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
  } else {
    try {
      std::vector<PlanItem> items;
      if (from >= 0) {
        const auto meta_path = cc_.dir / ck::step_name(from) / ck::kMetadataName;
        // Its dataset size was checked by rank 0 (choose_checkpoint), and every rank's reader
        // agreed on that size at the start exchange.
        const auto m = ck::Metadata::parse(decision_.at("metadata").as_string(), meta_path);
        items = plan_of(m);
        step_ = m.step;
      } else if (const auto block = ShardRange::of(reader_->total_samples(), {me_, world_});
                 block.size() > 0) {
        items.push_back(
            {{ck::Pending::Kind::Read, {block.begin, block.end}, {me_, world_}, me_, -1}, {}, {}});
      }
      batches = start_plan(std::move(items));
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
    Value pending = Value::array();
    if (plan_) {
      const auto rest = plan_->remaining(s_.held.has_value());
      shard.covers = plan_->covers(rest);
      for (const auto& p : rest) {
        const auto& it = p.item;
        const bool state = it.kind == ck::Pending::Kind::State;
        if (state) shard.states.push_back({it.span, p.payload});
        pending.push_back(pending_value(it));
      }
    }
    rec.set("covers_begin", shard.covers.begin);
    rec.set("covers_end", shard.covers.end);
    rec.set("pending", std::move(pending));
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
      ck::ShardRecord rec{ck::shard_name(r),
                          static_cast<std::uint32_t>(v.at("crc32").as_int()),
                          static_cast<std::uint64_t>(v.at("size").as_int()),
                          {v.at("covers_begin").as_int(), v.at("covers_end").as_int()},
                          {}};
      for (const auto& p : v.at("pending").as_array()) rec.pending.push_back(pending_of(p));
      m.shards.push_back(std::move(rec));
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
  if (s.error) s.error->raise();
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

void Evaluator::load_state(std::string_view bytes) { load_states(std::span(&bytes, 1)); }

void Evaluator::load_states(std::span<const std::string_view> states) {
  auto& s = *impl_;
  const auto fail = [](const std::string& what) {
    throw InputError(fmt::format("load_state: {}", what));
  };
  // Every state's header, size, checksum, fingerprint and count first: a state that fails them
  // leaves this evaluator as it was.
  struct Unpacked {
    msgpack::object_handle handle;
    std::span<const std::byte> packed;
  };
  std::vector<Unpacked> all;
  std::int64_t samples = 0;
  for (const auto bytes : states) {
    const std::string_view payload = checked_payload(bytes);
    Unpacked u;
    u.packed = std::as_bytes(std::span(payload.data(), payload.size()));
    try {
      u.handle = unpack_bounded(u.packed, /*reference_bins=*/true);
    } catch (const std::exception& e) {
      fail(fmt::format("the state's payload is not valid msgpack: {}", e.what()));
    }
    const auto& o = u.handle.get();
    const auto* a = o.type == msgpack::type::ARRAY ? o.via.array.ptr : nullptr;
    if (a == nullptr || o.via.array.size != 3)
      fail("the state's payload is not [fingerprint, samples, states]");
    if (a[0].type != msgpack::type::POSITIVE_INTEGER || a[0].via.u64 != s.fingerprint)
      fail(
          "the state was saved by an evaluator of other metrics (labels, types, parameters or "
          "plugin versions differ from this one's)");
    if (a[1].type != msgpack::type::POSITIVE_INTEGER ||
        a[1].via.u64 > static_cast<std::uint64_t>(INT64_MAX - samples))
      fail("the state's sample count is not a count");
    samples += static_cast<std::int64_t>(a[1].via.u64);
    all.push_back(std::move(u));
  }
  // All or nothing: a state that fails part-way leaves this evaluator reset, not half-loaded.
  reset();
  try {
    for (std::size_t i = 0; i < all.size(); ++i)
      s.restore_states(all[i].handle.get().via.array.ptr[2],
                       msgpack_array_items(all[i].packed, 0)[2], "load_state",
                       /*merge=*/i > 0);
  } catch (const Error&) {
    reset();
    throw;
  }
  s.samples = samples;
}

}  // namespace tally
