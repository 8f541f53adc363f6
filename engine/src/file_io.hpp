// Whole-file reads (configs, results, checkpoints, Chart.js) and durable, atomic writes (the
// results JSON, the reports, checkpoint shards and metadata).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace tally {

/// The whole file; nullopt when it cannot be opened or read, with errno saying why (callers name
/// the file and what it is in their own error).
std::optional<std::string> read_whole_file(const std::filesystem::path& path);

/// Writes `bytes` to `path` so that a crash leaves either the old file or the new one, whole: a
/// temporary file in the same folder, fsync, rename over `path`, fsync of the folder. A failure
/// leaves no temporary file behind. RuntimeError naming the path on failure.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

/// fsync of a folder, making the entries created or renamed in it durable. File systems that
/// cannot fsync a folder (EINVAL) are accepted. RuntimeError naming the folder on failure.
void fsync_dir(const std::filesystem::path& dir);

}  // namespace tally
