// A plugin built for another plugin ABI (999): the registry must refuse it from its ABI marker,
// read from the file, before the library is loaded. Its static constructor, which would run at
// dlopen, writes the file named by TALLY_TEST_LOAD_MARKER: a test asserts it never appears.
#include <cstdio>
#include <cstdlib>

#include "tally/sdk/plugin.hpp"

namespace {
struct LoadMarker {
  LoadMarker() {
    if (const char* path = std::getenv("TALLY_TEST_LOAD_MARKER"))
      if (FILE* f = std::fopen(path, "w")) {
        std::fputs("bad_abi: static constructor ran\n", f);
        std::fclose(f);
      }
  }
};
const LoadMarker marker;

const tally::PluginManifest* entry() noexcept {
  static const tally::PluginManifest m{999, "bad_abi", "9.9.9", {}};
  return &m;
}
}  // namespace

// What TALLY_PLUGIN exports, for ABI 999.
extern "C" __attribute__((visibility("default"), used)) const std::uint32_t tally_abi_v999 = 999;
TALLY_PLUGIN_EXPORT_ENTRY(entry)
