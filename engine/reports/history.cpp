// History folders, trends and the slow-drift flag (tally/reports/history.hpp). The trend test
// follows SciPy 1.16.3's scipy.stats.kendalltau (method='auto', variant='b') and theilslopes
// operation by operation, so that p-values and slopes match it to rounding
// (tests/reference/history.py).
#include "tally/reports/history.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <system_error>

#include <fmt/format.h>

#include "tally/records.hpp"
#include "tally/reports/reports.hpp"
#include "tally/sdk/error.hpp"

namespace tally {

namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Natural order without the tie-break: <0, 0, >0.
int natural_compare(std::string_view a, std::string_view b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (is_digit(a[i]) && is_digit(b[j])) {
      std::size_t ei = i, ej = j;
      while (ei < a.size() && is_digit(a[ei])) ++ei;
      while (ej < b.size() && is_digit(b[ej])) ++ej;
      std::size_t si = i, sj = j;  // skip leading zeros
      while (si + 1 < ei && a[si] == '0') ++si;
      while (sj + 1 < ej && b[sj] == '0') ++sj;
      const std::size_t li = ei - si, lj = ej - sj;
      if (li != lj) return li < lj ? -1 : 1;
      if (const int c = a.substr(si, li).compare(b.substr(sj, lj)); c != 0) return c < 0 ? -1 : 1;
      i = ei;
      j = ej;
      continue;
    }
    const auto ca = static_cast<unsigned char>(a[i]), cb = static_cast<unsigned char>(b[j]);
    if (ca != cb) return ca < cb ? -1 : 1;
    ++i;
    ++j;
  }
  if (i < a.size()) return 1;
  if (j < b.size()) return -1;
  return 0;
}

// scipy.special.ndtr (Cephes): the standard normal CDF.
double ndtr(double a) {
  const double x = a * (std::numbers::sqrt2 / 2);
  const double z = std::fabs(x);
  if (z < std::numbers::sqrt2 / 2) return 0.5 + 0.5 * std::erf(x);
  const double y = 0.5 * std::erfc(z);
  return x > 0 ? 1.0 - y : y;
}

double factorial(std::size_t n) {
  double f = 1;
  for (std::size_t k = 2; k <= n; ++k) f *= static_cast<double>(k);
  return f;
}

// scipy.stats._mstats_basic._kendall_p_exact(n, c, 'two-sided'): c concordant pairs of n points.
double kendall_p_exact(std::size_t n, std::size_t c) {
  const std::size_t pairs = n * (n - 1) / 2;
  c = std::min(c, pairs - c);
  double prob = 1.0;
  if (n <= 2) {
    prob = 1.0;
  } else if (c == 0) {
    prob = n < 171 ? 2.0 / factorial(n) : 0.0;
  } else if (c == 1) {
    prob = n < 172 ? 2.0 / factorial(n - 1) : 0.0;
  } else if (4 * c == n * (n - 1)) {
    prob = 1.0;
  } else {
    // new[k]: permutations of j elements with k inversions (k <= c), built up j = 3..n.
    std::vector<double> cur(c + 1, 0.0), prev;
    cur[0] = cur[1] = 1.0;
    for (std::size_t j = 3; j <= n; ++j) {
      for (std::size_t k = 1; k <= c; ++k) cur[k] += cur[k - 1];
      if (n >= 171)
        for (auto& v : cur) v /= static_cast<double>(j);
      if (j <= c) {
        prev = cur;
        for (std::size_t k = j; k <= c; ++k) cur[k] -= prev[k - j];
      }
    }
    double sum = 0;
    for (double v : cur) sum += v;
    prob = n < 171 ? 2.0 * sum / factorial(n) : sum;
  }
  return std::clamp(prob, 0.0, 1.0);
}

double median_sorted(const std::vector<double>& s) {
  const std::size_t n = s.size();
  if (n == 0) return kNaN;
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

std::optional<double> number_at(const Value* v) {
  if (v == nullptr || !v->is_number()) return std::nullopt;
  const double d = v->as_double();
  if (!std::isfinite(d)) return std::nullopt;
  return d;
}

// The interval of `label`'s scalar key `flat` in a run's Results::intervals
// ({"metrics": {label: {key: {"low", "high", ...}}}}).
std::pair<std::optional<double>, std::optional<double>> interval_of(const Value& intervals,
                                                                    const std::string& label,
                                                                    const std::string& flat) {
  if (!intervals.is_map()) return {};
  const Value* metrics = intervals.find("metrics");
  if (metrics == nullptr || !metrics->is_map()) return {};
  const Value* per_label = metrics->find(label);
  if (per_label == nullptr || !per_label->is_map()) return {};
  const Value* iv = per_label->find(flat);
  if (iv == nullptr || !iv->is_map()) return {};
  return {number_at(iv->find("low")), number_at(iv->find("high"))};
}

// One scalar key of one label: where it lives in the results.
struct KeyRef {
  std::string label, top, flat;  // flat: flatten_scalars' name; top: the results key it is in
};

// The scalar keys of one run's results, and their values, in the run's order.
void scalar_keys(const Results& r, const ResultSpecs& specs,
                 std::vector<std::pair<KeyRef, double>>& out) {
  if (!r.metrics.is_map()) return;
  for (const auto& [label, res] : r.metrics.as_map()) {
    if (!res.is_map()) {
      if (const auto d = number_at(&res)) out.push_back({{label, "", ""}, *d});
      continue;
    }
    for (const auto& [top, v] : res.as_map()) {
      if (specs.plot(label, top) == Plot::Curve) continue;  // compare never fails a curve either
      Value one = Value::map();
      one.set(top, v);
      for (const auto& [flat, d] : flatten_scalars(one))
        if (std::isfinite(d)) out.push_back({{label, top, flat}, d});
    }
  }
}

std::string fmt_value(double v) { return format_number(Value(v)); }

// The numbers of a results map and the maps that hold them; arrays, strings and booleans dropped
// (what scalar_keys and interval_of read).
Value numbers_only(const Value& v) {
  if (!v.is_map()) return v.is_number() || v.is_null() ? v : Value();
  Value::Map kept;
  for (const auto& [k, e] : v.as_map())
    if (e.is_map() || e.is_number() || e.is_null()) kept.emplace_back(k, numbers_only(e));
  return Value(std::move(kept));
}

}  // namespace

bool natural_less(std::string_view a, std::string_view b) {
  const int c = natural_compare(a, b);
  return c != 0 ? c < 0 : a < b;
}

History read_history(const fs::path& dir, std::size_t runs) {
  std::error_code ec;
  const auto status = fs::status(dir, ec);
  if (ec || !fs::exists(status))
    throw InputError(fmt::format("history folder '{}' does not exist", dir.string()));
  if (!fs::is_directory(status))
    throw InputError(
        fmt::format("history '{}' is not a folder (expected a folder of results "
                    "JSON files)",
                    dir.string()));
  History h;
  h.dir = dir;
  std::vector<fs::path> files;
  fs::directory_iterator it(dir, ec), end;
  if (ec)
    throw InputError(
        fmt::format("history folder '{}' cannot be read: {}", dir.string(), ec.message()));
  std::size_t entries = 0;
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    if (++entries > kMaxHistoryEntries)
      throw InputError(fmt::format("history folder '{}' holds more than {} entries", dir.string(),
                                   kMaxHistoryEntries));
    const fs::path& p = it->path();
    if (p.extension() != ".json") continue;
    std::error_code fe;
    if (it->is_directory(fe)) continue;
    files.push_back(p);
    if (files.size() > kMaxHistoryRuns)
      throw InputError(fmt::format("history folder '{}' holds more than {} results files",
                                   dir.string(), kMaxHistoryRuns));
  }
  if (ec)
    throw InputError(
        fmt::format("history folder '{}' cannot be read: {}", dir.string(), ec.message()));
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return natural_less(a.filename().string(), b.filename().string());
  });
  h.files = files.size();
  for (std::size_t i = files.size() - std::min(runs, files.size()); i < files.size(); ++i) {
    const fs::path& f = files[i];
    HistoryRun run;
    run.name = f.stem().string();
    run.path = f;
    try {
      Results r = read_results_json(f);
      run.results.metrics = numbers_only(r.metrics);
      run.results.intervals = numbers_only(r.intervals);
    } catch (const InputError& e) {
      throw InputError(fmt::format("history '{}': {}", dir.string(), e.what()));
    }
    h.runs.push_back(std::move(run));
  }
  return h;
}

MannKendall mann_kendall(const std::vector<double>& x, const std::vector<double>& y) {
  MannKendall r;
  const std::size_t n = std::min(x.size(), y.size());
  if (n < 2) {
    r.tau = r.p_value = kNaN;
    return r;
  }
  // Pairs ordered by x (x has no ties): discordant when y falls, tied when y repeats.
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return x[a] < x[b]; });
  std::size_t dis = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j)
      if (y[order[j]] < y[order[i]]) ++dis;
  // Tie groups of y: ytie = sum c(c-1)/2, y0 = sum c(c-1)(c-2), y1 = sum c(c-1)(2c+5).
  std::vector<double> sorted(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(n));
  std::sort(sorted.begin(), sorted.end());
  std::uint64_t ytie = 0, y1 = 0;
  for (std::size_t i = 0; i < n;) {
    std::size_t k = i + 1;
    while (k < n && sorted[k] == sorted[i]) ++k;
    const std::uint64_t c = k - i;
    if (c > 1) {
      ytie += c * (c - 1) / 2;
      y1 += c * (c - 1) * (2 * c + 5);
    }
    i = k;
  }
  const std::uint64_t tot = n * (n - 1) / 2;
  r.discordant = dis;
  r.y_ties = ytie;
  if (ytie == tot) {
    r.tau = r.p_value = kNaN;
    return r;
  }
  const double con_minus_dis = static_cast<double>(static_cast<std::int64_t>(tot - ytie) -
                                                   2 * static_cast<std::int64_t>(dis));
  const double tau = con_minus_dis / std::sqrt(static_cast<double>(tot)) /
                     std::sqrt(static_cast<double>(tot - ytie));
  r.tau = std::min(1.0, std::max(-1.0, tau));
  if (ytie == 0 && (n <= 33 || std::min<std::uint64_t>(dis, tot - dis) <= 1)) {
    r.exact = true;
    r.p_value = kendall_p_exact(n, tot - dis);
  } else {
    const double size = static_cast<double>(n);
    const double m = size * (size - 1.);
    // SciPy's variance with x untied: the x terms are 0.
    const double var = (m * (2 * size + 5) - static_cast<double>(y1)) / 18;
    const double z = con_minus_dis / std::sqrt(var);
    r.p_value = 2 * ndtr(-std::fabs(z));
  }
  return r;
}

TheilSen theil_sen(const std::vector<double>& x, const std::vector<double>& y) {
  const std::size_t n = std::min(x.size(), y.size());
  std::vector<double> slopes;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      if (x[i] - x[j] > 0) slopes.push_back((y[i] - y[j]) / (x[i] - x[j]));
  if (slopes.empty()) return {kNaN, kNaN};
  std::sort(slopes.begin(), slopes.end());
  TheilSen t;
  t.slope = median_sorted(slopes);
  // method='separate': median(y) - slope * median(x).
  std::vector<double> xs(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n));
  std::vector<double> ys(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(n));
  std::sort(xs.begin(), xs.end());
  std::sort(ys.begin(), ys.end());
  t.intercept = median_sorted(ys) - t.slope * median_sorted(xs);
  return t;
}

std::string KeyTrend::name() const { return key.empty() ? label : label + "." + key; }

std::size_t Trends::drifted() const {
  return static_cast<std::size_t>(
      std::count_if(keys.begin(), keys.end(), [](const KeyTrend& k) { return k.drift; }));
}

Trends trends(const History& history, const Results& current, const ResultSpecs& specs,
              const Tolerances& tolerances, const DriftOptions& options) {
  if (options.window < 3)
    throw InputError(fmt::format(
        "history window expects an integer >= 3 (runs before the current one), found {}",
        options.window));
  if (!(options.alpha > 0 && options.alpha < 1))
    throw InputError(
        fmt::format("history alpha expects a number in (0, 1), found {}", options.alpha));
  Trends out;
  out.window = options.window;
  out.alpha = options.alpha;
  out.dir = history.dir;
  for (const auto& r : history.runs) out.runs.push_back(r.name);
  out.runs.push_back(options.current_name);
  const std::size_t n_runs = out.runs.size();

  // Every key, in the current run's order, then those only earlier runs have (newest first seen).
  std::vector<KeyRef> refs;
  std::map<std::pair<std::string, std::string>, std::size_t> index;  // (label, flat) -> key
  std::vector<std::vector<std::pair<KeyRef, double>>> per_run(n_runs);
  for (std::size_t r = 0; r < n_runs; ++r) {
    const Results& res = r + 1 == n_runs ? current : history.runs[r].results;
    scalar_keys(res, specs, per_run[r]);
  }
  const auto add_keys = [&](std::size_t r) {
    for (const auto& [ref, v] : per_run[r])
      if (index.emplace(std::make_pair(ref.label, ref.flat), refs.size()).second)
        refs.push_back(ref);
  };
  add_keys(n_runs - 1);
  for (std::size_t r = n_runs - 1; r-- > 0;) add_keys(r);

  out.keys.resize(refs.size());
  for (std::size_t k = 0; k < refs.size(); ++k) {
    auto& kt = out.keys[k];
    kt.label = refs[k].label;
    kt.key = refs[k].flat;
    kt.values.assign(n_runs, std::nullopt);
    kt.lows.assign(n_runs, std::nullopt);
    kt.highs.assign(n_runs, std::nullopt);
  }
  for (std::size_t r = 0; r < n_runs; ++r) {
    const Results& res = r + 1 == n_runs ? current : history.runs[r].results;
    for (const auto& [ref, v] : per_run[r]) {
      auto& kt = out.keys[index.at({ref.label, ref.flat})];
      kt.values[r] = v;
      auto [lo, hi] = interval_of(res.intervals, ref.label, ref.flat);
      if (lo && hi) {
        kt.lows[r] = lo;
        kt.highs[r] = hi;
      }
    }
  }

  const std::size_t begin = n_runs > options.window + 1 ? n_runs - options.window - 1 : 0;
  const ToleranceIndex tolerance_index(tolerances);
  for (std::size_t k = 0; k < refs.size(); ++k) {
    auto& kt = out.keys[k];
    const KeyRef& ref = refs[k];
    // Direction and tolerance as compare finds them: the key `<label>.<top>`, the element
    // `<label>.<top>.<sub>` for a number inside a map.
    const std::string name = ref.top.empty() ? ref.label : ref.label + "." + ref.top;
    const std::string element = kt.name();
    const auto rule = tolerance_index.resolve(name, element);
    kt.better = rule.better.value_or(specs.better(ref.label, ref.top));
    kt.window_begin = begin;
    kt.p_value = kt.tau = kt.slope = kt.intercept = kNaN;
    std::vector<double> xs, ys;
    for (std::size_t r = begin; r < n_runs; ++r)
      if (kt.values[r]) {
        xs.push_back(static_cast<double>(r - begin));
        ys.push_back(*kt.values[r]);
      }
    kt.points = ys.size();
    if (!ys.empty()) kt.first = ys.front();
    kt.current = kt.values.back();
    if (kt.current && kt.first) kt.change = *kt.current - *kt.first;
    if (kt.first) kt.tolerance = rule.tol.at(*kt.first);
    if (!kt.current) {
      kt.note = "not in the current run";
      continue;
    }
    if (ys.size() < 4) {
      kt.note = fmt::format("too few runs ({} with a value in the window, 4 needed)", ys.size());
      continue;
    }
    const MannKendall mk = mann_kendall(xs, ys);
    const TheilSen ts = theil_sen(xs, ys);
    kt.slope = ts.slope;
    kt.intercept = ts.intercept;
    kt.tau = mk.tau;
    kt.p_value = mk.p_value;
    if (std::isnan(mk.tau)) {
      kt.note = "constant over the window";
      continue;
    }
    kt.tested = true;
    if (kt.better == Better::Neither) continue;
    const double sign = kt.better == Better::Higher ? -1.0 : 1.0;  // the bad direction
    const bool bad_trend = sign * kt.tau > 0;
    const double worsening = sign * kt.change;
    kt.drift = bad_trend && kt.p_value < options.alpha && worsening > kt.tolerance;
    if (kt.drift) {
      const double rel = *kt.first != 0 ? kt.change / std::fabs(*kt.first) : kNaN;
      kt.note = fmt::format(
          "{} -> {} over the last {} runs ({}{}), {} a run (Theil-Sen); Mann-Kendall p = {:.3g}, "
          "tau = {:.3f}; tolerance {:.3g} ({})",
          fmt_value(*kt.first), fmt_value(*kt.current), n_runs - begin,
          format_delta(kt.change, false),
          std::isnan(rel) ? "" : fmt::format(", {:+.3g} %", 100 * rel),
          format_delta(kt.slope, false), kt.p_value, kt.tau, kt.tolerance, better_name(kt.better));
    }
  }
  return out;
}

std::string format_trends(const Trends& t, bool color) {
  const char* red = color ? "\033[31m" : "";
  const char* bold = color ? "\033[1m" : "";
  const char* reset = color ? "\033[0m" : "";
  const std::size_t runs = t.history_runs();
  const std::size_t drifted = t.drifted();
  std::string out;
  if (runs == 0) return "history: no earlier runs\n";
  out = fmt::format("history: {} run{}, ", runs, runs == 1 ? "" : "s");
  if (drifted == 0) {
    out += fmt::format("no key drifted (window: the last {} runs and this one, alpha {:g})\n",
                       std::min(runs, t.window), t.alpha);
    return out;
  }
  out += fmt::format("{}{}{} key{} drifted:", bold, drifted, reset, drifted == 1 ? "" : "s");
  std::string sep = " ";
  for (const auto& k : t.keys)
    if (k.drift) {
      out += sep + red + k.name() + reset;
      sep = ", ";
    }
  out += "\n";
  for (const auto& k : t.keys)
    if (k.drift) out += fmt::format("  {}{}{}: {}\n", red, k.name(), reset, k.note);
  return out;
}

}  // namespace tally
