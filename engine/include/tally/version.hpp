#pragma once

#include <cstdint>

namespace tally {

/// The engine's release version, reported in `tally plugins` and in the results JSON.
inline constexpr const char* kVersion = "0.1.0";

/// The plugin ABI version. A plugin built against another ABI version is refused before any of
/// its code runs. Bump on any change to a type that crosses the plugin boundary (the SDK headers).
/// 2: Batch text fields; 3: gather_varying; 4: DistBackend::reduce_values; 5: Reader::layout,
/// DistBackend::work_and_wait. A macro too: TALLY_PLUGIN (tally/plugin.hpp) puts it in the
/// name of an exported symbol, tally_abi_v<N>, that the registry reads from the file before
/// loading it.
#define TALLY_PLUGIN_ABI_VERSION 5
inline constexpr std::uint32_t kAbiVersion = TALLY_PLUGIN_ABI_VERSION;

/// The sync protocol version, carried in every sync header. 2: counts of ReducibleMetrics are
/// reduced to rank 0 (MPI_Reduce) instead of gathered; the header carries how many. 3: a start
/// exchange before any shard is read (every rank's status, the data's size and layout); rank 0
/// computes under run_on_root (its liveness, not the timeout, bounds the others' wait).
inline constexpr std::uint32_t kProtocolVersion = 3;

}  // namespace tally
