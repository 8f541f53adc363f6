#include "registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>

namespace tally {

namespace fs = std::filesystem;

namespace {

bool is_plugin_file(const fs::path& p) {
  const auto name = p.filename().string();
  return name.starts_with("libtally_") && name.ends_with(".so");
}

struct Loaded {
  std::shared_ptr<boost::dll::shared_library> lib;
  const PluginManifest* manifest = nullptr;
  fs::path file;
};

Loaded load_plugin(const fs::path& file) {
  Loaded out;
  out.file = file;
  try {
    // RTLD_LAZY | RTLD_LOCAL: a plugin's symbols never leak into another's.
    out.lib = std::make_shared<boost::dll::shared_library>(
        file, boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local);
  } catch (const std::system_error& e) {
    throw ConfigError(fmt::format("plugin '{}' cannot be loaded: {}", file.string(), e.what()));
  }
  if (!out.lib->has("tally_plugin"))
    throw ConfigError(fmt::format(
        "plugin '{}' is not a tally plugin: it exports no 'tally_plugin' entry", file.string()));
  auto& entry = out.lib->get_alias<PluginEntry>("tally_plugin");
  const PluginManifest* m = entry();
  if (m == nullptr)
    throw ConfigError(fmt::format("plugin '{}' failed while building its manifest", file.string()));
  // The ABI version is the first member; nothing else is read before it matches.
  if (m->abi_version != kAbiVersion)
    throw ConfigError(
        fmt::format("plugin '{}' was built for plugin ABI version {}, this tally {} uses ABI "
                    "version {}: rebuild the "
                    "plugin against this tally",
                    file.string(), m->abi_version, kVersion, kAbiVersion));
  for (const auto& c : m->components) {
    const bool has_factory = (c.kind == ComponentKind::Metric && c.make_metric) ||
                             (c.kind == ComponentKind::Reader && c.make_reader) ||
                             (c.kind == ComponentKind::Backend && c.make_backend);
    if (c.name.empty() || !has_factory)
      throw ConfigError(fmt::format("plugin '{}' declares a {} '{}' with no {}", file.string(),
                                    component_kind_name(c.kind), c.name,
                                    c.name.empty() ? "name" : "factory"));
  }
  out.manifest = m;
  return out;
}

std::vector<fs::path> env_paths() {
  std::vector<fs::path> out;
  const char* env = std::getenv("TALLY_PLUGIN_PATH");
  if (env == nullptr) return out;
  std::string_view s(env);
  while (!s.empty()) {
    const auto colon = s.find(':');
    const auto part = s.substr(0, colon);
    if (!part.empty()) out.emplace_back(std::string(part));
    if (colon == std::string_view::npos) break;
    s.remove_prefix(colon + 1);
  }
  return out;
}

// The plugin files under one search-path entry (a folder, or a single .so), sorted by name.
std::vector<fs::path> plugin_files(const fs::path& entry, const std::string& origin) {
  std::error_code ec;
  const auto st = fs::status(entry, ec);
  if (ec || !fs::exists(st))
    throw ConfigError(fmt::format("{}: plugin path '{}' does not exist", origin, entry.string()));
  if (fs::is_regular_file(st)) return {entry};
  if (!fs::is_directory(st))
    throw ConfigError(
        fmt::format("{}: plugin path '{}' is neither a folder nor a file", origin, entry.string()));
  std::vector<fs::path> files;
  for (const auto& d : fs::directory_iterator(entry, ec))
    if (is_plugin_file(d.path()) && !d.is_directory()) files.push_back(d.path());
  if (ec)
    throw ConfigError(fmt::format("{}: cannot list plugin folder '{}': {}", origin, entry.string(),
                                  ec.message()));
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

fs::path Registry::builtin_dir() {
  // libtally lives in <prefix>/lib (installed) or <build>/lib (build tree); so do the plugins.
  return boost::dll::this_line_location().parent_path() / "tally" / "plugins";
}

Registry Registry::load(const std::vector<fs::path>& config_paths) {
  Registry reg;
  std::vector<std::pair<fs::path, std::string>> entries;  // path, where it was named
  for (const auto& p : config_paths) entries.emplace_back(p, "plugins.paths");
  for (const auto& p : env_paths()) entries.emplace_back(p, "TALLY_PLUGIN_PATH");
  const auto builtin = builtin_dir();
  std::error_code ec;
  if (fs::is_directory(builtin, ec)) entries.emplace_back(builtin, "built-in plugin folder");

  std::vector<fs::path> seen;  // canonical paths: one file named twice loads once
  std::map<std::pair<ComponentKind, std::string>, std::size_t> by_name;
  for (const auto& [entry, origin] : entries) {
    reg.search_path_.push_back(entry);
    for (const auto& file : plugin_files(entry, origin)) {
      const auto canonical = fs::weakly_canonical(file, ec);
      if (std::find(seen.begin(), seen.end(), canonical) != seen.end()) continue;
      seen.push_back(canonical);
      Loaded loaded = load_plugin(file);
      for (const auto& info : loaded.manifest->components) {
        Component c{&info, file, loaded.manifest->name, loaded.manifest->version, loaded.lib};
        std::vector<std::string> names{info.name};
        names.insert(names.end(), info.aliases.begin(), info.aliases.end());
        for (const auto& n : names) {
          auto [it, inserted] = by_name.emplace(std::pair{info.kind, n}, reg.components_.size());
          if (!inserted) {
            const auto& other = reg.components_[it->second];
            throw ConfigError(fmt::format("two plugins define the {} '{}': '{}' and '{}'",
                                          component_kind_name(info.kind), n, other.file.string(),
                                          file.string()));
          }
        }
        reg.components_.push_back(std::move(c));
      }
    }
  }
  return reg;
}

const Component* Registry::find(ComponentKind kind, std::string_view name) const {
  for (const auto& c : components_) {
    if (c.info->kind != kind) continue;
    if (c.info->name == name) return &c;
    for (const auto& a : c.info->aliases)
      if (a == name) return &c;
  }
  return nullptr;
}

std::string Registry::search_text() const {
  std::string out;
  for (const auto& p : search_path_) out += (out.empty() ? "" : ":") + p.string();
  return out.empty() ? "no plugin folders" : out;
}

const Component& Registry::get(ComponentKind kind, std::string_view name) const {
  if (const Component* c = find(kind, name)) return *c;
  std::vector<std::string> known;
  for (const auto& c : components_)
    if (c.info->kind == kind) known.push_back(c.info->name);
  std::sort(known.begin(), known.end());
  throw ConfigError(fmt::format(
      "unknown {} '{}' (known: {}; searched {})", component_kind_name(kind), name,
      known.empty() ? "none" : fmt::format("{}", fmt::join(known, ", ")), search_text()));
}

namespace {
// Wraps a plugin-made object so that it holds its library: the object is destroyed first, then
// the library reference is dropped (DESIGN.md: a library is never unloaded under a live object).
template <class T>
std::shared_ptr<T> hold_library(std::unique_ptr<T> obj, const std::shared_ptr<void>& lib) {
  return std::shared_ptr<T>(obj.release(), [lib](T* p) { delete p; });
}
}  // namespace

std::shared_ptr<Metric> Registry::make_metric(const Component& c, const Params& p) {
  return hold_library(c.info->make_metric(p), c.library);
}
namespace {
// Batches are objects a reader plugin made too: their tensors may be views whose owner (a file
// mapping, say) is freed by code in the reader's library. This decorator re-wraps every tensor so
// that it also holds the library, which then outlives the last batch, not just the reader.
class LibraryPinningReader : public Reader {
 public:
  LibraryPinningReader(std::unique_ptr<Reader> inner, std::shared_ptr<void> lib)
      : lib_(std::move(lib)), inner_(std::move(inner)) {}
  std::vector<std::string> fields() const override { return inner_->fields(); }
  std::int64_t total_samples() const override { return inner_->total_samples(); }
  std::int64_t shard_samples() const override { return inner_->shard_samples(); }
  std::optional<Batch> next() override {
    auto batch = inner_->next();
    if (!batch) return batch;
    Batch pinned;
    for (const auto& [name, field] : batch->fields()) {
      if (const auto* t = std::get_if<Tensor>(&field)) {
        pinned.set(name, pin(*t));
      } else if (const auto* text = std::get_if<Text>(&field)) {
        pinned.set_text(name, *text);  // its storage was made by libtally (Text's factories)
      } else {
        Batch::Ragged r;
        for (const auto& e : std::get<Batch::Ragged>(field)) r.push_back(pin(e));
        pinned.set_ragged(name, std::move(r));
      }
    }
    return pinned;
  }

 private:
  struct Pin {
    std::shared_ptr<void> lib;  // destroyed last: members go in reverse order
    Tensor tensor;
  };
  Tensor pin(const Tensor& t) const {
    auto holder = std::make_shared<const Pin>(Pin{lib_, t});
    return Tensor::view(t.data(), t.dtype(), t.shape(), t.device(), holder);
  }

  std::shared_ptr<void> lib_;  // declared first: released after the inner reader
  std::unique_ptr<Reader> inner_;
};

// The same for a reader whose batches are stable (StableBatchReader): the wrapper says so too.
class StableLibraryPinningReader final : public LibraryPinningReader, public StableBatchReader {
 public:
  using LibraryPinningReader::LibraryPinningReader;
};
}  // namespace

std::shared_ptr<Reader> Registry::make_reader(const Component& c, const Params& p,
                                              const ShardInfo& s) {
  auto inner = c.info->make_reader(p, s);
  if (dynamic_cast<StableBatchReader*>(inner.get()) != nullptr)
    return hold_library<Reader>(
        std::make_unique<StableLibraryPinningReader>(std::move(inner), c.library), c.library);
  return hold_library<Reader>(std::make_unique<LibraryPinningReader>(std::move(inner), c.library),
                              c.library);
}
std::shared_ptr<DistBackend> Registry::make_backend(const Component& c, const Params& p) {
  return hold_library(c.info->make_backend(p), c.library);
}

}  // namespace tally
