#include "tally/evaluator.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checkpoint.hpp"
#include "config.hpp"
#include "file_io.hpp"
#include "msgpack_bounds.hpp"
#include "registry.hpp"
#include "sync.hpp"
#include "tally/error.hpp"
#include "tally/version.hpp"

namespace tally {

namespace fs = std::filesystem;

namespace {

struct MetricSlot {
  std::string label;
  const Component* component = nullptr;
  std::vector<std::pair<std::string, std::string>> inputs;  // metric input -> data field
  std::shared_ptr<Metric> metric;
  std::string where;
};

/// How a metric's state reaches rank 0 at a sync.
enum class Route : std::uint8_t {
  packed,   // packed into the payload and gathered (Metric::pack, compute_packed)
  local,    // a world of one: rank 0 computes from its state in place (LocalComputeMetric)
  reduced,  // its counts are summed to rank 0 (ReducibleMetric, DistBackend::reduce)
};

/// The routes of every metric for one sync, and where each reduced metric's counts sit in the
/// one vector of counts every rank reduces.
struct SyncPlan {
  std::vector<Route> routes;
  std::vector<std::size_t> offsets;  // per metric: its first count (reduced metrics)
  std::vector<std::size_t> sizes;    // per metric: how many counts (reduced metrics), else 0
  std::size_t counts = 0;            // in all
};

/// Local computation where the world is one and the metric can (no copy of its state at all);
/// otherwise a reduction where the metric's state is counts; otherwise a gather.
SyncPlan plan_sync(const std::vector<MetricSlot>& metrics, bool local) {
  SyncPlan plan;
  for (const auto& m : metrics) {
    Route route = Route::packed;
    std::size_t size = 0;
    if (local && dynamic_cast<LocalComputeMetric*>(m.metric.get()) != nullptr) {
      route = Route::local;
    } else if (const auto* r = dynamic_cast<const ReducibleMetric*>(m.metric.get())) {
      size = r->reduced_size();
      if (size != 0) route = Route::reduced;
    }
    plan.routes.push_back(route);
    plan.offsets.push_back(plan.counts);
    plan.sizes.push_back(size);
    plan.counts += size;
  }
  return plan;
}

/// The local counts of the reduced metrics into `counts`, checked so that their sum over `world`
/// ranks is exact: each count >= 0, all of a rank's counts together < 2^62 / world (then every
/// sum of sums stays under 2^62, as the metrics' own checks require). A corrupt restored state
/// fails here, on its rank, instead of wrapping in the reduction.
void write_counts(const std::vector<MetricSlot>& metrics, const SyncPlan& plan,
                  std::span<std::int64_t> counts, int world) {
  const std::int64_t limit = (std::int64_t{1} << 62) / world;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    if (plan.routes[i] != Route::reduced) continue;
    const auto mine = counts.subspan(plan.offsets[i], plan.sizes[i]);
    const auto where = fmt::format("metric '{}'", metrics[i].label);
    try {
      dynamic_cast<const ReducibleMetric&>(*metrics[i].metric).reduced_counts(mine);
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

/// The last sample of a batch, held back: a copy, since the caller may reuse its buffers for the
/// next batch, unless the batch comes from a StableBatchReader (views of memory nothing rewrites).
Batch last_sample(const Batch& batch, bool stable) {
  const auto n = batch.size();
  Batch last = batch.slice(n - 1, n);
  return stable ? last : last.clone();
}

bool is_stable(const Reader* reader) {
  return dynamic_cast<const StableBatchReader*>(reader) != nullptr;
}

std::string owner_of(const MetricConfig& mc) {
  return mc.label == mc.type ? fmt::format("metric '{}'", mc.label)
                             : fmt::format("metric '{}' ({})", mc.label, mc.type);
}

// Prefixes a ConfigError with a location unless it already carries one.
template <class F>
decltype(auto) at(const std::string& where, F&& f) {  // decltype(auto): references stay references
  try {
    return f();
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    if (where.empty() || msg.starts_with(where.substr(0, where.find(':')))) throw;
    throw ConfigError(fmt::format("{}: {}", where, msg));
  }
}

// Rethrows a failure reported through the sync protocol as the error type its exit code maps to.
[[noreturn]] void throw_error(int exit_code, const std::string& message) {
  if (exit_code == 2) throw InputError(message);
  throw RuntimeError(message);
}

}  // namespace

struct Evaluator::Impl {
  Config config;
  Registry registry;
  std::shared_ptr<DistBackend> backend;
  std::string backend_name;
  std::vector<MetricSlot> metrics;
  std::uint64_t fingerprint = 0;
  // What a checkpoint's config fingerprint covers: the metrics (with their plugin versions), the
  // data (reader, its plugin version and parameters: set by make_reader) and the backend type.
  std::string metrics_canonical;
  std::string data_canonical;
  std::optional<std::pair<std::string, std::string>> data_plugin;  // name, version
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  // The last sample added on this rank is held back until the next add() or compute(): a
  // distributed sampler's padding, when compute(dataset_size) says there is some, is always a
  // rank's last sample, and must not be counted.
  std::optional<Batch> held;
  std::int64_t samples = 0;  // added on this rank, held sample included
  std::optional<std::pair<int, std::string>> error;

  // Every metric's state as one sync payload, [0, [state...]] (the held sample is not in it).
  // With a plan: nil in place of the states that do not travel in the payload (Route::local,
  // Route::reduced), so that they are neither packed nor unpacked.
  void pack_states(msgpack::sbuffer& payload, const SyncPlan* plan = nullptr) const {
    Packer packer(payload);
    packer.pack_array(2);
    packer.pack(0);
    packer.pack_array(static_cast<std::uint32_t>(metrics.size()));
    for (std::size_t i = 0; i < metrics.size(); ++i) {
      if (plan != nullptr && plan->routes[i] != Route::packed)
        packer.pack_nil();
      else
        metrics[i].metric->pack(packer);
    }
  }

  void record(int exit_code, const std::string& message) {
    if (!error) error.emplace(exit_code == 0 ? 1 : exit_code, message);
  }

  // Runs `fn`; an exception it throws is recorded (its message after `prefix`), for compute() to
  // report on every rank. Returns whether `fn` completed.
  template <class Fn>
  bool recording(std::string_view prefix, Fn&& fn) {
    try {
      fn();
      return true;
    } catch (const Error& e) {
      record(e.exit_code(), fmt::format("{}{}", prefix, e.what()));
    } catch (const std::exception& e) {
      record(1, fmt::format("{}{}", prefix, e.what()));
    }
    return false;
  }

  // The next batch of `reader`; nullopt at the end of the shard or after a failure (recorded).
  std::optional<Batch> next_batch(Reader& reader, bool& failed) {
    std::optional<Batch> b;
    failed = !recording("", [&] { b = reader.next(); });
    return b;
  }

  /// `stable`: the batch comes from a StableBatchReader.
  void add(const Batch& batch, bool stable = false);
  /// The metrics of the config (from_yaml); throws on the first that cannot be made.
  void build_metrics(const std::string& source);
  /// The start exchange (sync::exchange_start): throws on every rank what one rank's failure or
  /// a disagreement on the data makes every rank throw.
  void agree_at_start(const Reader* reader);
  void read_checkpointed(Reader* reader, const ReadOptions& options);
  Value decide(Reader& reader, const ReadOptions& options, const checkpoint::Expected& expected);
  std::int64_t restore(Reader& reader, const checkpoint::Metadata& m, const ReadOptions& options);
  checkpoint::Expected expectation() const;

  void apply(const Batch& batch) {
    for (auto& m : metrics) {
      try {
        m.metric->add(batch.renamed(m.inputs));
      } catch (const Error& e) {
        const std::string msg = e.what();
        // Messages from the SDK name the field; say which metric read it.
        const std::string prefix = fmt::format("metric '{}'", m.label);
        if (msg.starts_with(prefix)) throw;
        if (dynamic_cast<const InputError*>(&e))
          throw InputError(fmt::format("{}: {}", prefix, msg));
        throw RuntimeError(fmt::format("{}: {}", prefix, msg));
      }
    }
  }
};

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
  auto& c = impl->config;
  const Component* bc = nullptr;
  std::optional<Params> bp;
  try {
    c = Config::parse(yaml_text, source, base_dir.empty() ? fs::current_path() : base_dir,
                      options.overrides);
    impl->registry = Registry::load(c.plugin_paths, c.allow_unsafe_plugins);
    // The backend first: its rank decides the reader's shard.
    bc = &at(c.backend_params.where, [&]() -> const Component& {
      return impl->registry.get(ComponentKind::Backend, c.backend_type);
    });
    bp.emplace(make_params(*bc->info, c.backend_params, fmt::format("backend '{}'", c.backend_type),
                           c.base_dir));
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
    metrics.push_back(std::move(slot));
    canonical += fmt::format("{}|{}|{}@{}|{}|", mc.label, comp.info->name, comp.plugin_name,
                             comp.plugin_version, Value(params.values()).to_json());
    for (const auto& [k, v] : mc.inputs) canonical += fmt::format("{}={};", k, v);
    canonical += '\n';
  }
  fingerprint = sync::fingerprint(canonical);
  metrics_canonical = std::move(canonical);
}

int Evaluator::rank() const { return impl_->backend ? impl_->backend->rank() : 0; }
int Evaluator::world_size() const { return impl_->backend ? impl_->backend->world_size() : 1; }
const std::string& Evaluator::backend_name() const { return impl_->backend_name; }
std::optional<fs::path> Evaluator::output_json() const { return impl_->config.output_json; }

std::shared_ptr<Reader> Evaluator::make_reader() const {
  // An evaluator that failed to set up reads nothing (read_all's start exchange reports why).
  if (impl_->error) throw_error(impl_->error->first, impl_->error->second);
  const auto& c = impl_->config;
  if (!c.data_type)
    throw ConfigError(fmt::format(
        "{}: no 'data:' section: say which reader reads the data (for example type: npy)",
        c.source));
  const Component& rc = at(c.data_params.where, [&]() -> const Component& {
    return impl_->registry.get(ComponentKind::Reader, *c.data_type);
  });
  const Params rp =
      make_params(*rc.info, c.data_params, fmt::format("data ({})", *c.data_type), c.base_dir);
  impl_->data_canonical = fmt::format("{}|{}@{}|{}", rc.info->name, rc.plugin_name,
                                      rc.plugin_version, Value(rp.values()).to_json());
  impl_->data_plugin.emplace(rc.plugin_name, rc.plugin_version);
  auto reader = Registry::make_reader(rc, rp, ShardInfo{rank(), world_size()});
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

void Evaluator::Impl::add(const Batch& batch, bool stable) {
  auto& s = *this;
  const auto n = batch.size();
  if (n == 0) return;
  try {
    if (s.held) {
      Batch last = std::move(*s.held);
      s.held.reset();
      s.apply(last);
    }
    if (n > 1) s.apply(batch.slice(0, n - 1));
    s.held = last_sample(batch, stable);
    s.samples += n;
  } catch (const Error& e) {
    if (!s.error) s.error.emplace(e.exit_code(), e.what());
    throw;
  } catch (const std::exception& e) {
    if (!s.error) s.error.emplace(1, e.what());
    throw;
  }
}

void Evaluator::record_error(int exit_code, const std::string& message) {
  if (!impl_->error) impl_->error.emplace(exit_code == 0 ? 1 : exit_code, message);
}

void Evaluator::barrier() {
  if (impl_->backend) impl_->backend->barrier();
}

void Evaluator::reset() {
  for (auto& m : impl_->metrics) m.metric->reset();
  impl_->held.reset();
  impl_->samples = 0;
  impl_->error.reset();
  impl_->start = std::chrono::steady_clock::now();
}

Results Evaluator::compute(std::optional<std::int64_t> dataset_size) {
  auto& s = *impl_;
  if (!s.backend)
    throw ConfigError(
        "this evaluator was built to validate a config; it has no backend to compute with");
  DistBackend& backend = *s.backend;
  const int world = backend.world_size();
  const int me = backend.rank();

  // How each state travels; the number of reduced counts goes in the header, so that every rank
  // knows that every rank reduces as many before any rank does.
  SyncPlan plan;
  if (!s.recording("", [&] { plan = plan_sync(s.metrics, world == 1); })) {
    plan = SyncPlan{};  // this rank reports its failure (status) and reduces nothing
    plan.routes.assign(s.metrics.size(), Route::packed);
  }

  sync::Header mine;
  mine.reduced = static_cast<std::int64_t>(plan.counts);
  mine.protocol = kProtocolVersion;
  mine.fingerprint = s.fingerprint;
  mine.samples = s.samples;
  mine.dataset_size = dataset_size.value_or(-1);
  mine.status = s.error ? s.error->first : 0;
  const auto headers = sync::exchange_headers(backend, mine);

  const auto fail_everywhere = [&](int code, const std::string& msg) -> Results {
    throw_error(code, msg);
  };
  if (auto verdict = sync::check_headers(headers))
    return fail_everywhere(verdict->exit_code, verdict->message);

  // A rank that failed: gather every rank's message (an empty one from ranks that did not fail).
  if (std::any_of(headers.begin(), headers.end(), [](const auto& h) { return h.status != 0; })) {
    const std::string msg = s.error ? s.error->second : std::string();
    const auto msgs = backend.all_gather_object(std::as_bytes(std::span(msg)));
    std::vector<int> failed;
    for (int r = 0; r < world; ++r)
      if (headers[static_cast<std::size_t>(r)].status != 0) failed.push_back(r);
    const auto first = static_cast<std::size_t>(failed.front());
    const auto bytes = msgs[first];
    std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    if (world > 1) {
      text = fmt::format("rank {}: {}", failed.front(), text);
      if (failed.size() > 1)
        text += fmt::format(" (ranks {} failed too)",
                            fmt::join(failed.begin() + 1, failed.end(), ", "));
    }
    return fail_everywhere(headers[first].status, text);
  }

  // Padding from a distributed sampler: the last sample of each of the last `excess` ranks.
  std::int64_t total = 0;
  for (const auto& h : headers) total += h.samples;
  bool drop_held = false;
  if (dataset_size) {
    const std::int64_t excess = total - *dataset_size;
    const bool even = std::all_of(headers.begin(), headers.end(),
                                  [&](const auto& h) { return h.samples == headers[0].samples; });
    if (*dataset_size < 0 || excess < 0 || excess >= world || (excess > 0 && !even)) {
      std::vector<std::int64_t> counts;
      for (const auto& h : headers) counts.push_back(h.samples);
      return fail_everywhere(2, fmt::format("compute(dataset_size={}): the ranks added {} samples "
                                            "({} per rank); a distributed sampler pads the "
                                            "dataset to equal shards with fewer than world_size "
                                            "({}) extra samples, so these counts cannot come from "
                                            "a dataset of that size",
                                            *dataset_size, total, fmt::join(counts, ", "), world));
    }
    drop_held = me >= world - excess;
    total = *dataset_size;
  }

  // Each rank packs every metric's state into one fused payload: [0, [state...]], or
  // [exit code, message] when this rank failed while finishing (its held sample was bad, say):
  // it still takes part in the reduction and the gather, and rank 0 reports the failure to every
  // rank. In a world of one the states of LocalComputeMetrics stay where they are; otherwise the
  // counts of ReducibleMetrics go in `counts` (nil in the payload for both).
  msgpack::sbuffer payload;
  std::vector<std::int64_t> counts(plan.counts, 0);
  try {
    if (s.held && !drop_held) s.apply(*s.held);
    s.held.reset();
    s.pack_states(payload, &plan);
    write_counts(s.metrics, plan, counts, world);
  } catch (const std::exception& e) {
    const auto* te = dynamic_cast<const Error*>(&e);
    payload.clear();
    msgpack::pack(payload, std::make_tuple(te ? te->exit_code() : 1, std::string(e.what())));
    std::fill(counts.begin(), counts.end(), 0);
  }
  // The counts, summed at rank 0: one state's worth there, whatever the world size. Every rank
  // holds the same number (the headers agreed), so every rank makes the same calls.
  if (!counts.empty()) backend.reduce(counts, ReduceOp::sum, 0);
  // The other states, to rank 0 only: the other ranks never hold everyone's state.
  const auto gathered =
      backend.gather_object(std::as_bytes(std::span(payload.data(), payload.size())), 0);

  // Rank 0 computes; every rank gets what it computed, or its error. The others wait for it as
  // long as it is alive and computing, whatever backend.timeout says (run_on_root).
  msgpack::sbuffer reply;
  backend.run_on_root(0, [&] {
    Value out = Value::map();
    out.set("status", 0);
    try {
      std::vector<msgpack::object_handle> handles(static_cast<std::size_t>(world));
      for (int r = 0; r < world; ++r) {
        const auto bytes = gathered[static_cast<std::size_t>(r)];
        auto& h = handles[static_cast<std::size_t>(r)];
        try {
          // Bins are referenced in place: large numeric state is read straight from the buffer.
          h = unpack_bounded(bytes, /*reference_bins=*/true);
        } catch (const std::exception& e) {
          throw RuntimeError(
              fmt::format("sync failed: the payload of rank {} ({} bytes) is not valid msgpack: {}",
                          r, bytes.size(), e.what()));
        }
        const auto& obj = h.get();
        if (obj.type != msgpack::type::ARRAY || obj.via.array.size != 2 ||
            obj.via.array.ptr[0].type != msgpack::type::POSITIVE_INTEGER)
          throw RuntimeError(
              fmt::format("sync failed: the payload of rank {} is not a tally state payload", r));
        const auto status = obj.via.array.ptr[0].via.u64;
        const auto& body = obj.via.array.ptr[1];
        if (status != 0) {
          const std::string msg =
              body.type == msgpack::type::STR ? body.as<std::string>() : "(no message)";
          throw_error(static_cast<int>(status),
                      world > 1 ? fmt::format("rank {}: {}", r, msg) : msg);
        }
        if (body.type != msgpack::type::ARRAY || body.via.array.size != s.metrics.size())
          throw RuntimeError(fmt::format(
              "sync failed: rank {} sent {} metric states, expected {}", r,
              body.type == msgpack::type::ARRAY ? body.via.array.size : 0, s.metrics.size()));
      }
      Value results = Value::map();
      std::vector<msgpack::object> states(static_cast<std::size_t>(world));
      for (std::size_t i = 0; i < s.metrics.size(); ++i) {
        for (int r = 0; r < world; ++r)
          states[static_cast<std::size_t>(r)] =
              handles[static_cast<std::size_t>(r)].get().via.array.ptr[1].via.array.ptr[i];
        try {
          Metric& metric = *s.metrics[i].metric;
          switch (plan.routes[i]) {
            case Route::local:
              results.set(s.metrics[i].label,
                          dynamic_cast<LocalComputeMetric&>(metric).compute_local());
              break;
            case Route::reduced:
              results.set(s.metrics[i].label,
                          dynamic_cast<const ReducibleMetric&>(metric).compute_reduced(
                              std::span<const std::int64_t>(counts).subspan(plan.offsets[i],
                                                                            plan.sizes[i])));
              break;
            case Route::packed:
              results.set(s.metrics[i].label, metric.compute_packed(states));
              break;
          }
        } catch (const msgpack::type_error&) {
          throw RuntimeError(fmt::format("metric '{}': a rank sent a state this metric cannot read",
                                         s.metrics[i].label));
        } catch (const Error& e) {
          const std::string msg = e.what();
          const std::string prefix = fmt::format("metric '{}'", s.metrics[i].label);
          if (msg.starts_with(prefix)) throw;
          throw_error(e.exit_code(), fmt::format("{}: {}", prefix, msg));
        }
      }
      out.set("results", std::move(results));
    } catch (const Error& e) {
      out.set("status", e.exit_code());
      out.set("message", e.what());
    } catch (const std::exception& e) {
      out.set("status", 1);
      out.set("message", fmt::format("rank 0 failed while computing: {}", e.what()));
    }
    out.set("samples", total);
    out.set("wall_seconds",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - s.start).count());
    msgpack::pack(reply, out);
  });
  const auto answer =
      backend.broadcast_object(std::as_bytes(std::span(reply.data(), reply.size())), 0);
  Value out;
  try {
    unpack_bounded(answer, /*reference_bins=*/false).get().convert(out);
  } catch (const std::exception& e) {
    throw RuntimeError(fmt::format(
        "sync failed: rank {} could not read the results rank 0 broadcast: {}", me, e.what()));
  }
  if (const auto code = out.at("status").as_int(); code != 0)
    throw_error(static_cast<int>(code), out.at("message").as_string());

  Results r;
  r.metrics = out.at("results");
  r.run.config = s.config.source;
  r.run.backend = s.backend_name;
  r.run.world_size = world;
  r.run.samples = out.at("samples").as_int();
  r.run.wall_seconds = out.at("wall_seconds").as_double();
  for (const auto& m : s.metrics) {
    r.run.types.emplace_back(m.label, m.component->info->name);
    const auto& plugin = m.component->plugin_name;
    if (std::none_of(r.run.plugins.begin(), r.run.plugins.end(),
                     [&](const auto& p) { return p.first == plugin; }))
      r.run.plugins.emplace_back(plugin, m.component->plugin_version);
  }
  return r;
}

// ---- reading, with checkpoints (docs/checkpoint.md) ---------------------------------------------

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

void Evaluator::Impl::agree_at_start(const Reader* reader) {
  sync::StartRecord mine;
  mine.header.protocol = kProtocolVersion;
  mine.header.fingerprint = fingerprint;
  if (!error && reader != nullptr) {
    recording("", [&] {
      mine.layout = reader->layout();
      mine.header.total_samples = reader->total_samples();
    });
    mine.header.layout_fingerprint = sync::fingerprint(mine.layout);
  }
  if (error) {
    mine.header.status = error->first;
    mine.message = error->second;
  }
  if (auto verdict = sync::exchange_start(*backend, mine)) {
    // Recorded too: a compute() after this failure fails the same way, on every rank.
    record(verdict->exit_code, verdict->message);
    throw_error(verdict->exit_code, verdict->message);
  }
}

void Evaluator::read_all(Reader* reader, const ReadOptions& options) {
  auto& s = *impl_;
  // A rank without a reader must fail the run, not count as an empty shard.
  if (reader == nullptr) s.record(1, "read_all: this rank has no reader");
  if (!s.backend)
    throw ConfigError(
        "this evaluator was built to validate a config; it has no backend to read data with");
  s.agree_at_start(reader);
  if (s.config.checkpoint) return s.read_checkpointed(reader, options);
  if (options.resume)
    throw ConfigError(fmt::format(
        "--resume: {} has no 'checkpoint:' section (checkpoint: {{dir: DIR, every_n_batches: "
        "N}}), so there is no checkpoint to resume from",
        s.config.source));
  // Every rank reads its shard, then waits for the others; a rank still reading is waited for as
  // long as it reads batches (run_on_every_rank), however long that takes.
  std::atomic<std::uint64_t> batches{0};
  s.backend->run_on_every_rank(
      [&] {
        if (reader == nullptr || s.error) return;
        bool failed = false;
        const bool stable = is_stable(reader);
        while (auto batch = s.next_batch(*reader, failed)) {
          const auto n = batch->size();
          try {
            s.add(*batch, stable);
          } catch (const std::exception&) {  // add() recorded it
            return;
          }
          batches.fetch_add(1, std::memory_order_relaxed);
          if (options.on_batch) options.on_batch(n);
        }
      },
      batches);
}

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
Value Evaluator::Impl::decide(Reader& reader, const ReadOptions& options,
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
  try {
    h = unpack_bounded(std::as_bytes(std::span(shard.payload.data(), shard.payload.size())),
                       /*reference_bins=*/true);
  } catch (const std::exception& e) {
    throw InputError(fmt::format("checkpoint shard {}: the metric states are not valid msgpack: {}",
                                 file.string(), e.what()));
  }
  const auto& o = h.get();
  if (o.type != msgpack::type::ARRAY || o.via.array.size != 2 ||
      o.via.array.ptr[0].type != msgpack::type::POSITIVE_INTEGER ||
      o.via.array.ptr[0].via.u64 != 0 || o.via.array.ptr[1].type != msgpack::type::ARRAY ||
      o.via.array.ptr[1].via.array.size != metrics.size())
    throw InputError(
        fmt::format("checkpoint shard {}: expected the states of {} metrics, found something else",
                    file.string(), metrics.size()));
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    auto* target = dynamic_cast<RestorableMetric*>(metrics[i].metric.get());
    try {
      target->restore(o.via.array.ptr[1].via.array.ptr[i]);
    } catch (const msgpack::type_error&) {
      throw InputError(
          fmt::format("checkpoint shard {}: metric '{}' cannot read its saved state (expected "
                      "the state its plugin packs)",
                      file.string(), metrics[i].label));
    }
  }

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
      held = last_sample(*b, stable);
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

void Evaluator::Impl::read_checkpointed(Reader* reader, const ReadOptions& options) {
  namespace ck = checkpoint;
  const CheckpointConfig& cc = *config.checkpoint;
  if (!backend)
    throw ConfigError(
        "this evaluator was built to validate a config; it has no backend to read data with");
  for (const auto& m : metrics)
    if (dynamic_cast<RestorableMetric*>(m.metric.get()) == nullptr)
      throw ConfigError(fmt::format(
          "{}: metric '{}' ({}, plugin {} {}) cannot be checkpointed: it does not implement "
          "tally::RestorableMetric (every TypedMetric does); remove the checkpoint: section or "
          "rebuild its plugin against this tally",
          cc.where, m.label, m.component->info->name, m.component->plugin_name,
          m.component->plugin_version));
  DistBackend& b = *backend;
  const int world = b.world_size();
  const int me = b.rank();
  const auto expected = expectation();

  // 1. Rank 0 picks the checkpoint to resume (or clears the folder for a fresh run) and tells
  // every rank; a refusal fails every rank alike, before anything is read.
  msgpack::sbuffer out;
  if (me == 0) {
    Value d = Value::map();
    d.set("status", -1);  // rank 0 failed already: compute() reports it on every rank
    if (!error && reader != nullptr) {
      try {
        d = decide(*reader, options, expected);
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
  const Value decision =
      unpack_value(b.broadcast_object(bytes_of(out), 0), "rank 0's checkpoint decision");
  const auto status = decision.at("status").as_int();
  if (status > 0) throw_error(static_cast<int>(status), decision.at("message").as_string());
  if (status < 0) return;
  const std::int64_t from = decision.at("step").as_int();

  // 2. Every rank restores its own shard; the ranks agree before any goes on.
  std::int64_t step = 0;
  std::int64_t batches = 0;
  Value mine = Value::map();
  int kind = 0;  // 0 ok, 1 this rank failed before (recorded), 2 its shard cannot be used
  if (error || reader == nullptr) {
    kind = 1;
  } else if (from >= 0) {
    try {
      const auto meta_path = cc.dir / ck::step_name(from) / ck::kMetadataName;
      const auto m = ck::Metadata::parse(decision.at("metadata").as_string(), meta_path);
      batches = restore(*reader, m, options);
      step = m.step;
      if (error) kind = 1;
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
  {
    const auto all = b.all_gather_object(bytes_of(packed_status));
    std::optional<std::pair<int, std::string>> refusal;
    bool stop = false;
    for (int r = 0; r < world; ++r) {
      const Value v = unpack_value(all[static_cast<std::size_t>(r)], "a rank's restore status");
      const auto k = v.at("kind").as_int();
      if (k == 2 && !refusal) {
        const auto& msg = v.at("message").as_string();
        refusal.emplace(static_cast<int>(v.at("code").as_int()),
                        world > 1 ? fmt::format("rank {}: {}", r, msg) : msg);
      }
      stop = stop || k != 0;
    }
    if (refusal) throw_error(refusal->first, refusal->second);
    // Said once every rank has restored its shard: "resuming from" is then true.
    if (const Value* note = decision.find("notice");
        me == 0 && options.on_notice && note != nullptr && !note->as_string().empty())
      options.on_notice(note->as_string());
    if (stop) return;
  }

  // 3. Rounds: every rank reads up to N batches and writes its shard; once every shard is
  // written, rank 0 writes the metadata that completes the checkpoint. Ranks whose shard is done
  // keep taking part until every shard is done.
  const std::int64_t every = cc.every_n_batches;
  const bool stable = is_stable(reader);
  bool done = false;
  while (true) {
    bool failed = error.has_value();
    for (std::int64_t i = 0; i < every && !done && !failed; ++i) {
      auto batch = next_batch(*reader, failed);
      if (failed) break;
      if (!batch) {
        done = true;
        break;
      }
      const auto n = batch->size();
      try {
        add(*batch, stable);
      } catch (const std::exception&) {  // add() recorded it
        failed = true;
        break;
      }
      ++batches;
      if (options.on_batch) options.on_batch(n);
    }
    step += every;
    const fs::path step_dir = cc.dir / ck::step_name(step);
    Value rec = Value::map();
    if (!error) {
      recording("checkpoint: ", [&] {
        ck::Shard shard;
        shard.rank = me;
        shard.step = step;
        shard.samples = samples;
        shard.batches = batches;
        msgpack::sbuffer payload;
        pack_states(payload);
        shard.payload.assign(payload.data(), payload.size());
        const std::string bytes = shard.serialize();
        ck::make_dir(step_dir);
        write_file_atomic(step_dir / ck::shard_name(me), bytes, "checkpoint shard");
        rec.set("crc32", static_cast<std::int64_t>(ck::crc32_of(bytes)));
        rec.set("size", as_count(bytes.size()));
      });
    }
    rec.set("failed", error.has_value());
    rec.set("done", done);
    rec.set("samples", samples);
    rec.set("batches", batches);
    msgpack::sbuffer packed_rec;
    msgpack::pack(packed_rec, rec);
    std::vector<Value> recs;
    {
      const auto all = b.all_gather_object(bytes_of(packed_rec));
      for (int r = 0; r < world; ++r)
        recs.push_back(
            unpack_value(all[static_cast<std::size_t>(r)], "a rank's checkpoint record"));
    }
    // A rank failed: no checkpoint for this step (its shards stay incomplete), and compute()
    // reports the failure on every rank.
    if (std::any_of(recs.begin(), recs.end(),
                    [](const Value& v) { return v.at("failed").as_bool(); }))
      return;
    if (me == 0) {
      recording("checkpoint: ", [&] {
        ck::Metadata m;
        m.tally_version = kVersion;
        m.protocol = kProtocolVersion;
        m.step = step;
        m.every_n_batches = every;
        m.world_size = world;
        m.config_fingerprint = expected.config_fingerprint;
        m.plugins = expected.plugins;
        m.dataset_samples = reader->total_samples();
        for (int r = 0; r < world; ++r) {
          const auto& v = recs[static_cast<std::size_t>(r)];
          m.samples.push_back(v.at("samples").as_int());
          m.batches.push_back(v.at("batches").as_int());
          m.shards.push_back({ck::shard_name(r), static_cast<std::uint32_t>(v.at("crc32").as_int()),
                              static_cast<std::uint64_t>(v.at("size").as_int())});
        }
        write_file_atomic(step_dir / ck::kMetadataName, m.to_json(), "checkpoint metadata");
        for (const auto& problem : ck::prune(cc.dir, step))
          if (options.on_notice) options.on_notice(fmt::format("checkpoint: {}", problem));
      });
    }
    if (std::all_of(recs.begin(), recs.end(),
                    [](const Value& v) { return v.at("done").as_bool(); }))
      return;
  }
}

}  // namespace tally
