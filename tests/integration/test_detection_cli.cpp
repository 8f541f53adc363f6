// Detection data as users have it and COCO geometry (issue 16), through the real `tally` binary:
// box data whose layout the jsonl reader makes dense (every image with the same box count),
// integer boxes and images with no boxes give mmeval's values for any batch size; COCO
// geometry and values out of range are exit 2 with one line naming the annotation and the key,
// and no results file.
//
// Expected values: tests/reference/expected_voc.json, section "users" (mmeval 0.2.1, written by
// tests/reference/voc.py; each metric records its exact call).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "support/process.hpp"

namespace tally::test {
namespace {

namespace fs = std::filesystem;

const std::string kTally = TALLY_CLI;

nlohmann::json load(const fs::path& p) { return nlohmann::json::parse(read_file(p)); }

ProcessResult tally(const std::string& args) { return run_command(kTally + " " + args); }

/// One line on stderr, "tally: error: ..." holding every part.
void expect_one_error_line(const ProcessResult& r, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("tally: error: ", 0), 0u) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  for (const auto& p : parts) EXPECT_NE(r.err.find(p), std::string::npos) << p << " in " << r.err;
}

class DetectionCli : public ::testing::TestWithParam<std::string> {
 protected:
  TempDir dir;
};

// VOCMeanAP and ProposalRecall over the jsonl files as users write them: exit 0 and mmeval's
// values for batch sizes 1, 3 and 7 (same_count: every field dense; empty_int: `[]` images,
// the first line among them, and integer boxes).
TEST_P(DetectionCli, BoxDataAsUsersHaveItGivesMmevalsValues) {
  const nlohmann::json section =
      load(fs::path(TALLY_SOURCE_DIR) / "tests/reference/expected_voc.json")["users"][GetParam()];
  const fs::path data = fs::path(TALLY_SOURCE_DIR) / section["data"].get<std::string>();
  for (const int batch : {1, 3, 7}) {
    const fs::path cfg = dir / "voc.yaml", out = dir / "results.json";
    write_text(cfg, "data:\n  type: jsonl\n  path: " + data.string() +
                        "\n  batch_size: " + std::to_string(batch) +
                        "\nmetrics:\n  - type: VOCMeanAP\n    num_classes: 3\n    iou_thrs: [0.5, "
                        "0.75]\n    scale_ranges: [[0, 32], [32, 96], [96, null]]\n  - type: "
                        "ProposalRecall\n    proposal_nums: [1, 3, 10]\n");
    const ProcessResult r = tally("run " + cfg.string() + " --output " + out.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json got = load(out)["results"];
    for (const auto& m : section["metrics"]) {
      const std::string label = m["label"].get<std::string>();
      for (const auto& [key, want] : m["expected"].items()) {
        const nlohmann::json& g = got[label][key];
        if (want.is_null()) {
          EXPECT_TRUE(g.is_null()) << label << " " << key << ": " << g.dump();
          continue;
        }
        EXPECT_NEAR(g.get<double>(), want.get<double>(), 1e-12 * std::abs(want.get<double>()))
            << GetParam() << " batch " << batch << " " << label << " " << key;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Mmeval, DetectionCli, ::testing::Values("same_count", "empty_int"));

// A 1 KB COCO file with geometry far outside the image, RLE values cut to 32 bits, an image
// size that cannot be a mask, or a value of the wrong type: exit 2, one line naming the file,
// the annotation and the key; no results file; bounded time and memory (no gigabytes walked).
TEST(DetectionCliCoco, OutOfRangeGeometryAndTypesAreExitTwoNamingTheAnnotation) {
  TempDir dir;
  const std::string res =
      "[{\"image_id\": 1, \"category_id\": 1, \"bbox\": [1, 1, 4, 4], \"score\": 0.5}]";
  struct Case {
    std::string image, segmentation, bbox;
    std::vector<std::string> parts;
  };
  const std::string image = "{\"id\": 1, \"height\": 480, \"width\": 640}";
  const std::vector<Case> cases = {
      {image,
       "[[1, 1, 999999999.5, 1, 5, 5]]",
       "[0, 0, 2, 2]",
       {"annotations[0] (id 7)", "'segmentation'", "out of range"}},
      {image,
       "[[1, 1, 4e8, 1e8, 5, 5]]",
       "[0, 0, 2, 2]",
       {"annotations[0] (id 7)", "'segmentation'", "out of range"}},
      {image,
       "[[1, 1, 9, 1, 5, 5]]",
       "[0, -2e9, 2, 2]",
       {"annotations[0] (id 7)", "'bbox'", "out of range"}},
      {image,
       "{\"size\": [480, 640], \"counts\": [4294967296, 307200]}",
       "[0, 0, 2, 2]",
       {"annotations[0] (id 7)", "'segmentation.counts'"}},
      {image,
       "{\"size\": [4294967776, 640], \"counts\": [307200]}",
       "[0, 0, 2, 2]",
       {"annotations[0] (id 7)", "'segmentation.size'"}},
      {"{\"id\": 1, \"height\": 2147483648, \"width\": 640}",
       "[[1, 1, 9, 1, 5, 5]]",
       "[0, 0, 2, 2]",
       {"images[0] (id 1)", "'height'", "out of range"}},
      {image,
       "[[1, 1, 9, 1, 5, 5]]",
       "[0, 0, \"2\", 2]",
       {"annotations[0] (id 7)", "'bbox'", "expected numbers, found the string"}},
      {image, "[[1, 1, 9, 1, 5, 5]]", "[0, 0, 2]", {"annotations[0] (id 7)", "'bbox'"}},
      {image, "7", "[0, 0, 2, 2]", {"annotations[0] (id 7)", "'segmentation'"}},
  };
  for (const Case& c : cases) {
    const fs::path gt = dir / "gt.json", rs = dir / "res.json", cfg = dir / "coco.yaml",
                   out = dir / "results.json";
    write_text(gt, "{\"images\": [" + c.image +
                       "], \"categories\": [{\"id\": 1}], \"annotations\": [{\"id\": 7, "
                       "\"image_id\": 1, \"category_id\": 1, \"area\": 4, \"bbox\": " +
                       c.bbox + ", \"segmentation\": " + c.segmentation + "}]}");
    write_text(rs, res);
    write_text(cfg,
               "data:\n  type: coco_json\n  annotations: gt.json\n  results: res.json\n  "
               "masks: 'true'\nmetrics:\n  - type: COCODetection\n    metric: [bbox, segm]\n");
    const ProcessResult r = tally("run " + cfg.string() + " --output " + out.string());
    expect_one_error_line(r, c.parts);
    EXPECT_NE(r.err.find("gt.json"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << c.segmentation;
  }
}

}  // namespace
}  // namespace tally::test
