// Pieces the clustering metrics share:
//  - PairCounts, the contingency state of the nine extrinsic metrics: a sparse table of
//    (target label, pred label) -> int64 count, merged across ranks by adding counts (exact and
//    order-free; its size grows with the distinct label pairs, not with the samples);
//  - Contingency, the table of one compute() in scikit-learn's layout (classes and clusters in
//    ascending label order, non-zero cells row-major: the order of scipy.sparse.find), and the
//    quantities scikit-learn 1.7.2 derives from it (sklearn/metrics/cluster/_supervised.py):
//    entropy, mutual_info_score, the pair confusion matrix, _generalized_average and
//    expected_mutual_information (_expected_mutual_info_fast.pyx), each with scikit-learn's
//    operations in scikit-learn's order (NumPy's pairwise sums: tally/sdk/numpy_math.hpp);
//  - ContingencyMetric, the base of the extrinsic metrics (update reads preds/target into the
//    table), and PointsMetric, the base of DaviesBouldinScore and DunnIndex (which need every
//    point: the distances to a cluster's centroid need the centroid first);
//  - the component infos plugin.cpp registers.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/numpy_math.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"

namespace tally::clustering {

/// 128-bit integers (a GCC and Clang extension): exact sums of squared counts and their
/// products.
__extension__ using int128 = __int128;

inline constexpr const char* kPreds = "preds";
inline constexpr const char* kTarget = "target";
inline constexpr const char* kData = "data";
inline constexpr const char* kLabels = "labels";

// ---- the contingency state ----------------------------------------------------------------------

/// (target, pred) -> count in an open-addressing hash table (linear probing, a count of 0 marks
/// an empty slot). Packs as one msgpack bin of (target, pred, count) int64 triples sorted by
/// (target, pred): one canonical byte string per table, whatever the order of the samples.
class PairCounts {
 public:
  struct Cell {
    std::int64_t target, pred, count;
  };

  std::size_t size() const noexcept { return used_; }
  bool empty() const noexcept { return used_ == 0; }

  /// Adds `count` (> 0) samples to cell (target, pred). RuntimeError if the cell overflows.
  void add(std::int64_t target, std::int64_t pred, std::int64_t count = 1) {
    if (2 * (used_ + 1) > cap_) grow();
    std::size_t at = slot(target, pred);
    while (count_[at] != 0) {
      if (target_[at] == target && pred_[at] == pred) {
        if (__builtin_add_overflow(count_[at], count, &count_[at]))
          throw RuntimeError("clustering: a contingency count overflows int64");
        return;
      }
      at = (at + 1) & (cap_ - 1);
    }
    target_[at] = target, pred_[at] = pred, count_[at] = count;
    ++used_;
  }

  /// Adds a later rank's counts.
  void merge(const PairCounts& later) {
    for (std::size_t i = 0; i < later.cap_; ++i)
      if (later.count_[i] != 0) add(later.target_[i], later.pred_[i], later.count_[i]);
  }

  /// The non-empty cells sorted by (target, pred).
  std::vector<Cell> sorted() const {
    std::vector<Cell> cells;
    cells.reserve(used_);
    for (std::size_t i = 0; i < cap_; ++i)
      if (count_[i] != 0) cells.push_back({target_[i], pred_[i], count_[i]});
    std::sort(cells.begin(), cells.end(), [](const Cell& x, const Cell& y) {
      return x.target != y.target ? x.target < y.target : x.pred < y.pred;
    });
    return cells;
  }

  void tally_pack(StateWriter& out) const {
    PackedVector<std::int64_t> flat;
    flat.reserve(3 * used_);
    for (const Cell& c : sorted()) flat.insert(flat.end(), {c.target, c.pred, c.count});
    internal::write(out, flat);
  }

  /// Reads what tally_pack wrote; StateFormatError for anything else (cells out of order or
  /// repeated, a count <= 0: a corrupt state).
  void tally_unpack(StateReader& in) {
    PackedVector<std::int64_t> flat;
    internal::read(in, flat);
    if (flat.size() % 3 != 0) StateReader::fail("pair counts not in triples");
    PairCounts t;
    for (std::size_t i = 0; i < flat.size(); i += 3) {
      if (flat[i + 2] <= 0) StateReader::fail("a pair count is not positive");
      if (i > 0 &&
          (flat[i - 3] > flat[i] || (flat[i - 3] == flat[i] && flat[i - 2] >= flat[i + 1])))
        StateReader::fail("pair counts out of order or repeated");
      t.add(flat[i], flat[i + 1], flat[i + 2]);
    }
    *this = std::move(t);
  }

 private:
  static constexpr std::uint64_t kMulT = 0x9E3779B97F4A7C15ull, kMulP = 0xC2B2AE3D27D4EB4Full;

  std::size_t slot(std::int64_t t, std::int64_t p) const {
    // Multiplicative hashing: the high bits of the products mix every bit of both labels.
    const std::uint64_t h =
        static_cast<std::uint64_t>(t) * kMulT ^ (static_cast<std::uint64_t>(p) * kMulP);
    return static_cast<std::size_t>((h ^ (h >> 31)) * kMulT >> shift_);
  }

  void grow() {
    std::vector<std::int64_t> t = std::move(target_), p = std::move(pred_), c = std::move(count_);
    const std::size_t old = cap_;
    cap_ = cap_ == 0 ? 64 : 2 * cap_;
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(cap_));
    target_.assign(cap_, 0), pred_.assign(cap_, 0), count_.assign(cap_, 0);
    used_ = 0;
    for (std::size_t i = 0; i < old; ++i)
      if (c[i] != 0) {
        std::size_t at = slot(t[i], p[i]);
        while (count_[at] != 0) at = (at + 1) & (cap_ - 1);
        target_[at] = t[i], pred_[at] = p[i], count_[at] = c[i];
        ++used_;
      }
  }

  std::vector<std::int64_t> target_, pred_, count_;
  std::size_t cap_ = 0, used_ = 0;
  unsigned shift_ = 64;
};

/// The state of the extrinsic metrics.
struct PairState {
  PairCounts cells;
  TALLY_STATE(merge(cells))
};

// ---- the contingency table of one compute() --------------------------------------------------

/// scikit-learn's contingency_matrix(labels_true=target, labels_pred=preds, sparse=True): rows
/// are the classes (target labels, ascending), columns the clusters (pred labels, ascending).
struct Contingency {
  std::int64_t n = 0;
  std::vector<std::int64_t> row_sums, col_sums;  // a_i (class sizes), b_j (cluster sizes)
  std::vector<std::int64_t> row, col, count;     // the non-zero cells, row-major
  std::size_t rows() const { return row_sums.size(); }
  std::size_t cols() const { return col_sums.size(); }
};

/// The table of a merged state. InputError "no samples" for an empty one; RuntimeError when the
/// counts sum to 2^62 or more (a corrupt state: no dataset is that large).
inline Contingency make_contingency(const PairCounts& cells, const InputChecker& check) {
  if (cells.empty()) check.fail("no samples");
  const std::vector<PairCounts::Cell> sorted = cells.sorted();
  Contingency c;
  std::vector<std::int64_t> preds;
  preds.reserve(sorted.size());
  for (const auto& cell : sorted) preds.push_back(cell.pred);
  std::sort(preds.begin(), preds.end());
  preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
  c.col_sums.assign(preds.size(), 0);
  c.row.reserve(sorted.size()), c.col.reserve(sorted.size()), c.count.reserve(sorted.size());
  for (std::size_t k = 0; k < sorted.size(); ++k) {
    if (k == 0 || sorted[k].target != sorted[k - 1].target) c.row_sums.push_back(0);
    const auto j = static_cast<std::int64_t>(
        std::lower_bound(preds.begin(), preds.end(), sorted[k].pred) - preds.begin());
    const std::int64_t x = sorted[k].count;
    c.row.push_back(static_cast<std::int64_t>(c.row_sums.size()) - 1);
    c.col.push_back(j);
    c.count.push_back(x);
    if (__builtin_add_overflow(c.n, x, &c.n) || c.n >= (std::int64_t{1} << 62))
      check.fail_runtime(std::string("the state is corrupt: its counts sum to 2^62 or more"));
    c.row_sums.back() += x;
    c.col_sums[static_cast<std::size_t>(j)] += x;
  }
  return c;
}

/// scikit-learn's entropy(labels) from the label counts (ascending label order): 0 for one
/// label, else -sum((pi / pi_sum) * (log(pi) - log(pi_sum))), NumPy's pairwise sum.
inline double entropy(const std::vector<std::int64_t>& counts) {
  if (counts.size() == 1) return 0.0;
  std::vector<double> pi(counts.begin(), counts.end());
  const double pi_sum = numpy::sum(pi.data(), pi.size());
  const double log_sum = std::log(pi_sum);
  std::vector<double> terms(pi.size());
  for (std::size_t i = 0; i < pi.size(); ++i)
    terms[i] = (pi[i] / pi_sum) * (std::log(pi[i]) - log_sum);
  return -numpy::sum(terms.data(), terms.size());
}

/// scikit-learn's mutual_info_score (natural log): 0 for one class or one cluster; else per
/// non-zero cell nm = n_ij / N, nm * (log n_ij - log N) + nm * (-log(a_i b_j) + log N + log N),
/// terms under float64 eps set to 0, their pairwise sum clipped at 0.
inline double mutual_info(const Contingency& c) {
  if (c.rows() == 1 || c.cols() == 1) return 0.0;
  const auto n = static_cast<double>(c.n);
  const double log_n = std::log(n);
  std::vector<double> mi(c.count.size());
  for (std::size_t k = 0; k < mi.size(); ++k) {
    const auto nz = static_cast<double>(c.count[k]);
    const double nm = nz / n;
    // outer = pi * pj as int64, cast to float64 by np.log (exact below 2^53, rounded above).
    const auto outer =
        static_cast<double>(static_cast<int128>(c.row_sums[static_cast<std::size_t>(c.row[k])]) *
                            c.col_sums[static_cast<std::size_t>(c.col[k])]);
    const double log_outer = -std::log(outer) + log_n + log_n;
    const double v = nm * (std::log(nz) - log_n) + nm * log_outer;
    mi[k] = std::abs(v) < std::numeric_limits<double>::epsilon() ? 0.0 : v;
  }
  return std::max(numpy::sum(mi.data(), mi.size()), 0.0);
}

/// scikit-learn's homogeneity: MI / H(target), 1 when H(target) = 0.
inline double homogeneity(const Contingency& c) {
  const double h = entropy(c.row_sums);
  return h != 0.0 ? mutual_info(c) / h : 1.0;
}

/// scikit-learn's completeness: MI / H(preds), 1 when H(preds) = 0.
inline double completeness(const Contingency& c) {
  const double h = entropy(c.col_sums);
  return h != 0.0 ? mutual_info(c) / h : 1.0;
}

/// scikit-learn's _generalized_average(U, V, average_method).
inline double generalized_average(double u, double v, const std::string& method) {
  if (method == "min") return std::min(u, v);
  if (method == "max") return std::max(u, v);
  if (method == "geometric") return std::sqrt(u * v);
  return (u + v) / 2.0;  // np.mean([U, V]): (-0.0 + U + V) + 0, / 2
}

/// scikit-learn's pair_confusion_matrix C (tn = C00, fp = C01, fn = C10, tp = C11), in exact
/// 128-bit integers (scikit-learn's int64 would overflow above about 3e9 samples).
struct PairConfusion {
  int128 tn = 0, fp = 0, fn = 0, tp = 0;
};

inline PairConfusion pair_confusion(const Contingency& c) {
  int128 squares = 0, by_cols = 0, by_rows = 0;
  for (std::size_t k = 0; k < c.count.size(); ++k) {
    const int128 x = c.count[k];
    squares += x * x;
    by_cols += x * c.col_sums[static_cast<std::size_t>(c.col[k])];
    by_rows += x * c.row_sums[static_cast<std::size_t>(c.row[k])];
  }
  const int128 n = c.n;
  PairConfusion p;
  p.tp = squares - n;
  p.fp = by_cols - squares;
  p.fn = by_rows - squares;
  p.tn = n * n - p.fp - p.fn - squares;
  return p;
}

/// SciPy's gammaln(x) for x >= 1 (scipy.special.gammaln: the Cephes library's lgam, as SciPy
/// 1.16's xsf translates it), operation for operation: scikit-learn's expected mutual
/// information takes its constant terms from it, and libm's lgamma differs from it in the last
/// bit for about half of the integers. Checked bit for bit against SciPy 1.16.3 on the integers
/// 1..3000 and 20000 random integers up to 10^9.
inline double scipy_gammaln(double x) {
  static constexpr double kA[] = {8.11614167470508450300E-4, -5.95061904284301438324E-4,
                                  7.93650340457716943945E-4, -2.77777777730099687205E-3,
                                  8.33333333333331927722E-2};
  static constexpr double kB[] = {-1.37825152569120859100E3, -3.88016315134637840924E4,
                                  -3.31612992738871184744E5, -1.16237097492762307383E6,
                                  -1.72173700820839662146E6, -8.53555664245765465627E5};
  static constexpr double kC[] = {-3.51815701436523470549E2, -1.70642106651881159223E4,
                                  -2.20528590553854454839E5, -1.13933444367982507207E6,
                                  -2.53252307177582951285E6, -2.01889141433532773231E6};
  constexpr double kLogSqrt2Pi = 0.91893853320467274178;
  if (x < 13.0) {
    double z = 1.0, p = 0.0, u = x;
    while (u >= 3.0) {
      p -= 1.0;
      u = x + p;
      z *= u;
    }
    while (u < 2.0) {
      z /= u;
      p += 1.0;
      u = x + p;
    }
    if (u == 2.0) return std::log(z);
    p -= 2.0;
    x = x + p;
    double num = kB[0], den = x + kC[0];
    for (int i = 1; i < 6; ++i) num = num * x + kB[i], den = den * x + kC[i];
    return std::log(z) + x * num / den;
  }
  double q = (x - 0.5) * std::log(x) - x + kLogSqrt2Pi;
  if (x > 1.0e8) return q;
  const double p = 1.0 / (x * x);
  if (x >= 1000.0) {
    q += ((7.9365079365079365079365e-4 * p - 2.7777777777777777777778e-3) * p +
          0.0833333333333333333333) /
         x;
  } else {
    double a = kA[0];
    for (int i = 1; i < 5; ++i) a = a * p + kA[i];
    q += a / x;
  }
  return q;
}

/// The most contingency cells expected_mutual_info visits one by one (scikit-learn's loop); the
/// tests pass a smaller bound to check the other path.
inline constexpr double kMaxEmiCells = 16777216.0;  // 2^24

/// scikit-learn's expected_mutual_information(contingency, n_samples), the expected mutual
/// information of two random labelings with these class and cluster sizes:
///   EMI = sum_ij sum_{nij = max(1, a_i + b_j - N)}^{min(a_i, b_j)}
///         nij / N * log(N nij / (a_i b_j)) * exp(gln(nij)),
///   gln = lgamma(a+1) + lgamma(b+1) + lgamma(N-a+1) + lgamma(N-b+1) - lgamma(nij+1) - lgamma(N+1)
///         - lgamma(a-nij+1) - lgamma(b-nij+1) - lgamma(N-a-b+nij+1)   (a hypergeometric pmf),
/// every term computed with scikit-learn's operations in its order, and the terms added in
/// increasing nij as its loop adds them. Faster than the loop over every nij: exp(gln) is the
/// pmf of a hypergeometric distribution, which is log-concave in nij, so the terms whose exp(gln)
/// underflows to exactly 0 (contributing exactly +-0 to the sum) form the two tails of the range;
/// each cell walks out from the mode until exp(gln) is 0 on both sides and skips the tails. The
/// sum is then the one scikit-learn's full loop makes, term for term (with SciPy's gammaln for the
/// constants (scipy_gammaln) and libm's lgamma in the loop, as there.)
inline double expected_mutual_info(const Contingency& c, double max_cells = kMaxEmiCells) {
  if (c.rows() == 1 || c.cols() == 1) return 0.0;
  const std::int64_t n = c.n;
  const auto nd = static_cast<double>(n);
  const double log_n = std::log(nd);
  const double gln_n1 = scipy_gammaln(nd + 1.0);
  const std::size_t rows = c.rows(), cols = c.cols();
  std::vector<double> log_a(rows), gln_a(rows), gln_na(rows), log_b(cols), gln_b(cols),
      gln_nb(cols);
  for (std::size_t i = 0; i < rows; ++i) {
    const auto a = static_cast<double>(c.row_sums[i]);
    log_a[i] = std::log(a);
    gln_a[i] = scipy_gammaln(a + 1.0);
    gln_na[i] = scipy_gammaln(static_cast<double>(n - c.row_sums[i]) + 1.0);
  }
  for (std::size_t j = 0; j < cols; ++j) {
    const auto b = static_cast<double>(c.col_sums[j]);
    log_b[j] = std::log(b);
    gln_b[j] = scipy_gammaln(b + 1.0);
    gln_nb[j] = scipy_gammaln(static_cast<double>(n - c.col_sums[j]) + 1.0);
  }
  // Per nij: term1 = nij / N, log(N) + log(nij), lgamma(nij + 1) + lgamma(N + 1); cached for the
  // nij values up to a bound (they repeat across cells), computed on the fly above it.
  const std::int64_t max_ab = std::max(*std::max_element(c.row_sums.begin(), c.row_sums.end()),
                                       *std::max_element(c.col_sums.begin(), c.col_sums.end()));
  const auto cached = static_cast<std::size_t>(std::min<std::int64_t>(max_ab, 1 << 22) + 1);
  std::vector<double> memo_log(cached, std::numeric_limits<double>::quiet_NaN()), memo_gln(cached);
  const auto per_nij = [&](std::int64_t k, double& log_nnij, double& gln_nnij) {
    const auto at = static_cast<std::size_t>(k);
    if (at < cached && !std::isnan(memo_log[at])) {
      log_nnij = memo_log[at], gln_nnij = memo_gln[at];
      return;
    }
    const auto kd = static_cast<double>(k);
    log_nnij = log_n + std::log(kd);
    gln_nnij = scipy_gammaln(kd + 1.0) + gln_n1;
    if (at < cached) memo_log[at] = log_nnij, memo_gln[at] = gln_nnij;
  };
  std::vector<double> below;  // the terms below the mode, in decreasing nij
  std::vector<double> above;  // the mode and the terms above it, in increasing nij
  // Adds the terms of the cell (class i of size a, cluster j of size b) to `emi`, in increasing
  // nij (they depend on a and b only).
  const auto add_cell = [&](std::size_t i, std::size_t j, double& emi) {
    const std::int64_t a = c.row_sums[i], b = c.col_sums[j];
    const std::int64_t start = std::max<std::int64_t>(1, a - n + b);
    const std::int64_t end = std::min(a, b) + 1;
    if (start >= end) return;
    const double head = gln_a[i] + gln_b[j] + gln_na[i] + gln_nb[j];
    // term1 * term2 * term3, and whether term3 = exp(gln) is non-zero.
    const auto term = [&](std::int64_t k, bool& nonzero) {
      double log_nnij = 0, gln_nnij = 0;
      per_nij(k, log_nnij, gln_nnij);
      const double term2 = log_nnij - log_a[i] - log_b[j];
      const double gln = head - gln_nnij - std::lgamma(static_cast<double>(a - k) + 1.0) -
                         std::lgamma(static_cast<double>(b - k) + 1.0) -
                         std::lgamma(static_cast<double>(n - a - b + k) + 1.0);
      const double term3 = std::exp(gln);
      nonzero = term3 != 0.0;
      return static_cast<double>(k) / nd * term2 * term3;
    };
    // The mode of the hypergeometric pmf, floor((a + 1)(b + 1) / (N + 2)), in the range.
    const auto mode_wide = (static_cast<int128>(a) + 1) * (static_cast<int128>(b) + 1) / (n + 2);
    const std::int64_t mode = std::clamp(static_cast<std::int64_t>(mode_wide), start, end - 1);
    below.clear(), above.clear();
    bool nonzero = true;
    for (std::int64_t k = mode; k < end && nonzero;) above.push_back(term(k++, nonzero));
    nonzero = true;
    for (std::int64_t k = mode - 1; k >= start && nonzero;) below.push_back(term(k--, nonzero));
    for (auto it = below.rbegin(); it != below.rend(); ++it) emi += *it;
    for (const double t : above) emi += t;
  };
  double emi = 0.0;
  if (static_cast<double>(rows) * static_cast<double>(cols) <= max_cells) {
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) add_cell(i, j, emi);
    return emi;
  }
  // More cells than that (many tiny clusters: N singletons make N^2 cells): the cells of equal
  // sizes (a, b) have equal terms, so each distinct pair of sizes is summed once and weighted by
  // its number of cells. The same value up to rounding; the last bits differ from the loop's.
  const auto distinct = [](const std::vector<std::int64_t>& sizes) {
    std::vector<std::pair<std::int64_t, std::size_t>> first;  // (size, an index), ascending
    for (std::size_t i = 0; i < sizes.size(); ++i) first.emplace_back(sizes[i], i);
    std::sort(first.begin(), first.end());
    std::vector<std::pair<std::size_t, double>> out;  // (an index of the size, how many)
    for (std::size_t k = 0; k < first.size(); ++k) {
      if (k > 0 && first[k].first == first[k - 1].first) {
        out.back().second += 1.0;
        continue;
      }
      out.emplace_back(first[k].second, 1.0);
    }
    return out;
  };
  for (const auto& [i, rows_of_size] : distinct(c.row_sums))
    for (const auto& [j, cols_of_size] : distinct(c.col_sums)) {
      double cell = 0.0;
      add_cell(i, j, cell);
      emi += rows_of_size * cols_of_size * cell;
    }
  return emi;
}

// ---- reading the inputs -------------------------------------------------------------------------

/// The field `field` of `batch` as cluster labels: a 1-D [N] tensor of any integer dtype (any
/// values: they are names, not indices).
inline const Tensor& label_field(const InputChecker& check, const Batch& batch, const char* field) {
  const Tensor& t = check.tensor(batch, field);
  if (!is_integral(t.dtype()))
    check.fail(field, "must hold integer cluster labels, got " + t.describe() +
                          " (torchmetrics and scikit-learn expect discrete labels)");
  check.dims(t, field, 1, "[N]");
  return t;
}

/// Reads preds and target into the table.
inline void add_pairs(const InputChecker& check, const Batch& batch, PairCounts& cells) {
  if (batch.fields().empty() || batch.size() == 0) return;
  const Tensor& p = label_field(check, batch, kPreds);
  const Tensor& t = label_field(check, batch, kTarget);
  check.same_rows(p, kPreds, t, kTarget);
  const std::int64_t n = p.size(0);
  visit_integral(p, [&](const auto* pv) {
    visit_integral(t, [&](const auto* tv) {
      for (std::int64_t i = 0; i < n; ++i)
        cells.add(static_cast<std::int64_t>(tv[i]), static_cast<std::int64_t>(pv[i]));
    });
  });
}

inline std::vector<InputSpec> pair_inputs() {
  return {InputSpec{kPreds, "Predicted cluster labels [N], any integer dtype and values.", true},
          InputSpec{kTarget, "True class labels [N], any integer dtype and values.", true}};
}

inline ParamSpec average_method_param() {
  return param("average_method", ParamType::String,
               "How the two entropies H(target), H(preds) combine into the normalizer "
               "(scikit-learn's and torchmetrics' average_method): arithmetic (their mean), "
               "geometric, min or max.")
      .def("arithmetic")
      .choices({"arithmetic", "geometric", "min", "max"});
}

/// The base of the extrinsic metrics: the contingency state, filled from preds and target.
/// score() gets the table of the merged state.
class ContingencyMetric : public TypedMetric<PairState> {
 public:
  ContingencyMetric(const Params& p, const char* type, std::string key)
      : check_(p.owner_or(type)), key_(std::move(key)) {}

 protected:
  void update(PairState& s, const Batch& batch) override { add_pairs(check_, batch, s.cells); }

  Value compute(const PairState& s) const override {
    Value out = Value::map();
    out.set(key_, score(make_contingency(s.cells, check_)));
    return out;
  }

  virtual double score(const Contingency& c) const = 0;

  InputChecker check_;
  std::string key_;
};

// ---- points (DaviesBouldinScore, DunnIndex) -----------------------------------------------------

/// Every point and its label, in dataset order: [n * dims] float64 and [n] int64, concatenated
/// across ranks in rank order; the number of dimensions shared by every rank with samples.
struct PointsState {
  PackedVector<double> data;
  PackedVector<std::int64_t> labels;
  std::int64_t dims = -1;  // -1 until the first non-empty batch
  TALLY_STATE(concat(data), concat(labels), agree(dims, -1))
};

inline std::vector<InputSpec> points_inputs() {
  return {InputSpec{kData, "The points [N, D], float32 or float64 (computed in float64).", true},
          InputSpec{kLabels, "Their cluster labels [N], any integer dtype and values.", true}};
}

/// Reads data and labels of one batch into `s`. InputError for a missing field, a bad shape or
/// dtype, a NaN or an infinity (scikit-learn's check_X_y rejects them), or D changing. Messages
/// number the samples from `first` (-1: the samples `s` holds already).
inline void add_points(const InputChecker& check, const Batch& batch, PointsState& s,
                       std::int64_t first = -1) {
  if (batch.fields().empty() || batch.size() == 0) return;
  const Tensor& x = check.tensor(batch, kData);
  if (!is_floating(x.dtype()))
    check.fail(kData, "must hold float32 or float64 points, got " + x.describe());
  check.dims(x, kData, 2, "[N, D]");
  const Tensor& y = label_field(check, batch, kLabels);
  check.same_rows(x, kData, y, kLabels);
  const std::int64_t n = x.size(0), d = x.size(1);
  if (d < 1) check.fail(kData, "has no dimensions (" + x.describe() + ")");
  if (s.dims >= 0 && s.dims != d)
    check.fail(kData, "has " + std::to_string(d) + " dimensions (" + x.describe() + ") but " +
                          std::to_string(s.dims) + " in earlier samples");
  if (first < 0) first = static_cast<std::int64_t>(s.labels.size());
  const std::size_t at = s.data.size();
  s.data.resize(at + static_cast<std::size_t>(n * d));
  visit_floating(x, [&](const auto* v) {
    for (std::int64_t k = 0; k < n * d; ++k) {
      const auto value = static_cast<double>(v[k]);
      if (!std::isfinite(value))
        check.fail(kData, "sample " + std::to_string(first + k / d) + ", dimension " +
                              std::to_string(k % d) + ": " +
                              (std::isnan(value) ? "NaN" : "infinity") +
                              " (scikit-learn rejects non-finite values)");
      s.data[at + static_cast<std::size_t>(k)] = value;
    }
  });
  visit_integral(y, [&](const auto* v) {
    for (std::int64_t i = 0; i < n; ++i) s.labels.push_back(static_cast<std::int64_t>(v[i]));
  });
  s.dims = d;
}

/// The points of a merged state grouped by cluster (labels ascending, points in dataset order).
struct Clusters {
  std::int64_t n = 0, dims = 0;
  std::vector<std::vector<std::size_t>> members;  // sample indices per cluster
};

/// Groups the points. InputError unless 1 < clusters < samples (scikit-learn's
/// check_number_of_labels; torchmetrics' _validate_intrinsic_labels_to_samples) when `strict`,
/// unless there are 2 clusters or more otherwise; RuntimeError for a corrupt state.
inline Clusters group_points(const PointsState& s, const InputChecker& check, bool strict) {
  if (s.dims == 0 || (s.dims < 0 && (!s.data.empty() || !s.labels.empty())) ||
      (s.dims > 0 && (s.dims > (std::int64_t{1} << 40) ||
                      s.data.size() != s.labels.size() * static_cast<std::size_t>(s.dims))))
    check.fail_runtime(std::string("the state is corrupt"));
  if (s.labels.empty()) check.fail("no samples");
  Clusters c;
  c.n = static_cast<std::int64_t>(s.labels.size());
  c.dims = s.dims;
  std::vector<std::int64_t> order(s.labels.begin(), s.labels.end());
  std::sort(order.begin(), order.end());
  order.erase(std::unique(order.begin(), order.end()), order.end());
  const auto k = static_cast<std::int64_t>(order.size());
  if (strict ? !(1 < k && k < c.n) : k < 2)
    check.fail(kLabels, "has " + std::to_string(k) + " distinct cluster label(s) in " +
                            std::to_string(c.n) + " samples; " +
                            (strict ? "it needs between 2 and n_samples - 1 (scikit-learn's and "
                                      "torchmetrics' check)"
                                    : "it needs at least 2 clusters"));
  c.members.resize(order.size());
  for (std::size_t i = 0; i < s.labels.size(); ++i) {
    const auto at = std::lower_bound(order.begin(), order.end(), s.labels[i]) - order.begin();
    c.members[static_cast<std::size_t>(at)].push_back(i);
  }
  return c;
}

/// The mean of a cluster's points per dimension as NumPy's mean(axis=0) computes it: the rows
/// added one after another (NumPy reduces a C-order array along axis 0 row by row), then divided
/// by the count.
inline std::vector<double> centroid(const PointsState& s, const std::vector<std::size_t>& members,
                                    std::int64_t dims) {
  const auto d = static_cast<std::size_t>(dims);
  std::vector<double> mean(d, 0.0);
  for (std::size_t r = 0; r < members.size(); ++r) {
    const double* x = s.data.data() + members[r] * d;
    for (std::size_t k = 0; k < d; ++k) mean[k] = r == 0 ? x[k] : mean[k] + x[k];
  }
  for (double& m : mean) m /= static_cast<double>(members.size());
  return mean;
}

}  // namespace tally::clustering
