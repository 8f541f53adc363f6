#!/usr/bin/env python3
"""Reference data and expected values for torchmetrics' classification curves of
plugins/classification (curve_core.hpp): PrecisionRecallCurve, ROC and AUROC, exact (thresholds None)
and binned (an integer or a list of thresholds), for task binary, multiclass and multilabel.

(a) Writes test data to tests/data/classification_curves/*.npy, deterministically:
      bc_*      scikit-learn's breast_cancer: StandardScaler + LogisticRegression(C=0.05) fitted
                on samples 0..299, probabilities and logits of samples 300..568 (binary)
      wine_*    wine: LogisticRegression(C=0.05) on every second sample, probabilities and
                logits (decision_function) of all 178 (3 classes)
      ml_*      make_multilabel_classification(300 samples, 4 labels, seed 0), one-vs-rest
                LogisticRegression fitted on 0..149, probabilities of 150..299
      edge cases: tied scores ({0, .25, .5, .75, 1}), every target negative / positive, one
      sample, ignore_index, multiclass targets all of class 0.
(b) Writes configs/examples/data/classification_curves/ (wine probabilities and targets) for
    configs/examples/classification_curves.yaml.
(c) Writes tests/reference/expected_classification_curves.json: per case the metric, its tally
    parameters, inputs, expected values (torchmetrics 1.9.0 with torch's default dtype float64
    and Tensor.float returning float64, so that _safe_divide's float32 casts compute in float64;
    float64 preds), the exact call, and cross-checks: torchmetrics as it ships (float32
    thresholds) and scikit-learn 1.7.2 precision_recall_curve / roc_curve for exact binary
    curves, and roc_auc_score for AUROC.

Run from the repository root: .venv-ref/bin/python tests/reference/classification_curves.py
"""

import json
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "classification_curves"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "classification_curves"
OUT = ROOT / "tests" / "reference" / "expected_classification_curves.json"
TORCH_PY = ROOT / ".venv-torch" / "bin" / "python"
FUNCS = {"PrecisionRecallCurve": "precision_recall_curve", "ROC": "roc", "AUROC": "auroc"}
KEYS = {"PrecisionRecallCurve": ["precision", "recall", "thresholds"],
        "ROC": ["fpr", "tpr", "thresholds"]}


def clean(v):
    if isinstance(v, list):
        return [clean(x) for x in v]
    return None if v != v else float(v)


def torch_main():
    import torch
    import torchmetrics
    import torchmetrics.functional as F

    real_float = torch.Tensor.float

    def run(case, wide):
        kw = dict(case["params"])
        preds = torch.from_numpy(np.load(ROOT / case["inputs"]["preds"])).double()
        target = torch.from_numpy(np.load(ROOT / case["inputs"]["target"]))
        if wide:
            torch.set_default_dtype(torch.float64)
            torch.Tensor.float = lambda self, *a, **k: self.double()
        try:
            out = getattr(F, FUNCS[case["metric"]])(preds, target, **kw)
        finally:
            torch.set_default_dtype(torch.float32)
            torch.Tensor.float = real_float
        if case["metric"] == "AUROC":
            return {"auroc": clean(out.double().tolist())}
        res = {}
        for k, v in zip(KEYS[case["metric"]], out):
            res[k] = clean([x.double().tolist() for x in v] if isinstance(v, list) else v.double().tolist())
        return res

    results = []
    for case in json.load(sys.stdin):
        try:
            results.append({"expected": run(case, True), "float32": run(case, False)})
        except Exception as e:
            results.append({"error": f"{type(e).__name__}: {e}"})
    json.dump({"results": results, "versions": {"torch": torch.__version__,
                                                 "torchmetrics": torchmetrics.__version__}},
              sys.stdout)


def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(folder, name, array):
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / name, np.ascontiguousarray(array), allow_pickle=False)
    return rel(folder / name)


def datasets():
    from sklearn.datasets import load_breast_cancer, load_wine, make_multilabel_classification
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    d = {}
    X, y = load_breast_cancer(return_X_y=True)
    m = make_pipeline(StandardScaler(), LogisticRegression(C=0.05)).fit(X[:300], y[:300])
    d["bc_prob"] = (m.predict_proba(X[300:])[:, 1], y[300:].astype(np.int64))
    d["bc_logit"] = (m.decision_function(X[300:]), y[300:].astype(np.int64))
    bc_ign = y[300:].astype(np.int64).copy()
    bc_ign[::7] = -1
    d["bc_ignore"] = (d["bc_prob"][0], bc_ign)
    X, y = load_wine(return_X_y=True)
    m = make_pipeline(StandardScaler(), LogisticRegression(C=0.05)).fit(X[::2], y[::2])
    d["wine_prob"] = (m.predict_proba(X), y.astype(np.int64))
    d["wine_logit"] = (m.decision_function(X) * 3.0, y.astype(np.int64))
    w_ign = y.astype(np.int64).copy()
    w_ign[::5] = 7
    d["wine_ignore"] = (d["wine_prob"][0], w_ign)
    X, Y = make_multilabel_classification(300, n_classes=4, random_state=0)
    m = OneVsRestClassifier(make_pipeline(StandardScaler(), LogisticRegression(C=0.05)))
    m.fit(X[:150], Y[:150])
    d["ml_prob"] = (m.predict_proba(X[150:]), Y[150:].astype(np.int64))
    ml_ign = Y[150:].astype(np.int64).copy()
    ml_ign[::3, 1] = -1
    d["ml_ignore"] = (d["ml_prob"][0], ml_ign)
    rng = np.random.default_rng(0)
    d["ties"] = (rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], 60), rng.integers(0, 2, 60))
    d["all_neg"] = (rng.random(20), np.zeros(20, np.int64))
    d["all_pos"] = (rng.random(20), np.ones(20, np.int64))
    d["one"] = (np.array([0.3]), np.array([1], np.int64))
    d["mc_class0"] = (rng.dirichlet([1, 1, 1], 15), np.zeros(15, np.int64))
    files = {}
    for k, (p, t) in d.items():
        files[k] = {"preds": save(DATA, f"{k}_preds.npy", p), "target": save(DATA, f"{k}_target.npy", t)}
    return d, files


def case_list(files):
    cases = []

    def add(metric, data, params, suffix=""):
        name = f"{metric}_{data}{suffix}"
        cases.append({"name": name, "metric": metric, "params": params, "inputs": files[data],
                      "data": data})

    for metric in ("PrecisionRecallCurve", "ROC"):
        b = {"task": "binary"}
        add(metric, "bc_prob", b)
        add(metric, "bc_prob", {**b, "thresholds": 100}, "_t100")
        add(metric, "bc_prob", {**b, "thresholds": [0.9, 0.1, 0.5, 0.3]}, "_tlist")
        add(metric, "bc_logit", b)
        add(metric, "bc_logit", {**b, "thresholds": 11}, "_t11")
        add(metric, "bc_ignore", {**b, "ignore_index": -1})
        add(metric, "bc_ignore", {**b, "ignore_index": -1, "thresholds": 5}, "_t5")
        for e in ("ties", "all_neg", "all_pos", "one"):
            add(metric, e, b)
            add(metric, e, {**b, "thresholds": 5}, "_t5")
        mc = {"task": "multiclass", "num_classes": 3}
        add(metric, "wine_prob", mc)
        add(metric, "wine_prob", {**mc, "thresholds": 20}, "_t20")
        add(metric, "wine_logit", mc)
        add(metric, "wine_logit", {**mc, "thresholds": 20}, "_t20")
        add(metric, "wine_ignore", {**mc, "ignore_index": 7})
        add(metric, "wine_ignore", {**mc, "ignore_index": 7, "thresholds": [0.2, 0.6]}, "_tlist")
        add(metric, "mc_class0", mc)
        add(metric, "mc_class0", {**mc, "thresholds": 4}, "_t4")
        ml = {"task": "multilabel", "num_labels": 4}
        add(metric, "ml_prob", ml)
        add(metric, "ml_prob", {**ml, "thresholds": 10}, "_t10")
        add(metric, "ml_ignore", {**ml, "ignore_index": -1})
        add(metric, "ml_ignore", {**ml, "ignore_index": -1, "thresholds": 10}, "_t10")
    a = "AUROC"
    b = {"task": "binary"}
    for data in ("bc_prob", "bc_logit", "ties", "all_neg", "all_pos", "one"):
        add(a, data, b)
        add(a, data, {**b, "thresholds": 100}, "_t100")
    add(a, "bc_prob", {**b, "max_fpr": 0.3}, "_maxfpr")
    add(a, "bc_prob", {**b, "max_fpr": 0.3, "thresholds": 100}, "_maxfpr_t100")
    add(a, "ties", {**b, "max_fpr": 0.5}, "_maxfpr")
    add(a, "bc_prob", {**b, "thresholds": [0.9, 0.1, 0.5, 0.3]}, "_tlist")
    add(a, "bc_ignore", {**b, "ignore_index": -1})
    add(a, "bc_ignore", {**b, "ignore_index": -1, "thresholds": 7}, "_t7")
    mc = {"task": "multiclass", "num_classes": 3}
    for avg in ("macro", "weighted", "none"):
        add(a, "wine_prob", {**mc, "average": avg}, "_" + avg)
        add(a, "wine_prob", {**mc, "average": avg, "thresholds": 20}, f"_{avg}_t20")
    add(a, "wine_logit", mc)
    add(a, "wine_ignore", {**mc, "ignore_index": 7, "average": "weighted"})
    add(a, "wine_ignore", {**mc, "ignore_index": 7, "thresholds": 9}, "_t9")
    add(a, "mc_class0", mc)
    ml = {"task": "multilabel", "num_labels": 4}
    for avg in ("micro", "macro", "weighted", "none"):
        add(a, "ml_prob", {**ml, "average": avg}, "_" + avg)
        add(a, "ml_prob", {**ml, "average": avg, "thresholds": 10}, f"_{avg}_t10")
        add(a, "ml_ignore", {**ml, "average": avg, "ignore_index": -1}, "_" + avg)
    add(a, "ml_ignore", {**ml, "ignore_index": -1, "thresholds": 10, "average": "micro"}, "_micro_t10")
    return cases


def rel_diff(a, b):
    if isinstance(a, dict):
        return max(rel_diff(a[k], b[k]) for k in a)
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return float("inf")
        return max([rel_diff(x, y) for x, y in zip(a, b)] + [0.0])
    if a is None or b is None:
        return 0.0 if a is None and b is None else float("inf")
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


def finite(d):
    """A relative difference for the json (no Infinity literal there)."""
    return d if d != float("inf") else ("inf: NaN against a number, or curves of different "
                                        "lengths (see the module docstring)")


def call_of(case):
    kw = ", ".join(f"{k}={v!r}" for k, v in case["params"].items())
    return (f"torchmetrics.functional.{FUNCS[case['metric']]}(torch.from_numpy(preds).double(), "
            f"torch.from_numpy(target), {kw}) with torch.set_default_dtype(torch.float64) and Tensor.float -> float64")


def sklearn_check(case, d):
    """scikit-learn's curve for exact binary cases without ignored targets."""
    from sklearn.metrics import precision_recall_curve, roc_auc_score, roc_curve
    p = case["params"]
    if case["metric"] == "AUROC" and p["task"] == "multiclass" and "thresholds" not in p \
            and "ignore_index" not in p and p.get("average", "macro") != "none" \
            and case["data"] == "wine_prob":
        preds, target = d["wine_prob"]
        v = roc_auc_score(target, preds, multi_class="ovr", average=p.get("average", "macro"))
        return (f"sklearn.metrics.roc_auc_score(target, preds, multi_class='ovr', "
                f"average={p.get('average', 'macro')!r})", {"auroc": float(v)})
    if p["task"] != "binary" or "thresholds" in p or "ignore_index" in p:
        return None
    data = case["data"]
    preds, target = d[data]
    if data == "bc_logit":
        preds = 1 / (1 + np.exp(-preds))
    if case["metric"] == "AUROC":
        if len(set(target.tolist())) < 2:
            return None
        v = roc_auc_score(target, preds, max_fpr=p.get("max_fpr"))
        return (f"sklearn.metrics.roc_auc_score(target, preds, max_fpr={p.get('max_fpr')!r})",
                {"auroc": float(v)})
    if case["metric"] == "ROC":
        fpr, tpr, thr = roc_curve(target, preds, drop_intermediate=False)
        return ("sklearn.metrics.roc_curve(target, preds, drop_intermediate=False)",
                {"fpr": clean(fpr.tolist()), "tpr": clean(tpr.tolist())})
    if target.sum() == 0:
        return None
    prec, recall, thr = precision_recall_curve(target, preds)
    return ("sklearn.metrics.precision_recall_curve(target, preds) (it stops at full recall: "
            "compared on its points, the lowest thresholds of torchmetrics' curve)",
            {"precision": clean(prec.tolist()), "recall": clean(recall.tolist())})


def run_torch(cases):
    out = subprocess.run([str(TORCH_PY), __file__, "--torch"], input=json.dumps(cases),
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout)


def main():
    import sklearn
    d, files = datasets()
    cases = case_list(files)
    tm = run_torch(cases)
    kept = []
    for case, r in zip(cases, tm["results"]):
        if "error" in r:
            print(f"{case['name']}: torchmetrics raised {r['error']}: left out", file=sys.stderr)
            continue
        case["expected"] = r["expected"]
        case["call"] = call_of(case)
        # Only the differences are kept (the curves themselves would make the file large).
        case["cross_check"] = {"torchmetrics_float32": "torchmetrics as it ships (float32)",
                               "rel_diff_float32": finite(rel_diff(r["expected"], r["float32"]))}
        sk = sklearn_check(case, d)
        if sk is not None:
            e = r["expected"]
            if case["metric"] == "AUROC":
                diff = rel_diff(e, sk[1])
            elif case["metric"] == "ROC":
                diff = max(rel_diff(e["fpr"], sk[1]["fpr"]), rel_diff(e["tpr"], sk[1]["tpr"]))
            else:  # sklearn's points: the last len(sk) of torchmetrics' (lowest thresholds first)
                n = len(sk[1]["precision"])
                diff = max(rel_diff(e["precision"][:n - 1], sk[1]["precision"][:n - 1]),
                           rel_diff(e["recall"][:n - 1], sk[1]["recall"][:n - 1]))
            case["cross_check"].update({"sklearn_call": sk[0], "rel_diff_sklearn": finite(diff)})
        kept.append(case)

    p, t = d["wine_prob"]
    ex_inputs = {"preds": save(EXAMPLE, "preds.npy", p), "target": save(EXAMPLE, "target.npy", t)}
    ex_metrics = [
        {"label": "pr_curve", "metric": "PrecisionRecallCurve", "params": {"task": "multiclass", "num_classes": 3}},
        {"label": "pr_curve_binned", "metric": "PrecisionRecallCurve", "params": {"task": "multiclass", "num_classes": 3, "thresholds": 11}},
        {"label": "roc", "metric": "ROC", "params": {"task": "multiclass", "num_classes": 3}},
        {"label": "roc_binned", "metric": "ROC", "params": {"task": "multiclass", "num_classes": 3, "thresholds": 11}},
        {"label": "auroc", "metric": "AUROC", "params": {"task": "multiclass", "num_classes": 3}},
        {"label": "auroc_binned", "metric": "AUROC", "params": {"task": "multiclass", "num_classes": 3, "thresholds": 100}},
    ]
    ex_cases = [{"name": m["label"], "metric": m["metric"], "params": m["params"], "inputs": ex_inputs}
                for m in ex_metrics]
    ex_tm = run_torch(ex_cases)
    example = {"config": "configs/examples/classification_curves.yaml", "inputs": ex_inputs,
               "samples": int(len(t)), "metrics": ex_metrics, "results": {}, "calls": {}}
    for m, c, r in zip(ex_metrics, ex_cases, ex_tm["results"]):
        example["results"][m["label"]] = r["expected"]
        example["calls"][m["label"]] = call_of(c)
    doc = {
        "generator": "tests/reference/classification_curves.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "scikit-learn": sklearn.__version__, **tm["versions"]},
        "notes": ["expected: torchmetrics 1.9.0 with torch's default dtype float64 (see 'call'): "
                  "float64 thresholds for an integer or a list; cross_check: torchmetrics as it "
                  "ships (float32 thresholds and counts) and scikit-learn for exact binary "
                  "curves. null is NaN."],
        "cases": kept,
        "example": example,
    }
    OUT.write_text(json.dumps(doc) + "\n")
    worst = max((c["cross_check"].get("rel_diff_sklearn", 0.0), c["name"]) for c in kept
                if not isinstance(c["cross_check"].get("rel_diff_sklearn", 0.0), str))
    print(f"{len(kept)} cases -> {rel(OUT)}; largest difference to scikit-learn: {worst}")


if __name__ == "__main__":
    if "--torch" in sys.argv:
        torch_main()
    else:
        main()
