// Batch: named fields for a run of samples. A field is dense (one tensor whose leading dimension
// is the sample), ragged (one tensor per sample, for data whose shape varies) or text (strings per
// sample: a hypothesis, or several references).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tally/sdk/export.hpp"
#include "tally/sdk/tensor.hpp"

namespace tally {

/// Text per sample: sample i holds a list of UTF-8 strings (exactly one for a prediction such as
/// a hypothesis; one or more for references). Immutable and cheap to copy and slice: the strings
/// are shared. Built in libtally (so the shared storage never points into a plugin's code).
class TALLY_API Text {
 public:
  Text();
  /// One string per sample.
  static Text from_strings(std::vector<std::string> per_sample);
  /// A list of strings per sample.
  static Text from_lists(const std::vector<std::vector<std::string>>& per_sample);
  /// `strings` with sample i holding [offsets[i], offsets[i + 1]); offsets start at 0, never
  /// decrease and end at strings.size() (InputError otherwise).
  static Text from_flat(std::vector<std::string> strings, std::vector<std::int64_t> offsets);

  std::int64_t size() const noexcept { return end_ - begin_; }
  /// The strings of sample i (0 <= i < size(); unchecked).
  std::span<const std::string> operator[](std::int64_t i) const noexcept {
    const auto* o = offsets_->data() + begin_ + i;
    return {strings_->data() + o[0], static_cast<std::size_t>(o[1] - o[0])};
  }
  /// Samples [begin, end), sharing the strings.
  Text slice(std::int64_t begin, std::int64_t end) const;

 private:
  std::shared_ptr<const std::vector<std::string>> strings_;
  std::shared_ptr<const std::vector<std::int64_t>> offsets_;
  std::int64_t begin_ = 0, end_ = 0;
};

class TALLY_API Batch {
 public:
  using Ragged = std::vector<Tensor>;
  using Field = std::variant<Tensor, Ragged, Text>;

  /// Adds or replaces a dense field. Its leading dimension must equal the other fields' count.
  Batch& set(std::string name, Tensor dense);
  /// Adds or replaces a ragged field: one tensor per sample.
  Batch& set_ragged(std::string name, Ragged per_sample);
  /// Adds or replaces a text field.
  Batch& set_text(std::string name, Text per_sample);

  bool has(std::string_view name) const noexcept { return find(name) != nullptr; }
  bool is_ragged(std::string_view name) const;
  bool is_text(std::string_view name) const;
  /// The dense field `name`; InputError naming the field when it is missing or ragged.
  const Tensor& tensor(std::string_view name) const;
  /// The ragged field `name`; InputError naming the field when it is missing or dense.
  const Ragged& ragged(std::string_view name) const;
  /// The text field `name`; InputError naming the field when it is missing or not text.
  const Text& text(std::string_view name) const;
  /// The text field `name` when every sample holds exactly one string (a hypothesis, a
  /// label): InputError naming the field and the first sample that holds another count.
  const Text& single_text(std::string_view name) const;

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
