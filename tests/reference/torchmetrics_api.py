#!/usr/bin/env python3
"""torchmetrics 1.9.0's public API for the metrics tally computes: writes
python/tally/_torchmetrics_api.json, from which tally.torchmetrics makes its drop-in classes.

For every torchmetrics class that a tally plugin computes under the same name (the metric of that
name whose fields are the class's update() arguments, or a task-based classification metric and
its Binary*/Multiclass*/Multilabel* classes), the file records what torchmetrics' users write:

    name      the class name (torchmetrics.<name>)
    module    its torchmetrics sub-package (classification, regression, ...)
    metric    the tally metric (the plugin component) that computes it
    task      binary / multiclass / multilabel for a concrete classification class, "any" for the
              task wrapper (Accuracy(task=...)), null otherwise
    init      the constructor's parameters in order: [name, default] with default
              {"required": true} where there is none (keyword-only ones flagged "kw_only")
    update    update()'s parameters in order
    tm_only   constructor parameters tally's metric does not have (validate_args, ...): the
              drop-in accepts them at their defaults only, and says so otherwise
    fixed     the plugin parameters the drop-in sets: torchmetrics' convention where tally's
              default is another (MatchErrorRate's convention, SQuAD's percent)
    functional  torchmetrics.functional's twin: its name and parameters

and, per tally metric, the renames where torchmetrics and the plugin name the same thing
differently. Nothing here computes a value: the values all come from the plugins. Run in
.venv-torch (scripts/setup-torch-venv.sh) with the build's Python package on PYTHONPATH:

    PYTHONPATH=build-ci/python .venv-torch/bin/python tests/reference/torchmetrics_api.py

python/tests/test_torchmetrics.py checks the committed file against the installed torchmetrics.
"""

import importlib
import inspect
import json
import sys
from pathlib import Path

import torchmetrics

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "python" / "tally" / "_torchmetrics_api.json"
MODULES = ["classification", "regression", "retrieval", "audio", "image", "nominal",
           "segmentation", "text", "clustering"]
# torchmetrics classes computed by a tally metric of another name, its fields renamed
# (torchmetrics' update argument -> the plugin's field).
OTHER_NAMES = {
    "MeanSquaredError": ("RegressionMSE", {"preds": "pred"}),
    "MeanAbsoluteError": ("RegressionMAE", {"preds": "pred"}),
    "R2Score": ("R2", {"preds": "pred"}),
}
# torchmetrics' constructor parameter -> the plugin's, where they differ.
PARAM_RENAMES = {"SpatialCorrelationCoefficient": {"high_pass_filter": "hp_filter"}}
# Plugin parameters a drop-in sets: where tally's default convention differs from torchmetrics'
# under the same name, the other convention is a parameter of the plugin (docs/python.md).
FIXED = {
    "MatchErrorRate": {"convention": "torchmetrics"},
    "WordInfoLost": {"convention": "torchmetrics"},
    "WordInfoPreserved": {"convention": "torchmetrics"},
    "SQuAD": {"percent": True},
    "CHRFScore": {"convention": "torchmetrics"},
}
# Classes left out though a plugin of the name exists: another definition under the name.
NOT_DROP_IN = {
    "MeanIoU": "tally's MeanIoU is mmeval's (label maps, ignore_index 255), not torchmetrics' "
    "one-hot segmentation MeanIoU",
    "Perplexity": "tally's Perplexity reads pred_logits/gt_tokens with ignore_labels",
    "TranslationEditRate": "tally's TranslationEditRate is sacrebleu's TER, which differs from "
    "torchmetrics' by up to 19% on real text (tests/reference/expected_text_torchmetrics.json, "
    "cross_check); torchmetrics' convention is not a plugin parameter yet",
}
TASKS = {"Binary": "binary", "Multiclass": "multiclass", "Multilabel": "multilabel"}
SKIP_PARAMS = {"self", "cls", "kwargs", "args"}


def plugin_metrics():
    import tally

    out = {}
    for c in tally.plugins():
        if c["kind"] != "metric":
            continue
        out[c["name"]] = c
    return out


def params_of(fn):
    out = []
    for name, p in inspect.signature(fn).parameters.items():
        if name in SKIP_PARAMS:
            continue
        if p.default is inspect.Parameter.empty:
            default = {"required": True}
        else:
            default = p.default
            if isinstance(default, tuple):
                default = list(default)
            try:
                json.dumps(default)
            except TypeError:
                default = {"repr": repr(default)}
        entry = [name, default]
        if p.kind is inspect.Parameter.KEYWORD_ONLY:
            entry.append("kw_only")
        out.append(entry)
    return out


def init_of(cls):
    # The task wrappers take their arguments in __new__.
    if "__new__" in cls.__dict__:
        return params_of(cls.__new__)
    return params_of(cls.__init__)


def snake(name):
    out = ""
    for i, ch in enumerate(name):
        if ch.isupper() and i and (not name[i - 1].isupper() or
                                   (i + 1 < len(name) and name[i + 1].islower())):
            out += "_"
        out += ch.lower()
    return out


def functional_of(name, module, plugin):
    """torchmetrics.functional.<module>'s twin of class `name`: its snake_case name, its lower
    case name (SQuAD -> squad), or the name of the plugin's first key (RetrievalMAP ->
    retrieval_average_precision); with its parameters."""
    F = importlib.import_module(f"torchmetrics.functional.{module}")
    keys = [r["key"] for r in plugin["results"]]
    for candidate in [snake(name), name.lower()] + keys[:1]:
        fn = getattr(F, candidate, None)
        if callable(fn):
            return {"name": candidate, "params": params_of(fn)}
    return None


def entry(name, module, metric, task, cls, plugin):
    init = init_of(cls)
    renames = PARAM_RENAMES.get(name, {})
    known = {p["name"] for p in plugin["params"]}
    tm_only = [p[0] for p in init if renames.get(p[0], p[0]) not in known and p[0] != "task"]
    return {
        "name": name, "module": module, "metric": metric, "task": task, "init": init,
        "update": [p[0] for p in params_of(cls.update)], "tm_only": tm_only,
        "param_renames": renames, "functional": functional_of(name, module, plugin),
        "fixed": FIXED.get(name, {}),
    }


def main():
    plugins = plugin_metrics()
    classes, skipped = [], {}
    for module in MODULES:
        mod = importlib.import_module(f"torchmetrics.{module}")
        for name in sorted(dir(mod)):
            cls = getattr(mod, name)
            if not (isinstance(cls, type) and issubclass(cls, torchmetrics.Metric)):
                continue
            base, task = name, None
            for prefix, t in TASKS.items():
                if module == "classification" and name.startswith(prefix):
                    base, task = name[len(prefix):], t
            metric, fields = OTHER_NAMES.get(base, (base, {}))
            plugin = plugins.get(metric)
            if base in NOT_DROP_IN:
                skipped[name] = NOT_DROP_IN[base]
                continue
            if plugin is None:
                skipped[name] = "no tally metric of this name"
                continue
            update = [p[0] for p in params_of(cls.update)]
            inputs = [i["name"] for i in plugin["inputs"]]
            task_param = next((p for p in plugin["params"] if p["name"] == "task"), None)
            if module == "classification":
                if task_param is None:
                    skipped[name] = f"tally's {metric} is not task-based"
                    continue
                if task is None:
                    task = "any"
                elif task not in task_param["choices"]:
                    skipped[name] = f"tally's {metric} has no task {task}"
                    continue
            elif [fields.get(u, u) for u in update if fields.get(u, u) in inputs] != [
                    fields.get(u, u) for u in update]:
                skipped[name] = f"update({', '.join(update)}) is not {metric}'s fields {inputs}"
                continue
            e = entry(name, module, metric, task, cls, plugin)
            if task == "any":  # the wrapper's update(*args, **kwargs): its classes' arguments
                e["update"] = [i["name"] for i in plugin["inputs"] if i["name"] in ("preds", "target")]
            e["fields"] = {u: fields.get(u, u) for u in e["update"]}
            classes.append(e)
    doc = {"torchmetrics": torchmetrics.__version__, "classes": classes, "not_drop_in": skipped}
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    print(f"torchmetrics_api: {len(classes)} classes, {len(skipped)} left out -> {OUT}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
