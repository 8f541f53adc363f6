// Plugin manifest and export macro. A plugin is a shared library (libtally_<name>.so) exporting
// one entry, the extern "C" function `tally_plugin` (TALLY_PLUGIN_EXPORT_ENTRY), which the registry
// finds with Boost.DLL (shared_library::get), and two ABI markers: symbols whose names carry the
// ABI's major and minor versions (tally_abi_v7, tally_abi_minor_0), which the registry reads from
// the file before it loads the library (docs/abi.md). The entry returns the manifest: the ABI
// version again (the first member), the plugin's version, and its components with their parameter
// schemas and factories. Nothing runs at load time.
//
// A component is declared in its own file, next to its class, and registered there with one line
// (TALLY_COMPONENT); the plugin's one TALLY_PLUGIN line lists them all:
//
//   // accuracy.cpp
//   tally::ComponentInfo accuracy_info() {
//     return tally::metric<Accuracy>("Accuracy", "Top-k accuracy ...", Accuracy::params(),
//                                    Accuracy::inputs(), {}, {{"top*", Better::Higher}});
//   }
//   TALLY_COMPONENT(accuracy_info)
//
//   // plugin.cpp
//   TALLY_PLUGIN("classification", "0.1.0")
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tally/sdk/metric.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/reader.hpp"
#include "tally/sdk/version.hpp"

namespace tally {

// A backend plugin includes tally/sdk/dist_backend.hpp (it derives from DistBackend); a metric or
// reader plugin needs none of it.
class DistBackend;

enum class ComponentKind { Metric, Reader, Backend };

inline const char* component_kind_name(ComponentKind k) {
  switch (k) {
    case ComponentKind::Metric:
      return "metric";
    case ComponentKind::Reader:
      return "reader";
    case ComponentKind::Backend:
      return "backend";
  }
  return "?";
}

/// Which way a result should move: `tally compare` flags a move the other way as a regression.
enum class Better { Higher, Lower, Neither };

/// How a report draws a result.
enum class Plot {
  None,     // a number in the tables
  Bars,     // an array of per-class values: a bar chart
  Heatmap,  // a matrix (array of equal-length arrays): a heatmap, rows = ground truth
  Curve,    // a map {"x": [...], "y": [...], "x_label": "...", "y_label": "..."}: a line chart
};

/// What a metric declares about its result keys. `key` is a key or a glob over keys ("top*",
/// "*_classwise"); the first spec that matches a key applies. Keys no spec matches are treated as
/// Better::Higher, Plot::None.
struct ResultSpec {
  std::string key;
  Better better = Better::Higher;
  Plot plot = Plot::None;
  std::string doc;
};

using MetricFactory = std::function<std::unique_ptr<Metric>(const Params&)>;
using ReaderFactory = std::function<std::unique_ptr<Reader>(const Params&, const ShardInfo&)>;
using BackendFactory = std::function<std::unique_ptr<DistBackend>(const Params&)>;

struct ComponentInfo {
  ComponentKind kind = ComponentKind::Metric;
  std::string name;
  /// Other names it answers to (mmeval's class name, for instance).
  std::vector<std::string> aliases;
  std::string doc;
  std::vector<ParamSpec> params;
  /// Metrics: the batch fields read.
  std::vector<InputSpec> inputs;
  /// Metrics: what the result keys mean for comparisons and reports.
  std::vector<ResultSpec> results;
  MetricFactory make_metric;
  ReaderFactory make_reader;
  BackendFactory make_backend;
};

struct PluginManifest {
  /// Must stay the first member: the registry reads it before touching anything else.
  std::uint32_t abi_version = kAbiVersion;
  std::string name;
  std::string version;
  std::vector<ComponentInfo> components;
};

/// A metric component whose factory is `M(const Params&)`.
template <class M>
ComponentInfo metric(std::string name, std::string doc, std::vector<ParamSpec> params,
                     std::vector<InputSpec> inputs, std::vector<std::string> aliases = {},
                     std::vector<ResultSpec> results = {}) {
  ComponentInfo c;
  c.results = std::move(results);
  c.kind = ComponentKind::Metric;
  c.name = std::move(name);
  c.aliases = std::move(aliases);
  c.doc = std::move(doc);
  c.params = std::move(params);
  c.inputs = std::move(inputs);
  c.make_metric = [](const Params& p) -> std::unique_ptr<Metric> { return std::make_unique<M>(p); };
  return c;
}

/// `c` with its result specs: what its keys mean for `tally compare` and the reports.
inline ComponentInfo with_results(ComponentInfo c, std::vector<ResultSpec> results) {
  c.results = std::move(results);
  return c;
}

/// A reader component whose factory is `R(const Params&, const ShardInfo&)`.
template <class R>
ComponentInfo reader(std::string name, std::string doc, std::vector<ParamSpec> params) {
  ComponentInfo c;
  c.kind = ComponentKind::Reader;
  c.name = std::move(name);
  c.doc = std::move(doc);
  c.params = std::move(params);
  c.make_reader = [](const Params& p, const ShardInfo& s) -> std::unique_ptr<Reader> {
    return std::make_unique<R>(p, s);
  };
  return c;
}

/// A dist-backend component whose factory is `B(const Params&)`.
template <class B>
ComponentInfo backend(std::string name, std::string doc, std::vector<ParamSpec> params) {
  ComponentInfo c;
  c.kind = ComponentKind::Backend;
  c.name = std::move(name);
  c.doc = std::move(doc);
  c.params = std::move(params);
  c.make_backend = [](const Params& p) -> std::unique_ptr<DistBackend> {
    return std::make_unique<B>(p);
  };
  return c;
}

/// The signature of the exported entry.
using PluginEntry = const PluginManifest*() noexcept;

/// What TALLY_COMPONENT registers: a function that describes one component.
using ComponentFn = ComponentInfo (*)();

namespace internal {

/// TALLY_PLUGIN's optional third argument: the components it lists by hand (none when absent).
inline std::vector<ComponentInfo> listed() { return {}; }
template <class F>
std::vector<ComponentInfo> listed(F&& f) {
  return std::forward<F>(f)();
}

}  // namespace internal

}  // namespace tally

// The registered components: TALLY_COMPONENT puts a pointer to each describing function into the
// section `tally_components` of the plugin being linked (constant data; no code runs at load), and
// the linker marks the section's bounds with these two symbols, hidden, so each plugin sees only
// its own (weak: null in a plugin that registers none).
extern "C" {
extern const ::tally::ComponentFn
    __start_tally_components[]  // NOLINT(bugprone-reserved-identifier)
    __attribute__((weak, visibility("hidden")));
extern const ::tally::ComponentFn __stop_tally_components[]  // NOLINT(bugprone-reserved-identifier)
    __attribute__((weak, visibility("hidden")));
}

// TALLY_PLUGIN_ABI_VERSION (tally/sdk/version.hpp) is kAbiVersion as a preprocessor number, so that
// it can be part of a symbol's name.
static_assert(TALLY_PLUGIN_ABI_VERSION == ::tally::kAbiVersion,
              "TALLY_PLUGIN_ABI_VERSION must equal tally::kAbiVersion");
#define TALLY_PLUGIN_CAT_(a, b) a##b
#define TALLY_PLUGIN_CAT(a, b) TALLY_PLUGIN_CAT_(a, b)
/// The ABI marker: an exported symbol whose NAME carries the ABI version (tally_abi_v<N>). The
/// registry reads it from the library's dynamic symbol table without loading the library, so a
/// plugin built for another ABI is refused before any of its code (static constructors
/// included) runs.
#define TALLY_PLUGIN_ABI_MARKER TALLY_PLUGIN_CAT(tally_abi_v, TALLY_PLUGIN_ABI_VERSION)
/// The minor marker: the ABI additions this plugin was built with (tally_abi_minor_0). A tally of
/// the same major loads the plugin when its own minor is at least this one (docs/abi.md).
#define TALLY_PLUGIN_ABI_MINOR_MARKER TALLY_PLUGIN_CAT(tally_abi_minor_, TALLY_PLUGIN_ABI_MINOR)

/// Exports `FN` (a `const tally::PluginManifest* FN() noexcept`) as the entry: the extern "C"
/// function `tally_plugin` (one plain exported symbol; the registry calls it once).
#define TALLY_PLUGIN_EXPORT_ENTRY(FN)                                                    \
  extern "C" __attribute__((visibility("default"), used)) const ::tally::PluginManifest* \
  tally_plugin() noexcept {                                                              \
    return FN();                                                                         \
  }

/// Registers `FN`, a `tally::ComponentInfo FN()` of this file, as a component of the plugin the
/// file is linked into; at most once per function. The plugin's components are listed in link
/// order (the order of the plugin's sources), a file's in the order of its TALLY_COMPONENT lines.
#define TALLY_COMPONENT(FN)                                                         \
  [[gnu::used, gnu::section("tally_components")]] static const ::tally::ComponentFn \
      TALLY_PLUGIN_CAT(tally_component_, FN) = &FN;

/// Defines and exports the plugin entry and the ABI marker. Its components are those its files
/// registered (TALLY_COMPONENT), after those of the optional third argument: a callable returning
/// std::vector<tally::ComponentInfo> (it may contain commas: a lambda with a braced list). Both
/// run once, on the first call of the entry, never at load.
#define TALLY_PLUGIN(NAME, VERSION, ...)                                                         \
  namespace tally_plugin_export {                                                                \
  static std::vector<::tally::ComponentInfo> components(std::vector<::tally::ComponentInfo> c) { \
    if (__start_tally_components != nullptr)                                                     \
      for (const auto* f = __start_tally_components; f != __stop_tally_components; ++f)          \
        c.push_back((*f)());                                                                     \
    return c;                                                                                    \
  }                                                                                              \
  static const ::tally::PluginManifest* entry() noexcept {                                       \
    try {                                                                                        \
      static const ::tally::PluginManifest manifest{                                             \
          ::tally::kAbiVersion, NAME, VERSION,                                                   \
          components(::tally::internal::listed(__VA_ARGS__))};                                   \
      return &manifest;                                                                          \
    } catch (...) {                                                                              \
      return nullptr;                                                                            \
    }                                                                                            \
  }                                                                                              \
  }                                                                                              \
  extern "C" __attribute__((visibility("default"), used))                                        \
  const ::std::uint32_t TALLY_PLUGIN_ABI_MARKER = TALLY_PLUGIN_ABI_VERSION;                      \
  extern "C" __attribute__((visibility("default"), used))                                        \
  const ::std::uint32_t TALLY_PLUGIN_ABI_MINOR_MARKER = TALLY_PLUGIN_ABI_MINOR;                  \
  TALLY_PLUGIN_EXPORT_ENTRY(tally_plugin_export::entry)
