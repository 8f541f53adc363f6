// Every example config in configs/examples/ runs as a user runs it: `tally run` prints a results
// table and exits 0; its results equal the reference values recorded for it (the "example"
// section, or one entry of the "examples" list, of a tests/reference/expected_*.json whose
// "config" names the example); and under real `mpirun` ranks (1, 2, 3 and 4) with the mpi backend
// the results equal the single-process ones bit for bit; and so do they with any batch size and,
// where a metric or reader is threaded, any thread count.
//
// Reference values: each expected_*.json names the library, version and call that produced them
// (tests/reference/*.py). Compared to 1e-9 relative (1e-12 absolute near zero).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "integration/cli_fixture.hpp"

namespace fs = std::filesystem;
using namespace tally::test;

namespace {

const fs::path kSource = TALLY_SOURCE_DIR;

std::vector<std::string> example_names() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(kSource / "configs/examples"))
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

nlohmann::json read_json_file(const fs::path& p) {
  std::ifstream in(p);
  if (!in) throw std::runtime_error("cannot open " + p.string());
  return nlohmann::json::parse(in);
}

/// The recorded reference entry for configs/examples/<name>.yaml, with the file it came from;
/// null when no expected_*.json names it.
std::pair<nlohmann::json, std::string> reference_for(const std::string& name) {
  const std::string config = "configs/examples/" + name + ".yaml";
  for (const auto& e : fs::directory_iterator(kSource / "tests/reference")) {
    const auto file = e.path().filename().string();
    if (file.rfind("expected_", 0) != 0 || e.path().extension() != ".json") continue;
    const auto j = read_json_file(e.path());
    std::vector<nlohmann::json> entries;
    if (j.contains("example")) entries.push_back(j["example"]);
    if (j.contains("examples"))
      for (const auto& x : j["examples"]) entries.push_back(x);
    for (const auto& x : entries)  // an entry is an object naming its config
      if (x.is_object() && x.value("config", "") == config) return {x, file};
  }
  return {nullptr, ""};
}

/// Compares `got` against `want` recursively: numbers to 1e-9 relative (1e-12 absolute near
/// zero), NaN equal to NaN (JSON null stands for NaN in the results file), the rest exactly.
void expect_close(const nlohmann::json& got, const nlohmann::json& want, const std::string& where) {
  if (want.is_number() && (got.is_number() || got.is_null())) {
    const double w = want.get<double>();
    if (got.is_null()) {
      ADD_FAILURE() << where << ": got null (NaN), expected " << w;
      return;
    }
    const double g = got.get<double>();
    if (std::isnan(w) && std::isnan(g)) return;
    const double tol = std::max(1e-12, 1e-9 * std::abs(w));
    EXPECT_LE(std::abs(g - w), tol) << where << ": got " << g << ", expected " << w;
  } else if (want.is_object()) {
    ASSERT_TRUE(got.is_object()) << where << ": got " << got.dump(-1).substr(0, 200);
    for (const auto& [k, v] : want.items()) {
      ASSERT_TRUE(got.contains(k))
          << where << ": no key '" << k << "' in " << got.dump(-1).substr(0, 300);
      expect_close(got[k], v, where + "." + k);
    }
  } else if (want.is_array()) {
    ASSERT_TRUE(got.is_array()) << where;
    ASSERT_EQ(got.size(), want.size()) << where;
    for (std::size_t i = 0; i < want.size(); ++i)
      expect_close(got[i], want[i], where + "[" + std::to_string(i) + "]");
  } else {
    EXPECT_EQ(got, want) << where;
  }
}

class ExampleTest : public CliTest, public ::testing::WithParamInterface<std::string> {
 protected:
  fs::path example() const { return kSource / "configs/examples" / (GetParam() + ".yaml"); }
};

}  // namespace

TEST_P(ExampleTest, RunsAndMatchesItsReferenceValues) {
  const auto out = dir / "single.json";
  const auto r = tally("run " + example().string() + " -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.out.empty()) << "no results table printed";
  const auto got = read_json(out);
  ASSERT_TRUE(got["results"].is_object() && !got["results"].empty()) << got.dump();

  const auto [ref, file] = reference_for(GetParam());
  ASSERT_FALSE(ref.is_null()) << "no tests/reference/expected_*.json records the results of "
                              << "configs/examples/" << GetParam() << ".yaml";
  SCOPED_TRACE("reference values: tests/reference/" + file);
  ASSERT_TRUE(ref.contains("results")) << file;
  expect_close(got["results"], ref["results"], GetParam());
  if (ref.contains("samples")) {
    EXPECT_EQ(got["run"]["samples"], ref["samples"]);
  }
}

TEST_P(ExampleTest, AnyWorldSizeGivesTheSingleProcessResults) {
#ifndef TALLY_MPIEXEC
  FAIL() << "mpirun was not found when the tests were configured (apt-get install openmpi-bin)";
#else
  const auto single_out = dir / "single.json";
  const auto s = tally("run -q " + example().string() + " -o " + single_out.string());
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto single = read_json(single_out);
  for (int np : {1, 2, 3, 4}) {
    SCOPED_TRACE("mpirun -np " + std::to_string(np));
    const auto out = dir / ("np" + std::to_string(np) + ".json");
    const auto r = run_command(mpirun(np) + kTally + " run -q " + example().string() +
                               " --set backend.type=mpi -o " + out.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = read_json(out);
    EXPECT_EQ(j["results"], single["results"]);  // exact: every double bit for bit
    EXPECT_EQ(j["run"]["world_size"], np);
    EXPECT_EQ(j["run"]["samples"], single["run"]["samples"]);
  }
#endif
}

// Reproducible floats: the results do not depend on how the data is cut into batches (one
// sample a batch, an odd size that leaves a short last batch, everything in one batch) nor, where
// a metric or reader takes `threads`, on the thread count. Bit for bit, not to a tolerance: every
// sum is exact or runs in a fixed order over the data (see the metrics' header comments).
TEST_P(ExampleTest, AnyBatchSizeOrThreadCountGivesTheSameResultsBitForBit) {
  const auto base_out = dir / "base.json";
  const auto b = tally("run -q " + example().string() + " -o " + base_out.string());
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto base = read_json(base_out);
  std::vector<std::string> variants = {"--set data.batch_size=1", "--set data.batch_size=3",
                                       "--set data.batch_size=1000000"};
  // The threaded accumulations: COCODetection's matching and the coco_json reader's parsing.
  std::ifstream config(example());
  const std::string text((std::istreambuf_iterator<char>(config)), {});
  if (text.find("type: COCODetection") != std::string::npos)
    for (const char* t : {"2", "3"})
      variants.push_back(std::string("--set data.threads=") + t + " --set metrics.0.threads=" + t +
                         " --set data.batch_size=7");
  for (const auto& v : variants) {
    SCOPED_TRACE(v);
    const auto out = dir / "variant.json";
    const auto r = tally("run -q " + example().string() + " " + v + " -o " + out.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = read_json(out);
    EXPECT_EQ(j["results"], base["results"]);  // exact: every double bit for bit
    EXPECT_EQ(j["run"]["samples"], base["run"]["samples"]);
  }
}

std::string example_test_name(const ::testing::TestParamInfo<std::string>& param) {
  std::string n = param.param;
  std::replace_if(
      n.begin(), n.end(), [](unsigned char c) { return !std::isalnum(c); }, '_');
  return n;
}

INSTANTIATE_TEST_SUITE_P(Configs, ExampleTest, ::testing::ValuesIn(example_names()),
                         example_test_name);
