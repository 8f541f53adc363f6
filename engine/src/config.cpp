#include "config.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "tally/file_io.hpp"
#include "tally/sdk/error.hpp"
#include "tally/text_safety.hpp"

namespace tally {

namespace fs = std::filesystem;

const Located* Located::child(std::string_view key) const {
  for (const auto& [k, c] : children)
    if (k == key) return &c;
  return nullptr;
}

namespace {

// ---- YAML -> Located ---------------------------------------------------------------------------

std::string where_of(const std::string& source, const YAML::Mark& m) {
  if (m.is_null()) return source;
  return fmt::format("{}:{}:{}", source, m.line + 1, m.column + 1);
}

// YAML 1.2 core schema for plain scalars; quoted scalars are always strings.
Value resolve_scalar(const std::string& s, bool plain) {
  if (!plain) return Value(s);
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return Value();
  if (s == "true" || s == "True" || s == "TRUE") return Value(true);
  if (s == "false" || s == "False" || s == "FALSE") return Value(false);
  static const std::regex int_re(R"([-+]?[0-9]+)");
  static const std::regex float_re(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (std::regex_match(s, int_re)) {
    std::int64_t v = 0;
    const char* b = s.data() + (s[0] == '+' ? 1 : 0);
    auto [p, ec] = std::from_chars(b, s.data() + s.size(), v);
    if (ec == std::errc() && p == s.data() + s.size()) return Value(static_cast<long long>(v));
    return Value(s);  // out of range: leave it a string, the schema check will say so
  }
  if (std::regex_match(s, float_re)) {
    errno = 0;
    const double d = std::strtod(s.c_str(), nullptr);
    // Out of the range of a double (1e999): not infinity, but a string the schema check names.
    if (errno == ERANGE && std::isinf(d)) return Value(s);
    return Value(d);
  }
  if (s == ".inf" || s == "+.inf" || s == ".Inf") return Value(HUGE_VAL);
  if (s == "-.inf" || s == "-.Inf") return Value(-HUGE_VAL);
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return Value(std::nan(""));
  return Value(s);
}

// yaml-cpp shares an aliased node between its uses, so a few hundred bytes of anchors and
// aliases ("billion laughs") stand for billions of nodes, which tally's own walk of the tree
// (Builder) would expand. One pass over the parse events first counts the nodes the document
// expands to and how deep they nest, and refuses the document past kMaxYamlNodes or
// kMaxYamlDepth, naming the place where the limit was crossed; an alias inside the node it names
// (a cycle) is refused too. yaml-cpp's own guard (2000 levels) throws "bad file", and deeper
// recursion in tally's walk would overflow the stack.
class YamlBounds final : public YAML::EventHandler {
 public:
  YamlBounds(std::string source, std::string fixed_where)
      : source_(std::move(source)), fixed_where_(std::move(fixed_where)) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor, 0); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string& value) override {
    leaf(mark, anchor, value.size());
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto it = done_.find(anchor);
    if (it == done_.end())
      fail(mark,
           "a YAML alias refers to a node that contains it (a cycle): expected an alias of "
           "a node defined before it");
    add(mark, it->second.nodes, it->second.height, it->second.bytes);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Size {
    std::size_t nodes = 1;   // the node and everything below it, aliases expanded
    std::size_t height = 0;  // levels below it
    std::size_t bytes = 0;   // of its scalars, aliases expanded
  };
  struct Open {
    Size size;
    YAML::anchor_t anchor;
  };

  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& what) const {
    const std::string where = fixed_where_.empty() ? where_of(source_, mark) : fixed_where_;
    throw ConfigError(fmt::format("{}: {}", where, what), ErrorContext{.file = where});
  }
  // A node of `nodes` nodes, `height` levels deep and `bytes` of scalars, at the current depth.
  void add(const YAML::Mark& mark, std::size_t nodes, std::size_t height, std::size_t bytes) {
    total_ += nodes;  // nodes <= total_ <= kMaxYamlNodes before: no overflow
    if (total_ > kMaxYamlNodes)
      fail(mark, fmt::format("the document expands to more than {} nodes (YAML aliases?)",
                             kMaxYamlNodes));
    // A long scalar aliased a few thousand times is as large as a billion laughs.
    total_bytes_ += bytes;  // likewise bounded by kMaxYamlBytes before
    if (total_bytes_ > kMaxYamlBytes)
      fail(mark, fmt::format("the document expands to more than {} MiB of text (YAML aliases?)",
                             kMaxYamlBytes >> 20));
    if (open_.size() + height > kMaxYamlDepth)
      fail(mark, fmt::format("nested deeper than {} levels", kMaxYamlDepth));
    if (!open_.empty()) {
      open_.back().size.nodes += nodes;
      open_.back().size.height = std::max(open_.back().size.height, height + 1);
      open_.back().size.bytes += bytes;
    }
  }
  void leaf(const YAML::Mark& mark, YAML::anchor_t anchor, std::size_t bytes) {
    add(mark, 1, 0, bytes);
    if (anchor != YAML::NullAnchor) done_[anchor] = Size{1, 0, bytes};
  }
  void open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    add(mark, 1, 0, 0);
    open_.push_back({Size{}, anchor});
  }
  void close() {
    const Open o = open_.back();
    open_.pop_back();
    if (o.anchor != YAML::NullAnchor) done_[o.anchor] = o.size;
    if (!open_.empty()) {
      // add() counted the node itself in its parent already.
      open_.back().size.nodes += o.size.nodes - 1;
      open_.back().size.height = std::max(open_.back().size.height, o.size.height + 1);
      open_.back().size.bytes += o.size.bytes;
    }
  }

  std::string source_, fixed_where_;
  std::vector<Open> open_;
  std::map<YAML::anchor_t, Size> done_;  // anchors of finished nodes
  std::size_t total_ = 0;
  std::size_t total_bytes_ = 0;
};

// YAML::Load, after checking that the document's expansion stays within the bounds (ConfigError
// naming the place otherwise); YAML::Exception for syntax errors, as YAML::Load.
YAML::Node load_bounded(const std::string& text, const std::string& source,
                        const std::string& fixed_where) {
  {
    std::istringstream in(text);
    YAML::Parser parser(in);
    YamlBounds bounds(source, fixed_where);
    parser.HandleNextDocument(bounds);
  }
  return YAML::Load(text);
}

// The key path of a map's entry below `parent`, in Python's subscript form: config['metrics'].
std::string key_path(const std::string& parent, const std::string& key) {
  std::string quoted;
  for (const char ch : escape_for_terminal(key)) {
    if (ch == '\'' || ch == '\\') quoted += '\\';
    quoted += ch;
  }
  return fmt::format("{}['{}']", parent, quoted);
}

struct Builder {
  std::string source;
  // Overridden locations: every node built from a --set value is located at the --set itself.
  std::string fixed_where;
  // The text is a serialized mapping the user never saw as text (Python's dict config): a node is
  // located by its key path from `source` (config['metrics'][0]['top_k']), not a line and column.
  bool key_paths = false;

  std::string where(const YAML::Node& n, const std::string& path) const {
    if (key_paths) return path;
    return fixed_where.empty() ? where_of(source, n.Mark()) : fixed_where;
  }

  Located build(const YAML::Node& n) const { return build(n, source); }

  Located build(const YAML::Node& n, const std::string& path) const {
    Located out;
    out.where = where(n, path);
    switch (n.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        out.value = Value();
        break;
      case YAML::NodeType::Scalar:
        // YAML is UTF-8: checked here, before any work.
        require_utf8(n.Scalar(), out.where, "the value");
        out.value = resolve_scalar(n.Scalar(), n.Tag() == "?");
        break;
      case YAML::NodeType::Sequence: {
        out.value = Value::array();
        std::size_t i = 0;
        for (const auto& e : n) {
          Located c = build(e, key_paths ? fmt::format("{}[{}]", path, i) : std::string());
          out.value.push_back(c.value);
          out.children.emplace_back(std::to_string(i++), std::move(c));
        }
        break;
      }
      case YAML::NodeType::Map:
        build_map(n, path, out);
        break;
    }
    return out;
  }

  void build_map(const YAML::Node& n, const std::string& path, Located& out) const {
    out.value = Value::map();
    // Keys looked up by hash: a tolerances file of thousands of rules loads in linear time.
    std::unordered_set<std::string> seen;
    for (const auto& kv : n) {
      const auto key_node = kv.first;
      if (!key_node.IsScalar())
        throw ConfigError(fmt::format("{}: map keys must be plain strings", where(key_node, path)));
      const std::string key = key_node.Scalar();
      const std::string child_path = key_paths ? key_path(path, key) : "";
      require_utf8(key, where(key_node, path), "the key");
      if (kv.second.IsScalar())
        require_utf8(kv.second.Scalar(), where(kv.second, child_path),
                     fmt::format("the value of '{}'", escape_for_terminal(key)));
      if (!seen.insert(key).second)
        throw ConfigError(fmt::format("{}: duplicate key '{}'", where(key_node, path), key));
      Located c = build(kv.second, child_path);
      // A key with no value ("topk:") points at the key.
      if (kv.second.IsNull() && fixed_where.empty()) c.where = where(key_node, child_path);
      c.key_where = where(key_node, child_path);
      out.value.as_map().emplace_back(key, c.value);
      out.children.emplace_back(key, std::move(c));
    }
  }
};

// Keeps Located::value in sync with the children after an override changed them.
void rebuild_value(Located& l) {
  if (l.value.is_map()) {
    Value::Map m;
    for (auto& [k, c] : l.children) {
      rebuild_value(c);
      m.emplace_back(k, c.value);
    }
    l.value = Value(std::move(m));
  } else if (l.value.is_array()) {
    Value::Array a;
    for (auto& [k, c] : l.children) {
      rebuild_value(c);
      a.push_back(c.value);
    }
    l.value = Value(std::move(a));
  }
}

void apply_override(Located& root, const std::string& spec) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError(
        fmt::format("--set '{}': expected KEY=VALUE (for example metrics.0.topk=[1,5])", spec));
  const std::string key = spec.substr(0, eq);
  const std::string text = spec.substr(eq + 1);
  const std::string where = fmt::format("--set {}", key);
  YAML::Node parsed;
  try {
    parsed = load_bounded(text, "", where);
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: the value '{}' is not valid YAML: {}", where, text, e.msg));
  }
  Located value = Builder{"", where}.build(parsed);

  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string part; std::getline(ss, part, '.');) {
    if (part.empty())
      throw ConfigError(fmt::format("{}: empty component in the key '{}'", where, key));
    parts.push_back(part);
  }
  if (parts.size() > kMaxYamlDepth)
    throw ConfigError(fmt::format("{}: the key has {} components, expected at most {}", where,
                                  parts.size(), kMaxYamlDepth));
  Located* node = &root;
  std::string path;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto& part = parts[i];
    const bool last = i + 1 == parts.size();
    path += (path.empty() ? "" : ".") + part;
    if (node->value.is_null()) {
      node->value = Value::map();
      node->where = where;
    }
    if (node->value.is_array()) {
      std::size_t idx = 0;
      auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), idx);
      if (ec != std::errc() || p != part.data() + part.size())
        throw ConfigError(fmt::format("{}: '{}' is a list, so '{}' must be an index", where,
                                      path.substr(0, path.size() - part.size() - 1), part));
      if (idx > node->children.size())
        throw ConfigError(fmt::format("{}: index {} is past the end of a list of {}", where, idx,
                                      node->children.size()));
      if (idx == node->children.size()) {
        node->children.emplace_back(part, Located{Value(), where, {}, {}});
      }
      node = &node->children[idx].second;
    } else if (node->value.is_map()) {
      auto it = std::find_if(node->children.begin(), node->children.end(),
                             [&](const auto& c) { return c.first == part; });
      if (it == node->children.end()) {
        node->children.emplace_back(part, Located{Value(), where, {}, {}});
        it = node->children.end() - 1;
      }
      node = &it->second;
    } else {
      throw ConfigError(fmt::format("{}: '{}' is {}, it has no key '{}'", where,
                                    path.substr(0, path.size() - part.size() - 1),
                                    Value::kind_name(node->value.kind()), part));
    }
    if (last) *node = value;
  }
  rebuild_value(root);
}

// ---- schema checks ----------------------------------------------------------------------------

std::string found(const Located& l) {
  if (l.value.is_null()) return "nothing";
  if (l.value.is_string()) return fmt::format("'{}'", l.value.as_string());
  return fmt::format("{} {}", Value::kind_name(l.value.kind()), l.value.to_json());
}

[[noreturn]] void fail_at(const Located& l, const std::string& msg) {
  throw ConfigError(l.where.empty() ? msg : fmt::format("{}: {}", l.where, msg),
                    ErrorContext{.file = l.where});
}

// For errors about a key itself (unknown keys): the key's own place.
[[noreturn]] void fail_at_key(const Located& l, const std::string& msg) {
  const std::string& w = l.key_where.empty() ? l.where : l.key_where;
  throw ConfigError(w.empty() ? msg : fmt::format("{}: {}", w, msg), ErrorContext{.file = w});
}

// A plain scalar written where a string is expected stays a string ("average: none", "name: 1").
std::optional<std::string> as_text(const Value& v) {
  if (v.is_string()) return v.as_string();
  if (v.is_int()) return std::to_string(v.as_int());
  if (v.is_bool()) return v.as_bool() ? "true" : "false";
  return std::nullopt;
}

std::string resolve_path(const std::string& p, const fs::path& base) {
  fs::path path(p);
  if (path.is_relative() && !base.empty()) path = base / path;
  return path.lexically_normal().string();
}

Value check_param(const ParamSpec& spec, const Located& l, const std::string& owner,
                  const fs::path& base) {
  const auto bad = [&](const std::string& extra = {}) -> Value {
    fail_at(l, fmt::format("{}: parameter '{}' expects {}{}, found {}{}", owner, spec.name,
                           param_type_name(spec.type), spec.nullable ? " or null" : "", found(l),
                           extra));
  };
  const Value& v = l.value;
  if (v.is_null()) {
    if (spec.nullable || spec.type == ParamType::Any) return v;
    bad();
  }
  const auto check_choice = [&](const std::string& s, const Located& where) {
    if (!spec.choices.empty() &&
        std::find(spec.choices.begin(), spec.choices.end(), s) == spec.choices.end())
      fail_at(where, fmt::format("{}: parameter '{}' must be one of {}, found '{}'", owner,
                                 spec.name, fmt::join(spec.choices, ", "), s));
  };
  // Lists: a single value stands for a list of one.
  const auto each = [&](auto&& one) -> Value {
    Value out = Value::array();
    if (!v.is_array()) {
      out.push_back(one(l));
      return out;
    }
    for (const auto& [k, c] : l.children) {
      if (c.value.is_null() && spec.nullable)
        out.push_back(Value());
      else
        out.push_back(one(c));
    }
    return out;
  };
  switch (spec.type) {
    case ParamType::Any:
      return v;
    case ParamType::Bool:
      if (!v.is_bool()) bad();
      return v;
    case ParamType::Int:
      if (!v.is_int()) bad();
      return v;
    case ParamType::Float:
      if (!v.is_number()) bad();
      return Value(v.as_double());
    case ParamType::String:
    case ParamType::Path: {
      auto s = as_text(v);
      if (!s) bad();
      check_choice(*s, l);
      return spec.type == ParamType::Path ? Value(resolve_path(*s, base)) : Value(*s);
    }
    case ParamType::IntList:
      return each([&](const Located& c) -> Value {
        if (!c.value.is_int())
          fail_at(c, fmt::format("{}: parameter '{}' expects {}, found {}", owner, spec.name,
                                 param_type_name(spec.type), found(c)));
        return c.value;
      });
    case ParamType::FloatList:
      return each([&](const Located& c) -> Value {
        if (!c.value.is_number())
          fail_at(c, fmt::format("{}: parameter '{}' expects {}, found {}", owner, spec.name,
                                 param_type_name(spec.type), found(c)));
        return Value(c.value.as_double());
      });
    case ParamType::StringList:
      return each([&](const Located& c) -> Value {
        auto s = as_text(c.value);
        if (!s)
          fail_at(c, fmt::format("{}: parameter '{}' expects {}, found {}", owner, spec.name,
                                 param_type_name(spec.type), found(c)));
        check_choice(*s, c);
        return Value(*s);
      });
    case ParamType::StringMap:
    case ParamType::PathMap: {
      if (!v.is_map()) bad();
      Value out = Value::map();
      for (const auto& [k, c] : l.children) {
        auto s = as_text(c.value);
        if (!s)
          fail_at(c, fmt::format("{}: parameter '{}' entry '{}' expects a {}, found {}", owner,
                                 spec.name, k, spec.type == ParamType::PathMap ? "path" : "string",
                                 found(c)));
        out.set(k, spec.type == ParamType::PathMap ? Value(resolve_path(*s, base)) : Value(*s));
      }
      return out;
    }
  }
  return bad();
}

Located unlocated(const Value& v) {
  Located l{v, "", {}, {}};
  if (v.is_map()) {
    for (const auto& [k, e] : v.as_map()) l.children.emplace_back(k, unlocated(e));
  } else if (v.is_array()) {
    std::size_t i = 0;
    for (const auto& e : v.as_array()) l.children.emplace_back(std::to_string(i++), unlocated(e));
  }
  return l;
}

// A section's keys other than the ones the engine itself reads.
Located without(const Located& m, std::initializer_list<std::string_view> keys) {
  Located out{Value::map(), m.where, {}, {}};
  for (const auto& [k, c] : m.children) {
    if (std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
    out.value.set(k, c.value);
    out.children.emplace_back(k, c);
  }
  return out;
}

std::string text_of(const Located& l, const std::string& what) {
  auto s = as_text(l.value);
  if (!s || s->empty()) fail_at(l, fmt::format("{} expects a name, found {}", what, found(l)));
  return *s;
}

void require_map(const Located& l, const std::string& what) {
  if (!l.value.is_map()) fail_at(l, fmt::format("{} expects a map, found {}", what, found(l)));
}

}  // namespace

Params make_params(const ComponentInfo& info, const Located& given, const std::string& owner,
                   const fs::path& base_dir) {
  Value::Map out;
  if (!given.value.is_null() && !given.value.is_map())
    fail_at(given, fmt::format("{}: parameters must be a map", owner));
  for (const auto& [k, c] : given.children) {
    const auto spec = std::find_if(info.params.begin(), info.params.end(),
                                   [&key = k](const ParamSpec& p) { return p.name == key; });
    if (spec == info.params.end()) {
      std::vector<std::string> known;
      for (const auto& p : info.params) known.push_back(p.name);
      fail_at_key(c, fmt::format("{}: unknown parameter '{}' ({} takes {})", owner, k, info.name,
                                 known.empty() ? "no parameters"
                                               : fmt::format("{}", fmt::join(known, ", "))));
    }
  }
  for (const auto& spec : info.params) {
    const Located* c = given.child(spec.name);
    if (c == nullptr || (c->value.is_null() && !spec.nullable)) {
      if (spec.required())
        fail_at(c ? *c : given, fmt::format("{}: missing required parameter '{}' ({})", owner,
                                            spec.name, spec.doc));
      Value def = spec.default_value;
      if (!def.is_null()) def = check_param(spec, unlocated(def), owner, base_dir);
      out.emplace_back(spec.name, std::move(def));
      continue;
    }
    out.emplace_back(spec.name, check_param(spec, *c, owner, base_dir));
  }
  return Params(owner, std::move(out));
}

Params make_params(const ComponentInfo& info, const Value::Map& given, const std::string& owner,
                   const fs::path& base_dir) {
  return make_params(info, unlocated(Value(given)), owner, base_dir);
}

namespace {

/// backend: a type name, or a map of its type and its parameters.
void parse_backend(Config& cfg, const Located& root) {
  const Located* b = root.child("backend");
  if (b == nullptr || b->value.is_null()) {
    cfg.backend_params = Located{Value::map(), cfg.source, {}, {}};
    return;
  }
  if (b->value.is_string()) {
    cfg.backend_type = b->value.as_string();
    cfg.backend_params = Located{Value::map(), b->where, {}, {}};
  } else {
    require_map(*b, "backend");
    if (const Located* t = b->child("type")) cfg.backend_type = text_of(*t, "backend.type");
    cfg.backend_params = without(*b, {"type"});
  }
}

/// plugins: the folders to load plugins from, and allow_unsafe.
void parse_plugins(Config& cfg, const Located& root, const fs::path& base_dir) {
  const Located* p = root.child("plugins");
  if (p == nullptr || p->value.is_null()) return;
  require_map(*p, "plugins");
  for (const auto& [k, c] : p->children) {
    if (k == "allow_unsafe") {
      if (!c.value.is_bool())
        fail_at(c, fmt::format("plugins.allow_unsafe expects true or false, found {}", found(c)));
      cfg.allow_unsafe_plugins = c.value.as_bool();
      continue;
    }
    if (k != "paths")
      fail_at_key(c, fmt::format("unknown key 'plugins.{}' (expected paths, allow_unsafe)", k));
    const auto add = [&](const Located& e) {
      if (!e.value.is_string())
        fail_at(e, fmt::format("plugins.paths expects folder names, found {}", found(e)));
      cfg.plugin_paths.emplace_back(resolve_path(e.value.as_string(), base_dir));
    };
    if (c.value.is_array()) {
      for (const auto& [i, e] : c.children) add(e);
    } else {
      add(c);
    }
  }
}

/// data: the reader plugin (type) and its parameters.
void parse_data(Config& cfg, const Located& root) {
  const Located* d = root.child("data");
  if (d == nullptr || d->value.is_null()) return;
  require_map(*d, "data");
  const Located* t = d->child("type");
  if (t == nullptr) fail_at(*d, "data: missing 'type' (the reader plugin, for example npy)");
  cfg.data_type = text_of(*t, "data.type");
  cfg.data_params = without(*d, {"type"});
}

/// metrics: a list of metrics, each a type, an optional unique label (name), inputs and
/// parameters.
void parse_metrics(Config& cfg, const Located& root) {
  const Located* ms = root.child("metrics");
  if (ms == nullptr || ms->value.is_null()) return;
  if (!ms->value.is_array())
    fail_at(*ms, fmt::format("metrics expects a list of metrics, found {}", found(*ms)));
  std::map<std::string, std::string> labels;  // label -> where
  for (const auto& [idx, m] : ms->children) {
    const std::string what = fmt::format("metrics[{}]", idx);
    require_map(m, what);
    MetricConfig mc;
    mc.where = m.where;
    const Located* t = m.child("type");
    if (t == nullptr)
      fail_at(m, fmt::format("{}: missing 'type' (a metric plugin, for example Accuracy)", what));
    mc.type = text_of(*t, what + ".type");
    mc.label = mc.type;
    if (const Located* n = m.child("name")) mc.label = text_of(*n, what + ".name");
    if (const Located* in = m.child("inputs"); in && !in->value.is_null()) {
      require_map(*in, what + ".inputs");
      for (const auto& [k, c] : in->children) {
        if (!c.value.is_string())
          fail_at(c, fmt::format("{}.inputs.{} expects a data field name, found {}", what, k,
                                 found(c)));
        mc.inputs.emplace_back(k, c.value.as_string());
      }
    }
    auto [it, inserted] = labels.emplace(mc.label, m.where);
    if (!inserted)
      fail_at(
          m,
          fmt::format(
              "{}: two metrics are labelled '{}' (the other is at {}); give one a unique 'name:'",
              what, mc.label, it->second));
    mc.params = without(m, {"type", "name", "inputs"});
    cfg.metrics.push_back(std::move(mc));
  }
}

/// output: the files to write (json, junit, markdown, html, records).
void parse_output(Config& cfg, const Located& root) {
  const Located* o = root.child("output");
  if (o == nullptr || o->value.is_null()) return;
  require_map(*o, "output");
  for (const auto& [k, c] : o->children) {
    std::optional<fs::path>* slot = k == "json"       ? &cfg.output_json
                                    : k == "junit"    ? &cfg.output_junit
                                    : k == "markdown" ? &cfg.output_markdown
                                    : k == "html"     ? &cfg.output_html
                                    : k == "records"  ? &cfg.output_records
                                                      : nullptr;
    if (slot == nullptr)
      fail_at_key(
          c, fmt::format("unknown key 'output.{}' (expected json, junit, markdown, html, records)",
                         k));
    if (c.value.is_null()) continue;
    if (!c.value.is_string() || c.value.as_string().empty())
      fail_at(c, fmt::format("output.{} expects a file name, found {}", k, found(c)));
    *slot = fs::path(c.value.as_string());  // relative to the working directory
  }
}

/// regression: the baseline to compare with, its tolerances and the paired tests.
void parse_regression(Config& cfg, const Located& root, const fs::path& base_dir) {
  const Located* r = root.child("regression");
  if (r == nullptr || r->value.is_null()) return;
  require_map(*r, "regression");
  RegressionConfig rc;
  rc.where = r->where;
  bool has_baseline = false;
  for (const auto& [k, c] : r->children) {
    if (k == "baseline") {
      if (!c.value.is_string() || c.value.as_string().empty())
        fail_at(c, fmt::format("regression.baseline expects a results JSON file name, found {}",
                               found(c)));
      rc.baseline = resolve_path(c.value.as_string(), base_dir);
      has_baseline = true;
    } else if (k == "rtol" || k == "atol") {
      if (!c.value.is_number() || !std::isfinite(c.value.as_double()) || c.value.as_double() < 0)
        fail_at(c,
                fmt::format("regression.{} expects a finite number >= 0, found {}", k, found(c)));
      (k == "rtol" ? rc.rtol : rc.atol) = c.value.as_double();
    } else if (k == "tolerances") {
      if (c.value.is_string()) {
        rc.tolerances_file = resolve_path(c.value.as_string(), base_dir);
      } else if (c.value.is_map() || c.value.is_null()) {
        rc.tolerances = parse_tolerance_rules(c, "regression.tolerances");
      } else {
        fail_at(c,
                fmt::format(
                    "regression.tolerances expects a file name or a map of KEY_PATTERN: {{rtol: X, "
                    "atol: Y}}, found {}",
                    found(c)));
      }
    } else if (k == "baseline_records" || k == "history") {
      if (c.value.is_null()) continue;  // null: none (--set regression.history=null)
      if (!c.value.is_string() || c.value.as_string().empty())
        fail_at(c, fmt::format("regression.{} expects a {} name (or null), found {}", k,
                               k == "history" ? "folder" : "records file", found(c)));
      (k == "history" ? rc.history : rc.baseline_records) =
          resolve_path(c.value.as_string(), base_dir);
    } else if (k == "alpha") {
      if (!c.value.is_number() || !(c.value.as_double() > 0 && c.value.as_double() < 1))
        fail_at(c, fmt::format("regression.alpha expects a number in (0, 1) such as 0.05, found {}",
                               found(c)));
      rc.paired.alpha = c.value.as_double();
    } else if (k == "resamples") {
      if (!c.value.is_int() || c.value.as_int() < 2 || c.value.as_int() > 1000000)
        fail_at(c, fmt::format("regression.resamples expects an integer in [2, 1000000], found {}",
                               found(c)));
      rc.paired.resamples = static_cast<std::uint64_t>(c.value.as_int());
    } else if (k == "seed") {
      if (!c.value.is_int() || c.value.as_int() < 0)
        fail_at(c, fmt::format("regression.seed expects an integer >= 0, found {}", found(c)));
      rc.paired.seed = static_cast<std::uint64_t>(c.value.as_int());
    } else if (k == "test") {
      if (!c.value.is_string() ||
          (c.value.as_string() != "auto" && c.value.as_string() != "bootstrap"))
        fail_at(c, fmt::format("regression.test expects auto or bootstrap, found {}", found(c)));
      rc.paired.mcnemar = c.value.as_string() == "auto";
    } else if (k == "fail_on_drift") {
      if (!c.value.is_bool())
        fail_at(c,
                fmt::format("regression.fail_on_drift expects true or false, found {}", found(c)));
      rc.fail_on_drift = c.value.as_bool();
    } else {
      fail_at_key(c, fmt::format("unknown key 'regression.{}' (expected baseline, rtol, atol, "
                                 "tolerances, baseline_records, alpha, resamples, seed, test, "
                                 "history, fail_on_drift)",
                                 k));
    }
  }
  if (!has_baseline)
    fail_at(*r,
            "regression: missing 'baseline' (the results JSON to compare with, relative to this "
            "file)");
  cfg.regression = std::move(rc);
}

/// checkpoint: the folder and how often to write one.
void parse_checkpoint(Config& cfg, const Located& root, const fs::path& base_dir) {
  const Located* ck = root.child("checkpoint");
  if (ck == nullptr || ck->value.is_null()) return;
  require_map(*ck, "checkpoint");
  CheckpointConfig cc;
  cc.where = ck->where;
  bool has_dir = false;
  bool has_every = false;
  for (const auto& [k, c] : ck->children) {
    if (k == "dir") {
      if (!c.value.is_string() || c.value.as_string().empty())
        fail_at(c, fmt::format("checkpoint.dir expects a folder name, found {}", found(c)));
      cc.dir = resolve_path(c.value.as_string(), base_dir);
      has_dir = true;
    } else if (k == "every_n_batches") {
      if (!c.value.is_int() || c.value.as_int() < 1)
        fail_at(c, fmt::format("checkpoint.every_n_batches expects an integer >= 1, found {}",
                               found(c)));
      cc.every_n_batches = c.value.as_int();
      has_every = true;
    } else {
      fail_at_key(c, fmt::format("unknown key 'checkpoint.{}' (expected dir, every_n_batches)", k));
    }
  }
  if (!has_dir)
    fail_at(*ck, "checkpoint: missing 'dir' (the folder for checkpoints, relative to this file)");
  if (!has_every)
    fail_at(*ck, "checkpoint: missing 'every_n_batches' (write a checkpoint every N batches)");
  cfg.checkpoint = std::move(cc);
}

/// intervals: bootstrap confidence intervals over units (docs/significance.md).
void parse_intervals(Config& cfg, const Located& root) {
  const Located* iv = root.child("intervals");
  if (iv == nullptr || iv->value.is_null()) return;
  require_map(*iv, "intervals");
  IntervalSettings is;
  for (const auto& [k, c] : iv->children) {
    if (k == "confidence") {
      if (!c.value.is_number() || !(c.value.as_double() > 0 && c.value.as_double() < 1))
        fail_at(c, fmt::format("intervals.confidence expects a number in (0, 1) such as 0.95, "
                               "found {}",
                               found(c)));
      is.confidence = c.value.as_double();
    } else if (k == "resamples") {
      if (!c.value.is_int() || c.value.as_int() < 2 || c.value.as_int() > 1000000)
        fail_at(c, fmt::format("intervals.resamples expects an integer in [2, 1000000], found {}",
                               found(c)));
      is.resamples = static_cast<std::uint64_t>(c.value.as_int());
    } else if (k == "seed") {
      if (!c.value.is_int() || c.value.as_int() < 0)
        fail_at(c, fmt::format("intervals.seed expects an integer >= 0, found {}", found(c)));
      is.seed = static_cast<std::uint64_t>(c.value.as_int());
    } else if (k == "method") {
      if (!c.value.is_string() ||
          (c.value.as_string() != "percentile" && c.value.as_string() != "bca"))
        fail_at(c, fmt::format("intervals.method expects percentile or bca, found {}", found(c)));
      is.method = c.value.as_string();
    } else {
      fail_at_key(c, fmt::format("unknown key 'intervals.{}' (expected confidence, resamples, "
                                 "seed, method)",
                                 k));
    }
  }
  cfg.intervals = std::move(is);
}

/// The sections that cannot go together yet.
void check_combinations(const Config& cfg) {
  const bool paired = cfg.regression && cfg.regression->baseline_records;
  if (cfg.checkpoint && (cfg.intervals || cfg.output_records || paired))
    throw ConfigError(fmt::format(
        "{}: checkpoint: cannot be combined with {} yet: per-sample records are not saved in "
        "checkpoints",
        cfg.checkpoint->where,
        cfg.intervals        ? "intervals:"
        : cfg.output_records ? "output.records"
                             : "regression.baseline_records"));
}

/// The config's YAML, located, with the overrides (--set KEY=VALUE) applied: a map.
Located load_root(const std::string& yaml_text, const std::string& source,
                  const std::vector<std::string>& overrides, bool key_paths) {
  YAML::Node doc;
  try {
    // A dict's text has no lines the user wrote: a limit crossed names the config, not a column.
    doc = load_bounded(yaml_text, source, key_paths ? source : "");
  } catch (const YAML::ParserException& e) {
    throw ConfigError(fmt::format("{}: YAML syntax error: {}", where_of(source, e.mark), e.msg));
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: cannot read YAML: {}", source, e.what()));
  }
  Located root = Builder{source, "", key_paths}.build(doc);
  if (root.value.is_null()) {
    root.value = Value::map();
    root.where = source;
  }
  for (const auto& o : overrides) apply_override(root, o);
  require_map(root, fmt::format("{}: the top level", source));
  return root;
}

/// The top-level keys: only the sections known.
void check_top_keys(const Located& root) {
  static const std::set<std::string, std::less<>> top_keys{
      "backend", "plugins", "data", "metrics", "output", "regression", "checkpoint", "intervals"};
  for (const auto& [k, c] : root.children)
    if (!top_keys.contains(k))
      fail_at_key(c, fmt::format("unknown top-level key '{}' (expected backend, plugins, data, "
                                 "metrics, output, regression, checkpoint, intervals)",
                                 k));
}

}  // namespace

Config Config::parse(const std::string& yaml_text, const std::string& source,
                     const fs::path& base_dir, const std::vector<std::string>& overrides,
                     bool key_paths) {
  const Located root = load_root(yaml_text, source, overrides, key_paths);
  Config cfg;
  cfg.source = source;
  cfg.base_dir = base_dir;

  check_top_keys(root);
  parse_backend(cfg, root);
  parse_plugins(cfg, root, base_dir);
  parse_data(cfg, root);
  parse_metrics(cfg, root);
  parse_output(cfg, root);
  parse_regression(cfg, root, base_dir);
  parse_checkpoint(cfg, root, base_dir);
  parse_intervals(cfg, root);
  check_combinations(cfg);
  return cfg;
}

Located load_yaml_file(const fs::path& file, std::string_view what) {
  const std::string text = read_whole_file(file, what, kConfigMaxBytes);
  YAML::Node doc;
  try {
    doc = load_bounded(text, file.string(), "");
  } catch (const YAML::ParserException& e) {
    throw ConfigError(
        fmt::format("{}: YAML syntax error: {}", where_of(file.string(), e.mark), e.msg));
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: cannot read YAML: {}", file.string(), e.what()));
  }
  Located root = Builder{file.string(), ""}.build(doc);
  if (root.where.empty() || root.value.is_null()) root.where = file.string();
  return root;
}

Config Config::load(const fs::path& file, const std::vector<std::string>& overrides) {
  const std::string text = read_whole_file(file, "config", kConfigMaxBytes);
  auto base = file.parent_path();
  if (base.empty()) base = ".";
  std::error_code ec;
  auto abs = fs::absolute(base, ec);
  return parse(text, file.string(), ec ? base : abs.lexically_normal(), overrides);
}

}  // namespace tally

namespace tally {

namespace {

std::string rule_text(const ToleranceRule& r) {
  const auto number = [](const std::optional<double>& x) {
    return x ? fmt::format("{}", *x) : std::string("-");
  };
  const char* better = !r.better                     ? "-"
                       : *r.better == Better::Higher ? "higher"
                       : *r.better == Better::Lower  ? "lower"
                                                     : "neither";
  return fmt::format("{}: rtol {}, atol {}, better {}", r.pattern, number(r.rtol), number(r.atol),
                     better);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> Config::agreed_settings() const {
  std::vector<std::pair<std::string, std::string>> s;
  const auto path = [&](const char* name, const std::optional<fs::path>& p) {
    if (p) s.emplace_back(name, p->string());
  };
  s.emplace_back("backend.type", backend_type);
  // The deadlines: every rank must wait alike (the rendezvous and interface settings may differ
  // from host to host; the chunk size is compared first of all, by sync::exchange_start).
  for (const char* key : {"timeout", "start_timeout"})
    if (const Located* v = backend_params.child(key))
      s.emplace_back(fmt::format("backend.{}", key), v->value.to_json());
  path("output.json", output_json);
  path("output.junit", output_junit);
  path("output.markdown", output_markdown);
  path("output.html", output_html);
  path("output.records", output_records);
  if (intervals)
    s.emplace_back("intervals", fmt::format("confidence {}, resamples {}, seed {}, method {}",
                                            intervals->confidence, intervals->resamples,
                                            intervals->seed, intervals->method));
  if (regression) {
    const auto& r = *regression;
    s.emplace_back("regression.baseline", r.baseline.string());
    if (r.rtol) s.emplace_back("regression.rtol", fmt::format("{}", *r.rtol));
    if (r.atol) s.emplace_back("regression.atol", fmt::format("{}", *r.atol));
    if (r.tolerances_file) s.emplace_back("regression.tolerances", r.tolerances_file->string());
    if (!r.tolerances.empty()) {
      std::vector<std::string> rules;
      for (const auto& rule : r.tolerances) rules.push_back(rule_text(rule));
      s.emplace_back("regression.tolerances", fmt::format("{{{}}}", fmt::join(rules, "; ")));
    }
    path("regression.baseline_records", r.baseline_records);
    s.emplace_back("regression.alpha", fmt::format("{}", r.paired.alpha));
    s.emplace_back("regression.resamples", std::to_string(r.paired.resamples));
    s.emplace_back("regression.seed", std::to_string(r.paired.seed));
    s.emplace_back("regression.test", r.paired.mcnemar ? "auto" : "bootstrap");
    path("regression.history", r.history);
    s.emplace_back("regression.fail_on_drift", r.fail_on_drift ? "true" : "false");
  }
  if (checkpoint) {
    s.emplace_back("checkpoint.dir", checkpoint->dir.string());
    s.emplace_back("checkpoint.every_n_batches", std::to_string(checkpoint->every_n_batches));
  }
  return s;
}

}  // namespace tally
