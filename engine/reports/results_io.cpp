#include "results_io.hpp"

#include "report_common.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tally/file_io.hpp"
#include "tally/sdk/error.hpp"
#include "tally/text_safety.hpp"

namespace tally {

namespace fs = std::filesystem;

namespace {

std::string scalar_text(const Value& v) {
  if (v.is_float()) {
    const double d = v.as_double();
    if (std::isnan(d)) return "nan";
    return fmt::format("{:.6f}", d);
  }
  if (v.is_int()) return fmt::format("{}", v.as_int());
  if (v.is_bool()) return v.as_bool() ? "true" : "false";
  if (v.is_string()) return v.as_string();
  if (v.is_null()) return "null";
  return v.to_json();
}

bool is_scalar(const Value& v) { return !v.is_array() && !v.is_map(); }

bool is_matrix(const Value& v) {
  if (!v.is_array() || v.size() == 0) return false;
  for (const auto& row : v.as_array())
    if (!row.is_array() || row.size() != v.as_array()[0].size()) return false;
  return true;
}

std::string inline_array(const Value& v, std::size_t max_items = 10) {
  std::string out = "[";
  const auto& a = v.as_array();
  for (std::size_t i = 0; i < a.size() && i < max_items; ++i) {
    if (i) out += ", ";
    out += is_scalar(a[i]) ? scalar_text(a[i]) : a[i].to_json();
  }
  if (a.size() > max_items) out += fmt::format(", ... ({} values)", a.size());
  return out + "]";
}

struct JsonTooDeep {};
struct JsonTooLarge {};

// "line L, column C" of byte `offset` of `text` (empty when offset is npos).
std::string place_of(std::string_view text, std::size_t offset) {
  if (offset == std::string_view::npos || offset > text.size()) return {};
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return fmt::format("line {}, column {}", line, column);
}

// The place of the bracket that opens level `limit` + 1 of JSON `text` (strings skipped).
std::string place_of_depth(std::string_view text, std::size_t limit) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return place_of(text, i);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return "somewhere";
}

// A results file holds numbers (null for NaN), arrays and maps; strings only as the axis titles
// of a curve ("x_label", "y_label"). Anything else (a number written as a string, a boolean)
// would compare as "changed", never as a regression: bad input, named by its key path (built
// only for the value found, on the way back).
const Value* bad_result_value(const Value& v, std::string& where) {
  switch (v.kind()) {
    case Value::Kind::Array: {
      const auto& a = v.as_array();
      for (std::size_t i = 0; i < a.size(); ++i)
        if (const Value* bad = bad_result_value(a[i], where)) {
          where = fmt::format("[{}]{}", i, where);
          return bad;
        }
      return nullptr;
    }
    case Value::Kind::Map:
      for (const auto& [k, e] : v.as_map()) {
        if (e.is_string() && (k == "x_label" || k == "y_label")) continue;
        if (const Value* bad = bad_result_value(e, where)) {
          where = "." + k + where;
          return bad;
        }
      }
      return nullptr;
    case Value::Kind::Null:
    case Value::Kind::Int:
    case Value::Kind::Float:
      return nullptr;
    default:
      return &v;
  }
}

void check_result_values(const Value& results, const fs::path& path) {
  std::string where;
  const Value* bad = bad_result_value(results, where);
  if (bad == nullptr) return;
  std::string shown = bad->to_json();
  if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
  throw InputError(fmt::format(
      "results '{}': \"results{}\" is {} {}, expected a number (or null for NaN), an array or a "
      "map",
      path.string(), where, bad->is_string() ? "the string" : "the boolean", shown));
}

// Equal keys in one JSON object: the last value at the first key's place (as nlohmann's objects
// keep them). Sorting an index finds them in n log n, whatever the object's size.
void merge_equal_keys(Value::Map& m) {
  if (m.size() < 2) return;
  std::vector<std::size_t> order(m.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return m[a].first < m[b].first; });
  std::vector<bool> drop(m.size(), false);
  bool any = false;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i + 1;
    while (j < order.size() && m[order[j]].first == m[order[i]].first) drop[order[j++]] = true;
    if (j > i + 1) {
      m[order[i]].second = std::move(m[order[j - 1]].second);
      any = true;
    }
    i = j;
  }
  if (!any) return;
  std::size_t out = 0;
  for (std::size_t i = 0; i < m.size(); ++i)
    if (!drop[i]) {
      if (out != i) m[out] = std::move(m[i]);  // never onto itself: a self-move empties a key
      ++out;
    }
  m.resize(out);
}

// JSON text straight into a Value (nlohmann's SAX interface): one copy of the document instead of
// a DOM and a Value, and no DOM object's linear key lookups (quadratic in a map's keys). Nesting
// deeper than kMaxJsonDepth throws JsonTooDeep; a parse error throws nlohmann's exception.
class ValueBuilder {
 public:
  explicit ValueBuilder(std::size_t max_values) : max_values_(max_values) {}
  bool null() { return put(Value()); }
  bool boolean(bool b) { return put(Value(b)); }
  bool number_integer(std::int64_t i) { return put(Value(static_cast<long long>(i))); }
  bool number_unsigned(std::uint64_t u) {
    if (u > static_cast<std::uint64_t>(INT64_MAX)) return put(Value(static_cast<double>(u)));
    return put(Value(static_cast<long long>(u)));
  }
  bool number_float(double d, const std::string&) { return put(Value(d)); }
  bool string(std::string& s) { return put(Value(std::move(s))); }
  bool binary(nlohmann::json::binary_t&) { return put(Value()); }
  bool start_object(std::size_t) { return open(Value::map()); }
  bool start_array(std::size_t) { return open(Value::array()); }
  bool key(std::string& k) {
    key_ = std::move(k);
    return true;
  }
  bool end_object() {
    merge_equal_keys(stack_.back().as_map());
    return close();
  }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) {
    if (const auto* p = dynamic_cast<const nlohmann::json::parse_error*>(&e)) throw *p;
    if (const auto* o = dynamic_cast<const nlohmann::json::out_of_range*>(&e)) throw *o;
    throw RuntimeError(e.what());
  }
  Value take() { return std::move(root_); }

 private:
  bool open(Value v) {
    if (stack_.size() >= kMaxJsonDepth) throw JsonTooDeep{};
    stack_.push_back(std::move(v));
    keys_.push_back(std::move(key_));
    return true;
  }
  bool close() {
    Value done = std::move(stack_.back());
    stack_.pop_back();
    key_ = std::move(keys_.back());
    keys_.pop_back();
    return put(std::move(done));
  }
  bool put(Value v) {
    if (++values_ > max_values_) throw JsonTooLarge{};
    if (stack_.empty()) {
      root_ = std::move(v);
    } else if (stack_.back().is_map()) {
      stack_.back().as_map().emplace_back(std::move(key_), std::move(v));
    } else {
      stack_.back().as_array().push_back(std::move(v));
    }
    return true;
  }
  std::vector<Value> stack_;       // the open arrays and objects, outermost first
  std::vector<std::string> keys_;  // the key each open one goes under in its parent
  std::string key_;
  Value root_;
  std::size_t values_ = 0, max_values_;
};

}  // namespace

Value value_from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null:
    case T::discarded:
      return Value();
    case T::boolean:
      return Value(j.get<bool>());
    case T::number_integer:
      return Value(static_cast<long long>(j.get<std::int64_t>()));
    case T::number_unsigned: {
      const auto u = j.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<long long>(u));
    }
    case T::number_float:
      return Value(j.get<double>());
    case T::string:
      return Value(j.get<std::string>());
    case T::array: {
      Value::Array a;
      a.reserve(j.size());
      for (const auto& e : j) a.push_back(value_from_json(e));
      return Value(std::move(a));
    }
    case T::object: {
      Value::Map m;
      m.reserve(j.size());
      for (const auto& [k, e] : j.items()) m.emplace_back(k, value_from_json(e));
      return Value(std::move(m));
    }
    case T::binary:
      break;
  }
  return Value();
}

Value parse_results_text(const std::string& text, const fs::path& path, std::size_t max_values) {
  try {
    // Nesting is bounded before anything recursive (the checks, the comparison) walks it.
    ValueBuilder builder(max_values);
    nlohmann::json::sax_parse(text, &builder);
    return builder.take();
  } catch (const JsonTooDeep&) {
    throw InputError(fmt::format("results '{}': {}: nested deeper than {} levels", path.string(),
                                 place_of_depth(text, kMaxJsonDepth), kMaxJsonDepth));
  } catch (const JsonTooLarge&) {
    throw InputError(fmt::format(
        "results '{}': more than {} values (numbers, arrays and maps), the most a results file "
        "holds (its memory is bounded by them)",
        path.string(), max_values));
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's message: "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    std::string why = e.what();
    if (const auto p = why.find("] "); p != std::string::npos) why = why.substr(p + 2);
    // Python's json module writes NaN and infinities as bare words, which JSON does not have.
    const std::size_t at = e.byte > 0 ? e.byte - 1 : 0;
    const std::string_view near = std::string_view(text).substr(at > 8 ? at - 8 : 0, 24);
    for (const char* word : {"NaN", "Infinity"})
      if (near.find(word) != std::string_view::npos) {
        why += fmt::format(" ({} is not a JSON value: write null for NaN, as tally does)", word);
        break;
      }
    throw InputError(fmt::format("results '{}' is not valid JSON: {}", path.string(), why));
  } catch (const nlohmann::json::exception& e) {
    // A number out of the range of a double (1e999): "[json.exception.out_of_range.406] number
    // overflow parsing '1e999'".
    std::string why = e.what();
    if (const auto p = why.find("] "); p != std::string::npos) why = why.substr(p + 2);
    std::string place;
    if (const auto q = why.find('\''); q != std::string::npos) {
      const auto token = why.substr(q + 1, why.find('\'', q + 1) - q - 1);
      if (!token.empty()) place = place_of(text, text.find(token));
    }
    throw InputError(
        fmt::format("results '{}'{}: {} (expected a number within the range of a "
                    "double, about 1.8e308)",
                    path.string(), place.empty() ? "" : ": " + place, why));
  }
}

Results read_results_json(const fs::path& path) {
  auto text = std::make_optional(read_whole_file(path, "results", kResultsMaxBytes));
  Value doc = parse_results_text(*text, path, kMaxJsonValues);
  text.reset();  // the peak is the text and the Value together, never more
  const auto bad = [&](const std::string& what) -> Results {
    throw InputError(
        fmt::format("results '{}' is not a tally results file: {}", path.string(), what));
  };
  if (!doc.is_map()) return bad("the top level is not an object");
  const Value* res = doc.find("results");
  if (res == nullptr || !res->is_map()) return bad("no \"results\" object");
  check_result_values(*res, path);
  Results r;
  r.metrics = std::move(*doc.find("results"));
  if (const Value* iv = doc.find("intervals"); iv != nullptr && !iv->is_null()) {
    if (!iv->is_map()) return bad("\"intervals\" is not an object");
    r.intervals = std::move(*doc.find("intervals"));
  }
  if (const Value* run = doc.find("run"); run != nullptr) {
    if (!run->is_map()) return bad("\"run\" is not an object");
    const auto text_of = [&](const char* key) -> std::string {
      const Value* it = run->find(key);
      return it != nullptr && it->is_string() ? it->as_string() : std::string();
    };
    r.run.config = text_of("config");
    r.run.backend = text_of("backend");
    if (const Value* it = run->find("world_size");
        it != nullptr && it->is_int() && it->as_int() >= INT_MIN && it->as_int() <= INT_MAX)
      r.run.world_size = static_cast<int>(it->as_int());
    if (const Value* it = run->find("samples"); it != nullptr && it->is_int())
      r.run.samples = it->as_int();
    if (const Value* it = run->find("wall_seconds"); it != nullptr && it->is_number())
      r.run.wall_seconds = it->as_double();
    for (const char* key : {"types", "plugins"}) {
      const Value* it = run->find(key);
      if (it == nullptr) continue;
      if (!it->is_map()) return bad(fmt::format("\"run.{}\" is not an object", key));
      auto& out = std::string_view(key) == "types" ? r.run.types : r.run.plugins;
      for (const auto& [k, v] : it->as_map()) {
        if (!v.is_string()) return bad(fmt::format("\"run.{}.{}\" is not a string", key, k));
        out.emplace_back(k, v.as_string());
      }
    }
  }
  return r;
}

/// A curve ({"x": [...], "y": [...], "x_label", "y_label"}) in one line of the table: its size
/// and axes (the points are in the JSON and drawn in the HTML report); empty for anything else.
static std::string curve_summary(const Value& v) {
  if (!report::is_curve(v)) return {};
  const auto label = [&](const char* key, const char* fallback) {
    const Value* l = v.find(key);
    return l && l->is_string() ? l->as_string() : std::string(fallback);
  };
  return fmt::format("curve of {} points, {} against {} (in the JSON; drawn by --html)",
                     v.find("x")->size(), label("y_label", "y"), label("x_label", "x"));
}

std::string format_table(const Results& r) {
  struct Row {
    std::string metric, key, value;
  };
  std::vector<Row> rows;
  std::vector<std::string> blocks;  // matrices, printed below the table
  for (const auto& [raw_label, res] : r.metrics.as_map()) {
    // Labels and keys come from the config and from plugins: control characters shown escaped.
    const std::string label = escape_for_terminal(raw_label);
    if (!res.is_map()) {
      rows.push_back({label, "", escape_for_terminal(scalar_text(res))});
      continue;
    }
    for (const auto& [raw_key, v] : res.as_map()) {
      const std::string key = escape_for_terminal(raw_key);
      if (is_matrix(v) && v.size() <= 30) {
        rows.push_back(
            {label, key, fmt::format("{}x{} matrix, below", v.size(), v.as_array()[0].size())});
        std::vector<std::string> cells;
        std::size_t width = 1;
        for (const auto& row : v.as_array())
          for (const auto& c : row.as_array()) width = std::max(width, scalar_text(c).size());
        std::string block =
            fmt::format("{} {} (rows: ground truth, columns: prediction)\n", label, key);
        for (const auto& row : v.as_array()) {
          block += "  ";
          for (const auto& c : row.as_array())
            block += fmt::format(" {:>{}}", scalar_text(c), width);
          block += "\n";
        }
        blocks.push_back(std::move(block));
      } else if (is_matrix(v)) {  // too large to print: one line, as a curve
        rows.push_back({label, key,
                        fmt::format("{}x{} matrix (in the JSON; drawn by --html)", v.size(),
                                    v.as_array()[0].size())});
      } else if (const std::string c = curve_summary(v); !c.empty()) {
        rows.push_back({label, key, escape_for_terminal(c)});
      } else if (v.is_array()) {
        rows.push_back({label, key, escape_for_terminal(inline_array(v))});
      } else {
        rows.push_back(
            {label, key,
             escape_for_terminal(is_scalar(v) ? scalar_text(v) +
                                                    report::interval_suffix(r.intervals, raw_label,
                                                                            raw_key, scalar_text)
                                              : v.to_json())});
      }
    }
  }
  std::size_t w0 = 6, w1 = 3;
  for (const auto& row : rows) {
    w0 = std::max(w0, row.metric.size());
    w1 = std::max(w1, row.key.size());
  }
  std::string out = fmt::format("{:<{}}  {:<{}}  {}\n", "metric", w0, "key", w1, "value");
  out += fmt::format("{:-<{}}  {:-<{}}  {:-<{}}\n", "", w0, "", w1, "", 10);
  std::string last;
  for (const auto& row : rows) {
    out += fmt::format("{:<{}}  {:<{}}  {}\n", row.metric == last ? "" : row.metric, w0, row.key,
                       w1, row.value);
    last = row.metric;
  }
  for (const auto& b : blocks) out += "\n" + b;
  out += fmt::format("\n{} samples, {} backend, world size {}, {:.3f} s\n", r.run.samples,
                     r.run.backend, r.run.world_size, r.run.wall_seconds);
  return out;
}

}  // namespace tally
