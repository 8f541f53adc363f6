#pragma once

#include <cstdint>

namespace tally {

/// The engine's release version, reported in `tally plugins` and in the results JSON.
inline constexpr const char* kVersion = "0.1.0";

/// The plugin ABI version. A plugin built against another ABI version is refused before any of
/// its code runs. Bump on any change to a type that crosses the plugin boundary (the SDK headers).
/// 2: Batch text fields; 3: gather_varying; 4: DistBackend::reduce_values; 5: Reader::layout,
/// DistBackend::work_and_wait; 6: one Metric interface (SDK 2: TALLY_STATE states merged by the
/// engine; RestorableMetric, LocalComputeMetric and ReducibleMetric gone); 7: a boundary of plain
/// bytes (states cross as Bytes / ByteSink, written by libtally's StateWriter: no msgpack type in
/// any signature; Metric::merge_saved; the entry an extern "C" function; SDK headers under
/// tally/sdk/). A macro too:
/// TALLY_PLUGIN (tally/sdk/plugin.hpp) puts it in the name of an exported symbol, tally_abi_v<N>,
/// that the registry reads from the file before loading it.
#define TALLY_PLUGIN_ABI_VERSION 7
inline constexpr std::uint32_t kAbiVersion = TALLY_PLUGIN_ABI_VERSION;

/// The plugin ABI's minor version: additions within one major version that keep every plugin
/// built for an older minor loading (docs/abi.md says which changes are additions). The registry
/// loads a plugin of the same major built for a minor up to this one, and refuses one built for a
/// newer minor (it may use what this tally lacks). Reset to 0 when the major changes. A macro
/// too: TALLY_PLUGIN exports it in the name of a second symbol, tally_abi_minor_<M>.
/// 7.0: the first of ABI 7 (docs/abi.md lists what crosses).
#define TALLY_PLUGIN_ABI_MINOR 0
inline constexpr std::uint32_t kAbiMinor = TALLY_PLUGIN_ABI_MINOR;

/// The sync protocol version, carried in every sync header. 2: counts of ReducibleMetrics are
/// reduced to rank 0 (MPI_Reduce) instead of gathered; the header carries how many. 3: a start
/// exchange before any shard is read (every rank's status, the data's size and layout); rank 0
/// computes under run_on_root (its liveness, not the timeout, bounds the others' wait). 4: every
/// metric's `sum` fields are reduced and only its other fields gathered (SDK 2).
inline constexpr std::uint32_t kProtocolVersion = 4;

}  // namespace tally
