#include "tally/sdk/batch.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tally {

// ---- Text ---------------------------------------------------------------------------------------

Text::Text()
    : strings_(std::make_shared<const std::vector<std::string>>()),
      offsets_(std::make_shared<const std::vector<std::int64_t>>(1, 0)) {}

Text Text::from_flat(std::vector<std::string> strings, std::vector<std::int64_t> offsets) {
  if (offsets.empty() || offsets.front() != 0 ||
      offsets.back() != static_cast<std::int64_t>(strings.size()))
    throw InputError(fmt::format(
        "text offsets must start at 0 and end at the number of strings ({}), found {} offsets",
        strings.size(), offsets.size()));
  for (std::size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] < offsets[i - 1])
      throw InputError(fmt::format("text offsets must not decrease: offset {} is {} after {}", i,
                                   offsets[i], offsets[i - 1]));
  Text t;
  t.end_ = static_cast<std::int64_t>(offsets.size()) - 1;
  t.strings_ = std::make_shared<const std::vector<std::string>>(std::move(strings));
  t.offsets_ = std::make_shared<const std::vector<std::int64_t>>(std::move(offsets));
  return t;
}

Text Text::from_strings(std::vector<std::string> per_sample) {
  std::vector<std::int64_t> offsets(per_sample.size() + 1);
  for (std::size_t i = 0; i < offsets.size(); ++i) offsets[i] = static_cast<std::int64_t>(i);
  return from_flat(std::move(per_sample), std::move(offsets));
}

Text Text::from_lists(const std::vector<std::vector<std::string>>& per_sample) {
  std::vector<std::string> strings;
  std::vector<std::int64_t> offsets{0};
  offsets.reserve(per_sample.size() + 1);
  for (const auto& list : per_sample) {
    strings.insert(strings.end(), list.begin(), list.end());
    offsets.push_back(static_cast<std::int64_t>(strings.size()));
  }
  return from_flat(std::move(strings), std::move(offsets));
}

Text Text::slice(std::int64_t begin, std::int64_t end) const {
  if (begin < 0 || end < begin || end > size())
    throw InputError(
        fmt::format("text slice [{}, {}) is out of range for {} samples", begin, end, size()));
  Text t = *this;
  t.begin_ = begin_ + begin;
  t.end_ = begin_ + end;
  return t;
}

// ---- Batch --------------------------------------------------------------------------------------

const Batch::Field* Batch::find(std::string_view name) const noexcept {
  for (const auto& [n, f] : fields_)
    if (n == name) return &f;
  return nullptr;
}

void Batch::check_count(std::string_view name, std::int64_t n) {
  // The first field sets the sample count; replacing the only field may change it.
  const bool only_this = fields_.empty() || (fields_.size() == 1 && fields_[0].first == name);
  if (!only_this && n != size_)
    throw InputError(
        fmt::format("batch field '{}' has {} samples, the other fields have {}", name, n, size_));
  size_ = n;
}

Batch& Batch::set(std::string name, Tensor dense) {
  if (dense.dim() < 1)
    throw InputError(fmt::format("batch field '{}' must have a leading sample dimension, found {}",
                                 name, dense.describe()));
  check_count(name, dense.size(0));
  for (auto& [n, f] : fields_)
    if (n == name) {
      f = std::move(dense);
      return *this;
    }
  fields_.emplace_back(std::move(name), std::move(dense));
  return *this;
}

Batch& Batch::set_ragged(std::string name, Ragged per_sample) {
  check_count(name, static_cast<std::int64_t>(per_sample.size()));
  for (auto& [n, f] : fields_)
    if (n == name) {
      f = std::move(per_sample);
      return *this;
    }
  fields_.emplace_back(std::move(name), std::move(per_sample));
  return *this;
}

Batch& Batch::set_text(std::string name, Text per_sample) {
  check_count(name, per_sample.size());
  for (auto& [n, f] : fields_)
    if (n == name) {
      f = std::move(per_sample);
      return *this;
    }
  fields_.emplace_back(std::move(name), std::move(per_sample));
  return *this;
}

bool Batch::is_text(std::string_view name) const {
  const Field* f = find(name);
  return f != nullptr && std::holds_alternative<Text>(*f);
}

namespace {
const char* field_kind(const Batch::Field& f) {
  if (std::holds_alternative<Tensor>(f)) return "dense";
  if (std::holds_alternative<Batch::Ragged>(f)) return "ragged (one tensor per sample)";
  return "text";
}
}  // namespace

const Text& Batch::text(std::string_view name) const {
  const Field* f = find(name);
  if (f == nullptr)
    throw InputError(
        fmt::format("field '{}' is not in the batch (fields: {})", name, fmt::join(names(), ", ")));
  if (!std::holds_alternative<Text>(*f))
    throw InputError(
        fmt::format("field '{}' is {}, a text field (strings) was expected", name, field_kind(*f)));
  return std::get<Text>(*f);
}

const Text& Batch::single_text(std::string_view name) const {
  const Text& t = text(name);
  for (std::int64_t i = 0; i < t.size(); ++i)
    if (t[i].size() != 1)
      throw InputError(
          fmt::format("field '{}' sample {}: one string was expected, found a list of {}", name, i,
                      t[i].size()));
  return t;
}

bool Batch::is_ragged(std::string_view name) const {
  const Field* f = find(name);
  return f != nullptr && std::holds_alternative<Ragged>(*f);
}

const Tensor& Batch::tensor(std::string_view name) const {
  const Field* f = find(name);
  if (f == nullptr)
    throw InputError(
        fmt::format("field '{}' is not in the batch (fields: {})", name, fmt::join(names(), ", ")));
  if (!std::holds_alternative<Tensor>(*f))
    throw InputError(
        fmt::format("field '{}' is {}, a dense tensor was expected", name, field_kind(*f)));
  return std::get<Tensor>(*f);
}

const Batch::Ragged& Batch::ragged(std::string_view name) const {
  const Field* f = find(name);
  if (f == nullptr)
    throw InputError(
        fmt::format("field '{}' is not in the batch (fields: {})", name, fmt::join(names(), ", ")));
  if (!std::holds_alternative<Ragged>(*f))
    throw InputError(
        fmt::format("field '{}' is {}, a ragged field (one tensor per sample) was expected", name,
                    field_kind(*f)));
  return std::get<Ragged>(*f);
}

std::vector<std::string> Batch::names() const {
  std::vector<std::string> out;
  out.reserve(fields_.size());
  for (const auto& [n, f] : fields_) out.push_back(n);
  return out;
}

Batch Batch::slice(std::int64_t begin, std::int64_t end) const {
  if (begin < 0 || end < begin || end > size_)
    throw InputError(
        fmt::format("batch slice [{}, {}) is out of range for {} samples", begin, end, size_));
  Batch out;
  for (const auto& [n, f] : fields_) {
    if (const auto* t = std::get_if<Tensor>(&f)) {
      out.fields_.emplace_back(n, t->slice(begin, end));
    } else if (const auto* text = std::get_if<Text>(&f)) {
      out.fields_.emplace_back(n, text->slice(begin, end));
    } else {
      const auto& r = std::get<Ragged>(f);
      out.fields_.emplace_back(n, Ragged(r.begin() + begin, r.begin() + end));
    }
  }
  out.size_ = end - begin;
  return out;
}

Batch Batch::clone() const {
  Batch out;
  for (const auto& [n, f] : fields_) {
    if (const auto* t = std::get_if<Tensor>(&f)) {
      out.fields_.emplace_back(n, t->clone());
    } else if (const auto* text = std::get_if<Text>(&f)) {
      std::vector<std::vector<std::string>> lists;
      lists.reserve(static_cast<std::size_t>(text->size()));
      for (std::int64_t i = 0; i < text->size(); ++i)
        lists.emplace_back((*text)[i].begin(), (*text)[i].end());
      out.fields_.emplace_back(n, Text::from_lists(lists));
    } else {
      Ragged copy;
      for (const auto& t2 : std::get<Ragged>(f)) copy.push_back(t2.clone());
      out.fields_.emplace_back(n, std::move(copy));
    }
  }
  out.size_ = size_;
  return out;
}

Batch Batch::renamed(const std::vector<std::pair<std::string, std::string>>& mapping) const {
  if (mapping.empty()) return *this;
  Batch out;
  out.size_ = size_;
  // Renamed fields first, under their new names; then the untouched ones.
  for (const auto& [to, from] : mapping)
    if (const Field* f = find(from)) out.fields_.emplace_back(to, *f);
  for (const auto& [n, f] : fields_) {
    const bool is_source = std::any_of(mapping.begin(), mapping.end(),
                                       [&name = n](const auto& m) { return m.second == name; });
    if (!is_source && out.find(n) == nullptr) out.fields_.emplace_back(n, f);
  }
  return out;
}

}  // namespace tally
