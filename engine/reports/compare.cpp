#include "tally/reports/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tally/registry.hpp"
#include "tally/sdk/error.hpp"
#include "tally/text_safety.hpp"
#include "value_json.hpp"

namespace tally {

namespace fs = std::filesystem;

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Ok:
      return "ok";
    case Verdict::Improved:
      return "improved";
    case Verdict::Regressed:
      return "regressed";
    case Verdict::Changed:
      return "changed";
    case Verdict::Missing:
      return "missing";
    case Verdict::New:
      return "new";
    case Verdict::WithinNoise:
      return "within noise";
  }
  return "?";
}

const char* better_name(Better b) {
  switch (b) {
    case Better::Higher:
      return "higher is better";
    case Better::Lower:
      return "lower is better";
    case Better::Neither:
      return "no direction";
  }
  return "?";
}

bool glob_match(std::string_view pattern, std::string_view text) {
  // Iterative matcher with one backtrack point (the last `*`): linear in practice.
  std::size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

double Tolerance::at(double baseline) const {
  return atol + rtol * (std::isfinite(baseline) ? std::abs(baseline) : 0.0);
}

// ---- tolerances ---------------------------------------------------------------------------------

namespace {

bool has_wildcard(std::string_view p) { return p.find_first_of("*?") != std::string_view::npos; }

std::size_t literal_count(std::string_view p) {
  return static_cast<std::size_t>(
      std::count_if(p.begin(), p.end(), [](char c) { return c != '*' && c != '?'; }));
}

}  // namespace

Tolerances::Resolved Tolerances::resolve(std::string_view key, std::string_view element) const {
  // One key: the plain scan costs no index (ToleranceIndex gives the same answers for many).
  const Rule* best = nullptr;
  int best_rank = 0;
  std::size_t best_literals = 0;
  for (const auto& r : rules) {
    int rank = 0;
    if (element != key && r.pattern == element) {
      rank = 4;
    } else if (r.pattern == key) {
      rank = 3;
    } else if (has_wildcard(r.pattern) &&
               (glob_match(r.pattern, element) || glob_match(r.pattern, key))) {
      rank = 1;
    }
    if (rank == 0) continue;
    const std::size_t literals = rank == 1 ? literal_count(r.pattern) : 0;
    if (rank > best_rank || (rank == best_rank && literals > best_literals)) {
      best = &r;
      best_rank = rank;
      best_literals = literals;
    }
  }
  Resolved out;
  out.tol = defaults;
  if (best != nullptr) {
    if (best->rtol) out.tol.rtol = *best->rtol;
    if (best->atol) out.tol.atol = *best->atol;
    out.better = best->better;
    out.rule = best;
  }
  return out;
}

void Tolerances::check() const {
  const auto bad = [](double x) { return !std::isfinite(x) || x < 0; };
  for (const auto& [name, x] : {std::pair{"rtol", defaults.rtol}, std::pair{"atol", defaults.atol}})
    if (bad(x))
      throw ConfigError(
          fmt::format("the default {} expects a finite number >= 0, found {}", name, x));
  for (const auto& r : rules)
    for (const auto& [name, x] : {std::pair{"rtol", r.rtol}, std::pair{"atol", r.atol}})
      if (x && bad(*x))
        throw ConfigError(fmt::format("{}tolerance '{}': {} expects a finite number >= 0, found {}",
                                      r.where.empty() ? "" : r.where + ": ", r.pattern, name, *x));
}

// ---- the tolerance index ------------------------------------------------------------------------

namespace {
constexpr std::size_t kNone = static_cast<std::size_t>(-1);
}  // namespace

struct ToleranceIndex::Impl {
  // Patterns (and glob parts) are views of the rules' strings.
  std::unordered_map<std::string_view, std::size_t> exact;  // pattern -> the first rule so written
  struct Bucket {
    std::unordered_map<std::string_view, std::vector<std::size_t>> by_suffix;
    std::vector<std::size_t> suffix_lengths;  // distinct, ascending
  };
  std::unordered_map<std::string_view, Bucket> by_prefix;  // globs by their literal prefix
  std::vector<std::size_t> prefix_lengths;                 // distinct, ascending
  std::vector<std::size_t> literals;                       // per rule
};

ToleranceIndex::ToleranceIndex(const Tolerances& tolerances)
    : tolerances_(tolerances), impl_(std::make_unique<Impl>()) {
  auto& x = *impl_;
  const auto add_length = [](std::vector<std::size_t>& v, std::size_t n) {
    if (std::find(v.begin(), v.end(), n) == v.end())
      v.insert(std::upper_bound(v.begin(), v.end(), n), n);
  };
  x.literals.resize(tolerances.rules.size());
  for (std::size_t i = 0; i < tolerances.rules.size(); ++i) {
    const std::string_view p = tolerances.rules[i].pattern;
    x.exact.emplace(p, i);
    if (!has_wildcard(p)) continue;
    x.literals[i] = literal_count(p);
    const std::string_view prefix = p.substr(0, p.find_first_of("*?"));
    const std::string_view suffix = p.substr(p.find_last_of("*?") + 1);
    auto& bucket = x.by_prefix[prefix];
    bucket.by_suffix[suffix].push_back(i);
    add_length(bucket.suffix_lengths, suffix.size());
    add_length(x.prefix_lengths, prefix.size());
  }
}

ToleranceIndex::~ToleranceIndex() = default;

std::size_t ToleranceIndex::best_glob(std::string_view text, std::size_t best) const {
  const auto& x = *impl_;
  const auto better = [&](std::size_t r) {
    return best == kNone || x.literals[r] > x.literals[best] ||
           (x.literals[r] == x.literals[best] && r < best);
  };
  for (const std::size_t l : x.prefix_lengths) {
    if (l > text.size()) break;
    const auto bucket = x.by_prefix.find(text.substr(0, l));
    if (bucket == x.by_prefix.end()) continue;
    for (const std::size_t m : bucket->second.suffix_lengths) {
      if (l + m > text.size()) break;
      const auto rules = bucket->second.by_suffix.find(text.substr(text.size() - m));
      if (rules == bucket->second.by_suffix.end()) continue;
      for (const std::size_t r : rules->second)
        if (better(r) && glob_match(tolerances_.rules[r].pattern, text)) best = r;
    }
  }
  return best;
}

Tolerances::Resolved ToleranceIndex::make(std::size_t rule) const {
  Tolerances::Resolved out;
  out.tol = tolerances_.defaults;
  if (rule == kNone) return out;
  const auto& r = tolerances_.rules[rule];
  if (r.rtol) out.tol.rtol = *r.rtol;
  if (r.atol) out.tol.atol = *r.atol;
  out.better = r.better;
  out.rule = &r;
  return out;
}

ToleranceIndex::Key ToleranceIndex::key(std::string_view key) const {
  Key k;
  k.index_ = this;
  k.key_ = std::string(key);
  const auto it = impl_->exact.find(key);
  k.exact_ = it == impl_->exact.end() ? kNone : it->second;
  k.glob_ = k.exact_ == kNone ? best_glob(key, kNone) : kNone;
  return k;
}

Tolerances::Resolved ToleranceIndex::Key::resolve(std::string_view element) const {
  // As Tolerances::resolve: the element written exactly, then the key written exactly, then the
  // glob matching the element or the key with the most literal characters (the first on a tie).
  if (element != key_)
    if (const auto it = index_->impl_->exact.find(element); it != index_->impl_->exact.end())
      return index_->make(it->second);
  if (exact_ != kNone) return index_->make(exact_);
  return index_->make(element == key_ ? glob_ : index_->best_glob(element, glob_));
}

void Tolerances::add_rules(const std::vector<ToleranceRule>& more) {
  rules.insert(rules.end(), more.begin(), more.end());
}

void Tolerances::add_file(const fs::path& file) { add_rules(read_tolerance_rules(file)); }

Tolerances Tolerances::of(const RegressionSettings& regression) {
  Tolerances t;
  if (regression.rtol) t.defaults.rtol = *regression.rtol;
  if (regression.atol) t.defaults.atol = *regression.atol;
  if (regression.tolerances_file) t.add_file(*regression.tolerances_file);
  t.add_rules(regression.tolerances);
  return t;
}

// ---- result specs -------------------------------------------------------------------------------

void ResultSpecs::set(const std::string& label, std::vector<ResultSpec> specs, std::string type) {
  if (const auto it = by_label_.find(label); it != by_label_.end()) {
    auto& e = entries_[it->second];
    e.specs = std::move(specs);
    e.type = std::move(type);
    return;
  }
  by_label_.emplace(label, entries_.size());
  entries_.push_back({label, std::move(type), std::move(specs)});
}

const ResultSpecs::Entry* ResultSpecs::entry(std::string_view label) const {
  const auto it = by_label_.find(label);
  return it == by_label_.end() ? nullptr : &entries_[it->second];
}

const ResultSpec* ResultSpecs::find(std::string_view label, std::string_view key) const {
  const Entry* e = entry(label);
  if (e == nullptr) return nullptr;
  for (const auto& s : e->specs)
    if (glob_match(s.key, key)) return &s;
  return nullptr;
}

Better ResultSpecs::better(std::string_view label, std::string_view key) const {
  const ResultSpec* s = find(label, key);
  return s ? s->better : Better::Higher;
}

Plot ResultSpecs::plot(std::string_view label, std::string_view key) const {
  const ResultSpec* s = find(label, key);
  return s ? s->plot : Plot::None;
}

std::string ResultSpecs::type(std::string_view label) const {
  const Entry* e = entry(label);
  return e ? e->type : std::string();
}

ResultSpecs ResultSpecs::from_results(const Results& results) {
  ResultSpecs out;
  std::unordered_map<std::string_view, std::string_view> types;  // the last one written wins
  for (const auto& [l, t] : results.run.types) types[l] = t;
  for (const auto& [label, specs] : results.specs) {
    const auto it = types.find(label);
    out.set(label, specs, it == types.end() ? std::string() : std::string(it->second));
  }
  return out;
}

ResultSpecs ResultSpecs::from_registry(
    const Registry& registry, const std::vector<std::pair<std::string, std::string>>& types,
    std::vector<std::string>* unknown) {
  ResultSpecs out;
  std::unordered_set<std::string_view> unknown_seen;
  for (const auto& [label, type] : types) {
    const Component* c = registry.find(ComponentKind::Metric, type);
    if (c == nullptr) {
      if (unknown && unknown_seen.insert(type).second) unknown->push_back(type);
      out.set(label, {}, type);
      continue;
    }
    out.set(label, c->info->results, c->info->name);
  }
  return out;
}

// ---- comparison ---------------------------------------------------------------------------------

std::string KeyDiff::name() const { return key.empty() ? label : label + "." + key; }

std::size_t Comparison::count(Verdict v) const {
  return static_cast<std::size_t>(
      std::count_if(keys.begin(), keys.end(), [&](const KeyDiff& k) { return k.verdict == v; }));
}

std::string Comparison::summary() const {
  std::string out;
  for (auto v : {Verdict::Regressed, Verdict::Changed, Verdict::Improved, Verdict::WithinNoise,
                 Verdict::Ok, Verdict::Missing, Verdict::New}) {
    const auto n = count(v);
    if (n == 0) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}", n, verdict_name(v));
  }
  return out.empty() ? "no keys" : out;
}

const KeyDiff* Comparison::find(std::string_view label, std::string_view key) const {
  for (const auto& k : keys)
    if (k.label == label && k.key == key) return &k;
  return nullptr;
}

namespace {

bool is_nan_like(const Value& v) {
  return v.is_null() || (v.is_float() && std::isnan(v.as_double()));
}

std::string shape_of(const Value& v) {
  if (v.is_array()) {
    std::string s = fmt::format("[{}]", v.size());
    if (v.size() > 0 && v.as_array()[0].is_array()) s += shape_of(v.as_array()[0]);
    return s;
  }
  if (v.is_map()) return "a map";
  if (v.is_number() || v.is_null()) return "a number";
  return Value::kind_name(v.kind());
}

struct Scalar {
  Verdict verdict = Verdict::Ok;
  std::optional<double> delta;
  double tolerance = 0;
  std::string note;
};

Verdict by_direction(double delta, Better better) {
  switch (better) {
    case Better::Higher:
      return delta > 0 ? Verdict::Improved : Verdict::Regressed;
    case Better::Lower:
      return delta < 0 ? Verdict::Improved : Verdict::Regressed;
    case Better::Neither:
      return Verdict::Changed;
  }
  return Verdict::Changed;
}

Scalar compare_scalar(const Value& b, const Value& v, Tolerance tol, Better better) {
  Scalar out;
  const bool b_nan = is_nan_like(b), v_nan = is_nan_like(v);
  if (b.is_number() && v.is_number() && !b_nan && !v_nan) {
    const double bd = b.as_double(), vd = v.as_double();
    out.tolerance = tol.at(bd);
    const double delta = vd - bd;
    out.delta = std::isnan(delta) ? 0.0 : delta;  // inf - inf: the same infinity
    if (std::abs(*out.delta) > out.tolerance) out.verdict = by_direction(*out.delta, better);
    return out;
  }
  if (b_nan && v_nan) return out;
  if ((b.is_number() || b_nan) && (v.is_number() || v_nan)) {
    // One side is NaN (written as null): a metric that became undefined, or became defined.
    if (v_nan) {
      out.verdict = better == Better::Neither ? Verdict::Changed : Verdict::Regressed;
      out.note = "the value is null (NaN)";
    } else {
      out.verdict = better == Better::Neither ? Verdict::Changed : Verdict::Improved;
      out.note = "the baseline is null (NaN)";
    }
    return out;
  }
  if (!(b == v)) {
    out.verdict = Verdict::Changed;
    out.note = fmt::format("{} -> {}", b.to_json(), v.to_json());
  }
  return out;
}

int severity(Verdict v) {
  switch (v) {
    case Verdict::Regressed:
      return 3;
    case Verdict::Changed:
      return 2;
    case Verdict::Improved:
      return 1;
    default:
      return 0;
  }
}

// A map Value's entries by key, the first of equal keys as Value::find finds it: hashed for a
// large map (a results file of 300,000 labels compares in linear time), scanned for a small one.
class Lookup {
 public:
  explicit Lookup(const Value* map) : map_(map != nullptr && map->is_map() ? map : nullptr) {
    if (map_ == nullptr || map_->size() <= 16) return;
    index_.reserve(map_->size());
    for (const auto& [k, v] : map_->as_map()) index_.emplace(k, &v);
  }
  const Value* find(std::string_view key) const {
    if (map_ == nullptr) return nullptr;
    if (index_.empty()) return map_->find(key);
    const auto it = index_.find(key);
    return it == index_.end() ? nullptr : it->second;
  }

 private:
  const Value* map_;
  std::unordered_map<std::string_view, const Value*> index_;
};

class KeyComparer {
 public:
  KeyComparer(const ToleranceIndex& tols, Better spec_better, KeyDiff& kd)
      : spec_better_(spec_better), kd_(kd), name_(kd.name()), tols_(tols.key(name_)) {}

  void run(const Value& b, const Value& v) {
    const auto key_rule = tols_.resolve(name_);
    kd_.better = key_rule.better.value_or(spec_better_);
    kd_.tol = key_rule.tol;
    kd_.is_array = b.is_array() || v.is_array() || b.is_map() || v.is_map();
    if (!kd_.is_array) {
      const Scalar s = compare_scalar(b, v, kd_.tol, kd_.better);
      kd_.verdict = s.verdict;
      kd_.baseline = b;
      kd_.value = v;
      kd_.delta = s.delta;
      kd_.tolerance = s.tolerance;
      kd_.note = s.note;
      return;
    }
    walk(b, v, "");
    if (shape_mismatch_) {
      kd_.verdict = kd_.better == Better::Neither ? Verdict::Changed : Verdict::Regressed;
      kd_.baseline = b;
      kd_.value = v;
      return;
    }
    kd_.verdict = kd_.regressed_count  ? Verdict::Regressed
                  : kd_.changed_count  ? Verdict::Changed
                  : kd_.improved_count ? Verdict::Improved
                                       : Verdict::Ok;
    const ElementDiff* shown =
        worst_.verdict == kd_.verdict && kd_.verdict != Verdict::Ok ? &worst_ : nullptr;
    if (shown == nullptr && largest_.delta && *largest_.delta != 0) shown = &largest_;
    if (shown != nullptr) {
      kd_.element = shown->index;
      kd_.baseline = shown->baseline;
      kd_.value = shown->value;
      kd_.delta = shown->delta;
      kd_.tolerance = shown->tolerance;
    } else {
      kd_.baseline = b;
      kd_.value = v;
    }
    const std::size_t bad = kd_.verdict == Verdict::Regressed ? kd_.regressed_count
                            : kd_.verdict == Verdict::Changed ? kd_.changed_count
                                                              : kd_.improved_count;
    if (kd_.verdict != Verdict::Ok)
      kd_.note =
          fmt::format("{} of {} elements {}", bad, kd_.element_count, verdict_name(kd_.verdict));
    if (kd_.verdict == Verdict::Regressed && kd_.improved_count)
      kd_.note += fmt::format(", {} improved", kd_.improved_count);
  }

 private:
  void mismatch(const std::string& index, const Value& b, const Value& v) {
    if (shape_mismatch_) return;
    shape_mismatch_ = true;
    kd_.note = fmt::format("shape{} {} -> {}: not compared element by element",
                           index.empty() ? "" : " of " + index, shape_of(b), shape_of(v));
  }

  void walk(const Value& b, const Value& v, const std::string& index) {
    if (shape_mismatch_) return;
    if (b.is_array() && v.is_array()) {
      if (b.size() != v.size()) return mismatch(index, b, v);
      for (std::size_t i = 0; i < b.size(); ++i)
        walk(b.as_array()[i], v.as_array()[i], fmt::format("{}[{}]", index, i));
      return;
    }
    if (b.is_map() && v.is_map()) {
      if (b.size() != v.size()) return mismatch(index, b, v);
      const Lookup base(&b);
      for (const auto& [k, e] : v.as_map()) {
        const Value* be = base.find(k);
        if (be == nullptr) return mismatch(index, b, v);
        walk(*be, e, fmt::format("{}.{}", index, k));
      }
      return;
    }
    if (b.is_array() || v.is_array() || b.is_map() || v.is_map()) return mismatch(index, b, v);
    const auto rule = tols_.resolve(name_ + index);
    const Better better = rule.better.value_or(spec_better_);
    const Scalar s = compare_scalar(b, v, rule.tol, better);
    ++kd_.element_count;
    ElementDiff d{index, b, v, s.delta, s.tolerance, s.verdict};
    const double mag = s.delta ? std::abs(*s.delta) : 0.0;
    if (!largest_.delta || mag > std::abs(*largest_.delta)) largest_ = d;
    switch (s.verdict) {
      case Verdict::Regressed:
        ++kd_.regressed_count;
        break;
      case Verdict::Improved:
        ++kd_.improved_count;
        break;
      case Verdict::Changed:
        ++kd_.changed_count;
        break;
      default:
        return;
    }
    if (severity(s.verdict) > severity(worst_.verdict) ||
        (s.verdict == worst_.verdict && mag > (worst_.delta ? std::abs(*worst_.delta) : 0.0)))
      worst_ = d;
    if (kd_.elements.size() < kMaxElementDiffs) kd_.elements.push_back(std::move(d));
  }

  Better spec_better_;
  KeyDiff& kd_;
  const std::string name_;
  const ToleranceIndex::Key tols_;
  bool shape_mismatch_ = false;
  ElementDiff worst_, largest_;
};

// A label's results as (key, value) pairs: a map's entries, or the label's own value (key "").
template <class F>
void for_entries(const Value& v, F&& f) {
  static const std::string kNoKey;
  if (!v.is_map()) return f(kNoKey, v);
  for (const auto& [k, e] : v.as_map()) f(k, e);
}

}  // namespace

Comparison compare(const Value& results, const Value& baseline, const ResultSpecs& specs,
                   const Tolerances& tolerances) {
  tolerances.check();
  const ToleranceIndex index(tolerances);
  Comparison out;
  const auto emit_one_sided = [&](const std::string& label, const std::string& key, const Value& v,
                                  Verdict verdict) {
    KeyDiff kd;
    kd.label = label;
    kd.key = key;
    kd.verdict = verdict;
    kd.better = specs.better(label, key);
    (verdict == Verdict::Missing ? kd.baseline : kd.value) = v;
    kd.is_array = v.is_array() || v.is_map();
    kd.note =
        verdict == Verdict::Missing ? "in the baseline, not in the results" : "not in the baseline";
    out.keys.push_back(std::move(kd));
  };
  const Value::Map empty;
  const Lookup base_labels(&baseline);
  for (const auto& [label, res] : results.is_map() ? results.as_map() : empty) {
    const Value* base_label = base_labels.find(label);
    const Lookup base_keys(base_label);
    for_entries(res, [&](const std::string& key, const Value& v) {
      const Value* b = nullptr;
      if (base_label != nullptr) {
        if (base_label->is_map())
          b = key.empty() ? nullptr : base_keys.find(key);
        else if (key.empty())
          b = base_label;
      }
      if (b == nullptr) return emit_one_sided(label, key, v, Verdict::New);
      KeyDiff kd;
      kd.label = label;
      kd.key = key;
      if (specs.plot(label, key) == Plot::Curve) {
        // A curve's points move with its thresholds: it is compared as a whole, never failed.
        kd.better = Better::Neither;
        kd.is_array = true;
        kd.baseline = *b;
        kd.value = v;
        kd.verdict = *b == v ? Verdict::Ok : Verdict::Changed;
        if (kd.verdict == Verdict::Changed)
          kd.note = "the curve changed (curves are not compared point by point)";
      } else {
        KeyComparer(index, specs.better(label, key), kd).run(*b, v);
      }
      out.keys.push_back(std::move(kd));
    });
  }
  const Lookup result_labels(&results);
  for (const auto& [label, base] : baseline.is_map() ? baseline.as_map() : empty) {
    const Value* res = result_labels.find(label);
    const Lookup result_keys(res);
    for_entries(base, [&](const std::string& key, const Value& b) {
      bool present = false;
      if (res != nullptr)
        present = res->is_map() ? (!key.empty() && result_keys.find(key) != nullptr) : key.empty();
      if (!present) emit_one_sided(label, key, b, Verdict::Missing);
    });
  }
  return out;
}

// ---- paired tests -------------------------------------------------------------------------------

std::string format_p_value(const PairedTest& t) {
  if (std::isnan(t.p_value)) return "p n/a";
  const std::size_t used = t.resamples - std::min(t.resamples, t.dropped);
  if (t.p_value == 0 && t.method != "McNemar exact" && used > 0)
    return fmt::format("p < {:.2g}", 1.0 / static_cast<double>(used));
  if (t.p_value != 0 && t.p_value < 1e-4) return fmt::format("p = {:.1e}", t.p_value);
  return fmt::format("p = {:.3g}", t.p_value);
}

namespace {

/// "p = 0.003 (McNemar exact: 17 worse, 3 better of 500)" / "p = 0.21 (paired bootstrap, 1000
/// resamples)"
std::string describe_test(const PairedTest& t) {
  if (t.method == "McNemar exact")
    return fmt::format("{} (McNemar exact: {} worse, {} better of {})", format_p_value(t), t.worse,
                       t.better, t.units);
  return fmt::format("{} ({}, {} resamples{})", format_p_value(t), t.method, t.resamples,
                     t.dropped ? fmt::format(", {} left out", t.dropped) : "");
}

bool reproduces(const Value& v, double from_records) {
  if (!v.is_number()) return v.is_null() && std::isnan(from_records);
  const double x = v.as_double();
  if (std::isnan(x) || std::isnan(from_records)) return std::isnan(x) && std::isnan(from_records);
  return std::abs(x - from_records) <= 1e-9 * std::max(1.0, std::abs(x));
}

}  // namespace

void apply_paired_tests(Comparison& comparison, std::vector<MetricPairedTests> tests,
                        const std::string& results_source, const std::string& baseline_source) {
  for (auto& mt : tests) {
    std::vector<KeyDiff*> diffs;
    for (auto& kd : comparison.keys)
      if (kd.label == mt.label && kd.verdict != Verdict::Missing && kd.verdict != Verdict::New &&
          !kd.is_array)
        diffs.push_back(&kd);
    if (!mt.skipped.empty()) {
      for (KeyDiff* kd : diffs) kd->note += (kd->note.empty() ? "" : "; ") + mt.skipped;
      continue;
    }
    for (auto& t : mt.tests) {
      KeyDiff* kd = nullptr;
      for (KeyDiff* d : diffs)
        if (d->key == t.key) kd = d;
      if (kd == nullptr) continue;
      // The records must be those of the results compared: the same numbers, recomputed.
      if (!reproduces(kd->value, t.value))
        throw InputError(fmt::format(
            "{}: its records give {}.{} = {:.17g}, the results compared hold {}: were the records "
            "written by another run than the results?",
            results_source, mt.label, t.key, t.value, format_number(kd->value)));
      if (!reproduces(kd->baseline, t.baseline))
        throw InputError(fmt::format(
            "{}: its records give {}.{} = {:.17g}, the baseline holds {}: were the records "
            "written by another run than the baseline?",
            baseline_source, mt.label, t.key, t.baseline, format_number(kd->baseline)));
      const std::string said = describe_test(t);
      const std::string before = kd->note.empty() ? "" : kd->note + "; ";
      if (kd->better != Better::Neither) {
        decide_gate(t, kd->better == Better::Higher);
        const bool beyond = kd->verdict == Verdict::Regressed || kd->verdict == Verdict::Improved;
        if (beyond && t.gate == "within noise") {
          kd->verdict = Verdict::WithinNoise;
          kd->note = fmt::format("not significant at alpha {}: {}", t.alpha, said);
        } else if (beyond && t.gate == "undetermined") {
          kd->note = fmt::format("{}the paired test is undetermined ({}): the tolerance decides",
                                 before, said);
        } else if (beyond) {
          kd->note = fmt::format("significant: {}", said);
        } else if (kd->verdict == Verdict::Ok && (t.gate == "regressed" || t.gate == "improved")) {
          kd->note = fmt::format("{} significantly ({}) but within the tolerance", t.gate, said);
        } else {
          kd->note = before + said;
        }
      } else {
        kd->note = before + said;
      }
      kd->test = std::move(t);
    }
  }
}

void apply_paired_gate(Comparison& comparison, Evaluator& evaluator, const Results& results,
                       const RegressionSettings& regression, const std::string& shown) {
  if (!regression.baseline_records) return;
  const auto& file = *regression.baseline_records;
  apply_paired_tests(comparison, evaluator.paired_tests(results, file, regression.paired),
                     "this run's records", shown.empty() ? file.string() : shown);
}

// ---- formatting ---------------------------------------------------------------------------------

std::string format_number(const Value& v) {
  if (v.is_null()) return "null (NaN)";
  if (v.is_int()) return fmt::format("{}", v.as_int());
  if (v.is_float()) {
    const double d = v.as_double();
    if (std::isnan(d)) return "null (NaN)";
    return fmt::format("{:.6g}", d);
  }
  if (v.is_bool()) return v.as_bool() ? "true" : "false";
  if (v.is_string()) return v.as_string();
  if (v.is_array()) {
    std::string dims = fmt::format("{}", v.size());
    for (const Value* e = &v; e->is_array() && e->size() > 0 && e->as_array()[0].is_array();) {
      e = &e->as_array()[0];
      dims += fmt::format("x{}", e->size());
    }
    return fmt::format("[{} values]", dims);
  }
  if (v.is_map()) return fmt::format("{{{} keys}}", v.size());
  return v.to_json();
}

std::string format_delta(std::optional<double> delta, bool integral) {
  if (!delta) return "";
  if (integral) return fmt::format("{:+d}", static_cast<long long>(std::llround(*delta)));
  if (*delta == 0) return "0";
  return fmt::format("{:+.6g}", *delta);
}

namespace {

const char* ansi_of(Verdict v) {
  switch (v) {
    case Verdict::Regressed:
      return "\x1b[1;31m";
    case Verdict::Improved:
      return "\x1b[32m";
    case Verdict::Changed:
      return "\x1b[36m";
    case Verdict::Missing:
    case Verdict::New:
      return "\x1b[33m";
    case Verdict::Ok:
    case Verdict::WithinNoise:
      return "";
  }
  return "";
}

}  // namespace

std::string comparison_json(const Comparison& c) {
  using J = nlohmann::ordered_json;
  const auto num = [](double x) -> J { return std::isfinite(x) ? J(x) : J(nullptr); };
  J out = J::object();
  out["baseline"] = c.baseline_source;
  out["summary"] = c.summary();
  out["regressed"] = c.regressed();
  J counts = J::object();
  for (auto v : {Verdict::Regressed, Verdict::Changed, Verdict::Improved, Verdict::WithinNoise,
                 Verdict::Ok, Verdict::Missing, Verdict::New})
    counts[verdict_name(v)] = c.count(v);
  out["counts"] = std::move(counts);
  J keys = J::array();
  for (const auto& k : c.keys) {
    J e = J::object();
    e["label"] = k.label;
    e["key"] = k.key;
    e["element"] = k.element;
    e["verdict"] = verdict_name(k.verdict);
    e["better"] = k.better == Better::Higher  ? "higher"
                  : k.better == Better::Lower ? "lower"
                                              : "neither";
    e["baseline"] = detail::value_to_json(k.baseline);
    e["value"] = detail::value_to_json(k.value);
    e["delta"] = k.delta ? num(*k.delta) : J(nullptr);
    e["tolerance"] = num(k.tolerance);
    e["note"] = k.note;
    if (k.test) {
      const PairedTest& t = *k.test;
      e["test"] = J{{"method", t.method},
                    {"units", t.units},
                    {"resamples", t.resamples},
                    {"alpha", t.alpha},
                    {"difference", num(t.difference)},
                    {"low", num(t.low)},
                    {"high", num(t.high)},
                    {"standard_error", num(t.standard_error)},
                    {"p_value", num(t.p_value)},
                    {"worse", t.worse},
                    {"better", t.better},
                    {"dropped", t.dropped},
                    {"gate", t.gate}};
    } else {
      e["test"] = nullptr;
    }
    keys.push_back(std::move(e));
  }
  out["keys"] = std::move(keys);
  return out.dump(2, ' ', false, J::error_handler_t::replace) + "\n";
}

std::string format_comparison(const Comparison& c, bool color) {
  struct Row {
    std::string key, baseline, value, delta, tolerance, verdict, note;
    Verdict v;
  };
  std::vector<Row> rows;
  for (const auto& k : c.keys) {
    Row r;
    r.v = k.verdict;
    // Keys and notes come from results files and plugins: control characters shown escaped.
    r.key = escape_for_terminal(k.name() + k.element);
    const bool one_sided = k.verdict == Verdict::Missing || k.verdict == Verdict::New;
    r.baseline = k.verdict == Verdict::New ? "-" : format_number(k.baseline);
    r.value = k.verdict == Verdict::Missing ? "-" : format_number(k.value);
    r.delta = format_delta(k.delta, k.baseline.is_int() && k.value.is_int());
    if (!one_sided && k.delta)
      r.tolerance = k.tolerance == 0 ? "exact" : fmt::format("±{:.3g}", k.tolerance);
    r.verdict = verdict_name(k.verdict);
    r.note = escape_for_terminal(k.note);
    rows.push_back(std::move(r));
  }
  std::size_t w[6] = {3, 8, 5, 5, 9, 7};
  const auto width = [](const std::string& s) {
    // Display width: count UTF-8 code points (the ± sign is two bytes).
    return static_cast<std::size_t>(
        std::count_if(s.begin(), s.end(), [](char ch) { return (ch & 0xC0) != 0x80; }));
  };
  for (const auto& r : rows) {
    const std::string* cols[6] = {&r.key,   &r.baseline,  &r.value,
                                  &r.delta, &r.tolerance, &r.verdict};
    for (int i = 0; i < 6; ++i) w[i] = std::max(w[i], width(*cols[i]));
  }
  const auto pad = [&](const std::string& s, std::size_t n, bool right) {
    const std::string fill(n > width(s) ? n - width(s) : 0, ' ');
    return right ? fill + s : s + fill;
  };
  std::string out =
      fmt::format("{}  {}  {}  {}  {}  {}  note\n", pad("key", w[0], false),
                  pad("baseline", w[1], true), pad("value", w[2], true), pad("delta", w[3], true),
                  pad("tolerance", w[4], true), pad("verdict", w[5], false));
  for (std::size_t i = 0; i < 6; ++i) out += std::string(w[i], '-') + "  ";
  out += "----\n";
  for (const auto& r : rows) {
    const char* on = color ? ansi_of(r.v) : "";
    const char* off = color && *on ? "\x1b[0m" : "";
    std::string line = fmt::format("{}  {}  {}  {}{}{}  {}  {}{}{}  {}", pad(r.key, w[0], false),
                                   pad(r.baseline, w[1], true), pad(r.value, w[2], true), on,
                                   pad(r.delta, w[3], true), off, pad(r.tolerance, w[4], true), on,
                                   pad(r.verdict, w[5], false), off, r.note);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  std::string summary = c.summary();
  if (color && c.regressed()) summary = fmt::format("\x1b[1;31m{}\x1b[0m", summary);
  out += fmt::format("\n{}{}\n", summary,
                     c.baseline_source.empty()
                         ? ""
                         : fmt::format(" (baseline: {})", escape_for_terminal(c.baseline_source)));
  return out;
}

}  // namespace tally
