// Multi-label targets as lists of class ids that all have the same length: the jsonl reader makes
// them a dense [N, L] field, which the metrics read as 0/1 indicators unless label_format: index
// says they are class ids (issue 16, item 15: whether a field is ragged must not change what a
// metric computes). Expected values: the same targets written as one-hot rows, whose reading is
// checked against scikit-learn by the classification reference tests
// (tests/reference/classification.py); the two runs must agree bit for bit.
#include "integration/cli_fixture.hpp"

namespace fs = std::filesystem;
using namespace tally::test;

namespace {

class LabelFormatTest : public CliTest {
 protected:
  // 6 samples of 2 classes. Labels as lists of two class ids (repeats allowed), and the same
  // targets one-hot.
  void write_jsonl() {
    const std::vector<std::string> scores = {"[0.9, 0.2]", "[0.1, 0.8]",   "[0.7, 0.6]",
                                             "[0.3, 0.4]", "[0.55, 0.45]", "[0.2, 0.1]"};
    const std::vector<std::string> ids = {"[0, 0]", "[1, 1]", "[0, 1]",
                                          "[1, 0]", "[0, 0]", "[1, 1]"};
    const std::vector<std::string> hot = {"[1, 0]", "[0, 1]", "[1, 1]",
                                          "[1, 1]", "[1, 0]", "[0, 1]"};
    std::string a, b;
    for (std::size_t i = 0; i < scores.size(); ++i) {
      a += "{\"scores\": " + scores[i] + ", \"labels\": " + ids[i] + "}\n";
      b += "{\"scores\": " + scores[i] + ", \"labels\": " + hot[i] + "}\n";
    }
    write_text(dir / "ids.jsonl", a);
    write_text(dir / "hot.jsonl", b);
  }
  fs::path cfg(const std::string& file, const std::string& format) {
    const auto p = dir / (file + "_" + format + ".yaml");
    const std::string fmt = format.empty() ? "" : "    label_format: " + format + "\n";
    write_text(p, "data:\n  type: jsonl\n  path: " + file +
                      "\n  fields: {pred_scores: scores, gt_labels: labels}\n"
                      "metrics:\n  - type: MultiLabelMetric\n    average: none\n" +
                      fmt + "  - type: AveragePrecision\n    average: none\n" + fmt +
                      "  - type: ROCAUC\n    average: none\n" + fmt);
    return p;
  }
  nlohmann::json results(const fs::path& c) {
    const auto out = dir / (c.stem().string() + ".json");
    const auto r = tally("run -q " + c.string() + " -o " + out.string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return read_json(out)["results"];
  }
};

}  // namespace

TEST_F(LabelFormatTest, EqualLengthListsOfClassIdsAreReadAsClassIdsWithLabelFormatIndex) {
  write_jsonl();
  const auto onehot = results(cfg("hot.jsonl", ""));
  EXPECT_EQ(results(cfg("ids.jsonl", "index")), onehot);
  // Read as indicators they are other targets: the parameter is what tells them apart.
  EXPECT_NE(results(cfg("ids.jsonl", "")), onehot);
}

TEST_F(LabelFormatTest, ClassIdsOutOfRangeAreRefusedNamingTheSample) {
  write_jsonl();
  write_text(dir / "ids.jsonl", "{\"scores\": [0.1, 0.9], \"labels\": [0, 2]}\n");
  const auto r = tally("run -q " + cfg("ids.jsonl", "index").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("sample 0: class id 2 is outside [0, 2)"), std::string::npos) << r.err;
}
