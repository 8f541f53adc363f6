// The plugin ABI check the registry makes on a plugin file before loading it (docs/abi.md): the
// major version must be the engine's, the minor at most the engine's.
#pragma once

#include <cstdint>
#include <filesystem>

#include "tally/sdk/version.hpp"

namespace tally {

/// An ABI version: major.minor.
struct AbiLevel {
  std::uint32_t major = kAbiVersion;
  std::uint32_t minor = kAbiMinor;
};

/// Reads the ABI markers (tally_abi_v<N>, tally_abi_minor_<M>) from the dynamic symbol table of
/// `file` without loading it. ConfigError naming the file and both versions unless N is
/// `engine.major` and M <= `engine.minor` (no minor marker: M = 0); ConfigError too for a file
/// that is not an ELF shared library or has no 'tally_plugin' entry. `engine` is this tally's
/// ABI; tests pass others to check the rule against real plugin files.
void check_plugin_abi(const std::filesystem::path& file, AbiLevel engine = {});

}  // namespace tally
