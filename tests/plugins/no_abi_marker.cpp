// A plugin as tally built them before the ABI marker (TALLY_PLUGIN_ABI_MARKER): an entry and a
// manifest of the current ABI, but no exported tally_abi_vN symbol. The registry cannot know its
// ABI without loading it, so it is refused, and its static constructor (which writes the file
// named by TALLY_TEST_LOAD_MARKER) never runs.
#include <cstdio>
#include <cstdlib>

#include "tally/sdk/plugin.hpp"

namespace {
struct LoadMarker {
  LoadMarker() {
    if (const char* path = std::getenv("TALLY_TEST_LOAD_MARKER"))
      if (FILE* f = std::fopen(path, "w")) {
        std::fputs("no_abi_marker: static constructor ran\n", f);
        std::fclose(f);
      }
  }
};
const LoadMarker marker;

const tally::PluginManifest* entry() noexcept {
  static const tally::PluginManifest m{tally::kAbiVersion, "no_abi_marker", "0.0.1", {}};
  return &m;
}
}  // namespace

TALLY_PLUGIN_EXPORT_ENTRY(entry)
