// Parameter schemas and values. A component (metric, reader, backend) declares its parameters
// with a ParamSpec each; the engine checks a config against the schema (unknown keys, types,
// required values, choices), fills in defaults, resolves paths, and hands the component Params.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tally/sdk/export.hpp"
#include "tally/sdk/value.hpp"

namespace tally {

enum class ParamType {
  Bool,
  Int,
  Float,  // an integer is accepted and widened
  String,
  Path,        // a string; relative paths are resolved against the config file's folder
  IntList,     // a single integer is accepted as a one-element list
  FloatList,   // likewise; integers are widened
  StringList,  // likewise
  StringMap,   // a map of string -> string
  PathMap,     // a map of string -> path (resolved like Path)
  Any,         // any value, checked by the component itself
};

TALLY_API const char* param_type_name(ParamType t) noexcept;

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::Any;
  std::string doc;
  /// Null means: no default. Such a parameter is required unless `optional` is set.
  Value default_value;
  bool optional = false;
  /// Null is accepted for the value (or, for lists, for elements).
  bool nullable = false;
  /// For String (and StringList elements): the accepted values; empty means any.
  std::vector<std::string> choices;

  bool required() const { return default_value.is_null() && !optional; }
};

/// Fluent helpers for schemas: `param("topk", ParamType::IntList, "k
/// values").def(Value::Array{1})`.
struct ParamBuilder {
  ParamSpec spec;
  ParamBuilder& def(Value v) {
    spec.default_value = std::move(v);
    return *this;
  }
  ParamBuilder& optional() {
    spec.optional = true;
    return *this;
  }
  ParamBuilder& nullable() {
    spec.nullable = true;
    return *this;
  }
  ParamBuilder& choices(std::vector<std::string> c) {
    spec.choices = std::move(c);
    return *this;
  }
  operator ParamSpec() const { return spec; }
};
inline ParamBuilder param(std::string name, ParamType type, std::string doc) {
  return ParamBuilder{ParamSpec{std::move(name), type, std::move(doc), {}, false, false, {}}};
}

/// The upper bound of every size parameter: a parameter that sizes an allocation (num_classes,
/// num_thrs, topk, n_gram, proposal_nums, threads, ...), read with Params::get_size. 2^20 (a
/// million classes); a metric whose state grows faster than the parameter (a num_classes^2
/// matrix) passes a smaller bound and says why.
inline constexpr std::int64_t kMaxSize = std::int64_t{1} << 20;

/// The values a number parameter may take: lo..hi, either end open or closed. NaN is never in
/// it; an infinite end is in it only when closed (kNonNegativeOrInf). Read with
/// Params::get_number and its kin, whose messages are uniform across every metric: "<owner>:
/// parameter 'iou_thrs' element 1 must be a number in [0, 1], got 2".
struct NumberBounds {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = true;
  bool hi_open = true;
  constexpr bool contains(double v) const {
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
};
/// Thresholds, IoUs, probabilities, fractions: [0, 1].
inline constexpr NumberBounds kUnitInterval{0.0, 1.0, false, false};
/// A fraction that must leave something: (0, 1] (max_fpr, a positive threshold).
inline constexpr NumberBounds kPositiveFraction{0.0, 1.0, true, false};
/// A finite number > 0 (a scale, a sigma, a beta).
inline constexpr NumberBounds kPositive{0.0, std::numeric_limits<double>::infinity(), true, true};
/// A finite number >= 0.
inline constexpr NumberBounds kNonNegative{0.0, std::numeric_limits<double>::infinity(), false,
                                           true};
/// A number >= 0, infinity included (the open end of an area or scale range).
inline constexpr NumberBounds kNonNegativeOrInf{0.0, std::numeric_limits<double>::infinity(), false,
                                                false};
/// Any finite number.
inline constexpr NumberBounds kFinite{};

/// "[0, 1]", "(0, inf)": bounds for messages.
TALLY_API std::string bounds_text(const NumberBounds& b);

/// The order a number list must have (Params::get_number_list).
enum class ListOrder { Any, Increasing /* strictly */, NonDecreasing };

/// Checked parameter values of one component, with defaults filled in. Accessors throw
/// ConfigError naming the component and parameter on a type mismatch.
class TALLY_API Params {
 public:
  Params() = default;
  Params(std::string owner, Value::Map values)
      : owner_(std::move(owner)), values_(std::move(values)) {}

  /// Who these belong to, for messages: "metric 'prf_macro' (SingleLabelMetric)".
  const std::string& owner() const noexcept { return owner_; }
  /// owner(), or "metric '<type>'" when these params have none (a metric built directly, as unit
  /// tests do, rather than from a config): the prefix of the metric's error messages.
  std::string owner_or(std::string_view type) const {
    return owner_.empty() ? "metric '" + std::string(type) + "'" : owner_;
  }
  const Value::Map& values() const noexcept { return values_; }

  bool has(std::string_view name) const;          // present and not null
  const Value& get(std::string_view name) const;  // null when absent
  bool get_bool(std::string_view name) const;
  std::int64_t get_int(std::string_view name) const;
  double get_double(std::string_view name) const;
  std::string get_string(std::string_view name) const;
  std::vector<std::int64_t> get_int_list(std::string_view name) const;
  /// Null elements come back as nullopt.
  std::vector<std::optional<double>> get_optional_double_list(std::string_view name) const;
  std::vector<double> get_double_list(std::string_view name) const;
  std::vector<std::string> get_string_list(std::string_view name) const;
  std::vector<std::pair<std::string, std::string>> get_string_map(std::string_view name) const;
  /// A size parameter: an integer in [min, max], max at most kMaxSize. ConfigError naming the
  /// owner, the parameter, the bound (and `why`, when given) and the value otherwise, before
  /// anything is allocated: "<owner>: parameter 'num_classes' must be at most 1048576, got
  /// 1000000000000".
  std::int64_t get_size(std::string_view name, std::int64_t min = 1, std::int64_t max = kMaxSize,
                        std::string_view why = {}) const;
  /// The same for every element of an int list (a single integer is a list of one).
  std::vector<std::int64_t> get_size_list(std::string_view name, std::int64_t min = 1,
                                          std::int64_t max = kMaxSize,
                                          std::string_view why = {}) const;

  /// A number parameter within `bounds` (NaN never is; nor an infinity unless a closed end is
  /// one); an integer is widened. ConfigError otherwise: "<owner>: parameter 'match_iou_thr' must
  /// be a number in [0, 1], got 5".
  double get_number(std::string_view name, const NumberBounds& bounds = kFinite) const;
  /// A threshold, IoU or fraction: get_number(name, kUnitInterval).
  double get_fraction(std::string_view name) const { return get_number(name, kUnitInterval); }
  /// A list of numbers (a single number is a list of one) with at least `min_size` and at most
  /// `max_size` elements, each within `bounds`, in `order`: "<owner>: parameter 'iou_thrs'
  /// element 1 must be a number in [0, 1], got -1", "... must be strictly increasing: element 1
  /// (0.5) follows 0.7".
  std::vector<double> get_number_list(
      std::string_view name, const NumberBounds& bounds = kFinite, ListOrder order = ListOrder::Any,
      std::size_t min_size = 1, std::size_t max_size = static_cast<std::size_t>(kMaxSize)) const;
  /// Thresholds: get_number_list(name, kUnitInterval, order).
  std::vector<double> get_fraction_list(std::string_view name,
                                        ListOrder order = ListOrder::Any) const {
    return get_number_list(name, kUnitInterval, order);
  }
  /// `value` (read by the component itself: a list element, a map entry) within `bounds`, else
  /// ConfigError "<owner>: parameter '<name>'[ <where>] must be a number in <bounds>, got <v>";
  /// `where` says which part of the parameter it is ("element 2", "'small' lo"). Returns value.
  double check_number(std::string_view name, double value, const NumberBounds& bounds,
                      std::string_view where = {}) const;
  /// A range [lo, hi] of a parameter: both ends within `bounds` (check_number) and lo < hi, or
  /// lo <= hi when `closed` (a range that holds just lo), else ConfigError "<owner>: parameter
  /// 'scale_ranges' element 0 must be a range [lo, hi] with lo < hi, got [64, 32]".
  void check_range(std::string_view name, double lo, double hi, const NumberBounds& bounds,
                   std::string_view where = {}, bool closed = false) const;

  /// ConfigError("<owner>: parameter '<name>' <message>").
  [[noreturn]] void fail(std::string_view name, std::string_view message) const;

 private:
  std::string owner_;
  Value::Map values_;
};

}  // namespace tally
