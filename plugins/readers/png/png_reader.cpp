// The `png_masks` and `images` readers: one folder of PNG files per field, the files of the
// folders matched by name. Sample i is the i-th name in sorted (byte) order; every field of it is
// a ragged tensor (sizes vary between samples), decoded when its batch is read, so no more than
// one batch of images is in memory. Each rank reads its contiguous block of the names
// (ShardRange), and decodes only those.
//
//   data:
//     type: png_masks                 # or: images
//     batch_size: 16
//     fields:                         # field name -> folder, relative to the config file
//       pred_sem_seg: predictions/
//       gt_sem_seg: annotations/
//
// png_masks: each sample a [H, W] label map (U8: 8-bit or lower grayscale, palette indices; U16:
// 16-bit grayscale). images: each sample [H, W, C] (C = 1, 2, 3 or 4 as stored; U8 or U16).
// Every entry named *.png of a folder must be a regular file or a link to one: a FIFO, device,
// socket, folder or dangling link so named is an InputError naming it, never skipped.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "png_decode.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/reader.hpp"
#include "tally_support/folder_fields.hpp"
#include "tally_support/sharded_reader.hpp"

namespace {

namespace fs = std::filesystem;

enum class Kind { Masks, Images };

class PngReader : public tally::support::ShardedReader {
 public:
  PngReader(Kind kind, const tally::Params& params, const tally::ShardInfo& shard)
      : kind_(kind), name_(kind == Kind::Masks ? "png_masks" : "images") {
    read_batch_size(params);
    const auto dirs = params.get_string_map("fields");
    if (dirs.empty())
      params.fail("fields", "must name at least one field (field name: folder of .png files)");
    tally::support::check_shard(name_, shard);

    for (const auto& [field, dir] : dirs) fields_.push_back({field, fs::path(dir)});
    names_ = tally::support::folder_file_names(name_, fields_.front(), ".png");
    if (names_.empty())
      throw tally::InputError(fmt::format("{} reader: field '{}': no .png files in {}", name_,
                                          fields_.front().name, fields_.front().dir.string()));
    for (std::size_t f = 1; f < fields_.size(); ++f) {
      const auto other = tally::support::folder_file_names(name_, fields_[f], ".png");
      if (other != names_)
        tally::support::folder_mismatch(name_, ".png", fields_.front(), names_, fields_[f], other);
    }
    set_samples(static_cast<std::int64_t>(names_.size()), shard);
  }

  std::vector<std::string> fields() const override { return tally::support::field_names(fields_); }

 protected:
  tally::Batch read_batch(std::int64_t begin, std::int64_t end) override {
    tally::Batch batch;
    for (const auto& f : fields_) {
      tally::Batch::Ragged samples;
      samples.reserve(static_cast<std::size_t>(end - begin));
      for (std::int64_t i = begin; i < end; ++i) {
        const fs::path file = f.dir / names_[static_cast<std::size_t>(i)];
        const std::string what = fmt::format("{} reader: field '{}' sample {}", name_, f.name, i);
        samples.push_back(kind_ == Kind::Masks ? tally_png::decode_mask(file, what)
                                               : tally_png::decode_image(file, what));
      }
      batch.set_ragged(f.name, std::move(samples));
    }
    return batch;
  }

 private:
  using Field = tally::support::FolderField;

  Kind kind_;
  std::string name_;
  std::vector<Field> fields_;
  std::vector<std::string> names_;
};

class PngMasksReader final : public PngReader {
 public:
  PngMasksReader(const tally::Params& p, const tally::ShardInfo& s)
      : PngReader(Kind::Masks, p, s) {}
};

class ImagesReader final : public PngReader {
 public:
  ImagesReader(const tally::Params& p, const tally::ShardInfo& s) : PngReader(Kind::Images, p, s) {}
};

std::vector<tally::ParamSpec> params(const char* content) {
  return {
      tally::param("fields", tally::ParamType::PathMap,
                   std::string("field name -> folder of .png files (") + content +
                       "); the folders hold the same file names, matched by name, samples in "
                       "sorted name order"),
      tally::support::batch_size_param("samples per batch (decoded together, then released)", 16),
  };
}

std::vector<tally::ComponentInfo> png_components() {
  return {
      tally::reader<PngMasksReader>(
          "png_masks",
          "Folders of PNG label maps (segmentation masks), one folder per field, files matched by "
          "name. Each sample is a [H, W] tensor (ragged): uint8 for 8-bit (or lower) grayscale "
          "and palette PNGs (the palette index is the class id), uint16 for 16-bit grayscale. "
          "RGB and alpha PNGs are errors. Decoded with libspng, one batch at a time; each rank "
          "reads its contiguous block of the sorted names.",
          params("single-channel label maps")),
      tally::reader<ImagesReader>(
          "images",
          "Folders of PNG images, one folder per field, files matched by name. Each sample is a "
          "[H, W, C] tensor (ragged, HWC), channels as stored: 1 grayscale, 2 grayscale + alpha, "
          "3 RGB, 4 RGBA (a palette becomes RGB, or RGBA with transparency); uint8, or uint16 "
          "for 16-bit PNGs. Decoded with libspng, one batch at a time; each rank reads its "
          "contiguous block of the sorted names.",
          params("images")),
  };
}

}  // namespace

TALLY_PLUGIN("png", "0.1.0", png_components)
