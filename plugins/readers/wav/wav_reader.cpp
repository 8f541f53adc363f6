// The `wav` reader: one folder of WAV files per field, the files of the folders matched by name
// (as the png readers do). Sample i is the i-th name in sorted (byte) order; each field of it is a
// float64 tensor (ragged: lengths vary between samples): [T] for a mono file, [C, T] for C
// channels (channels as speakers, the layout of the audio metrics' [S, T]). Decoded with
// libsndfile when its batch is read, so no more than one batch of audio is in memory; each rank
// reads its contiguous block of the names.
//
//   data:
//     type: wav
//     batch_size: 16
//     sample_rate: 16000               # optional: every file must have it
//     fields:                          # field name -> folder, relative to the config file
//       preds: separated/
//       target: clean/
//
// Values as libsndfile reads them as double: PCM of b bits is x / 2^(b-1) (in [-1, 1)), IEEE
// float files as stored. PCM 8/16/24/32-bit and float32/64 WAV, and the other containers that
// declare their length (the file's header decides): RF64, W64, AIFF/AIFC, CAF, FLAC, AU. Each
// is checked for the data its header declares against the file's size (sound_container.hpp): a
// cut-off file is an InputError naming it, never a shorter recording. Formats that declare no
// length (Ogg, MP3, raw, ...) are refused naming their format. Every entry named *.wav of a
// folder must be a regular file or a link to one: a FIFO, device, socket, folder or dangling
// link is an InputError naming it (tally_support/folder_fields.hpp), never skipped. The files of
// one sample must have the same number of frames and channels in every field (a metric compares
// them sample by sample), and every file the same sample rate (sample_rate, or else the first
// file's): otherwise an InputError naming the file.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <sndfile.h>

#include "sound_container.hpp"

#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/reader.hpp"
#include "tally/sdk/tensor.hpp"
#include "tally_support/folder_fields.hpp"
#include "tally_support/sharded_reader.hpp"

namespace {

namespace fs = std::filesystem;

/// The bounds of one file: channels and values (frames x channels; 2^28 float64 values = 2 GiB).
constexpr std::int64_t kMaxChannels = 1024;
constexpr std::int64_t kMaxValues = std::int64_t{1} << 28;

struct SndCloser {
  void operator()(SNDFILE* f) const { sf_close(f); }
};

/// A file descriptor, closed when it goes.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

/// One open file and its header (the handle closed before the descriptor).
struct SoundFile {
  explicit SoundFile(int f) : fd(f) {}
  Fd fd;
  std::unique_ptr<SNDFILE, SndCloser> handle;
  SF_INFO info{};
};

/// The file opened without blocking (a FIFO or device named .wav is refused, not waited on), as a
/// regular file, its container checked for the data it declares (sound_container.hpp).
SoundFile open_sound(const fs::path& file, const std::string& what) {
  SoundFile s(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (s.fd.fd < 0)
    throw tally::InputError(
        fmt::format("{}: cannot open {}: {}", what, file.string(), std::strerror(errno)));
  struct stat st {};
  if (::fstat(s.fd.fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw tally::InputError(
        fmt::format("{}: {} is not a regular file ({}); a WAV file was expected", what,
                    file.string(), tally::support::not_regular_kind(file)));
  s.handle.reset(sf_open_fd(s.fd.fd, SFM_READ, &s.info, SF_FALSE));
  if (!s.handle)
    throw tally::InputError(
        fmt::format("{}: cannot read {} as audio: {}", what, file.string(), sf_strerror(nullptr)));
  tally_wav::check_declared_data(s.fd.fd, static_cast<std::uint64_t>(st.st_size), s.info,
                                 file.string(), what);
  if (s.info.channels < 1 || s.info.channels > kMaxChannels)
    throw tally::InputError(fmt::format("{}: {} has {} channels (at most {})", what, file.string(),
                                        s.info.channels, kMaxChannels));
  if (s.info.frames < 1 || s.info.frames > kMaxValues / s.info.channels)
    throw tally::InputError(fmt::format(
        "{}: {} holds {} frames of {} channels: {}", what, file.string(), s.info.frames,
        s.info.channels,
        s.info.frames < 1 ? "no audio" : fmt::format("more than {} values", kMaxValues)));
  if (s.info.samplerate < 1)
    throw tally::InputError(
        fmt::format("{}: {} has sample rate {}", what, file.string(), s.info.samplerate));
  return s;
}

class WavReader final : public tally::support::ShardedReader {
 public:
  WavReader(const tally::Params& params, const tally::ShardInfo& shard) {
    read_batch_size(params);
    const auto dirs = params.get_string_map("fields");
    if (dirs.empty())
      params.fail("fields", "must name at least one field (field name: folder of .wav files)");
    tally::support::check_shard("wav", shard);
    for (const auto& [field, dir] : dirs) fields_.push_back({field, fs::path(dir)});
    names_ = tally::support::folder_file_names("wav", fields_.front(), ".wav");
    if (names_.empty())
      throw tally::InputError(fmt::format("wav reader: field '{}': no .wav files in {}",
                                          fields_.front().name, fields_.front().dir.string()));
    for (std::size_t f = 1; f < fields_.size(); ++f) {
      const auto other = tally::support::folder_file_names("wav", fields_[f], ".wav");
      if (other != names_)
        tally::support::folder_mismatch("wav", ".wav", fields_.front(), names_, fields_[f], other);
    }
    has_rate_param_ = params.has("sample_rate");
    if (has_rate_param_) {
      sample_rate_ = params.get_size("sample_rate", 1, 1 << 24);
    } else {
      // The first file of the dataset, the same on every rank.
      const fs::path first = fields_.front().dir / names_.front();
      sample_rate_ =
          open_sound(first, fmt::format("wav reader: field '{}' sample 0", fields_.front().name))
              .info.samplerate;
    }
    set_samples(static_cast<std::int64_t>(names_.size()), shard);
  }

  std::vector<std::string> fields() const override { return tally::support::field_names(fields_); }

  std::string layout() const override {
    return fmt::format("wav: {} files a field at {} Hz", names_.size(), sample_rate_);
  }

 protected:
  tally::Batch read_batch(std::int64_t begin, std::int64_t end) override {
    tally::Batch batch;
    std::vector<tally::Batch::Ragged> columns(fields_.size());
    for (std::int64_t i = begin; i < end; ++i) {
      const std::string& name = names_[static_cast<std::size_t>(i)];
      std::int64_t frames = -1, channels = -1;
      std::string first_file;
      for (std::size_t f = 0; f < fields_.size(); ++f) {
        const fs::path file = fields_[f].dir / name;
        const std::string what =
            fmt::format("wav reader: field '{}' sample {}", fields_[f].name, i);
        SoundFile s = open_sound(file, what);
        if (s.info.samplerate != sample_rate_)
          throw tally::InputError(fmt::format(
              "{}: {} has sample rate {} Hz, expected {} Hz ({})", what, file.string(),
              s.info.samplerate, sample_rate_,
              has_rate_param_ ? "the sample_rate parameter" : "the rate of the first file"));
        if (frames >= 0 && (s.info.frames != frames || s.info.channels != channels))
          throw tally::InputError(fmt::format(
              "{}: {} holds {} frames of {} channel(s), but {} holds {} of {}: the files of one "
              "sample must have the same length and channels",
              what, file.string(), s.info.frames, s.info.channels, first_file, frames, channels));
        frames = s.info.frames;
        channels = s.info.channels;
        first_file = file.string();
        columns[f].push_back(decode(s, file, what));
      }
    }
    for (std::size_t f = 0; f < fields_.size(); ++f)
      batch.set_ragged(fields_[f].name, std::move(columns[f]));
    return batch;
  }

 private:
  using Field = tally::support::FolderField;

  /// The file's values: [T] for one channel, [C, T] (de-interleaved) for more.
  static tally::Tensor decode(SoundFile& s, const fs::path& file, const std::string& what) {
    const std::int64_t frames = s.info.frames, channels = s.info.channels;
    std::vector<double> interleaved(static_cast<std::size_t>(frames * channels));
    const sf_count_t got = sf_readf_double(s.handle.get(), interleaved.data(), frames);
    if (got != frames)
      throw tally::InputError(fmt::format(
          "{}: {} is truncated or corrupt: its header promises {} frames, {} could be read{}", what,
          file.string(), frames, got < 0 ? 0 : got,
          sf_error(s.handle.get()) != 0 ? fmt::format(" ({})", sf_strerror(s.handle.get()))
                                        : std::string()));
    if (channels == 1) return tally::Tensor::from_vector(interleaved, {frames});
    std::vector<double> planar(interleaved.size());
    for (std::int64_t t = 0; t < frames; ++t)
      for (std::int64_t c = 0; c < channels; ++c)
        planar[static_cast<std::size_t>(c * frames + t)] =
            interleaved[static_cast<std::size_t>(t * channels + c)];
    return tally::Tensor::from_vector(planar, {channels, frames});
  }

  std::vector<Field> fields_;
  std::vector<std::string> names_;
  std::int64_t sample_rate_ = 0;
  bool has_rate_param_ = false;
};

std::vector<tally::ComponentInfo> wav_components() {
  return {tally::reader<WavReader>(
      "wav",
      "Folders of WAV files, one folder per field, files matched by name; samples in sorted name "
      "order. Each sample is a float64 tensor (ragged): [T] for a mono file, [C, T] for C "
      "channels (speakers). PCM x of b bits reads as x / 2^(b-1), float files as stored "
      "(libsndfile). Containers: WAV, RF64, W64, AIFF/AIFC, CAF, FLAC, AU, each checked for the "
      "data its header declares (a cut-off file is an error). Every .wav entry must be a regular "
      "file. The files of a sample must match in length and channels across fields, and "
      "every file must have one sample rate. Decoded one batch at a time; each rank reads its "
      "contiguous block of the sorted names.",
      {tally::param("fields", tally::ParamType::PathMap,
                    "field name -> folder of .wav files; the folders hold the same file names, "
                    "matched by name, samples in sorted name order"),
       tally::support::batch_size_param("samples per batch (decoded together, then released)", 16),
       tally::param("sample_rate", tally::ParamType::Int,
                    "The sample rate (Hz) every file must have; unset: the first file's.")
           .optional()
           .nullable()})};
}

}  // namespace

TALLY_PLUGIN("wav", "0.1.0", wav_components)
