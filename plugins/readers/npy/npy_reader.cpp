// The `npy` reader: one NumPy .npy file per field, memory-mapped; batches are zero-copy views of
// this rank's contiguous shard of the samples (the leading dimension). A field may also name a
// member of an .npz archive ("run.npz:scores"): this rank's rows of it are read (inflated if
// np.savez_compressed wrote it) into owned memory once, and batches are views of that.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "npy_file.hpp"
#include "npz_member.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/reader.hpp"
#include "tally_support/sharded_reader.hpp"

namespace {

using tally_npy::NpyFile;

// Batches are views of a read-only mapping or of memory read once (an .npz member), kept alive
// by the views, or copies: nothing rewrites them (StableBatchReader).
class NpyReader final : public tally::support::ShardedReader, public tally::StableBatchReader {
 public:
  NpyReader(const tally::Params& params, const tally::ShardInfo& shard) {
    read_batch_size(params);
    const auto files = params.get_string_map("fields");
    if (files.empty()) params.fail("fields", "must name at least one field (field name: file.npy)");
    tally::support::check_shard("npy", shard);

    std::vector<std::unique_ptr<tally_npy::NpzMember>> members;  // per field, null for .npy
    for (const auto& [name, path] : files) {
      const std::string what = "npy reader: field '" + name + "' (" + path + ")";
      Field field;
      field.name = name;
      if (const auto ref = tally_npy::parse_npz_ref(path, name)) {
        members.push_back(std::make_unique<tally_npy::NpzMember>(*ref, what));
        field.file = members.back()->header();
      } else {
        members.push_back(nullptr);
        field.file = tally_npy::open_npy(path, what);
        // Typed access needs aligned data. NumPy aligns the data to 64 bytes (16 before 1.24),
        // so only hand-made files take the copying path.
        field.aligned = field.file.header_bytes % tally::dtype_size(field.file.dtype) == 0;
        field.data = field.file.data;
        field.keepalive = field.file.mapping;
      }
      if (!fields_.empty() && field.file.samples() != fields_.front().file.samples()) {
        const Field& first = fields_.front();
        throw tally::InputError(
            "npy reader: fields '" + first.name + "' (" + first.file.path.string() + ") and '" +
            name + "' (" + path + ") have different lengths: " +
            std::to_string(first.file.samples()) + " and " + std::to_string(field.file.samples()) +
            " samples (shapes " + tally_npy::shape_string(first.file.shape) + " and " +
            tally_npy::shape_string(field.file.shape) + ")");
      }
      fields_.push_back(std::move(field));
    }
    set_samples(fields_.front().file.samples(), shard);
    const tally::ShardRange& range = shard_range();
    for (std::size_t i = 0; i < fields_.size(); ++i) {
      if (!members[i]) continue;
      // This rank's rows, owned (and aligned: Tensor::zeros allocates them).
      auto rows = std::make_shared<tally::Tensor>(members[i]->read_rows(range.begin, range.end));
      fields_[i].first_row = range.begin;
      fields_[i].data = static_cast<const std::byte*>(rows->data());
      fields_[i].keepalive = std::shared_ptr<const void>(rows, rows->data());
    }
  }

  std::vector<std::string> fields() const override { return tally::support::field_names(fields_); }
  // "name: dtype [d1, d2]" per field: what every rank must read alike (shape without the sample
  // dimension, which total_samples() covers).
  std::string layout() const override {
    std::string out;
    for (const auto& f : fields_) {
      if (!out.empty()) out += "; ";
      const std::vector<std::int64_t> sample(f.file.shape.begin() + 1, f.file.shape.end());
      out +=
          f.name + ": " + tally::dtype_name(f.file.dtype) + " " + tally_npy::shape_string(sample);
    }
    return out;
  }

 protected:
  // Before every batch and at the end: see check_not_truncated().
  void before_next() override { check_not_truncated(); }

  tally::Batch read_batch(std::int64_t begin, std::int64_t end) override {
    const std::int64_t rows = end - begin;
    tally::Batch batch;
    for (const auto& f : fields_) {
      std::vector<std::int64_t> shape = f.file.shape;
      shape[0] = rows;
      const std::byte* data =
          f.data + static_cast<std::size_t>(begin - f.first_row) * f.file.row_bytes;
      if (f.file.dtype == tally::DType::Bool) check_bools(f, data, begin, rows);
      tally::Tensor t = tally::Tensor::view(data, f.file.dtype, std::move(shape),
                                            tally::Device::cpu(), f.keepalive);
      batch.set(f.name, f.aligned ? std::move(t) : t.clone());
    }
    return batch;
  }

 private:
  struct Field {
    std::string name;
    NpyFile file;
    bool aligned = true;
    const std::byte* data = nullptr;  // row `first_row` of the field
    std::int64_t first_row = 0;       // 0 for a mapped .npy; the shard's first row for .npz
    std::shared_ptr<const void> keepalive;
  };

  // A mapped file that another process shortened: past its last page a read raises SIGBUS (the
  // handler of npy_file.cpp names the file), within it the lost bytes read as zeros, silently.
  // Asked before every batch (the previous one has been read by then) and at the end, so a run
  // over a file shortened while it was read fails (exit 1) instead of computing on zeros.
  void check_not_truncated() const {
    for (const auto& f : fields_) {
      if (!f.file.size_now) continue;
      const auto now = f.file.size_now();
      if (now < f.file.file_size)
        throw tally::RuntimeError("npy reader: field '" + f.name + "' (" + f.file.path.string() +
                                  "): the file was truncated while it was read (it had " +
                                  std::to_string(f.file.file_size) + " bytes when it was opened, " +
                                  std::to_string(now) + " now; another process shortened it)");
    }
  }

  // A C++ bool must hold 0 or 1; NumPy writes nothing else, but a damaged file could.
  static void check_bools(const Field& f, const std::byte* data, std::int64_t first_row,
                          std::int64_t rows) {
    const std::size_t n = static_cast<std::size_t>(rows) * f.file.row_bytes;
    for (std::size_t i = 0; i < n; ++i) {
      if (static_cast<unsigned char>(data[i]) > 1) {
        const std::size_t element = static_cast<std::size_t>(first_row) * f.file.row_bytes + i;
        throw tally::InputError("npy reader: field '" + f.name + "' (" + f.file.path.string() +
                                "): bool element " + std::to_string(element) + " holds byte " +
                                std::to_string(static_cast<unsigned>(data[i])) +
                                ": expected 0 or 1");
      }
    }
  }

  std::vector<Field> fields_;
};

std::vector<tally::ParamSpec> npy_params() {
  return {
      tally::param("fields", tally::ParamType::PathMap,
                   "field name -> .npy file (bool, uint8, int8, int16, uint16, int32, uint32, "
                   "int64, float32 or float64; C order; the first dimension is the sample), or "
                   "a member of an .npz archive (np.savez or np.savez_compressed): "
                   "'ARCHIVE.npz:MEMBER' (split at the last '.npz:'; MEMBER is the key given to "
                   "np.savez, '.npy' optional), or 'ARCHIVE.npz' alone for the member named "
                   "like the field. A value containing '.npz:' or ending in '.npz' is always "
                   "read as an archive."),
      tally::support::batch_size_param("samples per batch", 4096),
  };
}

}  // namespace

TALLY_PLUGIN("npy", "0.1.0", [] {
  return std::vector<tally::ComponentInfo>{tally::reader<NpyReader>(
      "npy",
      "NumPy .npy files (format 1.0, 2.0, 3.0), one per field, memory-mapped, or members of .npz "
      "archives (stored or deflated; this rank's rows read into memory); every field has the "
      "same number of samples. Each rank reads its contiguous block of the samples.",
      npy_params())};
})
