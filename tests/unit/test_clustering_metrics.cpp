// The clustering plugin (plugins/clustering), loaded as the real libtally_clustering.so through
// the Registry: values against scikit-learn (DunnIndex: torchmetrics), independence from the
// number of ranks, the expected-mutual-information shortcut, the state sizes, and bad inputs.
//
// Expected values come from tests/reference/expected_clustering.json, written by
// tests/reference/clustering.py with scikit-learn 1.7.2 and torchmetrics 1.9.0 (the versions
// and, for each value, the exact call are recorded in the file), unless a test says otherwise.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../../plugins/clustering/common.hpp"
#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

const Json& expected_file() { return expected_json("tests/reference/expected_clustering.json"); }

// ---- values against the references, 1..7 ranks -----------------------------------------------

class ClusteringReference : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map in expected_clustering.json (the call for each key is in
// the case's "calls" map: scikit-learn 1.7.2, or torchmetrics 1.9.0 for DunnIndex).
TEST_P(ClusteringReference, MatchesTheReferenceOnAnyNumberOfRanks) {
  Json c = find_case(expected_file(), GetParam());
  // JSON has no infinity: the reference script writes DunnIndex's p = inf as "inf".
  if (c.at("params").contains("p") && c.at("params").at("p").is_string())
    c["params"]["p"] = std::numeric_limits<double>::infinity();
  const Batch data = load_inputs(c.at("inputs"));
  // The digits cases (600 and 1797 samples) in fewer, larger batches: the same splits across ranks,
  // a faster test under ASan.
  RankSweep sweep;
  if (data.size() > 500)
    sweep.batch_sizes = {std::int64_t{1} << 30, 97}, sweep.empty_rank_batch_size = 97;
  check_case(c, data, GetParam(), sweep);
  print_rel_diffs(c.at("metric") == "DunnIndex" ? "torchmetrics" : "scikit-learn");
}

INSTANTIATE_TEST_SUITE_P(Clustering, ClusteringReference,
                         ::testing::ValuesIn(case_names(expected_file())), param_name);

// Expected: section "example" of expected_clustering.json (scikit-learn and torchmetrics on the
// standardized wine data of configs/examples/data/clustering, made by
// tests/reference/clustering.py). The intrinsic metrics read their labels from the preds file,
// as the example config maps them (inputs: {labels: preds}).
TEST(ClusteringExample, MatchesTheReferences) {
  const Json& ex = expected_file().at("example");
  const Batch data = load_inputs(ex.at("inputs"));
  EXPECT_EQ(data.size(), ex.at("samples").get<std::int64_t>());
  for (const auto& m : ex.at("metrics")) {
    const std::string label = m.at("label").get<std::string>();
    const std::string type = m.at("metric").get<std::string>();
    std::vector<std::pair<std::string, std::string>> mapping;
    if (m.contains("inputs"))
      for (const auto& [input, field] : m.at("inputs").items())
        mapping.emplace_back(input, field.get<std::string>());
    Batch b = data;
    if (!mapping.empty()) {
      b = Batch{};
      b.set("data", data.tensor("data"));
      for (const auto& [input, field] : mapping) b.set(input, data.tensor(field));
    }
    RankSweep sweep;  // the reference cases sweep batch sizes 5 and 16 already
    sweep.batch_sizes = {std::int64_t{1} << 30, 16};
    const Value got = run_all_rank_counts(type, to_map(m.at("params")), b, label, sweep);
    expect_matches(got, ex.at("results").at(label), "example." + label, type);
  }
  print_rel_diffs("the references");
}

// ---- documented examples ------------------------------------------------------------------------

Batch pair_batch(const std::vector<std::int64_t>& target, const std::vector<std::int64_t>& preds) {
  Batch b;
  b.set("target", Tensor::from_vector(target));
  b.set("preds", Tensor::from_vector(preds));
  return b;
}

Batch points_batch(const std::vector<double>& data, std::int64_t dims,
                   const std::vector<std::int64_t>& labels) {
  Batch b;
  b.set("data", Tensor::from_vector(data, {static_cast<std::int64_t>(labels.size()), dims}));
  b.set("labels", Tensor::from_vector(labels));
  return b;
}

// Expected: scikit-learn 1.7.2 on target [0, 0, 0, 1, 1, 1], preds [0, 0, 1, 1, 2, 2] (the
// values of the `// Example:` lines, printed by sklearn.metrics.<function>(target, preds)), and
// torchmetrics' DunnIndex docstring (2.0).
TEST(Clustering, DocumentedExamples) {
  const Batch b = pair_batch({0, 0, 0, 1, 1, 1}, {0, 0, 1, 1, 2, 2});
  const std::vector<std::pair<std::string, double>> want = {
      {"AdjustedRandScore", 0.24242424242424243},
      {"RandScore", 0.6666666666666666},
      {"MutualInfoScore", 0.4620981203732969},
      {"NormalizedMutualInfoScore", 0.5158037429793889},
      {"AdjustedMutualInfoScore", 0.2987924581708901},
      {"HomogeneityScore", 0.6666666666666669},
      {"CompletenessScore", 0.420619835714305},
      {"VMeasureScore", 0.5158037429793889},
      {"FowlkesMallowsIndex", 0.4714045207910317}};
  for (const auto& [type, value] : want) {
    const Value got = run_all_rank_counts(type, {}, b);
    ASSERT_EQ(got.size(), 1u) << type;
    EXPECT_DOUBLE_EQ(got.as_map()[0].second.as_double(), value) << type;
  }
  const Batch p = points_batch({0, 0, 0.5, 0, 1, 0, 0.5, 1}, 2, {0, 0, 0, 1});
  EXPECT_EQ(run_all_rank_counts("DunnIndex", {}, p).at("dunn_index").as_double(), 2.0);
  EXPECT_DOUBLE_EQ(
      run_all_rank_counts("CalinskiHarabaszScore", {}, p).at("calinski_harabasz_score").as_double(),
      3.0);
  EXPECT_DOUBLE_EQ(
      run_all_rank_counts("DaviesBouldinScore", {}, p).at("davies_bouldin_score").as_double(),
      0.3333333333333333);
}

// The aliases answer too. Expected: the same values as the primary names.
TEST(Clustering, Aliases) {
  const Batch b = pair_batch({0, 0, 0, 1, 1, 1}, {0, 0, 1, 1, 2, 2});
  for (const auto& [alias, name] : std::vector<std::pair<std::string, std::string>>{
           {"AdjustedRandIndex", "AdjustedRandScore"},
           {"RandIndex", "RandScore"},
           {"VMeasure", "VMeasureScore"},
           {"FowlkesMallowsScore", "FowlkesMallowsIndex"}})
    EXPECT_TRUE(same_bits(run_single(alias, {}, b), run_single(name, {}, b))) << alias;
  for (const std::string name :
       {"AdjustedRandScore", "RandScore", "MutualInfoScore", "NormalizedMutualInfoScore",
        "AdjustedMutualInfoScore", "HomogeneityScore", "CompletenessScore", "VMeasureScore",
        "FowlkesMallowsIndex", "CalinskiHarabaszScore", "DaviesBouldinScore", "DunnIndex"}) {
    const Component* c = expect_documented(name, "clustering");
    if (c != nullptr) {
      EXPECT_NE(c->info->doc.find("Reference: "), std::string::npos) << name;
      EXPECT_EQ(c->info->doc.back(), '.') << name;
    }
  }
}

// ---- the expected mutual information ----------------------------------------------------------

/// scikit-learn's loop over every nij (_expected_mutual_info_fast.pyx), with the functions
/// clustering::expected_mutual_info uses: the reference for its tail skipping.
double full_loop_emi(const clustering::Contingency& c) {
  using clustering::scipy_gammaln;
  if (c.rows() == 1 || c.cols() == 1) return 0.0;
  const auto n = static_cast<double>(c.n);
  double emi = 0.0;
  for (const std::int64_t a : c.row_sums)
    for (const std::int64_t b : c.col_sums) {
      const std::int64_t start = std::max<std::int64_t>(1, a - c.n + b);
      const std::int64_t end = std::min(a, b) + 1;
      for (std::int64_t k = start; k < end; ++k) {
        const auto kd = static_cast<double>(k);
        const double term2 = (std::log(n) + std::log(kd)) - std::log(static_cast<double>(a)) -
                             std::log(static_cast<double>(b));
        const double gln = scipy_gammaln(static_cast<double>(a) + 1) +
                           scipy_gammaln(static_cast<double>(b) + 1) +
                           scipy_gammaln(static_cast<double>(c.n - a) + 1) +
                           scipy_gammaln(static_cast<double>(c.n - b) + 1) -
                           (scipy_gammaln(kd + 1) + scipy_gammaln(n + 1)) -
                           std::lgamma(static_cast<double>(a - k) + 1) -
                           std::lgamma(static_cast<double>(b - k) + 1) -
                           std::lgamma(static_cast<double>(c.n - a - b + k) + 1);
        emi += kd / n * term2 * std::exp(gln);
      }
    }
  return emi;
}

clustering::Contingency random_table(std::mt19937_64& rng, std::int64_t n, int classes,
                                     int clusters, double noise) {
  clustering::PairCounts cells;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto t = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(classes));
    const auto p = u(rng) < noise ? static_cast<std::int64_t>(rng() % clusters) : t % clusters;
    cells.add(t * 1000 - 7, p);
  }
  return clustering::make_contingency(cells, InputChecker("test"));
}

// Expected: the full loop over every nij (scikit-learn's), bit for bit: the terms skipped are
// exactly 0.
TEST(ExpectedMutualInfo, SkippingZeroTermsGivesTheFullLoopsBits) {
  std::mt19937_64 rng(11);
  for (const auto& [n, r, k, noise] :
       std::vector<std::tuple<std::int64_t, int, int, double>>{{200, 3, 4, 0.5},
                                                               {5000, 6, 8, 0.3},
                                                               {20000, 4, 5, 1.0},
                                                               {60000, 3, 2, 0.1},
                                                               {300, 30, 25, 0.9}}) {
    const auto c = random_table(rng, n, r, k, noise);
    const double fast = clustering::expected_mutual_info(c);
    const double full = full_loop_emi(c);
    EXPECT_EQ(std::bit_cast<std::uint64_t>(fast), std::bit_cast<std::uint64_t>(full))
        << n << " samples: " << fast << " vs " << full;
  }
}

// Expected: the full loop to 1e-13 relative: with more cells than the bound, cells of equal
// sizes are summed once and weighted (the last bits differ).
TEST(ExpectedMutualInfo, GroupedCellsGiveTheFullLoopsValue) {
  std::mt19937_64 rng(12);
  for (const auto& [n, r, k, noise] : std::vector<std::tuple<std::int64_t, int, int, double>>{
           {3000, 40, 35, 0.9}, {400, 200, 150, 1.0}}) {
    const auto c = random_table(rng, n, r, k, noise);
    const double grouped = clustering::expected_mutual_info(c, 10.0);
    const double full = full_loop_emi(c);
    EXPECT_NEAR(grouped, full, 1e-13 * std::abs(full)) << n << " samples";
  }
  // Every sample its own class and cluster: EMI = MI = H = log N (to the rounding of the sums
  // lgamma terms, about 1e-13 relative each).
  clustering::PairCounts cells;
  for (std::int64_t i = 0; i < 300; ++i) cells.add(i, 1000 - i);
  const auto c = clustering::make_contingency(cells, InputChecker("test"));
  const double grouped = clustering::expected_mutual_info(c, 10.0);
  EXPECT_NEAR(grouped, full_loop_emi(c), 1e-11 * grouped);  // 90000 terms added one by one
  EXPECT_NEAR(grouped, std::log(300.0), 1e-11);
}

// Expected: SciPy 1.16.3's scipy.special.gammaln at these points (printed with repr()).
TEST(ExpectedMutualInfo, GammalnIsScipys) {
  EXPECT_EQ(clustering::scipy_gammaln(1.0), 0.0);
  EXPECT_EQ(clustering::scipy_gammaln(2.0), 0.0);
  EXPECT_EQ(clustering::scipy_gammaln(8.0), 8.525161361065415);
  EXPECT_EQ(clustering::scipy_gammaln(151.0), 605.0201058494238);
  EXPECT_EQ(clustering::scipy_gammaln(1798.0), 11674.157296400237);
  EXPECT_EQ(clustering::scipy_gammaln(10000001.0), 151180965.48756957);
}

// ---- state sizes --------------------------------------------------------------------------------

// The contingency state grows with the distinct (target, pred) pairs, not the samples; the
// Calinski-Harabasz state with the clusters and dimensions, not the samples.
TEST(ClusteringState, DoesNotGrowWithTheSamples) {
  const Json& c = find_case(expected_file(), "AdjustedRandScore_digits_kmeans10");
  const Batch data = load_inputs(c.at("inputs"));
  std::size_t small = 0;
  for (std::int64_t n : {std::int64_t{300}, data.size()}) {
    const auto m = make_metric("AdjustedRandScore", {});
    m->add(data.slice(0, n));
    const msgpack::sbuffer buf = pack_state(*m);
    EXPECT_LT(buf.size(), 100u * 24u + 64u) << n;  // at most 100 cells of 3 int64
    if (n == 300) small = buf.size();
  }
  EXPECT_GT(small, 0u);
  const Json& p = find_case(expected_file(), "CalinskiHarabaszScore_iris_true");
  const Batch points = load_inputs(p.at("inputs"));
  std::vector<std::size_t> sizes;
  for (std::int64_t n : {std::int64_t{150}}) {
    const auto m = make_metric("CalinskiHarabaszScore", {});
    for (std::int64_t b = 0; b < n; b += 7) m->add(points.slice(b, std::min(n, b + 7)));
    sizes.push_back(pack_state(*m).size());
  }
  // 3 clusters, (4 + 1) accumulators of 67 int64 each, plus labels and counts.
  EXPECT_LT(sizes[0], 3u * 5u * 67u * 8u + 256u);
}

// ---- bad inputs ---------------------------------------------------------------------------------

const std::vector<std::string>& pair_types() {
  static const std::vector<std::string> t = {"AdjustedRandScore",       "RandScore",
                                             "MutualInfoScore",         "NormalizedMutualInfoScore",
                                             "AdjustedMutualInfoScore", "HomogeneityScore",
                                             "CompletenessScore",       "VMeasureScore",
                                             "FowlkesMallowsIndex"};
  return t;
}
const std::vector<std::string>& point_types() {
  static const std::vector<std::string> t = {"CalinskiHarabaszScore", "DaviesBouldinScore",
                                             "DunnIndex"};
  return t;
}

TEST(ClusteringErrors, LabelsOfTheWrongKind) {
  for (const auto& type : pair_types()) {
    const std::string owner = "metric '" + type + "': ";
    Batch f;
    f.set("target", Tensor::from_vector<std::int64_t>({0, 1}));
    f.set("preds", Tensor::from_vector<double>({0, 1}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(f); }),
               owner + "field 'preds' must hold integer cluster labels, got f64[2]");
    Batch d2;
    d2.set("target", Tensor::from_vector<std::int64_t>({0, 1}, {1, 2}));
    d2.set("preds", Tensor::from_vector<std::int64_t>({0, 1}, {1, 2}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(d2); }),
               owner + "field 'preds' must be 1-D [N], got i64[1, 2]");
    Batch missing;
    missing.set("preds", Tensor::from_vector<std::int64_t>({0, 1}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(missing); }),
               owner + "field 'target' is missing from the batch (it has: preds)");
    Batch boolean;
    boolean.set("target", Tensor::from_vector<bool>({true, false}));
    boolean.set("preds", Tensor::from_vector<std::int64_t>({0, 1}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(boolean); }),
               owner + "field 'target' must hold integer cluster labels, got bool[2]");
    Batch empty;
    EXPECT_HAS(error_of([&] { run_single(type, {}, empty); }), owner + "no samples");
  }
}

TEST(ClusteringErrors, MismatchedLengths) {
  // Two tensors of different lengths cannot share a Batch (Batch::set checks); InputChecker's
  // same_rows words the error for a metric that reads them anyway. Expected: Batch refuses.
  Batch b;
  b.set("target", Tensor::from_vector<std::int64_t>({0, 1, 1}));
  EXPECT_THROW(b.set("preds", Tensor::from_vector<std::int64_t>({0, 1})), Error);
}

TEST(ClusteringErrors, BadPoints) {
  for (const auto& type : point_types()) {
    const std::string owner = "metric '" + type + "': ";
    Batch ints;
    ints.set("data", Tensor::from_vector<std::int64_t>({0, 1, 2, 3}, {2, 2}));
    ints.set("labels", Tensor::from_vector<std::int64_t>({0, 1}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(ints); }),
               owner + "field 'data' must hold float32 or float64 points, got i64[2, 2]");
    Batch flat;
    flat.set("data", Tensor::from_vector<double>({0, 1}));
    flat.set("labels", Tensor::from_vector<std::int64_t>({0, 1}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(flat); }),
               owner + "field 'data' must be 2-D [N, D], got f64[2]");
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const Batch with_nan = points_batch({0, 1, nan, 3}, 2, {0, 1});
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(with_nan); }),
               owner + "field 'data' sample 1, dimension 0: NaN");
    const Batch with_inf =
        points_batch({0, 1, 2, std::numeric_limits<double>::infinity()}, 2, {0, 1});
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(with_inf); }),
               owner + "field 'data' sample 1, dimension 1: infinity");
    Batch float_labels;
    float_labels.set("data", Tensor::from_vector<double>({0, 1, 2, 3}, {2, 2}));
    float_labels.set("labels", Tensor::from_vector<float>({0, 1}));
    EXPECT_HAS(error_of([&] { make_metric(type, {})->add(float_labels); }),
               owner + "field 'labels' must hold integer cluster labels, got f32[2]");
    // The number of dimensions changing between batches.
    const auto m = make_metric(type, {});
    m->add(points_batch({0, 1, 2, 3}, 2, {0, 1}));
    EXPECT_HAS(error_of([&] {
                 m->add(points_batch({0, 1, 2, 3, 4, 5}, 3, {0, 1}));
               }),
               owner + "field 'data' has 3 dimensions (f64[2, 3]) but 2 in earlier samples");
    // One cluster.
    const Batch one = points_batch({0, 1, 2, 3, 4, 5}, 2, {7, 7, 7});
    EXPECT_HAS(error_of([&] { run_single(type, {}, one); }),
               owner + "field 'labels' has 1 distinct cluster label(s) in 3 samples");
    Batch empty;
    EXPECT_HAS(error_of([&] { run_single(type, {}, empty); }), owner + "no samples");
  }
  // scikit-learn also refuses every sample in its own cluster; torchmetrics' Dunn index does not.
  const Batch own = points_batch({0, 1, 2, 3, 4, 5}, 2, {0, 1, 2});
  for (const std::string type : {"CalinskiHarabaszScore", "DaviesBouldinScore"})
    EXPECT_HAS(error_of([&] { run_single(type, {}, own); }),
               "has 3 distinct cluster label(s) in 3 samples; it needs between 2 and "
               "n_samples - 1");
  EXPECT_TRUE(std::isinf(run_single("DunnIndex", {}, own).at("dunn_index").as_double()));
}

// Ranks that read points of different dimensions: an InputError naming the disagreement, on the
// rank that merges (expected: the engine's agree() message).
TEST(ClusteringErrors, RanksWithOtherDimensions) {
  for (const auto& type : point_types()) {
    const auto a = make_metric(type, {});
    const auto b = make_metric(type, {});
    a->add(points_batch({0, 1, 2, 3}, 2, {0, 1}));
    b->add(points_batch({0, 1, 2, 3, 4, 5}, 3, {0, 1}));
    EXPECT_HAS(error_of([&] {
                 compute_states(*make_metric(type, {}), {a, b});
               }),
               "rank 1 disagrees with an earlier rank");
  }
}

TEST(ClusteringErrors, BadParameters) {
  for (const std::string type : {"NormalizedMutualInfoScore", "AdjustedMutualInfoScore"})
    EXPECT_HAS(error_of<ConfigError>([&] {
                 make_metric(type, {{"average_method", "harmonic"}});
               }),
               "must be one of arithmetic, geometric, min, max");
  EXPECT_HAS(error_of<ConfigError>([&] {
               make_metric("VMeasureScore", {{"beta", -1.0}});
             }),
             "parameter 'beta' must be a finite number >= 0");
  EXPECT_HAS(error_of<ConfigError>([&] {
               make_metric("DunnIndex", {{"p", 0.0}});
             }),
             "parameter 'p' must be > 0");
}

// A corrupt contingency state (cells out of order, a count of 0) is refused on restore.
TEST(ClusteringErrors, CorruptState) {
  const auto m = make_metric("AdjustedRandScore", {});
  for (const std::vector<std::int64_t>& flat :
       {std::vector<std::int64_t>{1, 2, 3, 0, 0, 1}, std::vector<std::int64_t>{0, 0, 0},
        std::vector<std::int64_t>{0, 0}}) {
    msgpack::sbuffer buf;
    Packer packer(buf);
    packer.pack_array(1);
    packer.pack(PackedVector<std::int64_t>(flat));
    EXPECT_THROW(m->restore(bytes_of(buf)), tally::StateFormatError);
  }
}

}  // namespace
}  // namespace tally::test
