// Config parsing and schema checks: every error names where (file:line:column or the --set that
// introduced the value), what was expected and what was found.
#include <gtest/gtest.h>

#include "config.hpp"
#include "tally/sdk/error.hpp"

namespace fs = std::filesystem;
using tally::Config;
using tally::ConfigError;
using tally::Value;

namespace {

std::string parse_error(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  try {
    Config::parse(yaml, "eval.yaml", "/data/cfg", sets);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

// A component with one parameter of every type, for schema tests.
tally::ComponentInfo all_types() {
  tally::ComponentInfo c;
  c.name = "Probe";
  c.params = {
      tally::param("flag", tally::ParamType::Bool, "a flag").def(false),
      tally::param("count", tally::ParamType::Int, "a count"),
      tally::param("ratio", tally::ParamType::Float, "a ratio").def(0.5),
      tally::param("mode", tally::ParamType::String, "a mode")
          .def("macro")
          .choices({"macro", "micro", "none"}),
      tally::param("file", tally::ParamType::Path, "a file").optional(),
      tally::param("ks", tally::ParamType::IntList, "ks").def(Value::Array{1}),
      tally::param("thrs", tally::ParamType::FloatList, "thresholds")
          .def(Value::Array{Value()})
          .nullable(),
      tally::param("names", tally::ParamType::StringList, "names").optional(),
      tally::param("fields", tally::ParamType::PathMap, "fields").optional(),
  };
  return c;
}

std::string params_error(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  try {
    const auto cfg = Config::parse(yaml, "eval.yaml", "/data/cfg", sets);
    tally::make_params(all_types(), cfg.metrics.at(0).params, "metric 'Probe'", cfg.base_dir);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

tally::Params params_of(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  const auto cfg = Config::parse(yaml, "eval.yaml", "/data/cfg", sets);
  return tally::make_params(all_types(), cfg.metrics.at(0).params, "metric 'Probe'", cfg.base_dir);
}

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

}  // namespace

TEST(Config, ParsesTheDesignExample) {
  const auto cfg = Config::parse(R"(
backend:
  type: mpi
plugins:
  paths: [my/plugins]
data:
  type: npy
  batch_size: 4096
  fields:
    pred_scores: preds.npy
    gt_labels: labels.npy
metrics:
  - type: Accuracy
    topk: [1, 3]
  - type: SingleLabelMetric
    name: prf_macro
    average: macro
    inputs: {pred_scores: logits}
output:
  json: results.json
)",
                                 "eval.yaml", "/data/cfg");
  EXPECT_EQ(cfg.backend_type, "mpi");
  ASSERT_EQ(cfg.plugin_paths.size(), 1u);
  EXPECT_EQ(cfg.plugin_paths[0], fs::path("/data/cfg/my/plugins"));  // relative to the config file
  EXPECT_EQ(cfg.data_type, "npy");
  EXPECT_EQ(cfg.data_params.value.at("batch_size").as_int(), 4096);
  ASSERT_EQ(cfg.metrics.size(), 2u);
  EXPECT_EQ(cfg.metrics[0].label, "Accuracy");
  EXPECT_EQ(cfg.metrics[1].label, "prf_macro");
  EXPECT_EQ(cfg.metrics[1].type, "SingleLabelMetric");
  ASSERT_EQ(cfg.metrics[1].inputs.size(), 1u);
  EXPECT_EQ(cfg.metrics[1].inputs[0],
            (std::pair<std::string, std::string>{"pred_scores", "logits"}));
  EXPECT_EQ(cfg.metrics[1].params.value.at("average").as_string(), "macro");
  EXPECT_EQ(cfg.metrics[1].params.value.find("name"), nullptr);
  EXPECT_EQ(cfg.metrics[0].where, "eval.yaml:13:5");
  EXPECT_EQ(cfg.output_json, fs::path("results.json"));  // relative to the working directory
}

TEST(Config, DefaultsToNonDist) {
  const auto cfg = Config::parse("metrics: [{type: Accuracy}]", "eval.yaml", "/d");
  EXPECT_EQ(cfg.backend_type, "nondist");
  EXPECT_FALSE(cfg.data_type.has_value());
}

TEST(Config, YamlSyntaxErrorHasLineAndColumn) {
  const auto msg = parse_error("metrics:\n  - type: Accuracy\n    topk: [1, 3\n");
  EXPECT_HAS(msg, "eval.yaml:");
  EXPECT_HAS(msg, "YAML syntax error");
}

TEST(Config, UnknownTopLevelKey) {
  const auto msg = parse_error("metrics: [{type: A}]\noutptu: {json: x}\n");
  EXPECT_HAS(msg, "eval.yaml:2:1: unknown top-level key 'outptu'");
}

TEST(Config, DuplicateKey) {
  EXPECT_HAS(parse_error("metrics: [{type: A}]\nmetrics: [{type: B}]\n"),
             "eval.yaml:2:1: duplicate key 'metrics'");
}

TEST(Config, MetricsMustBeAListOfMapsWithType) {
  EXPECT_HAS(parse_error("metrics: {type: A}\n"),
             "eval.yaml:1:10: metrics expects a list of metrics");
  EXPECT_HAS(parse_error("metrics:\n  - topk: 1\n"), "eval.yaml:2:5: metrics[0]: missing 'type'");
  EXPECT_HAS(parse_error("metrics:\n  - 3\n"),
             "eval.yaml:2:5: metrics[0] expects a map, found an integer 3");
}

TEST(Config, DuplicateLabels) {
  const auto msg = parse_error("metrics:\n  - type: Accuracy\n  - type: Accuracy\n");
  EXPECT_HAS(msg,
             "eval.yaml:3:5: metrics[1]: two metrics are labelled 'Accuracy' (the other is at "
             "eval.yaml:2:5)");
}

TEST(Config, DataNeedsAType) {
  EXPECT_HAS(parse_error("data: {fields: {a: b}}\nmetrics: [{type: A}]\n"),
             "eval.yaml:1:7: data: missing 'type'");
}

TEST(Config, SetOverridesAnyKey) {
  const auto cfg =
      Config::parse("metrics:\n  - type: Accuracy\n    topk: 1\n", "eval.yaml", "/d",
                    {"metrics.0.topk=[1,5]", "backend.type=mpi", "output.json=out.json",
                     "metrics.1={type: ConfusionMatrix, num_classes: 3}"});
  EXPECT_EQ(cfg.backend_type, "mpi");
  EXPECT_EQ(cfg.metrics[0].params.value.at("topk"), Value(Value::Array{1, 5}));
  EXPECT_EQ(cfg.metrics[0].params.child("topk")->where, "--set metrics.0.topk");
  EXPECT_EQ(cfg.output_json, fs::path("out.json"));
  ASSERT_EQ(cfg.metrics.size(), 2u);
  EXPECT_EQ(cfg.metrics[1].type, "ConfusionMatrix");
}

TEST(Config, BadSetIsAnError) {
  EXPECT_HAS(parse_error("metrics: [{type: A}]", {"metrics.0.topk"}),
             "--set 'metrics.0.topk': expected KEY=VALUE");
  EXPECT_HAS(parse_error("metrics: [{type: A}]", {"metrics.5.topk=1"}),
             "index 5 is past the end of a list of 1");
  EXPECT_HAS(parse_error("metrics: [{type: A}]", {"metrics.x=1"}),
             "'metrics' is a list, so 'x' must be an index");
  EXPECT_HAS(parse_error("metrics: [{type: A}]", {"metrics.0.type.x=1"}),
             "'metrics.0.type' is a string");
  EXPECT_HAS(parse_error("metrics: [{type: A}]", {"metrics.0.topk=[1,"}), "is not valid YAML");
}

TEST(Params, TypesDefaultsAndCoercions) {
  const auto p = params_of(R"(metrics:
  - type: Probe
    count: 3
    ratio: 1
    ks: 5
    thrs: [0.5, null, 1]
    names: single
    file: rel/x.npy
    fields: {a: a.npy, b: /abs/b.npy}
    mode: none
)");
  EXPECT_EQ(p.get_int("count"), 3);
  EXPECT_FALSE(p.get_bool("flag"));                               // default
  EXPECT_DOUBLE_EQ(p.get_double("ratio"), 1.0);                   // int widened
  EXPECT_EQ(p.get_int_list("ks"), std::vector<std::int64_t>{5});  // scalar -> list of one
  const auto thrs = p.get_optional_double_list("thrs");
  ASSERT_EQ(thrs.size(), 3u);
  EXPECT_EQ(thrs[0], 0.5);
  EXPECT_FALSE(thrs[1].has_value());
  EXPECT_EQ(thrs[2], 1.0);
  EXPECT_EQ(p.get_string_list("names"), std::vector<std::string>{"single"});
  EXPECT_EQ(p.get_string("file"), "/data/cfg/rel/x.npy");  // relative to the config's folder
  const auto fields = p.get_string_map("fields");
  EXPECT_EQ(fields[0].second, "/data/cfg/a.npy");
  EXPECT_EQ(fields[1].second, "/abs/b.npy");
  EXPECT_EQ(p.get_string("mode"), "none");  // a YAML plain scalar, kept as the string
}

TEST(Params, ErrorsNameTheKeyTheLineAndWhatWasFound) {
  EXPECT_HAS(params_error("metrics:\n  - type: Probe\n    count: abc\n"),
             "eval.yaml:3:12: metric 'Probe': parameter 'count' expects int, found 'abc'");
  EXPECT_HAS(params_error("metrics:\n  - type: Probe\n    count: 1\n    ks: [1, x]\n"),
             "eval.yaml:4:13: metric 'Probe': parameter 'ks' expects int | list of int, found 'x'");
  EXPECT_HAS(params_error("metrics:\n  - type: Probe\n"),
             "eval.yaml:2:5: metric 'Probe': missing required parameter 'count'");
  EXPECT_HAS(params_error("metrics:\n  - type: Probe\n    count: 1\n    mode: mean\n"),
             "eval.yaml:4:11: metric 'Probe': parameter 'mode' must be one of macro, micro, none, "
             "found 'mean'");
  EXPECT_HAS(params_error("metrics:\n  - type: Probe\n    count: 1\n    topk: 3\n"),
             "eval.yaml:4:5: metric 'Probe': unknown parameter 'topk' (Probe takes flag, count, "
             "ratio, mode");
  EXPECT_HAS(params_error("metrics:\n  - type: Probe\n    count: 1\n    flag: 1\n"),
             "parameter 'flag' expects bool, found an integer 1");
  EXPECT_HAS(params_error("metrics:\n  - type: Probe\n    count: 1\n    fields: [a]\n"),
             "parameter 'fields' expects map of path");
  // An explicit null for a parameter with a default means the default.
  EXPECT_DOUBLE_EQ(
      params_of("metrics:\n  - type: Probe\n    count: 1\n    ratio: null\n").get_double("ratio"),
      0.5);
}

TEST(Params, SetValuesAreLocatedAtTheSet) {
  EXPECT_HAS(params_error("metrics:\n  - type: Probe\n    count: 1\n", {"metrics.0.count=abc"}),
             "--set metrics.0.count: metric 'Probe': parameter 'count' expects int, found 'abc'");
}

// Python's dict config arrives as one line of JSON the user never saw: its messages name the key
// path from `config`, not a column of that line.
TEST(Params, ADictsValuesAreLocatedByKeyPath) {
  const auto dict_error = [](const std::string& json) {
    try {
      const auto cfg = Config::parse(json, "config", "/data/cfg", {}, true);
      tally::make_params(all_types(), cfg.metrics.at(0).params, "metric 'Probe'", cfg.base_dir);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(dict_error(R"({"metrics": [{"type": "Probe", "count": "abc"}]})"),
            "config['metrics'][0]['count']: metric 'Probe': parameter 'count' expects int, found "
            "'abc'");
  EXPECT_HAS(dict_error(R"({"metrics": [{"type": "Probe", "count": 1, "ks": [1, "x"]}]})"),
             "config['metrics'][0]['ks'][1]: metric 'Probe': parameter 'ks' expects int | list of "
             "int, found 'x'");
  EXPECT_HAS(dict_error(R"({"metrics": [{"type": "Probe"}]})"),
             "config['metrics'][0]: metric 'Probe': missing required parameter 'count'");
  EXPECT_HAS(dict_error(R"({"metrics": [{"type": "Probe", "count": 1, "topk": 3}]})"),
             "config['metrics'][0]['topk']: metric 'Probe': unknown parameter 'topk'");
  EXPECT_HAS(dict_error(R"({"metrics": [{"type": "Probe", "count": 1}], "outptu": {}})"),
             "config['outptu']: unknown top-level key 'outptu'");
  EXPECT_HAS(dict_error(R"({"metrics": [{"count": 1}]})"), "config['metrics'][0]: ");
  // A key with a quote in it stays one subscript.
  EXPECT_HAS(dict_error(R"({"metrics": [{"type": "Probe", "count": 1, "it's": 3}]})"),
             R"(config['metrics'][0]['it\'s']: )");
  // An override is still located at its --set.
  try {
    const auto cfg = Config::parse(R"({"metrics": [{"type": "Probe"}]})", "config", "/data/cfg",
                                   {"metrics.0.count=abc"}, true);
    tally::make_params(all_types(), cfg.metrics.at(0).params, "metric 'Probe'", cfg.base_dir);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_HAS(std::string(e.what()), "--set metrics.0.count: metric 'Probe'");
  }
}

TEST(Params, ValuesFromCodeAreCheckedToo) {
  const auto c = all_types();
  const auto p =
      tally::make_params(c, Value::Map{{"count", 2}, {"ks", Value::Array{1, 3}}}, "metric 'Probe'");
  EXPECT_EQ(p.get_int_list("ks"), (std::vector<std::int64_t>{1, 3}));
  EXPECT_THROW(tally::make_params(c, Value::Map{{"count", "x"}}, "metric 'Probe'"), ConfigError);
  // A typed accessor used on the wrong type names the owner and the parameter.
  try {
    p.get_string("count");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_HAS(std::string(e.what()),
               "metric 'Probe': parameter 'count' expects a string, found 2");
  }
}

// Issue 32, item 11: the settings every rank must give alike, named as in the config, with every
// value that changes what the ranks do together or what is written, and nothing that may differ
// from host to host (the rendezvous, the interface, the data paths).
TEST(ConfigAgreedSettings, NameEverySettingThatChangesTheCollectivesOrTheOutputs) {
  using Settings = std::vector<std::pair<std::string, std::string>>;
  const auto settings = [](const std::string& yaml) {
    return Config::parse("metrics:\n  - type: Accuracy\n" + yaml, "e.yaml", "/cfg")
        .agreed_settings();
  };
  EXPECT_EQ(settings(""), (Settings{{"backend.type", "nondist"}}));
  EXPECT_EQ(
      settings("backend: {type: gloo, timeout: 30, start_timeout: 5, interface: eth0, "
               "master_port: 29500, chunk_bytes: 4096}\ndata: {type: npy, fields: {x: x.npy}}\n"),
      (Settings{
          {"backend.type", "gloo"}, {"backend.timeout", "30"}, {"backend.start_timeout", "5"}}));
  EXPECT_EQ(
      settings("output: {json: r.json, junit: r.xml, markdown: r.md, html: r.html, records: "
               "r.rec}\nintervals: {confidence: 0.9, resamples: 200, seed: 3, method: bca}\n"),
      (Settings{{"backend.type", "nondist"},
                {"output.json", "r.json"},
                {"output.junit", "r.xml"},
                {"output.markdown", "r.md"},
                {"output.html", "r.html"},
                {"output.records", "r.rec"},
                {"intervals", "confidence 0.9, resamples 200, seed 3, method bca"}}));
  const auto regression = settings(
      "regression:\n  baseline: b.json\n  rtol: 0.01\n  baseline_records: b.rec\n  alpha: 0.1\n"
      "  resamples: 500\n  seed: 9\n  test: bootstrap\n  history: runs\n  fail_on_drift: true\n"
      "  tolerances:\n    'Accuracy.*': {atol: 0.02, better: lower}\n");
  const Settings expected = {
      {"backend.type", "nondist"},
      {"regression.baseline", "/cfg/b.json"},
      {"regression.rtol", "0.01"},
      {"regression.tolerances", "{Accuracy.*: rtol -, atol 0.02, better lower}"},
      {"regression.baseline_records", "/cfg/b.rec"},
      {"regression.alpha", "0.1"},
      {"regression.resamples", "500"},
      {"regression.seed", "9"},
      {"regression.test", "bootstrap"},
      {"regression.history", "/cfg/runs"},
      {"regression.fail_on_drift", "true"}};
  EXPECT_EQ(regression, expected);
  EXPECT_EQ(settings("checkpoint: {dir: ck, every_n_batches: 7}\n"),
            (Settings{{"backend.type", "nondist"},
                      {"checkpoint.dir", "/cfg/ck"},
                      {"checkpoint.every_n_batches", "7"}}));
}
