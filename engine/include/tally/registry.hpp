// The plugin registry: discovers libtally_*.so files, checks each one's ABI version before
// anything else, reads its manifest, and creates components whose objects keep their library
// loaded (docs/architecture.md, "Plugins and the ABI"). Public for programs that list or query
// plugins (`tally plugins`, the ResultSpecs `tally compare` reads for results files); a plugin
// needs none of it.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tally/sdk/dist_backend.hpp"
#include "tally/sdk/export.hpp"
#include "tally/sdk/plugin.hpp"

namespace tally {

/// One component of one loaded plugin.
struct Component {
  const ComponentInfo* info = nullptr;
  std::filesystem::path file;
  std::string plugin_name;
  std::string plugin_version;
  /// The boost::dll::shared_library, type-erased. Every object made from this component holds it.
  std::shared_ptr<void> library;
};

/// A plugin file that was found but not loaded: it needs a shared library this machine lacks
/// (the mpi backend without Open MPI, nccl without NCCL). Its components are absent; asking for
/// one names the library (Registry::get).
struct UnloadedPlugin {
  std::filesystem::path file;
  /// The library's name as the loader gave it ("libmpi.so.40"), escaped for a terminal.
  std::string missing_library;
};

class TALLY_API Registry {
 public:
  /// Searches, in order: `config_paths` (folders or .so files), TALLY_PLUGIN_PATH
  /// (colon-separated), then the built-in plugin folder beside libtally. ConfigError for a
  /// missing folder, a library that is not a valid plugin (a plugin that needs a shared library
  /// this machine does not have is not an error: it is listed in unloaded()), an ABI mismatch (read
  /// from the file's ABI marker before the library is loaded) or a duplicate name, and for a plugin
  /// file or folder that another user could have written (world-writable, group-writable by a group
  /// other than root's or the caller's, owned by neither root nor the caller) unless `allow_unsafe`
  /// (plugins.allow_unsafe) or TALLY_ALLOW_UNSAFE_PLUGINS=1.
  static Registry load(const std::vector<std::filesystem::path>& config_paths = {},
                       bool allow_unsafe = false);

  /// <libdir>/tally/plugins, where libtally lives.
  static std::filesystem::path builtin_dir();

  /// The component of `kind` called `name` (or aliased so); nullptr when there is none.
  const Component* find(ComponentKind kind, std::string_view name) const;
  /// Like find(), but a ConfigError listing the known names, and the plugins that could not be
  /// loaded with the library each needs, when there is none.
  const Component& get(ComponentKind kind, std::string_view name) const;
  const std::vector<Component>& components() const { return components_; }
  /// The plugins found but not loaded, each with the library it needs.
  const std::vector<UnloadedPlugin>& unloaded() const { return unloaded_; }
  /// "; plugin 'F' is not loaded: it needs L, which this machine does not have" for each of
  /// unloaded(), or "": the tail of a message about a component that was not found.
  std::string unloaded_text() const;
  /// The folders searched, in order.
  const std::vector<std::filesystem::path>& search_path() const { return search_path_; }
  /// The search path as "a:b:c", for messages.
  std::string search_text() const;

  // Objects hold their library: it is unloaded only after the last object is gone.
  static std::shared_ptr<Metric> make_metric(const Component& c, const Params& p);
  static std::shared_ptr<Reader> make_reader(const Component& c, const Params& p,
                                             const ShardInfo& s);
  static std::shared_ptr<DistBackend> make_backend(const Component& c, const Params& p);

 private:
  std::vector<Component> components_;
  std::vector<UnloadedPlugin> unloaded_;
  std::vector<std::filesystem::path> search_path_;
};

}  // namespace tally
