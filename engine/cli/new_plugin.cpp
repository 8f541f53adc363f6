// `tally new-plugin NAME DIR`: the skeleton of an out-of-tree metric plugin, written whole or
// not at all (a temporary folder beside DIR, renamed at the end).
#include "new_plugin.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tally/registry.hpp"
#include "tally/sdk/error.hpp"

namespace fs = std::filesystem;

namespace tally::cli {
namespace {

// ---- the skeleton's files; @NAME@ is the plugin's name, @TYPE@ its metric type --------------

constexpr std::string_view kCMakeLists =
    R"skel(# The @NAME@ tally plugin: libtally_@NAME@.so, with the metric @TYPE@.
#   cmake -S . -B build -DCMAKE_PREFIX_PATH=<tally install prefix>
#   cmake --build build && ctest --test-dir build --output-on-failure
cmake_minimum_required(VERSION 3.25)
project(@NAME@ LANGUAGES CXX)

# tally::sdk brings the SDK headers and C++20: the project sets no C++ standard.
find_package(tally REQUIRED)
tally_add_plugin(@NAME@ SOURCES @NAME@.cpp)

# `ctest`: the installed tally runs the plugin on the example (eval.yaml over data.jsonl), and
# the result must be the one @NAME@.cpp documents: mean 2.4 of 5 values.
enable_testing()
add_test(NAME @NAME@.example
         COMMAND tally::tally_cli run ${CMAKE_CURRENT_SOURCE_DIR}/eval.yaml
                 --set "plugins.paths=[\"$<TARGET_FILE_DIR:tally_plugin_@NAME@>\"]"
                 --output ${CMAKE_CURRENT_BINARY_DIR}/results.json)
set_tests_properties(@NAME@.example PROPERTIES
                     PASS_REGULAR_EXPRESSION "@TYPE@ +mean +2\\.4000+ *\n[^\n]*count +5 *\n")
)skel";

constexpr std::string_view kSource =
    R"skel(// @TYPE@: the mean of the numbers in the field `values`, and how many there are.
//
//   metrics:
//     - type: @TYPE@
//
// Example: values [1.5, 2.5, 0.5, 3.5, 4.0] -> {mean: 2.4, count: 5}
//
// State: every value, concatenated across ranks in rank order (that is, in dataset order), and
// the count, summed across ranks. compute() adds the values in dataset order, so the result has
// the same bits on any number of ranks.
#include <cstdint>
#include <vector>

#include <tally/sdk/input.hpp>   // InputChecker, visit_floating / visit_integral
#include <tally/sdk/plugin.hpp>  // TALLY_PLUGIN, TypedMetric and their types (or tally/sdk.hpp)

namespace {

struct State {
  tally::PackedVector<double> values;  // per-sample values: concatenated in rank order
  std::int64_t n = 0;                  // a count: summed across ranks
  TALLY_STATE(concat(values), sum(n))
};

class @TYPE@ final : public tally::TypedMetric<State> {
 public:
  explicit @TYPE@(const tally::Params& p) : check_(p.owner_or("@TYPE@")) {}

 protected:
  State initial_state() const override { return {}; }

  void update(State& s, const tally::Batch& batch) override {
    const tally::Tensor& v = check_.tensor(batch, "values");
    check_.dims(v, "values", 1, "[N]");
    const auto append = [&](const auto* xs) {
      for (std::int64_t i = 0; i < v.size(0); ++i) s.values.push_back(static_cast<double>(xs[i]));
    };
    if (tally::is_floating(v.dtype()))
      tally::visit_floating(v, append);
    else if (tally::is_integral(v.dtype()))
      tally::visit_integral(v, append);
    else
      check_.fail("values", "must hold numbers, got " + v.describe());
    s.n += v.size(0);
  }

  // `all` is every rank's state merged as TALLY_STATE declares.
  tally::Value compute(const State& all) const override {
    if (all.n == 0) check_.fail("no samples");
    double total = 0.0;
    for (const double x : all.values) total += x;
    tally::Value out = tally::Value::map();
    out.set("mean", total / static_cast<double>(all.n));
    out.set("count", all.n);
    return out;
  }

 private:
  tally::InputChecker check_;  // words input errors: "metric '@TYPE@': field 'values' ..."
};

// The metric's identity next to its class: name, doc, parameters, inputs, aliases and what its
// result keys mean, registered with one line.
tally::ComponentInfo component() {
  return tally::metric<@TYPE@>(
      "@TYPE@", "The mean of the numbers in the field `values`, and their count", {},
      {{"values", "[N] numbers, any integer or float dtype", true}}, {},
      {{"mean", tally::Better::Neither, tally::Plot::None, "the mean of the values"},
       {"count", tally::Better::Neither, tally::Plot::None, "the number of values"}});
}
TALLY_COMPONENT(component)

}  // namespace

// The plugin: its name, its version, and every component its files registered.
TALLY_PLUGIN("@NAME@", "0.1.0")
)skel";

constexpr std::string_view kConfig =
    R"skel(# The example the test runs: @TYPE@ over data.jsonl. By hand, from the build folder:
#   tally run ../eval.yaml --set plugins.paths=[.]
data:
  type: jsonl
  path: data.jsonl   # one JSON object per line, relative to this file
metrics:
  - type: @TYPE@
)skel";

constexpr std::string_view kData = R"skel({"values": 1.5}
{"values": 2.5}
{"values": 0.5}
{"values": 3.5}
{"values": 4.0}
)skel";

constexpr std::string_view kReadme = R"skel(# @NAME@: a tally metric plugin

`@NAME@.cpp` defines the metric `@TYPE@` (the mean of the field `values`, and their count) and
builds into `libtally_@NAME@.so`, which tally loads from `plugins.paths`, `TALLY_PLUGIN_PATH` or
`tally plugins --path DIR`.

```sh
cmake -S . -B build -DCMAKE_PREFIX_PATH=<tally install prefix>
cmake --build build
ctest --test-dir build --output-on-failure      # runs eval.yaml with the plugin, checks the result
tally plugins --path build                      # lists @TYPE@ with its inputs and results
tally run eval.yaml --set plugins.paths=[build]
```

To write your own metric, change `State` (each field and how ranks merge it, in `TALLY_STATE`:
`sum`, `concat`, `min`, `max`, `first`, `agree`, `float_sum`, `merge`), `update()` (one batch into
this rank's state) and `compute()` (the result from every rank's state merged), then the example
data and the expected result in `CMakeLists.txt`. See "Writing a metric plugin" in tally's README.
)skel";

constexpr std::string_view kGitignore = "build/\n";

std::string fill(std::string_view text, const std::string& name, const std::string& type) {
  std::string out;
  out.reserve(text.size() + 256);
  for (std::size_t i = 0; i < text.size();) {
    if (text.substr(i, 6) == "@NAME@") {
      out += name;
      i += 6;
    } else if (text.substr(i, 6) == "@TYPE@") {
      out += type;
      i += 6;
    } else {
      out += text[i++];
    }
  }
  return out;
}

void write_text(const fs::path& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wbx");
  if (f == nullptr)
    throw RuntimeError(
        fmt::format("new-plugin: cannot create {}: {}", path.string(), std::strerror(errno)));
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed)
    throw RuntimeError(fmt::format("new-plugin: cannot write {}: {}", path.string(),
                                   std::strerror(wrote ? errno : write_errno)));
}

/// Removes a folder this command created, unless it was handed over (release()).
class TempDir {
 public:
  explicit TempDir(fs::path p) : path_(std::move(p)) {}
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  fs::path path_;
};

/// ConfigError when a plugin that tally loads now (the built-in ones, TALLY_PLUGIN_PATH) already
/// has the plugin name `name` or a component called `type`: the new plugin could not be loaded
/// beside it. Skipped when the plugins fail to load: that error is theirs, and any command that
/// loads them shows it.
void check_name_free(const std::string& name, const std::string& type) {
  std::optional<Registry> reg;
  try {
    reg.emplace(Registry::load());
  } catch (const Error&) {
    return;
  }
  for (const auto& c : reg->components()) {
    if (c.plugin_name == name)
      throw ConfigError(
          fmt::format("new-plugin: NAME '{}' is taken by the plugin {}; pick another name", name,
                      c.file.string()));
    bool taken = c.info->name == type;
    for (const auto& alias : c.info->aliases) taken = taken || alias == type;
    if (taken)
      throw ConfigError(fmt::format(
          "new-plugin: NAME '{}' names its metric '{}', a name the {} '{}' of {} has; pick "
          "another name",
          name, type, component_kind_name(c.info->kind), c.info->name, c.file.string()));
  }
}

}  // namespace

std::string plugin_metric_type(std::string_view name) {
  std::string type;
  bool upper = true;
  for (const char c : name) {
    if (c == '_') {
      upper = true;
      continue;
    }
    type += upper && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
    upper = false;
  }
  return type;
}

void write_plugin_skeleton(const std::string& name, const fs::path& dir) {
  // NAME becomes a file name, a CMake target, a library name and a C++ class name.
  constexpr std::size_t kMaxName = 64;
  bool valid = !name.empty() && name.size() <= kMaxName && name[0] >= 'a' && name[0] <= 'z';
  for (const char c : name)
    valid = valid && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  if (!valid)
    throw ConfigError(fmt::format(
        "new-plugin: NAME '{}' is not a plugin name: expected a lowercase letter, then lowercase "
        "letters, digits or '_' (at most {} characters), e.g. my_metric",
        name, kMaxName));
  const std::string type = plugin_metric_type(name);
  check_name_free(name, type);

  if (dir.empty()) throw ConfigError("new-plugin: DIR is empty; a folder name was expected");
  fs::path target = fs::absolute(dir).lexically_normal();
  if (!target.has_filename()) target = target.parent_path();  // "out/" -> "out"
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(target, ec);
  const bool exists = fs::exists(st);
  if (exists) {
    if (!fs::is_directory(st))
      throw ConfigError(
          fmt::format("new-plugin: DIR '{}' exists and is not a folder", dir.string()));
    fs::directory_iterator it(target, ec);
    if (ec)
      throw ConfigError(
          fmt::format("new-plugin: cannot read the folder '{}': {}", dir.string(), ec.message()));
    if (it != fs::directory_iterator())
      throw ConfigError(fmt::format(
          "new-plugin: DIR '{}' is not empty (it holds '{}'): the skeleton is written only into a "
          "new or empty folder",
          dir.string(), it->path().filename().string()));
  }

  const fs::path parent = target.parent_path();
  if (!exists) {
    fs::create_directories(parent, ec);
    if (ec)
      throw ConfigError(fmt::format("new-plugin: cannot create the folder '{}': {}",
                                    parent.string(), ec.message()));
  }
  // The skeleton is written into a fresh folder beside DIR (same file system: renames are
  // atomic), then moved in: DIR never holds half a skeleton.
  fs::path tmp_path;
  for (int attempt = 0; tmp_path.empty(); ++attempt) {
    const fs::path candidate =
        parent /
        fmt::format(".{}.new-plugin-{}-{}", target.filename().string(), ::getpid(), attempt);
    if (fs::create_directory(candidate, ec)) {
      tmp_path = candidate;
    } else if (ec || attempt >= 100) {
      throw ConfigError(fmt::format("new-plugin: cannot create a folder in '{}': {}",
                                    parent.string(), ec ? ec.message() : "names taken"));
    }
  }
  TempDir tmp(tmp_path);

  const std::vector<std::pair<std::string, std::string>> files = {
      {"CMakeLists.txt", fill(kCMakeLists, name, type)}, {name + ".cpp", fill(kSource, name, type)},
      {"eval.yaml", fill(kConfig, name, type)},          {"data.jsonl", std::string(kData)},
      {"README.md", fill(kReadme, name, type)},          {".gitignore", std::string(kGitignore)},
  };
  for (const auto& [file, text] : files) write_text(tmp.path() / file, text);

  if (!exists) {
    // rename(2) fails (EEXIST/ENOTEMPTY) rather than replace a folder created meanwhile with
    // something in it.
    fs::rename(tmp.path(), target, ec);
    if (ec)
      throw RuntimeError(
          fmt::format("new-plugin: cannot create '{}': {}", dir.string(), ec.message()));
    tmp.release();
    return;
  }
  // DIR exists and is empty (it may be the working folder: not replaced, filled): each file is
  // moved in by a rename, none of which replaces a file that appeared meanwhile (checked just
  // before); on a failure the files already moved are taken out again.
  std::vector<fs::path> moved;
  for (const auto& entry : files) {
    const fs::path to = target / entry.first;
    std::error_code move_ec;
    if (fs::exists(fs::symlink_status(to, ec)))
      move_ec = std::make_error_code(std::errc::file_exists);
    else
      fs::rename(tmp.path() / entry.first, to, move_ec);
    if (move_ec) {
      for (const auto& m : moved) fs::remove(m, ec);
      throw RuntimeError(
          fmt::format("new-plugin: cannot write '{}': {}", to.string(), move_ec.message()));
    }
    moved.push_back(to);
  }
}

}  // namespace tally::cli
