#pragma once

#include <cstdint>

namespace tally {

/// The engine's release version, reported in `tally plugins` and in the results JSON.
inline constexpr const char* kVersion = "0.1.0";

/// The plugin ABI version. A plugin built against another ABI version is refused before any of
/// its code runs. Bump on any change to a type that crosses the plugin boundary (the SDK headers).
/// 2: Batch text fields; 3: gather_varying; 4: DistBackend::reduce_values.
inline constexpr std::uint32_t kAbiVersion = 4;

/// The sync protocol version, carried in every sync header. 2: counts of ReducibleMetrics are
/// reduced to rank 0 (MPI_Reduce) instead of gathered; the header carries how many.
inline constexpr std::uint32_t kProtocolVersion = 2;

}  // namespace tally
