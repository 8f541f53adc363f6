// Batch: named fields for a run of samples. A field is either dense (one tensor whose leading
// dimension is the sample) or ragged (one tensor per sample, for data whose shape varies).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tally/export.hpp"
#include "tally/tensor.hpp"

namespace tally {

class TALLY_API Batch {
 public:
  using Ragged = std::vector<Tensor>;
  using Field = std::variant<Tensor, Ragged>;

  /// Adds or replaces a dense field. Its leading dimension must equal the other fields' count.
  Batch& set(std::string name, Tensor dense);
  /// Adds or replaces a ragged field: one tensor per sample.
  Batch& set_ragged(std::string name, Ragged per_sample);

  bool has(std::string_view name) const noexcept { return find(name) != nullptr; }
  bool is_ragged(std::string_view name) const;
  /// The dense field `name`; InputError naming the field when it is missing or ragged.
  const Tensor& tensor(std::string_view name) const;
  /// The ragged field `name`; InputError naming the field when it is missing or dense.
  const Ragged& ragged(std::string_view name) const;

  /// Number of samples (0 for a batch with no fields).
  std::int64_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::vector<std::string> names() const;
  const std::vector<std::pair<std::string, Field>>& fields() const noexcept { return fields_; }

  /// Samples [begin, end), sharing memory with this batch.
  Batch slice(std::int64_t begin, std::int64_t end) const;
  /// A deep copy whose memory is owned by the copy (CPU fields only).
  Batch clone() const;
  /// A batch holding the fields of this one under new names: `mapping` is (new name, old name).
  /// Fields not named in the mapping keep their names.
  Batch renamed(const std::vector<std::pair<std::string, std::string>>& mapping) const;

 private:
  const Field* find(std::string_view name) const noexcept;
  void check_count(std::string_view name, std::int64_t n);

  std::vector<std::pair<std::string, Field>> fields_;
  std::int64_t size_ = 0;
};

}  // namespace tally
