#include "tally/evaluator.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config.hpp"
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
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  // The last sample added on this rank is held back until the next add() or compute(): a
  // distributed sampler's padding, when compute(dataset_size) says there is some, is always a
  // rank's last sample, and must not be counted.
  std::optional<Batch> held;
  std::int64_t samples = 0;  // added on this rank, held sample included
  std::optional<std::pair<int, std::string>> error;

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
  std::ifstream in(config, std::ios::binary);
  if (!in)
    throw ConfigError(
        fmt::format("cannot read config '{}': {}", config.string(), std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  fs::path base = config.parent_path();
  if (base.empty()) base = ".";
  return from_yaml(text.str(), std::move(options), config.string(),
                   fs::absolute(base).lexically_normal());
}

Evaluator Evaluator::from_yaml(const std::string& yaml_text, EvaluatorOptions options,
                               const std::string& source, const fs::path& base_dir) {
  auto impl = std::make_unique<Impl>();
  auto& c = impl->config;
  c = Config::parse(yaml_text, source, base_dir.empty() ? fs::current_path() : base_dir,
                    options.overrides);
  impl->registry = Registry::load(c.plugin_paths);
  const auto& reg = impl->registry;

  // The backend first: its rank decides the reader's shard.
  const Component& bc = at(c.backend_params.where, [&]() -> const Component& {
    return reg.get(ComponentKind::Backend, c.backend_type);
  });
  const Params bp = make_params(*bc.info, c.backend_params,
                                fmt::format("backend '{}'", c.backend_type), c.base_dir);
  impl->backend_name = bc.info->name;
  if (options.backend) {
    impl->backend = std::move(options.backend);
    impl->backend_name = impl->backend->name();
  } else if (!options.validate_only) {
    impl->backend = Registry::make_backend(bc, bp);
  }

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
                       [&](const InputSpec& s) { return s.name == input; })) {
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
    impl->metrics.push_back(std::move(slot));
    canonical += fmt::format("{}|{}|{}@{}|{}|", mc.label, comp.info->name, comp.plugin_name,
                             comp.plugin_version, Value(params.values()).to_json());
    for (const auto& [k, v] : mc.inputs) canonical += fmt::format("{}={};", k, v);
    canonical += '\n';
  }
  impl->fingerprint = sync::fingerprint(canonical);
  return Evaluator(std::move(impl));
}

int Evaluator::rank() const { return impl_->backend ? impl_->backend->rank() : 0; }
int Evaluator::world_size() const { return impl_->backend ? impl_->backend->world_size() : 1; }
const std::string& Evaluator::backend_name() const { return impl_->backend_name; }
std::optional<fs::path> Evaluator::output_json() const { return impl_->config.output_json; }

std::shared_ptr<Reader> Evaluator::make_reader() const {
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

void Evaluator::add(const Batch& batch) {
  auto& s = *impl_;
  const auto n = batch.size();
  if (n == 0) return;
  try {
    if (s.held) {
      Batch held = std::move(*s.held);
      s.held.reset();
      s.apply(held);
    }
    if (n > 1) s.apply(batch.slice(0, n - 1));
    // Hold back a copy: the caller may reuse its buffers for the next batch.
    s.held = batch.slice(n - 1, n).clone();
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

  sync::Header mine;
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
  // it still takes part in the gather, and rank 0 reports the failure to every rank.
  msgpack::sbuffer payload;
  try {
    if (s.held && !drop_held) s.apply(*s.held);
    s.held.reset();
    Packer packer(payload);
    packer.pack_array(2);
    packer.pack(0);
    packer.pack_array(static_cast<std::uint32_t>(s.metrics.size()));
    for (const auto& m : s.metrics) m.metric->pack(packer);
  } catch (const std::exception& e) {
    const auto* te = dynamic_cast<const Error*>(&e);
    payload.clear();
    msgpack::pack(payload, std::make_tuple(te ? te->exit_code() : 1, std::string(e.what())));
  }
  const auto gathered =
      backend.all_gather_object(std::as_bytes(std::span(payload.data(), payload.size())));

  // Rank 0 computes; every rank gets what it computed, or its error.
  msgpack::sbuffer reply;
  if (me == 0) {
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
          results.set(s.metrics[i].label, s.metrics[i].metric->compute_packed(states));
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
  }
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

}  // namespace tally
