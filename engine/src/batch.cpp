#include "tally/batch.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tally {

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
    throw InputError(fmt::format(
        "field '{}' is ragged (one tensor per sample), a dense tensor was expected", name));
  return std::get<Tensor>(*f);
}

const Batch::Ragged& Batch::ragged(std::string_view name) const {
  const Field* f = find(name);
  if (f == nullptr)
    throw InputError(
        fmt::format("field '{}' is not in the batch (fields: {})", name, fmt::join(names(), ", ")));
  if (!std::holds_alternative<Ragged>(*f))
    throw InputError(fmt::format(
        "field '{}' is dense, a ragged field (one tensor per sample) was expected", name));
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
    const bool is_source =
        std::any_of(mapping.begin(), mapping.end(), [&](const auto& m) { return m.second == n; });
    if (!is_source && out.find(n) == nullptr) out.fields_.emplace_back(n, f);
  }
  return out;
}

}  // namespace tally
