// Shared set-up for the CLI tests: a small classification dataset written as .npy files in a
// temporary folder, and a config that evaluates it.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "support/npy.hpp"
#include "support/process.hpp"

namespace tally::test {

inline const std::string kTally = TALLY_CLI;

struct Dataset {
  std::vector<float> scores;
  std::vector<std::int64_t> labels;
  std::int64_t n = 0, c = 0;
};

/// n samples, c classes; scores from a fixed-seed generator, labels correlated with the argmax so
/// the accuracies are neither 0 nor 1; a few exact ties.
inline Dataset make_dataset(std::int64_t n, std::int64_t c, std::uint32_t seed = 7) {
  Dataset d;
  d.n = n;
  d.c = c;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t best = 0;
    for (std::int64_t k = 0; k < c; ++k) {
      const float s = (i % 11 == 0 && k < 2) ? 0.5f : u(gen);
      d.scores.push_back(s);
      if (s > d.scores[static_cast<std::size_t>(i * c + best)]) best = k;
    }
    d.labels.push_back(
        u(gen) < 0.6f ? best : static_cast<std::int64_t>(gen() % static_cast<std::uint32_t>(c)));
  }
  return d;
}

inline const char* kMetricsYaml = R"(metrics:
  - type: Accuracy
    topk: [1, 2]
  - type: SingleLabelMetric
    name: prf_macro
  - type: SingleLabelMetric
    name: prf_none
    average: none
  - type: ConfusionMatrix
    num_classes: 5
)";

/// How often `part` occurs in `text` (overlapping occurrences count).
inline int count_of(const std::string& text, const std::string& part) {
  int n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override { write_data(make_dataset(50, 5)); }

  void write_data(const Dataset& d) {
    write_npy(dir / "scores.npy", d.scores, {d.n, d.c});
    write_npy(dir / "labels.npy", d.labels);
  }

  /// A config in the temp folder: the npy reader over scores.npy and labels.npy, then `metrics`.
  std::filesystem::path config(const std::string& metrics = kMetricsYaml,
                               const std::string& extra = "",
                               const std::string& name = "eval.yaml") {
    const auto p = dir / name;
    write_text(p,
               "data:\n  type: npy\n  batch_size: 8\n  fields:\n    pred_scores: scores.npy\n"
               "    gt_labels: labels.npy\n" +
                   metrics + extra);
    return p;
  }

  ProcessResult tally(const std::string& args) { return run_command(kTally + " " + args); }

  /// `tally run -q cfg` on one process (exit 0 expected): the results every world size must equal.
  nlohmann::json run_single(const std::filesystem::path& cfg) {
    const auto out = dir / "single.json";
    const auto r = tally("run -q " + cfg.string() + " -o " + out.string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return read_json(out);
  }

  static nlohmann::json read_json(const std::filesystem::path& p) {
    return nlohmann::json::parse(read_file(p));
  }

  TempDir dir;
};

}  // namespace tally::test
