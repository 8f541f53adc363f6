// PrecisionRecallF1score: mmeval's factory name for precision, recall and F1: `task: singlelabel`
// (the default) is SingleLabelMetric, `task: multilabel` is MultiLabelMetric, with mmeval's
// argument names (thrs for both: for multilabel one threshold or null, which becomes its thr).
//
// Reference: mmeval 0.2.1 mmeval.metrics.PrecisionRecallF1score(task, num_classes, thrs, topk,
// items, average), which returns SingleLabelPrecisionRecallF1score or
// MultiLabelPrecisionRecallF1score; the values are those metrics' (single_label_metric.cpp,
// multi_label_metric.cpp, with their references). Stricter than mmeval: a parameter the chosen
// task does not take (topk with singlelabel, which mmeval drops silently; several thresholds with
// multilabel, which mmeval asserts against) is a configuration error naming it.
//
// State: the chosen metric's.
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"

namespace tally::classification {

namespace {

/// The parameters of `target` for the factory's `p`: those given, else the target's defaults.
/// `renamed` maps a factory name to the target's (thrs -> thr for multilabel).
Value::Map target_params(const Params& p, const std::vector<ParamSpec>& target,
                         const std::vector<ParamSpec>& factory, const std::string& task,
                         const std::vector<std::pair<std::string, std::string>>& renamed) {
  const auto target_name = [&](const std::string& name) {
    for (const auto& [from, to] : renamed)
      if (from == name) return to;
    return name;
  };
  for (const ParamSpec& f : factory) {
    if (f.name == "task" || !p.has(f.name)) continue;
    bool taken = false;
    for (const ParamSpec& t : target) taken |= t.name == target_name(f.name);
    // A size is checked against its bound first, whatever the task (the bound is the error).
    if (!taken && f.type == ParamType::Int) (void)p.get_size(f.name, 0);
    if (!taken) p.fail(f.name, "does not apply to task " + task);
  }
  Value::Map out;
  for (const ParamSpec& t : target) {
    std::string given;
    for (const ParamSpec& f : factory)
      if (target_name(f.name) == t.name) given = f.name;
    if (!given.empty() && p.has(given))
      out.emplace_back(t.name, p.get(given));
    else if (!t.default_value.is_null())
      out.emplace_back(t.name, t.default_value);
  }
  return out;
}

}  // namespace

ComponentInfo precision_recall_f1score_info() {
  const ComponentInfo single = single_label_metric_info();
  const ComponentInfo multi = multi_label_metric_info();
  ComponentInfo c = single;
  c.name = "PrecisionRecallF1score";
  c.aliases = {};
  c.doc =
      "Precision, recall and F1 by mmeval's factory: task singlelabel is SingleLabelMetric, "
      "multilabel is MultiLabelMetric (their keys and values). Reference: mmeval 0.2.1 "
      "PrecisionRecallF1score(task, num_classes, thrs, topk, items, average).";
  // The union of both schemas, every entry optional (each task applies its own defaults); thrs
  // stands for MultiLabelMetric's thr.
  c.params = {param("task", ParamType::String,
                    "singlelabel (SingleLabelMetric) or multilabel (MultiLabelMetric).")
                  .def("singlelabel")
                  .choices({"singlelabel", "multilabel"})};
  for (const auto* schema : {&single.params, &multi.params})
    for (ParamSpec spec : *schema) {
      if (spec.name == "thr") continue;
      bool seen = false;
      for (const ParamSpec& have : c.params) seen |= have.name == spec.name;
      if (seen) continue;
      if (spec.name == "thrs")
        spec.doc += " With task multilabel: one threshold (or null), MultiLabelMetric's thr.";
      spec.default_value = Value();
      spec.optional = true;
      c.params.push_back(std::move(spec));
    }
  c.inputs = single.inputs;
  for (const InputSpec& in : multi.inputs) {
    bool seen = false;
    for (const InputSpec& have : c.inputs) seen |= have.name == in.name;
    if (!seen) c.inputs.push_back(in);
  }
  c.make_metric = [single_make = single.make_metric, multi_make = multi.make_metric,
                   single_params = single.params, multi_params = multi.params,
                   factory = c.params](const Params& p) -> std::unique_ptr<Metric> {
    const std::string task = p.get_string("task");
    if (task == "singlelabel")
      return single_make(Params(p.owner(), target_params(p, single_params, factory, task, {})));
    if (p.has("thrs") && p.get("thrs").is_array() && p.get("thrs").size() > 1)
      p.fail("thrs", "holds " + std::to_string(p.get("thrs").size()) +
                         " thresholds: task multilabel takes one (or null)");
    Value::Map values = target_params(p, multi_params, factory, task, {{"thrs", "thr"}});
    for (auto& [name, v] : values)
      if (name == "thr" && v.is_array()) v = v.size() == 0 ? Value() : v.as_array()[0];
    std::erase_if(values, [](const auto& kv) { return kv.first == "thr" && kv.second.is_null(); });
    return multi_make(Params(p.owner(), std::move(values)));
  };
  c.results = single.results;
  return c;
}
TALLY_COMPONENT(precision_recall_f1score_info)

}  // namespace tally::classification
