// The run configuration (docs/architecture.md, "Config (YAML)"): YAML parsed with yaml-cpp, --set
// overrides applied, every key checked; errors name file:line:column (or the --set that
// introduced the value).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tally/records.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/value.hpp"
#include "tally/settings.hpp"

namespace tally {

class Registry;

/// Bounds of every YAML document tally reads (configs, --set values, tolerances): the nodes it
/// expands to, YAML aliases expanded (a "billion laughs" of a few hundred bytes stands for
/// billions), and how deep they nest. Past either: ConfigError naming the place (exit 2).
inline constexpr std::size_t kMaxYamlNodes = 1'000'000;
inline constexpr std::size_t kMaxYamlDepth = 64;
/// The most bytes of scalars a YAML document may expand to, aliases included (as large as a
/// config file may be).
inline constexpr std::size_t kMaxYamlBytes = std::size_t{64} << 20;

/// A value from the config with where it came from ("eval.yaml:7:5" or "--set metrics.0.topk").
struct Located {
  Value value;
  std::string where;
  /// For an entry of a map: where its key was written (unknown-key errors point there).
  std::string key_where;
  /// Locations of the entries of a map or array value, by key or index (parallel structure).
  struct Child;
  std::vector<Child> children;
  const Located* child(std::string_view key) const;
};

/// A (key, value) pair, as std::pair: clang 14 rejects std::pair<std::string, Located> inside
/// Located (its default constructor's explicit() needs Located complete).
struct Located::Child {
  std::string first;
  Located second;
  Child() = default;
  Child(std::string key, Located value) : first(std::move(key)), second(std::move(value)) {}
};

struct MetricConfig {
  std::string type;
  std::string label;  // `name:`, or the type
  Located params;     // the keys other than type, name, inputs (a map)
  std::vector<std::pair<std::string, std::string>> inputs;  // metric input -> data field
  std::string where;
};

/// The `regression:` section (tally/settings.hpp); its inline tolerances are checked here.
using RegressionConfig = RegressionSettings;

/// The `checkpoint:` section: save every rank's metric states and reader position every N batches,
/// so that `tally run --resume` continues an interrupted run (docs/checkpoint.md).
///   checkpoint:
///     dir: ckpt               # relative to the config file; shared by every rank
///     every_n_batches: 50     # >= 1
struct CheckpointConfig {
  std::filesystem::path dir;
  std::int64_t every_n_batches = 1;
  std::string where;  // where the section was written
};

struct Config {
  std::string source;  // the file name for messages ("<yaml>" for text, "config" for a dict)
  std::filesystem::path base_dir;  // relative data paths resolve against this
  std::string backend_type = "nondist";
  Located backend_params;  // keys of `backend:` other than type
  std::vector<std::filesystem::path> plugin_paths;
  /// plugins.allow_unsafe: load plugins that another user could have written (Registry::load).
  bool allow_unsafe_plugins = false;
  std::optional<std::string> data_type;
  Located data_params;  // keys of `data:` other than type
  std::vector<MetricConfig> metrics;
  /// output: json, junit, markdown, html (relative to the working directory).
  std::optional<std::filesystem::path> output_json;
  std::optional<std::filesystem::path> output_junit;
  std::optional<std::filesystem::path> output_markdown;
  std::optional<std::filesystem::path> output_html;
  /// output.records: the per-sample records file (tally/records.hpp).
  std::optional<std::filesystem::path> output_records;
  std::optional<RegressionConfig> regression;
  std::optional<CheckpointConfig> checkpoint;
  /// intervals: bootstrap confidence intervals (docs/significance.md).
  std::optional<IntervalSettings> intervals;

  /// Parses YAML text; `source` names it in messages, `base_dir` anchors relative data paths.
  /// `overrides` are "KEY=VALUE" strings (KEY dotted, list indices as numbers; VALUE is YAML).
  /// `key_paths`: the text is a serialized mapping (Python's dict config), and messages locate a
  /// value by its key path from `source` (config['metrics'][0]['top_k']) instead of a line and
  /// column of text the user never saw.
  static Config parse(const std::string& yaml_text, const std::string& source,
                      const std::filesystem::path& base_dir,
                      const std::vector<std::string>& overrides = {}, bool key_paths = false);
  static Config load(const std::filesystem::path& file,
                     const std::vector<std::string>& overrides = {});

  /// The settings every rank of a job must give alike, as (name, value) in text: those that
  /// change what the ranks do together (the records and intervals collectives, the paired tests,
  /// the checkpoints, the backend's deadlines) or what is written (every output path, the
  /// regression check and its verdict). Each is named as in the config ("output.records",
  /// "regression.rtol"); one that is not set is left out. The start exchange compares them
  /// (sync::exchange_start).
  std::vector<std::pair<std::string, std::string>> agreed_settings() const;
};

/// A YAML file as Located values (file:line:column kept); `what` names it in errors
/// ("tolerances"). InputError when it cannot be read (not a regular file, larger than
/// kConfigMaxBytes), ConfigError when it cannot be parsed. An empty file is null.
Located load_yaml_file(const std::filesystem::path& file, std::string_view what = "");

/// The tolerance rules of a YAML map (a tolerances file, or regression.tolerances written inline;
/// null: none). ConfigError naming `what` and the place of a bad entry.
std::vector<ToleranceRule> parse_tolerance_rules(const Located& map, const std::string& what);

/// Checks `given` against the component's schema: unknown keys, types, required parameters and
/// choices; fills in defaults; resolves Path and PathMap values against `base_dir`. ConfigError
/// names the owner, the key and where it was written.
Params make_params(const ComponentInfo& info, const Located& given, const std::string& owner,
                   const std::filesystem::path& base_dir);
/// The same for values built in code (tests, the library API): no locations.
Params make_params(const ComponentInfo& info, const Value::Map& given, const std::string& owner,
                   const std::filesystem::path& base_dir = {});

}  // namespace tally
