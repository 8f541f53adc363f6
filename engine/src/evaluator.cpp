#include "tally/evaluator.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backend_auto.hpp"
#include "evaluator_impl.hpp"
#include "file_io.hpp"
#include "msgpack_bounds.hpp"
#include "registry.hpp"
#include "sync.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/version.hpp"

namespace tally {

namespace fs = std::filesystem;

namespace {

std::string owner_of(const MetricConfig& mc) {
  return mc.label == mc.type ? fmt::format("metric '{}'", mc.label)
                             : fmt::format("metric '{}' ({})", mc.label, mc.type);
}

// Prefixes a ConfigError with a location unless it already carries one (its context's file).
template <class F>
decltype(auto) at(const std::string& where, F&& f) {  // decltype(auto): references stay references
  try {
    return f();
  } catch (const ConfigError& e) {
    if (where.empty() || !e.context().file.empty()) throw;
    rethrow_with(e, {.file = where}, fmt::format("{}: {}", where, e.what()));
  }
}

}  // namespace

Evaluator::Evaluator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Evaluator::Evaluator(Evaluator&&) noexcept = default;
Evaluator& Evaluator::operator=(Evaluator&&) noexcept = default;
Evaluator::~Evaluator() = default;

Evaluator Evaluator::from_file(const fs::path& config, EvaluatorOptions options) {
  const std::string text = read_whole_file(config, "config", kConfigMaxBytes);
  fs::path base = config.parent_path();
  if (base.empty()) base = ".";
  return from_yaml(text, std::move(options), config.string(),
                   fs::absolute(base).lexically_normal());
}

Evaluator Evaluator::from_yaml(const std::string& yaml_text, EvaluatorOptions options,
                               const std::string& source, const fs::path& base_dir) {
  auto impl = std::make_unique<Impl>();
  impl->hold_last = options.padded_sampler;
  auto& c = impl->config;
  const Component* bc = nullptr;
  std::optional<Params> bp;
  try {
    c = Config::parse(yaml_text, source, base_dir.empty() ? fs::current_path() : base_dir,
                      options.overrides, options.locate_by_key_path);
    impl->registry = Registry::load(c.plugin_paths, c.allow_unsafe_plugins);
    // The backend first: its rank decides the reader's shard.
    if (c.backend_type == "auto") {
      // auto: the backend the launcher's variables ask for (backend_auto.hpp).
      AutoBackend chosen =
          resolve_auto_backend(impl->registry, c.backend_params, process_env_lookup());
      bc = chosen.component;
      impl->backend_choice = fmt::format("{} ({})", chosen.choice.type, chosen.choice.reason);
      if (!chosen.ignored.empty())
        impl->backend_choice +=
            fmt::format("; {} takes no {}", chosen.choice.type, fmt::join(chosen.ignored, ", "));
      bp.emplace(make_params(*bc->info, chosen.params,
                             fmt::format("backend 'auto' (chose {})", chosen.choice.type),
                             c.base_dir));
    } else {
      bc = &at(c.backend_params.where, [&]() -> const Component& {
        return impl->registry.get(ComponentKind::Backend, c.backend_type);
      });
      bp.emplace(make_params(*bc->info, c.backend_params,
                             fmt::format("backend '{}'", c.backend_type), c.base_dir));
    }
  } catch (const Error& e) {
    // The host program's backend spans several ranks that will wait for this one: fail them too.
    if (options.backend && options.backend->world_size() > 1)
      return failed(std::move(options.backend), e.exit_code(), e.what());
    throw;
  }
  impl->backend_name = bc->info->name;
  if (options.backend) {
    impl->backend = std::move(options.backend);
    impl->backend_name = impl->backend->name();
  } else if (!options.validate_only) {
    impl->backend = Registry::make_backend(*bc, *bp);
  }

  // From here on a failure on one rank of several must reach the others, which are about to wait
  // for it in the start exchange: it is recorded, and the first collective (read_all's start
  // exchange, or compute()) fails every rank with it, naming this rank. Alone, it throws now.
  if (impl->backend && impl->backend->world_size() > 1) {
    try {
      impl->build_metrics(source);
    } catch (const Error& e) {
      impl->record(e.exit_code(), e.what());
    } catch (const std::exception& e) {
      impl->record(1, e.what());
    }
  } else {
    impl->build_metrics(source);
  }
  return Evaluator(std::move(impl));
}

Evaluator Evaluator::failed(std::shared_ptr<DistBackend> backend, int exit_code,
                            const std::string& message) {
  auto impl = std::make_unique<Impl>();
  impl->backend_name = backend->name();
  impl->backend = std::move(backend);
  impl->record(exit_code, message);
  return Evaluator(std::move(impl));
}

void Evaluator::Impl::build_metrics(const std::string& source) {
  const auto& c = config;
  const auto& reg = registry;
  if (c.metrics.empty())
    throw ConfigError(fmt::format("{}: no metrics: add a 'metrics:' list", source));
  std::string canonical = fmt::format("protocol {}\n", kProtocolVersion);
  for (const auto& mc : c.metrics) {
    const std::string owner = owner_of(mc);
    const Component& comp =
        at(mc.where, [&]() -> const Component& { return reg.get(ComponentKind::Metric, mc.type); });
    const Params params = make_params(*comp.info, mc.params, owner, c.base_dir);
    for (const auto& [input, field] : mc.inputs) {
      const auto& ins = comp.info->inputs;
      if (std::none_of(ins.begin(), ins.end(),
                       [&name = input](const InputSpec& s) { return s.name == name; })) {
        std::vector<std::string> names;
        for (const auto& s : ins) names.push_back(s.name);
        throw ConfigError(fmt::format(
            "{}: {}: unknown input '{}' in inputs (the metric reads {})", mc.where, owner, input,
            names.empty() ? "nothing" : fmt::format("{}", fmt::join(names, ", "))));
      }
    }
    MetricSlot slot;
    slot.label = mc.label;
    slot.component = &comp;
    slot.inputs = mc.inputs;
    slot.where = mc.where;
    slot.metric = at(mc.where, [&] { return Registry::make_metric(comp, params); });
    slot.params = params;
    metrics.push_back(std::move(slot));
    canonical += fmt::format("{}|{}|{}@{}|{}|", mc.label, comp.info->name, comp.plugin_name,
                             comp.plugin_version, Value(params.values()).to_json());
    for (const auto& [k, v] : mc.inputs) canonical += fmt::format("{}={};", k, v);
    canonical += '\n';
  }
  fingerprint = sync::fingerprint(canonical);
  metrics_canonical = std::move(canonical);
  if (c.output_records || c.intervals || (c.regression && c.regression->baseline_records)) {
    std::vector<UnitRecorder::Slot> slots;
    for (const auto& m : metrics)
      slots.push_back({m.label, m.component->info->name, Value(m.params.values()),
                       at(m.where, [&] { return Registry::make_metric(*m.component, m.params); }),
                       m.inputs});
    recorder = std::make_unique<UnitRecorder>(std::move(slots));
  }
}

int Evaluator::rank() const { return impl_->backend ? impl_->backend->rank() : 0; }
int Evaluator::world_size() const { return impl_->backend ? impl_->backend->world_size() : 1; }
const std::string& Evaluator::backend_name() const { return impl_->backend_name; }
const std::string& Evaluator::backend_choice() const { return impl_->backend_choice; }
std::optional<fs::path> Evaluator::output_json() const { return impl_->config.output_json; }
OutputPaths Evaluator::outputs() const {
  const auto& c = impl_->config;
  return {c.output_json, c.output_junit, c.output_markdown, c.output_html, c.output_records};
}
const std::optional<RegressionSettings>& Evaluator::regression() const {
  return impl_->config.regression;
}
bool Evaluator::has_checkpoint() const { return impl_->config.checkpoint.has_value(); }
bool Evaluator::has_data() const { return impl_->config.data_type.has_value(); }

std::shared_ptr<Reader> Evaluator::Impl::reader_for(ShardInfo shard) {
  const auto& c = config;
  if (!c.data_type)
    throw ConfigError(fmt::format(
        "{}: no 'data:' section: say which reader reads the data (for example type: npy)",
        c.source));
  const Component& rc = at(c.data_params.where, [&]() -> const Component& {
    return registry.get(ComponentKind::Reader, *c.data_type);
  });
  const Params rp =
      make_params(*rc.info, c.data_params, fmt::format("data ({})", *c.data_type), c.base_dir);
  data_canonical = fmt::format("{}|{}@{}|{}", rc.info->name, rc.plugin_name, rc.plugin_version,
                               Value(rp.values()).to_json());
  data_plugin.emplace(rc.plugin_name, rc.plugin_version);
  return Registry::make_reader(rc, rp, shard);
}

std::shared_ptr<Reader> Evaluator::make_reader() const {
  // An evaluator that failed to set up reads nothing (read_all's start exchange reports why).
  if (impl_->error) impl_->error->raise();
  const auto& c = impl_->config;
  auto reader = impl_->reader_for(ShardInfo{rank(), world_size()});
  const auto fields = reader->fields();
  for (const auto& m : impl_->metrics) {
    for (const auto& spec : m.component->info->inputs) {
      std::string field = spec.name;
      bool mapped = false;
      for (const auto& [in, f] : m.inputs)
        if (in == spec.name) {
          field = f;
          mapped = true;
        }
      if ((spec.required || mapped) &&
          std::find(fields.begin(), fields.end(), field) == fields.end())
        throw ConfigError(fmt::format(
            "{}: metric '{}' reads input '{}' from the data field '{}', which the {} reader does "
            "not provide (its "
            "fields: {}){}",
            m.where, m.label, spec.name, field, *c.data_type, fmt::join(fields, ", "),
            mapped ? ""
                   : fmt::format("; map another field with inputs: {{{}: FIELD}}", spec.name)));
    }
  }
  return reader;
}

void Evaluator::add(const Batch& batch) { impl_->add(batch); }

void Accumulation::add(const Batch& batch, bool stable) {
  auto& s = *this;
  const auto n = batch.size();
  if (n == 0) return;
  try {
    if (!s.hold_last) {
      s.apply(batch);
      s.samples += n;
      return;
    }
    s.apply_held();
    if (n > 1) s.apply(batch.slice(0, n - 1));
    s.held = last_sample(batch, stable);
    s.samples += n;
  } catch (const std::exception& e) {
    s.record(e);  // its context too: compute() reports the error that was caught
    throw;
  }
}

void Evaluator::record_error(int exit_code, const std::string& message) {
  impl_->record(exit_code, message);
}

void Evaluator::barrier() {
  if (impl_->backend) impl_->collectives().barrier({"Evaluator::barrier"});
}

void Evaluator::reset() {
  for (auto& m : impl_->metrics) m.metric->reset();
  if (impl_->recorder) impl_->recorder->clear();
  impl_->held.reset();
  impl_->samples = 0;
  impl_->error.reset();
  impl_->start = std::chrono::steady_clock::now();
}

Results Evaluator::compute(std::optional<std::int64_t> dataset_size, const RunStepFn& on_step) {
  auto& s = *impl_;
  if (!s.backend)
    throw ConfigError(
        "this evaluator was built to validate a config; it has no backend to compute with");
  sync::Request request;
  for (const auto& m : s.metrics) request.metrics.push_back({m.label, m.metric.get()});
  request.fingerprint = s.fingerprint;
  request.samples = s.samples;
  request.dataset_size = dataset_size;
  request.padded_sampler = s.hold_last;
  request.error = s.error;
  request.start = s.start;
  if (s.backend->rank() == 0) request.on_step = on_step;
  request.finish = [&s](bool drop_last) {
    if (drop_last)
      s.held.reset();
    else
      s.apply_held();
  };
  const sync::Outcome out = sync::run(s.collectives(), std::move(request));
  const int world = s.backend->world_size();

  Results r;
  r.metrics = out.results;
  r.run.config = s.config.source;
  r.run.backend = s.backend_name;
  r.run.world_size = world;
  r.run.samples = out.samples;
  r.run.wall_seconds = out.wall_seconds;
  for (const auto& m : s.metrics) {
    r.run.types.emplace_back(m.label, m.component->info->name);
    r.specs.emplace_back(m.label, m.component->info->results);
    const auto& plugin = m.component->plugin_name;
    if (std::none_of(r.run.plugins.begin(), r.run.plugins.end(),
                     [&](const auto& p) { return p.first == plugin; }))
      r.run.plugins.emplace_back(plugin, m.component->plugin_version);
  }
  if (s.recorder) s.gather_records(r);
  return r;
}

std::string dataset_samples(std::string_view message, std::int64_t offset) {
  if (offset <= 0) return std::string(message);
  constexpr std::string_view kWord = "sample ";
  std::string out;
  std::size_t from = 0;
  for (auto at = message.find(kWord); at != std::string_view::npos;
       at = message.find(kWord, at + 1)) {
    const auto digits = at + kWord.size();
    auto end = digits;
    while (end < message.size() && end - digits < 18 && message[end] >= '0' && message[end] <= '9')
      ++end;
    const bool word = at == 0 || !std::isalnum(static_cast<unsigned char>(message[at - 1]));
    const bool whole =
        end == message.size() || !std::isdigit(static_cast<unsigned char>(message[end]));
    if (!word || end == digits || !whole) continue;
    std::int64_t n = 0;
    std::from_chars(message.data() + digits, message.data() + end, n);
    if (n > std::numeric_limits<std::int64_t>::max() - offset) continue;
    out.append(message.substr(from, digits - from));
    out += std::to_string(n + offset);
    from = end;
  }
  out.append(message.substr(from));
  return out;
}

void Evaluator::Impl::agree_at_start(
    const Reader* reader, const std::vector<std::pair<std::string, std::string>>& settings) {
  sync::StartRecord mine;
  mine.header.protocol = kProtocolVersion;
  mine.header.fingerprint = fingerprint;
  mine.settings = config.agreed_settings();
  mine.settings.insert(mine.settings.end(), settings.begin(), settings.end());
  if (!error && reader != nullptr) {
    recording("", [&] {
      mine.layout = reader->layout();
      mine.header.total_samples = reader->total_samples();
      // Shards are contiguous blocks in dataset order (tally/sdk/reader.hpp).
      shard_begin = ShardRange::of(mine.header.total_samples,
                                   ShardInfo{backend->rank(), backend->world_size()})
                        .begin;
    });
    mine.header.layout_fingerprint = sync::fingerprint(mine.layout);
  }
  if (error) {
    mine.header.status = error->exit_code;
    mine.message = error->message;
  }
  if (auto verdict = sync::exchange_start(collectives(), mine)) {
    // Recorded too: a compute() after this failure fails the same way, on every rank.
    record(verdict->exit_code, verdict->message);
    throw_error(verdict->exit_code, verdict->message);
  }
}

namespace {

/// Reads a reader's batches on a thread of its own, one ahead: request() starts reading the next
/// batch, take() waits for it (rethrowing what next() threw). Only for a reader whose batches stay
/// valid while later ones are read (StableBatchReader). The first batch is requested at once.
class ReadAhead {
 public:
  explicit ReadAhead(Reader& reader) : reader_(reader), thread_([this] { run(); }) { request(); }
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;
  ~ReadAhead() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();  // after the read in flight, if any
  }

  void request() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (wanted_ || ready_) return;
      wanted_ = true;
    }
    cv_.notify_all();
  }

  std::optional<Batch> take() {
    request();
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return ready_; });
    ready_ = false;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return std::exchange(batch_, std::nullopt);
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      cv_.wait(lock, [&] { return wanted_ || stop_; });
      if (stop_) return;
      lock.unlock();
      std::optional<Batch> b;
      std::exception_ptr e;
      try {
        b = reader_.next();
      } catch (...) {
        e = std::current_exception();
      }
      lock.lock();
      batch_ = std::move(b);
      error_ = e;
      wanted_ = false;
      ready_ = true;
      cv_.notify_all();
    }
  }

  Reader& reader_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool wanted_ = false, ready_ = false, stop_ = false;
  std::optional<Batch> batch_;
  std::exception_ptr error_;
  std::thread thread_;  // last: started once everything it uses is
};

/// Reading without checkpoints: every rank reads its whole shard in one round, then waits for the
/// others; a rank still reading is waited for as long as it reads batches (run_on_every_rank),
/// however long that takes.
class ReadStraight final : public ReadPolicy {
 public:
  explicit ReadStraight(Collectives& collectives) : collectives_(collectives) {}
  bool decide() override { return true; }
  bool resume(std::int64_t& batches) override {
    batches = 0;
    return true;
  }
  std::int64_t round_batches() const override { return 0; }
  bool read_ahead() const override { return true; }
  void round(const std::function<void()>& read,
             const std::atomic<std::uint64_t>& progress) override {
    collectives_.run_on_every_rank(read, progress, {"reading the shards"});
  }
  bool save(bool /*done*/, std::int64_t /*batches*/) override { return false; }

 private:
  Collectives& collectives_;
};

}  // namespace

void Evaluator::Impl::read_shards(Reader* reader, const ReadOptions& options, ReadPolicy& policy) {
  std::int64_t resumed = 0;
  if (!policy.decide() || !policy.resume(resumed)) return;
  reader = policy.source(reader);
  if (options.on_shard && reader != nullptr) options.on_shard(reader->shard_samples());
  std::atomic<std::uint64_t> batches{static_cast<std::uint64_t>(resumed)};
  const std::int64_t limit = policy.round_batches();
  const bool stable = is_stable(reader);
  // A reader whose batches stay valid (StableBatchReader) reads the next batch on a thread of
  // its own while this one adds the current one: the same batches, in the same order. It lives
  // from the first round until this rank's reading stops, so that no batch it read is lost
  // between rounds.
  std::optional<ReadAhead> ahead;
  bool done = false;
  const auto next = [&](bool& failed) {
    if (!ahead) return next_batch(*reader, failed);
    std::optional<Batch> b;
    failed = !recording("", [&] { b = ahead->take(); });
    return b;
  };
  // One round of this rank's reading: false once it stopped (the shard's end, or a failure,
  // recorded: add() and next_batch() record theirs).
  const auto read_round = [&] {
    if (stable && policy.read_ahead() && !ahead) ahead.emplace(*reader);
    for (std::int64_t i = 0; limit == 0 || i < limit; ++i) {
      bool failed = false;
      std::optional<Batch> batch = next(failed);
      if (failed) return false;
      if (!batch) {
        done = true;
        return false;
      }
      const auto n = batch->size();
      if (ahead) ahead->request();
      try {
        add(*batch, stable);
      } catch (const std::exception&) {  // add() recorded it
        return false;
      }
      batches.fetch_add(1, std::memory_order_relaxed);
      if (options.on_batch) options.on_batch(n);
    }
    return true;
  };
  while (true) {
    policy.round(
        [&] {
          if (reader == nullptr || error || done) return;
          // Once this rank's reading stops, the read-ahead stops too (after the read in flight,
          // if any), inside the round, as when it was local to it.
          try {
            if (!read_round()) ahead.reset();
          } catch (...) {  // from on_batch, say
            ahead.reset();
            throw;
          }
        },
        batches);
    if (!policy.save(done, static_cast<std::int64_t>(batches.load()))) return;
  }
}

void Evaluator::read_all(Reader* reader, const ReadOptions& options) {
  auto& s = *impl_;
  // A rank without a reader must fail the run, not count as an empty shard.
  if (reader == nullptr) s.record(1, "read_all: this rank has no reader");
  if (!s.backend)
    throw ConfigError(
        "this evaluator was built to validate a config; it has no backend to read data with");
  s.agree_at_start(reader, options.settings);
  if (s.config.checkpoint) {
    const auto policy = s.checkpointed_reading(reader, options);
    return s.read_shards(reader, options, *policy);
  }
  if (options.resume)
    throw ConfigError(fmt::format(
        "--resume: {} has no 'checkpoint:' section (checkpoint: {{dir: DIR, every_n_batches: "
        "N}}), so there is no checkpoint to resume from",
        s.config.source));
  ReadStraight policy(s.collectives());
  s.read_shards(reader, options, policy);
}

}  // namespace tally
