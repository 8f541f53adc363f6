// A plugin built for another plugin ABI: the registry must refuse it after reading only the
// version field.
#include "tally/plugin.hpp"

namespace {
const tally::PluginManifest* entry() noexcept {
  static const tally::PluginManifest m{tally::kAbiVersion + 41, "bad_abi", "9.9.9", {}};
  return &m;
}
}  // namespace
BOOST_DLL_ALIAS(entry, tally_plugin)
