// Pieces the retrieval metrics share: the state (every sample's query id, score and relevance,
// concatenated across ranks in rank order = dataset order), reading and checking a batch, the
// parameters torchmetrics' retrieval metrics share (top_k, empty_target_action, ignore_index,
// aggregation), and compute(): the samples grouped by query and each query's value aggregated.
//
// Grouping and ties, as torchmetrics 1.9 does them on the CPU (PyTorch 2.x), so that scores tied
// at a cut-off give the reference's value, not just a valid one. torchmetrics sorts the query ids
// with torch.sort (an introsort, std::sort, under 32768 samples; fbgemm's stable radix sort from
// 32768 on), splits the sorted samples into queries, and ranks each query's documents with
// torch.topk (std::partial_sort when 64 k <= n, else std::nth_element and std::sort of the first
// k - 1) or torch.argsort(descending=True) (std::sort), all over (value, position) pairs compared
// by value only. The order they give tied scores is a function of the input order alone, so
// tally runs the same algorithms (libstdc++'s, which PyTorch's CPU kernels call) over the same
// sequence: the samples in dataset order, which the concatenated state keeps on any number of
// ranks. tests/reference/retrieval.py checks this on data full of ties against torchmetrics.
//
// Arithmetic: in float64. torchmetrics casts scores to float32 and computes several values in
// float32; the expected values (tests/reference/retrieval.py) are torchmetrics' own code run in
// float64, and the file records how far stock torchmetrics (float32) is from them (< 1e-6).
//
// Work after the merge: one sort of the query ids (a radix sort from 32768 samples on, O(n)), then
// one sort of each query's scores: O(n log n) overall, no map per query.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"

namespace tally::retrieval {

inline constexpr const char* kPreds = "preds";
inline constexpr const char* kTarget = "target";
inline constexpr const char* kIndexes = "indexes";

/// Every kept sample (ignore_index removed) in dataset order: its query id, score and relevance
/// (T: uint8 for the binary metrics, double for graded nDCG), concatenated across ranks in rank
/// order; `seen` counts the rows read (for the sample numbers of messages).
template <class T>
struct State {
  PackedVector<std::int64_t> indexes;
  PackedVector<double> preds;
  PackedVector<T> target;
  std::int64_t seen = 0;
  TALLY_STATE(concat(indexes), concat(preds), concat(target), sum(seen))
};

enum class EmptyAction { Neg, Pos, Skip, Error };
enum class Aggregation { Mean, Median, Min, Max };

// ---- torch's CPU orderings ----------------------------------------------------------------------

/// A score and its position in the query, as PyTorch's sort and topk kernels hold them.
using Scored = std::pair<double, std::int64_t>;

/// PyTorch's descending comparator (KeyValueCompDesc, and topk's for largest=True), NaN aside:
/// the inputs hold no NaN. A function object, so that the sorts inline it; the comparisons, and
/// so the order of ties, are those of a function.
struct ScoreDesc {
  bool operator()(const Scored& a, const Scored& b) const { return a.first > b.first; }
};
inline constexpr ScoreDesc score_desc{};

/// torch.argsort(p, descending=True) on the CPU: std::sort of (value, position).
inline void argsort_desc(const double* p, std::size_t m, std::vector<Scored>& out) {
  out.resize(m);
  for (std::size_t i = 0; i < m; ++i) out[i] = {p[i], static_cast<std::int64_t>(i)};
  std::sort(out.begin(), out.end(), score_desc);
}

/// torch.topk(p, k, sorted=True) on the CPU (aten TopKImpl.h): the first k entries of `out`.
inline void topk(const double* p, std::size_t m, std::size_t k, std::vector<Scored>& out) {
  out.resize(m);
  for (std::size_t i = 0; i < m; ++i) out[i] = {p[i], static_cast<std::int64_t>(i)};
  if (k == 0) return;
  const auto first = out.begin(), kth = out.begin() + static_cast<std::ptrdiff_t>(k);
  if (k * 64 <= m) {
    std::partial_sort(first, kth, out.end(), score_desc);
  } else {
    std::nth_element(first, kth - 1, out.end(), score_desc);
    std::sort(first, kth - 1, score_desc);
  }
}

/// From this many samples on, torch.sort(indexes) is stable (at::internal::GRAIN_SIZE).
inline constexpr std::size_t kRadixFrom = 32768;

/// The order torch.sort(indexes) gives on the CPU: fbgemm's stable radix sort from 32768 samples
/// on (here an LSD radix sort, equally stable), std::sort of (id, position) below.
inline std::vector<std::int64_t> query_order(std::span<const std::int64_t> ids) {
  const std::size_t n = ids.size();
  std::vector<std::int64_t> order(n);
  if (n < kRadixFrom) {
    std::vector<std::pair<std::int64_t, std::int64_t>> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = {ids[i], static_cast<std::int64_t>(i)};
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 0; i < n; ++i) order[i] = v[i].second;
    return order;
  }
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (std::is_sorted(ids.begin(), ids.end())) return order;  // already grouped (the usual case)
  const auto [lo_it, hi_it] = std::minmax_element(ids.begin(), ids.end());
  const auto lo = static_cast<std::uint64_t>(*lo_it);
  const std::uint64_t span = static_cast<std::uint64_t>(*hi_it) - lo;
  std::vector<std::uint64_t> key(n), key2(n);
  std::vector<std::int64_t> order2(n);
  for (std::size_t i = 0; i < n; ++i) key[i] = static_cast<std::uint64_t>(ids[i]) - lo;
  std::vector<std::size_t> count(1 << 16);
  for (unsigned shift = 0; shift < 64 && (span >> shift) != 0; shift += 16) {
    std::fill(count.begin(), count.end(), 0);
    for (std::size_t i = 0; i < n; ++i) ++count[(key[i] >> shift) & 0xffff];
    std::size_t at = 0;
    for (auto& c : count) at += std::exchange(c, at);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t to = count[(key[i] >> shift) & 0xffff]++;
      key2[to] = key[i];
      order2[to] = order[i];
    }
    key.swap(key2);
    order.swap(order2);
  }
  return order;
}

// ---- parameters
// ------------------------------------------------------------------------------------

struct Options {
  std::optional<std::int64_t> top_k;
  EmptyAction empty = EmptyAction::Neg;
  std::optional<std::int64_t> ignore_index;
  Aggregation aggregation = Aggregation::Mean;
};

inline Options read_options(const Params& p, bool has_top_k) {
  Options o;
  if (has_top_k && p.has("top_k")) {
    o.top_k = p.get_int("top_k");
    if (*o.top_k < 1)
      p.fail("top_k",
             "must be a positive integer or null (all documents), got " + std::to_string(*o.top_k));
  }
  const std::string e = p.get_string("empty_target_action");
  o.empty = e == "pos"     ? EmptyAction::Pos
            : e == "skip"  ? EmptyAction::Skip
            : e == "error" ? EmptyAction::Error
                           : EmptyAction::Neg;
  if (p.has("ignore_index")) o.ignore_index = p.get_int("ignore_index");
  const std::string a = p.get_string("aggregation");
  o.aggregation = a == "median" ? Aggregation::Median
                  : a == "min"  ? Aggregation::Min
                  : a == "max"  ? Aggregation::Max
                                : Aggregation::Mean;
  return o;
}

/// What makes one retrieval metric itself, declared once by its class (`static constexpr
/// Identity kIdentity`) and read by its constructor and its component alike.
struct Identity {
  const char* name;     // the config type
  const char* key;      // its one result key
  const char* key_doc;  // what the key means (for tally compare and the reports)
  Better better = Better::Higher;
  bool top_k = true;    // takes torchmetrics' top_k
  bool graded = false;  // target is graded relevance (nDCG), not 0 / 1
  /// The queries empty_target_action applies to, and torchmetrics' default action for them.
  const char* empty_doc = "with no relevant document";
  const char* empty_default = "neg";
};

/// The parameters every retrieval metric takes (torchmetrics' names and defaults), shaped by its
/// identity.
inline std::vector<ParamSpec> common_params(const Identity& id) {
  std::vector<ParamSpec> ps;
  if (id.top_k)
    ps.push_back(param("top_k", ParamType::Int,
                       "Only the top_k highest-scored documents of each query count "
                       "(torchmetrics' top_k); null: all of them.")
                     .nullable()
                     .optional());
  ps.push_back(param("empty_target_action", ParamType::String,
                     std::string("What a query ") + id.empty_doc +
                         " counts as: neg (0), pos (1), skip (left out of the aggregation; 0 "
                         "when every query is left out) or error (an input error naming it).")
                   .def(id.empty_default)
                   .choices({"neg", "pos", "skip", "error"}));
  ps.push_back(param("ignore_index", ParamType::Int,
                     "Samples whose target equals it are dropped before anything else "
                     "(torchmetrics' ignore_index); null: none.")
                   .nullable()
                   .optional());
  ps.push_back(param("aggregation", ParamType::String,
                     "How the per-query values combine: mean, median (torch.median: the lower "
                     "middle value), min or max.")
                   .def("mean")
                   .choices({"mean", "median", "min", "max"}));
  return ps;
}

inline std::vector<InputSpec> retrieval_inputs(bool graded) {
  return {InputSpec{kPreds,
                    "Scores of the documents, float32 or float64 [N] (or [N, ...], flattened); "
                    "no NaN.",
                    true},
          InputSpec{kTarget,
                    graded ? "Relevance of each document, the shape of preds: bool, integer or "
                             "float, finite and >= 0 (graded: 0, 1, 2, 3, ...)."
                           : "Relevance of each document, the shape of preds: bool, integer or "
                             "float holding 0 or 1.",
                    true},
          InputSpec{kIndexes,
                    "Query id of each document (integer, the shape of preds): a query's "
                    "documents may be anywhere in the data, on any rank.",
                    true}};
}

// ---- the metric base
// -----------------------------------------------------------------------------

/// A retrieval metric: reads and checks the batches into State<T> and, at compute(), groups the
/// samples by query as torchmetrics does and aggregates query_value() over the queries.
template <class T>
class RetrievalMetric : public TypedMetric<State<T>> {
 public:
  RetrievalMetric(const Params& p, const Identity& id)
      : check_(p.owner_or(id.name)),
        key_(id.key),
        opt_(read_options(p, id.top_k)),
        graded_(id.graded) {}

 protected:
  /// Per-query scratch buffers, reused across queries.
  struct Scratch {
    std::vector<Scored> ranked;
    std::vector<double> values, cumulated, targets;
  };

  /// The query's value (torchmetrics' functional on the query's documents, in the order the
  /// grouping left them). Called only for queries that are not empty().
  virtual double query_value(const double* p, const T* t, std::size_t m, Scratch& s) const = 0;
  /// Whether a query falls under empty_target_action: torchmetrics' `not target.sum()` (no
  /// relevant document); RetrievalFallOut overrides it (no non-relevant document).
  virtual bool empty(const T* t, std::size_t m) const {
    for (std::size_t i = 0; i < m; ++i)
      if (t[i] != T(0)) return false;
    return true;
  }
  virtual const char* empty_words() const { return "no relevant document (target all 0)"; }

  /// top_k, or every document: torchmetrics' `top_k or preds.shape[-1]`.
  std::size_t k_or_all(std::size_t m) const {
    return opt_.top_k ? static_cast<std::size_t>(*opt_.top_k) : m;
  }

  void update(State<T>& s, const Batch& b) override {
    if (b.fields().empty() || b.size() == 0) return;
    const Tensor& p = check_.tensor(b, kPreds);
    const Tensor& t = check_.tensor(b, kTarget);
    const Tensor& q = check_.tensor(b, kIndexes);
    if (!is_floating(p.dtype()))
      check_.fail(kPreds, "must hold float32 or float64 scores, got " + p.describe());
    if (p.dim() < 1)
      check_.fail(kPreds, "must be [N] or [N, ...] (one score per document), got " + p.describe());
    if (!is_integral(q.dtype()))
      check_.fail(kIndexes, "must hold integer query ids, got " + q.describe());
    for (const auto& [field, x] : {std::pair{kTarget, &t}, std::pair{kIndexes, &q}})
      if (x->shape() != p.shape())
        check_.fail(field, "has shape " + x->describe() + ", 'preds' " + p.describe() +
                               ": preds, target and indexes must have the same shape");
    const std::int64_t n = p.numel();
    const std::int64_t cols = p.size(0) > 0 ? n / p.size(0) : 1;
    const auto sample = [&](std::int64_t i) {
      return "sample " + std::to_string(s.seen + i / cols) + ": ";
    };
    scores_.resize(static_cast<std::size_t>(n));
    visit_floating(p, [&](const auto* v) {
      for (std::int64_t i = 0; i < n; ++i) scores_[static_cast<std::size_t>(i)] = v[i];
    });
    for (std::int64_t i = 0; i < n; ++i)
      if (std::isnan(scores_[static_cast<std::size_t>(i)])) check_.fail(kPreds, sample(i) + "NaN");
    ids_.resize(static_cast<std::size_t>(n));
    visit_integral(q, [&](const auto* v) {
      for (std::int64_t i = 0; i < n; ++i)
        ids_[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(v[i]);
    });
    relevance_.resize(static_cast<std::size_t>(n));
    keep_.assign(static_cast<std::size_t>(n), 1);
    const bool ignoring = opt_.ignore_index.has_value();
    const std::int64_t ignored = ignoring ? *opt_.ignore_index : 0;
    if (t.dtype() == DType::Bool) {
      const auto* v = t.data_as<bool>();
      for (std::int64_t i = 0; i < n; ++i) {
        relevance_[static_cast<std::size_t>(i)] = v[i] ? 1.0 : 0.0;
        if (ignoring && (v[i] ? 1 : 0) == ignored) keep_[static_cast<std::size_t>(i)] = 0;
      }
    } else if (is_floating(t.dtype())) {
      // As torch compares a float target with the integer ignore_index: as floats.
      visit_floating(t, [&](const auto* v) {
        for (std::int64_t i = 0; i < n; ++i) {
          relevance_[static_cast<std::size_t>(i)] = static_cast<double>(v[i]);
          if (ignoring && static_cast<double>(v[i]) == static_cast<double>(ignored))
            keep_[static_cast<std::size_t>(i)] = 0;
        }
      });
    } else {
      visit_integral(t, [&](const auto* v) {
        for (std::int64_t i = 0; i < n; ++i) {
          relevance_[static_cast<std::size_t>(i)] = static_cast<double>(v[i]);
          if (ignoring && static_cast<std::int64_t>(v[i]) == ignored)
            keep_[static_cast<std::size_t>(i)] = 0;
        }
      });
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const auto at = static_cast<std::size_t>(i);
      if (keep_[at] == 0) continue;
      const double r = relevance_[at];
      if (graded_) {
        if (!std::isfinite(r) || r < 0)
          check_.fail(kTarget, sample(i) + "relevance " + fmt_number(r) +
                                   " must be finite and >= 0 (graded relevance, as "
                                   "scikit-learn's ndcg_score requires)");
      } else if (r != 0.0 && r != 1.0) {
        check_.fail(kTarget, sample(i) + "relevance " + fmt_number(r) +
                                 " is not binary (0 or 1); graded relevance is for "
                                 "RetrievalNormalizedDCG");
      }
      s.indexes.push_back(ids_[at]);
      s.preds.push_back(scores_[at]);
      s.target.push_back(static_cast<T>(r));
    }
    s.seen += p.size(0);
  }

  void check_rank(const State<T>& s, std::size_t) const override {
    if (s.indexes.size() != s.preds.size() || s.preds.size() != s.target.size())
      throw RuntimeError("its indexes, preds and target have different lengths");
  }

  Value compute(const State<T>& s) const override {
    const std::size_t n = s.indexes.size();
    if (s.preds.size() != n || s.target.size() != n)
      check_.fail_runtime(std::string("the state is corrupt (fields of different lengths)"));
    // Checked again here: a state restored or gathered carries what update() would refuse, and
    // a NaN would break the sorts' ordering.
    for (std::size_t i = 0; i < n; ++i) {
      const double r = static_cast<double>(s.target[i]);
      if (std::isnan(s.preds[i]) || !std::isfinite(r) || r < 0 || (!graded_ && r > 1))
        check_.fail_runtime(std::string("the state is corrupt (sample ") + std::to_string(i) + ")");
    }
    if (n == 0)
      check_.fail(opt_.ignore_index ? "no samples (after dropping target == ignore_index)"
                                    : "no samples");
    // Ids already in order from kRadixFrom samples on (the usual case: a run file lists a
    // query's documents together): the stable sort leaves the samples where they are, and each
    // query is read in place.
    const bool in_place = n >= kRadixFrom && std::is_sorted(s.indexes.begin(), s.indexes.end());
    const std::vector<std::int64_t> order =
        in_place ? std::vector<std::int64_t>{} : query_order(s.indexes);
    const auto at = [&](std::size_t i) {
      return in_place ? i : static_cast<std::size_t>(order[i]);
    };
    std::vector<double> values;
    std::vector<double> qp;
    std::vector<T> qt;
    Scratch scratch;
    for (std::size_t a = 0; a < n;) {
      const std::int64_t id = s.indexes[at(a)];
      std::size_t b = a + 1;
      while (b < n && s.indexes[at(b)] == id) ++b;
      const std::size_t m = b - a;
      const double* pp = s.preds.data() + a;
      const T* tp = s.target.data() + a;
      if (!in_place) {
        qp.resize(m);
        qt.resize(m);
        for (std::size_t j = 0; j < m; ++j) {
          qp[j] = s.preds[at(a + j)];
          qt[j] = s.target[at(a + j)];
        }
        pp = qp.data();
        tp = qt.data();
      }
      if (empty(tp, m)) {
        switch (opt_.empty) {
          case EmptyAction::Error:
            check_.fail(kTarget, "query " + std::to_string(id) + " has " + empty_words() +
                                     " and empty_target_action is 'error'");
          case EmptyAction::Pos:
            values.push_back(1.0);
            break;
          case EmptyAction::Neg:
            values.push_back(0.0);
            break;
          case EmptyAction::Skip:
            break;
        }
      } else {
        values.push_back(query_value(pp, tp, m, scratch));
      }
      a = b;
    }
    Value out = Value::map();
    out.set(key_, aggregate(values));
    return out;
  }

  /// torchmetrics' _retrieval_aggregate; 0 when every query was skipped.
  double aggregate(std::vector<double>& v) const {
    if (v.empty()) return 0.0;
    switch (opt_.aggregation) {
      case Aggregation::Median: {  // torch.median: the lower of the two middle values
        const auto mid = v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2);
        std::nth_element(v.begin(), mid, v.end());
        return *mid;
      }
      case Aggregation::Min:
        return *std::min_element(v.begin(), v.end());
      case Aggregation::Max:
        return *std::max_element(v.begin(), v.end());
      case Aggregation::Mean:
        break;
    }
    // Neumaier's compensated sum, in query order: deterministic, and about as accurate as the
    // reference's float64 sum.
    double sum = 0.0, c = 0.0;
    for (const double x : v) {
      const double t = sum + x;
      c += std::abs(sum) >= std::abs(x) ? (sum - t) + x : (x - t) + sum;
      sum = t;
    }
    return (sum + c) / static_cast<double>(v.size());
  }

  static std::string fmt_number(double x) {
    if (std::isnan(x)) return "NaN";
    if (x == std::floor(x) && std::abs(x) < 1e15)
      return std::to_string(static_cast<std::int64_t>(x));
    return std::to_string(x);
  }

  InputChecker check_;
  std::string key_;
  Options opt_;
  bool graded_;

 private:
  std::vector<double> scores_, relevance_;
  std::vector<std::int64_t> ids_;
  std::vector<unsigned char> keep_;
};

/// The component of retrieval metric M (M::kIdentity): its doc (ending with the reference), the
/// common parameters with M's own (`extra`, after top_k), the inputs, aliases and its result key.
template <class M>
ComponentInfo retrieval_component(const std::string& doc, std::vector<std::string> aliases = {},
                                  std::vector<ParamSpec> extra = {}) {
  constexpr const Identity& id = M::kIdentity;
  auto params = common_params(id);
  params.insert(params.begin() + (id.top_k ? 1 : 0), extra.begin(), extra.end());
  return metric<M>(id.name, doc, std::move(params), retrieval_inputs(id.graded), std::move(aliases),
                   {{id.key, id.better, Plot::None, id.key_doc}});
}

}  // namespace tally::retrieval
