#pragma once

#include <cstdint>

namespace tally {

/// The engine's release version, reported in `tally plugins` and in the results JSON.
inline constexpr const char* kVersion = "0.1.0";

/// The plugin ABI version. A plugin built against another ABI version is refused before any of
/// its code runs. Bump on any change to a type that crosses the plugin boundary (the SDK headers).
inline constexpr std::uint32_t kAbiVersion = 3;  // 2: Batch text fields; 3: gather_varying

/// The sync protocol version, carried in every sync header.
inline constexpr std::uint32_t kProtocolVersion = 1;

}  // namespace tally
