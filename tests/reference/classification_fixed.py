#!/usr/bin/env python3
"""Reference values for torchmetrics' operating-point and area metrics built on the
classification curves of plugins/classification (curve_core.hpp): PrecisionAtFixedRecall,
RecallAtFixedPrecision, SensitivityAtSpecificity, SpecificityAtSensitivity, LogAUC, AveragePrecision
with a `task` (torchmetrics' semantics), and PrecisionRecallCurve / ROC with `average` micro or
macro (task multiclass), exact (thresholds None) and binned (an integer or a list).

Inputs: the test data of tests/data/classification_curves/ (written by
tests/reference/classification_curves.py: breast_cancer, wine and multilabel probabilities and
logits, ties, all-negative and all-positive targets, one sample, ignore_index, multiclass targets
all of class 0), plus two sets written here, deterministically, to tests/data/classification_fixed/:
      mc_nopos  multiclass, 4 classes, 40 samples of Dirichlet scores whose targets are in {0, 1, 2}
                only (class 3 has no positives)
      ml_nopos  multilabel, 3 labels, 40 samples of uniform scores; label 1 has no positives,
                label 2 no negatives

Writes tests/reference/expected_classification_fixed.json (and its "example" section, the
expected results of configs/examples/classification_fixed.yaml on the wine probabilities of
configs/examples/data/classification_curves/): per case the metric, its tally
parameters, inputs, expected values (torchmetrics 1.9.0 with torch's default dtype float64 and
Tensor.float returning float64, so that _safe_divide's float32 casts compute in float64; float64
preds), the exact call, and the largest relative difference to torchmetrics as it ships (float32
default dtype: float32 thresholds). Calls that torchmetrics refuses (it raises) are listed under
"torchmetrics_errors" with the error.

Run from the repository root: .venv-torch/bin/python tests/reference/classification_fixed.py
"""

import json
import platform
from pathlib import Path

import numpy as np
import torch
import torchmetrics
import torchmetrics.functional as F

ROOT = Path(__file__).resolve().parents[2]
CURVES = ROOT / "tests" / "data" / "classification_curves"
DATA = ROOT / "tests" / "data" / "classification_fixed"
OUT = ROOT / "tests" / "reference" / "expected_classification_fixed.json"

# tally metric -> (torchmetrics.functional name, result keys (None: one value), tally parameter ->
# torchmetrics argument).
FUNCS = {
    "PrecisionAtFixedRecall": ("precision_at_fixed_recall", ["precision", "threshold"]),
    "RecallAtFixedPrecision": ("recall_at_fixed_precision", ["recall", "threshold"]),
    "SensitivityAtSpecificity": ("sensitivity_at_specificity", ["sensitivity", "threshold"]),
    "SpecificityAtSensitivity": ("specificity_at_sensitivity", ["specificity", "threshold"]),
    "LogAUC": ("logauc", "logauc"),
    "AveragePrecision": ("average_precision", "average_precision"),
    "PrecisionRecallCurve": ("precision_recall_curve", ["precision", "recall", "thresholds"]),
    "ROC": ("roc", ["fpr", "tpr", "thresholds"]),
}


def clean(v):
    """NaN as null, +-inf as the strings "inf" / "-inf" (JSON has neither)."""
    if isinstance(v, list):
        return [clean(x) for x in v]
    if v != v:
        return None
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return float(v)


def to_list(v):
    if isinstance(v, (list, tuple)):
        return [to_list(x) for x in v]
    return clean(v.double().tolist())


def torch_kwargs(params):
    kw = dict(params)
    if "fpr_range" in kw:
        kw["fpr_range"] = tuple(kw["fpr_range"])
    return kw


real_float = torch.Tensor.float


def run(case, wide):
    kw = torch_kwargs(case["params"])
    preds = torch.from_numpy(np.load(ROOT / case["inputs"]["preds"])).double()
    target = torch.from_numpy(np.load(ROOT / case["inputs"]["target"]))
    if wide:
        torch.set_default_dtype(torch.float64)
        torch.Tensor.float = lambda self, *a, **k: self.double()
    try:
        out = getattr(F, FUNCS[case["metric"]][0])(preds, target, **kw)
    finally:
        torch.set_default_dtype(torch.float32)
        torch.Tensor.float = real_float
    keys = FUNCS[case["metric"]][1]
    if isinstance(keys, str):
        return {keys: to_list(out)}
    return {k: to_list(v) for k, v in zip(keys, out)}


def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(name, array):
    DATA.mkdir(parents=True, exist_ok=True)
    np.save(DATA / name, np.ascontiguousarray(array), allow_pickle=False)
    return rel(DATA / name)


def datasets():
    files = {}
    for k in ("bc_prob", "bc_logit", "bc_ignore", "ties", "all_neg", "all_pos", "one", "wine_prob",
              "wine_logit", "wine_ignore", "mc_class0", "ml_prob", "ml_ignore"):
        files[k] = {"preds": rel(CURVES / f"{k}_preds.npy"), "target": rel(CURVES / f"{k}_target.npy")}
    rng = np.random.default_rng(21)
    d = {
        "mc_nopos": (rng.dirichlet([1, 1, 1, 1], 40), rng.integers(0, 3, 40)),
    }
    ml_p = rng.random((40, 3))
    ml_t = np.stack([rng.integers(0, 2, 40), np.zeros(40, np.int64), np.ones(40, np.int64)], 1)
    d["ml_nopos"] = (ml_p, ml_t)
    for k, (p, t) in d.items():
        files[k] = {"preds": save(f"{k}_preds.npy", p),
                    "target": save(f"{k}_target.npy", t.astype(np.int64))}
    return files


def case_list(files):
    cases = []

    def add(metric, data, params, suffix=""):
        name = f"{metric}_{data}{suffix}"
        cases.append({"name": name, "metric": metric, "params": params, "inputs": files[data]})

    b = {"task": "binary"}
    mc = {"task": "multiclass", "num_classes": 3}
    mc4 = {"task": "multiclass", "num_classes": 4}
    ml = {"task": "multilabel", "num_labels": 4}
    ml3 = {"task": "multilabel", "num_labels": 3}
    fixed = {"PrecisionAtFixedRecall": "min_recall", "RecallAtFixedPrecision": "min_precision",
             "SensitivityAtSpecificity": "min_specificity",
             "SpecificityAtSensitivity": "min_sensitivity"}
    for metric, arg in fixed.items():
        for v in (0.5, 0.9):
            s = f"_{int(v * 100)}"
            add(metric, "bc_prob", {**b, arg: v}, s)
            add(metric, "bc_prob", {**b, arg: v, "thresholds": 100}, s + "_t100")
        add(metric, "bc_prob", {**b, arg: 0.8, "thresholds": [0.9, 0.1, 0.5, 0.3]}, "_tlist")
        # No threshold reaches the minimum (a list whose thresholds all lie below the scores of
        # many negatives, or minimum 1 where no point reaches it).
        add(metric, "bc_prob", {**b, arg: 0.999, "thresholds": [0.01, 0.02]}, "_unreached")
        add(metric, "bc_prob", {**b, arg: 1.0}, "_min1")
        add(metric, "bc_prob", {**b, arg: 0.0}, "_min0")
        add(metric, "bc_logit", {**b, arg: 0.7})
        add(metric, "bc_logit", {**b, arg: 0.7, "thresholds": 11}, "_t11")
        add(metric, "bc_ignore", {**b, arg: 0.6, "ignore_index": -1})
        add(metric, "bc_ignore", {**b, arg: 0.6, "ignore_index": -1, "thresholds": 5}, "_t5")
        for e in ("ties", "all_neg", "all_pos", "one"):
            add(metric, e, {**b, arg: 0.5})
            add(metric, e, {**b, arg: 0.5, "thresholds": 5}, "_t5")
        add(metric, "wine_prob", {**mc, arg: 0.9})
        add(metric, "wine_prob", {**mc, arg: 0.9, "thresholds": 20}, "_t20")
        add(metric, "wine_logit", {**mc, arg: 0.8})
        add(metric, "wine_ignore", {**mc, arg: 0.85, "ignore_index": 7})
        add(metric, "wine_ignore", {**mc, arg: 0.85, "ignore_index": 7, "thresholds": [0.2, 0.6, 0.4]},
            "_tlist")
        add(metric, "mc_class0", {**mc, arg: 0.5})
        add(metric, "mc_class0", {**mc, arg: 0.5, "thresholds": 4}, "_t4")
        add(metric, "mc_nopos", {**mc4, arg: 0.5})
        add(metric, "mc_nopos", {**mc4, arg: 0.5, "thresholds": 10}, "_t10")
        add(metric, "mc_nopos", {**mc4, arg: 0.0}, "_min0")
        add(metric, "mc_nopos", {**mc4, arg: 0.0, "thresholds": 10}, "_min0_t10")
        add(metric, "ml_prob", {**ml, arg: 0.7})
        add(metric, "ml_prob", {**ml, arg: 0.7, "thresholds": 10}, "_t10")
        add(metric, "ml_ignore", {**ml, arg: 0.7, "ignore_index": -1})
        add(metric, "ml_ignore", {**ml, arg: 0.7, "ignore_index": -1, "thresholds": 10}, "_t10")
        add(metric, "ml_nopos", {**ml3, arg: 0.5})
        add(metric, "ml_nopos", {**ml3, arg: 0.5, "thresholds": 10}, "_t10")

    m = "LogAUC"
    add(m, "bc_prob", b)
    add(m, "bc_prob", {**b, "fpr_range": [0.01, 0.5]}, "_range")
    add(m, "bc_prob", {**b, "fpr_range": [0.0, 0.3]}, "_range0")
    add(m, "bc_prob", {**b, "fpr_range": [0.2, 1.0]}, "_range1")
    add(m, "bc_prob", {**b, "thresholds": 100}, "_t100")
    add(m, "bc_prob", {**b, "thresholds": [0.9, 0.1, 0.5, 0.3]}, "_tlist")
    add(m, "bc_prob", {**b, "thresholds": [0.5]}, "_tone")
    add(m, "bc_logit", {**b, "fpr_range": [0.05, 0.6]})
    add(m, "bc_ignore", {**b, "ignore_index": -1, "fpr_range": [0.05, 0.6]})
    add(m, "bc_ignore", {**b, "ignore_index": -1, "thresholds": 7}, "_t7")
    for e in ("ties", "all_neg", "all_pos", "one"):
        add(m, e, {**b, "fpr_range": [0.1, 0.9]})
        add(m, e, {**b, "fpr_range": [0.1, 0.9], "thresholds": 5}, "_t5")
    for avg in ("macro", "none"):
        add(m, "wine_prob", {**mc, "average": avg, "fpr_range": [0.01, 0.4]}, "_" + avg)
        add(m, "wine_prob", {**mc, "average": avg, "fpr_range": [0.01, 0.4], "thresholds": 20},
            f"_{avg}_t20")
        add(m, "ml_prob", {**ml, "average": avg, "fpr_range": [0.02, 0.5]}, "_" + avg)
        add(m, "ml_prob", {**ml, "average": avg, "fpr_range": [0.02, 0.5], "thresholds": 10},
            f"_{avg}_t10")
        add(m, "mc_nopos", {**mc4, "average": avg, "fpr_range": [0.05, 0.5]}, "_" + avg)
        add(m, "ml_nopos", {**ml3, "average": avg, "fpr_range": [0.05, 0.5]}, "_" + avg)
        add(m, "ml_nopos", {**ml3, "average": avg, "fpr_range": [0.05, 0.5], "thresholds": 10},
            f"_{avg}_t10")
    add(m, "wine_prob", mc, "_default")
    add(m, "wine_logit", {**mc, "average": "macro", "fpr_range": [0.01, 0.4]})
    add(m, "wine_ignore", {**mc, "ignore_index": 7, "average": "macro", "fpr_range": [0.01, 0.4]})
    add(m, "ml_ignore", {**ml, "ignore_index": -1, "average": "none", "fpr_range": [0.02, 0.5]})

    a = "AveragePrecision"
    add(a, "bc_prob", b)
    add(a, "bc_prob", {**b, "thresholds": 100}, "_t100")
    add(a, "bc_prob", {**b, "thresholds": [0.9, 0.1, 0.5, 0.3]}, "_tlist")
    add(a, "bc_logit", b)
    add(a, "bc_ignore", {**b, "ignore_index": -1})
    add(a, "bc_ignore", {**b, "ignore_index": -1, "thresholds": 7}, "_t7")
    for e in ("ties", "all_neg", "all_pos", "one"):
        add(a, e, b)
        add(a, e, {**b, "thresholds": 5}, "_t5")
    for avg in ("macro", "weighted", "none"):
        add(a, "wine_prob", {**mc, "average": avg}, "_" + avg)
        add(a, "wine_prob", {**mc, "average": avg, "thresholds": 20}, f"_{avg}_t20")
        add(a, "mc_nopos", {**mc4, "average": avg}, "_" + avg)
        add(a, "mc_nopos", {**mc4, "average": avg, "thresholds": 10}, f"_{avg}_t10")
        add(a, "mc_class0", {**mc, "average": avg}, "_" + avg)
        add(a, "mc_class0", {**mc, "average": avg, "thresholds": 4}, f"_{avg}_t4")
    add(a, "wine_logit", mc)
    add(a, "wine_ignore", {**mc, "ignore_index": 7, "average": "weighted"})
    add(a, "wine_ignore", {**mc, "ignore_index": 7, "thresholds": [0.2, 0.6, 0.4]}, "_tlist")
    for avg in ("micro", "macro", "weighted", "none"):
        add(a, "ml_prob", {**ml, "average": avg}, "_" + avg)
        add(a, "ml_prob", {**ml, "average": avg, "thresholds": 10}, f"_{avg}_t10")
        add(a, "ml_ignore", {**ml, "average": avg, "ignore_index": -1}, "_" + avg)
        add(a, "ml_ignore", {**ml, "average": avg, "ignore_index": -1, "thresholds": 10}, f"_{avg}_t10")
        add(a, "ml_nopos", {**ml3, "average": avg}, "_" + avg)
        add(a, "ml_nopos", {**ml3, "average": avg, "thresholds": 10}, f"_{avg}_t10")

    for metric in ("PrecisionRecallCurve", "ROC"):
        for avg in ("micro", "macro"):
            add(metric, "wine_prob", {**mc, "average": avg}, "_" + avg)
            add(metric, "wine_prob", {**mc, "average": avg, "thresholds": 20}, f"_{avg}_t20")
            add(metric, "wine_prob", {**mc, "average": avg, "thresholds": [0.9, 0.1, 0.5, 0.3]},
                f"_{avg}_tlist")
            add(metric, "wine_logit", {**mc, "average": avg}, "_" + avg)
            add(metric, "wine_ignore", {**mc, "average": avg, "ignore_index": 7}, "_" + avg)
            add(metric, "wine_ignore", {**mc, "average": avg, "ignore_index": 7, "thresholds": 5},
                f"_{avg}_t5")
            add(metric, "mc_class0", {**mc, "average": avg}, "_" + avg)
            add(metric, "mc_nopos", {**mc4, "average": avg}, "_" + avg)
            add(metric, "mc_nopos", {**mc4, "average": avg, "thresholds": 10}, f"_{avg}_t10")
    return cases


def rel_diff(a, b):
    if isinstance(a, dict):
        return max(rel_diff(a[k], b[k]) for k in a)
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return float("inf")
        return max([rel_diff(x, y) for x, y in zip(a, b)] + [0.0])
    if a is None or b is None or isinstance(a, str) or isinstance(b, str):
        return 0.0 if a == b else float("inf")
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


def call_of(case):
    kw = ", ".join(f"{k}={v!r}" for k, v in torch_kwargs(case["params"]).items())
    return (f"torchmetrics.functional.{FUNCS[case['metric']][0]}(torch.from_numpy(preds).double(), "
            f"torch.from_numpy(target), {kw}) with torch.set_default_dtype(torch.float64) and "
            f"Tensor.float -> float64")


def main():
    files = datasets()
    kept, errors = [], []
    for case in case_list(files):
        try:
            expected = run(case, True)
        except Exception as e:  # torchmetrics refuses the call: recorded, not a case
            errors.append({"name": case["name"], "metric": case["metric"], "params": case["params"],
                           "inputs": case["inputs"], "call": call_of(case),
                           "error": f"{type(e).__name__}: {e}"})
            continue
        case["expected"] = expected
        case["call"] = call_of(case)
        try:
            d = rel_diff(expected, run(case, False))
            case["rel_diff_float32"] = d if d != float("inf") else "inf (NaN against a number or other lengths)"
        except Exception as e:
            case["rel_diff_float32"] = f"float32 run raised {type(e).__name__}: {e}"
        kept.append(case)
    # configs/examples/classification_fixed.yaml: the wine probabilities of
    # configs/examples/classification_curves.yaml (written by classification_curves.py).
    ex_inputs = {"preds": "configs/examples/data/classification_curves/preds.npy",
                 "target": "configs/examples/data/classification_curves/target.npy"}
    mc = {"task": "multiclass", "num_classes": 3}
    ex_metrics = [
        {"label": "precision_at_recall", "metric": "PrecisionAtFixedRecall", "params": {**mc, "min_recall": 0.9}},
        {"label": "recall_at_precision", "metric": "RecallAtFixedPrecision", "params": {**mc, "min_precision": 0.9}},
        {"label": "sensitivity_at_specificity", "metric": "SensitivityAtSpecificity",
         "params": {**mc, "min_specificity": 0.9}},
        {"label": "specificity_at_sensitivity_binned", "metric": "SpecificityAtSensitivity",
         "params": {**mc, "min_sensitivity": 0.9, "thresholds": 11}},
        {"label": "logauc", "metric": "LogAUC", "params": {**mc, "average": "macro", "fpr_range": [0.01, 0.5]}},
        {"label": "average_precision", "metric": "AveragePrecision", "params": {**mc, "average": "macro"}},
        {"label": "average_precision_binned", "metric": "AveragePrecision",
         "params": {**mc, "average": "weighted", "thresholds": 100}},
        {"label": "roc_micro", "metric": "ROC", "params": {**mc, "average": "micro", "thresholds": 11}},
    ]
    example = {"config": "configs/examples/classification_fixed.yaml", "inputs": ex_inputs,
               "samples": int(len(np.load(ROOT / ex_inputs["target"]))), "metrics": ex_metrics,
               "results": {}, "calls": {}}
    for m in ex_metrics:
        c = {"name": m["label"], "metric": m["metric"], "params": m["params"], "inputs": ex_inputs}
        example["results"][m["label"]] = run(c, True)
        example["calls"][m["label"]] = call_of(c)
    doc = {
        "generator": "tests/reference/classification_fixed.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "torch": torch.__version__, "torchmetrics": torchmetrics.__version__},
        "notes": ["expected: torchmetrics 1.9.0 functional calls with torch's default dtype float64 "
                  "(see 'call'); rel_diff_float32: against torchmetrics as it ships (float32 "
                  "thresholds). null is NaN; the strings \"inf\" and \"-inf\" are infinities."],
        "cases": kept,
        "torchmetrics_errors": errors,
        "example": example,
    }
    OUT.write_text(json.dumps(doc) + "\n")
    print(f"{len(kept)} cases, {len(errors)} torchmetrics errors -> {rel(OUT)}")
    for e in errors:
        print(f"  {e['name']}: {e['error']}")


if __name__ == "__main__":
    main()
