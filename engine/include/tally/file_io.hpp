// Whole-file reads (configs, tolerances, results and baselines, Chart.js, checkpoints), bounded
// and refusing anything but a regular file; and outputs written whole or not at all (the results
// JSON, the reports, the baseline, checkpoint shards and metadata).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tally/sdk/export.hpp"

namespace tally {

/// The most bytes read from each kind of file read whole (exit 2 past them). Configs and
/// tolerances are hand-written; results and baselines hold per-class arrays and matrices;
/// checkpoint shards hold metric states (tally's own files: the limit only stops a runaway read).
inline constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
inline constexpr std::uint64_t kConfigMaxBytes = 64 * kMiB;              // configs, tolerances
inline constexpr std::uint64_t kResultsMaxBytes = 1024 * kMiB;           // results, baselines
inline constexpr std::uint64_t kChartjsMaxBytes = 64 * kMiB;             // Chart.js
inline constexpr std::uint64_t kCheckpointMetadataMaxBytes = 64 * kMiB;  // metadata.json
inline constexpr std::uint64_t kCheckpointShardMaxBytes = 64 * 1024 * kMiB;

/// The whole of the regular file `path`, at most `max_bytes` of it. InputError (exit 2) naming
/// `what` ("config", "tolerances", ...) and the file when it cannot be opened, is not a regular
/// file (a FIFO, a device, a folder: refused without blocking and without reading), or is larger
/// than `max_bytes` (or grows past it while read: at most max_bytes + 1 bytes are ever read).
std::string read_whole_file(const std::filesystem::path& path, std::string_view what,
                            std::uint64_t max_bytes);

/// "64 MiB", "1.5 GiB", "812 bytes": a size for messages.
std::string format_size(std::uint64_t bytes);

/// Several outputs written all or none. stage() writes each regular-file output to a temporary
/// file in its folder (".NAME.tmp.PID.XXXXXX", fsync'ed, locked while it exists) and opens each
/// output that is a character device, FIFO, socket or an open file descriptor (/dev/stdout,
/// /dev/fd/N); commit() writes the latter through, then renames every temporary file over its
/// target and fsyncs the folders. Destroyed without a commit (an error on the way), it removes
/// every temporary file it made: nothing is written.
///
/// Paths: a symlink's final target is written (the link stays a link; a dangling link creates
/// its target); a device, FIFO or socket is written through and never replaced; a folder or a
/// block device is refused (ConfigError). A new file gets 0666 & ~umask; a replaced one keeps its
/// permission bits. A temporary name longer than the file system allows is shortened. Temporary
/// files that a killed tally left in a folder are removed when the next one writes there (their
/// PID is gone and they are not locked); those of a live run are kept.
/// SIGTERM and SIGINT while any output is staged remove every staged temporary file (a fixed
/// table of their paths, read by an async-signal-safe handler installed while one is staged),
/// then do what they did before: the default action ends the process with the signal; a handler
/// of the program's own is called, and commit() then fails (RuntimeError naming the signal).
/// Ignored signals stay ignored. At most 64 files staged at once are covered.
///
/// Errors name `what` (the option or config key the path came from, say "--output"): a path that
/// cannot take output is a ConfigError (exit 2); a failed write or rename is a RuntimeError.
/// Limits: outputs written through are written before any rename, one after the other (a second
/// device that fails leaves the first written); a rename that fails (the folder changed under the
/// run) leaves the outputs renamed before it in place.
class TALLY_API OutputSet {
 public:
  OutputSet();
  ~OutputSet();
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;

  void stage(const std::filesystem::path& path, std::string_view bytes,
             std::string_view what = "output");
  void commit();

 private:
  struct Entry;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::vector<std::filesystem::path> cleaned_dirs_;
  bool committed_ = false;
};

/// One output written whole or not at all: an OutputSet of one (see there). The missing folders
/// of the path as given are made first; ConfigError naming the path when one cannot be (or the
/// path cannot take output), RuntimeError when the write fails.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes,
                       std::string_view what = "output");

/// ConfigError (exit 2) naming `what` and the path when the path cannot take output: empty, a
/// folder, a block device, its folder missing or not writable, a file name longer than the file
/// system allows, a symlink loop, a file descriptor that is not open. Checked before a run so that
/// a long evaluation does not end with nowhere to put its results.
void check_writable(const std::filesystem::path& path, std::string_view what = "output");

/// Writes all of `bytes` to `fd`, retrying short writes and EINTR; SIGPIPE (a reader that went
/// away: `tally plugins | head`) is an EPIPE error, not the end of the process. Returns 0 or the
/// errno.
int write_all(int fd, std::string_view bytes);

/// fsync of a folder, making the entries created or renamed in it durable. File systems that
/// cannot fsync a folder (EINVAL) are accepted. RuntimeError naming the folder on failure.
void fsync_dir(const std::filesystem::path& dir);

/// The process's umask, read without changing it (/proc/self/status) where the system says it.
unsigned current_umask();

}  // namespace tally
