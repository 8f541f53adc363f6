#!/usr/bin/env python3
"""Reference data and expected values for the torchmetrics task-based metrics of
plugins/classification (tm_core.hpp): StatScores, Specificity, FBetaScore, HammingDistance,
JaccardIndex, ExactMatch, MatthewsCorrCoef, CohenKappa, CalibrationError, and (tm_rates.cpp)
Accuracy, Precision, Recall and F1Score with a task.

(a) Writes test data to tests/data/classification_torchmetrics/*.npy, deterministically:
      bc_*      scikit-learn's breast_cancer: a StandardScaler + LogisticRegression(C=0.05)
                fitted on samples 0..299, its probabilities (and logits: decision_function,
                and a float32 copy) for samples 300..568 (binary)
      wine_*    wine: LogisticRegression(C=0.05) fitted on every second sample, probabilities
                and logits of all 178 (3 classes)
      digits_*  digits: LogisticRegression(C=0.01) fitted on samples 0..999, probabilities of
                samples 1000..1399 (10 classes)
      ml_*      make_multilabel_classification(400 samples, 5 labels, seed 0), a one-vs-rest
                LogisticRegression fitted on 0..199, probabilities / logits of 200..399
      edge cases: ties at the threshold (scores in {0, .25, .5, .75, 1}), ignore_index (-1 and
      an in-range class), a class absent from preds and target, all targets of one class,
      perfect and all-wrong predictions, one sample.
(b) Writes configs/examples/data/classification_torchmetrics/ for
    configs/examples/classification_torchmetrics.yaml (wine: probabilities and targets).
(c) Writes tests/reference/expected_classification_torchmetrics.json: per case the metric, its
    tally parameters, its inputs, the expected values, the exact reference call, and the
    cross-checks (torchmetrics in its own float32, scikit-learn where it has the metric) with
    their relative differences.

The expected values are torchmetrics 1.9.0's functional calls on float64 preds, run in
.venv-torch (a subprocess of this script) with torch's default dtype float64 and
Tensor.float() returning float64, so that its float32 casts (_safe_divide, .float()) compute
in float64; torchmetrics as it ships (float32) is recorded as a cross-check.

Run from the repository root, in the reference environment (it runs .venv-torch itself):

    .venv-ref/bin/python tests/reference/classification_torchmetrics.py
"""

import json
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "classification_torchmetrics"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "classification_torchmetrics"
OUT = ROOT / "tests" / "reference" / "expected_classification_torchmetrics.json"
TORCH_PY = ROOT / ".venv-torch" / "bin" / "python"

FUNCS = {
    "StatScores": "stat_scores",
    "Specificity": "specificity",
    "FBetaScore": "fbeta_score",
    "HammingDistance": "hamming_distance",
    "JaccardIndex": "jaccard_index",
    "ExactMatch": "exact_match",
    "MatthewsCorrCoef": "matthews_corrcoef",
    "CohenKappa": "cohen_kappa",
    "CalibrationError": "calibration_error",
    "Accuracy": "accuracy",
    "Precision": "precision",
    "Recall": "recall",
    "F1Score": "f1_score",
}
# tally parameters that torchmetrics' functional call does not take.
NOT_TM = {"multidim_average"}


# ---- the torchmetrics side (runs in .venv-torch) ---------------------------------------------

def torch_main():
    import torch
    import torchmetrics
    import torchmetrics.functional as F

    cases = json.load(sys.stdin)
    real_float = torch.Tensor.float

    def run(case, wide):
        kwargs = {k: v for k, v in case["params"].items() if k not in NOT_TM}
        for k in ("threshold", "beta"):
            if k in kwargs:
                kwargs[k] = float(kwargs[k])
        preds = torch.from_numpy(np.load(ROOT / case["inputs"]["preds"]))
        target = torch.from_numpy(np.load(ROOT / case["inputs"]["target"]))
        if preds.is_floating_point():
            preds = preds.double()
        fn = getattr(F, FUNCS[case["metric"]])
        if wide:
            torch.set_default_dtype(torch.float64)
            torch.Tensor.float = lambda self, *a, **k: self.double()
        try:
            out = fn(preds, target, **kwargs)
        finally:
            torch.set_default_dtype(torch.float32)
            torch.Tensor.float = real_float
        if case["metric"] == "StatScores":
            t = out if out.ndim == 2 else out.reshape(1, 5) if case["params"].get("average") == "none" else out
            keys = ["tp", "fp", "tn", "fn", "support"]
            if t.ndim == 2:
                return {k: t[:, i].tolist() for i, k in enumerate(keys)}
            return {k: t[i].item() for i, k in enumerate(keys)}
        key = FUNCS[case["metric"]]
        v = out.tolist()
        if isinstance(v, float) and v != v:
            v = None
        if isinstance(v, list):
            v = [None if x != x else x for x in v]
        return {key: float(v) if isinstance(v, int) else v}

    results = []
    for case in cases:
        try:
            results.append({"expected": run(case, True), "float32": run(case, False)})
        except Exception as e:  # a reference error: the case expects an InputError
            results.append({"error": f"{type(e).__name__}: {e}"})
    json.dump({"results": results, "versions": {"torch": torch.__version__,
                                                 "torchmetrics": torchmetrics.__version__}},
              sys.stdout)


# ---- data (runs in .venv-ref) ---------------------------------------------------------------

def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(folder, name, array):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


def datasets():
    from sklearn.datasets import (load_breast_cancer, load_digits, load_wine,
                                  make_multilabel_classification)
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    d = {}
    X, y = load_breast_cancer(return_X_y=True)
    m = make_pipeline(StandardScaler(), LogisticRegression(C=0.05, max_iter=2000)).fit(X[:300], y[:300])
    d["bc_prob"] = (m.predict_proba(X[300:])[:, 1], y[300:])
    d["bc_logit"] = (m.decision_function(X[300:]), y[300:])
    d["bc_f32"] = (d["bc_prob"][0].astype(np.float32), y[300:])
    d["bc_labels"] = ((d["bc_prob"][0] > 0.5).astype(np.int64), y[300:])

    X, y = load_wine(return_X_y=True)
    m = make_pipeline(StandardScaler(), LogisticRegression(C=0.05, max_iter=2000)).fit(X[::2], y[::2])
    d["wine_prob"] = (m.predict_proba(X), y)
    d["wine_logit"] = (m.decision_function(X), y)
    d["wine_labels"] = (m.predict(X).astype(np.int64), y)

    X, y = load_digits(return_X_y=True)
    m = make_pipeline(StandardScaler(), LogisticRegression(C=0.01, max_iter=2000)).fit(X[:1000], y[:1000])
    d["digits_prob"] = (m.predict_proba(X[1000:1400]), y[1000:1400])

    X, Y = make_multilabel_classification(n_samples=400, n_features=20, n_classes=5, random_state=0)
    m = OneVsRestClassifier(LogisticRegression(C=0.05, max_iter=2000)).fit(X[:200], Y[:200])
    d["ml_prob"] = (m.predict_proba(X[200:]), Y[200:].astype(np.int64))
    d["ml_logit"] = (m.decision_function(X[200:]), Y[200:].astype(np.int64))
    d["ml_labels"] = ((d["ml_prob"][0] > 0.5).astype(np.int64), Y[200:].astype(np.int64))

    rng = np.random.default_rng(20251127)
    # Ties: scores on a grid that holds the thresholds 0, 0.5 and 1 themselves.
    d["ties"] = (rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=60), rng.integers(0, 2, size=60))
    # ignore_index -1 in a fifth of the targets.
    t = d["bc_prob"][1].copy()
    t[rng.random(t.size) < 0.2] = -1
    d["bc_ignore"] = (d["bc_prob"][0], t)
    t = d["wine_prob"][1].copy()
    t[rng.random(t.size) < 0.2] = -1
    d["wine_ignore"] = (d["wine_prob"][0], t)
    t = d["ml_prob"][1].copy()
    t[rng.random(t.shape) < 0.1] = -1
    d["ml_ignore"] = (d["ml_prob"][0], t)
    # A class (3 of 5) absent from preds and target; class 4 only predicted.
    yt = rng.choice([0, 1, 2], size=80)
    yp = np.where(rng.random(80) < 0.7, yt, rng.choice([0, 1, 2, 4], size=80))
    d["absent"] = (yp.astype(np.int64), yt.astype(np.int64))
    # Every target 1 (binary), predicted by the breast_cancer model's probabilities.
    d["allone"] = (d["bc_prob"][0][:50], np.ones(50, dtype=np.int64))
    d["perfect"] = (d["bc_prob"][1].astype(np.int64), d["bc_prob"][1])
    d["allwrong"] = ((1 - d["bc_prob"][1]).astype(np.int64), d["bc_prob"][1])
    d["allone_right"] = (np.ones(30, dtype=np.int64), np.ones(30, dtype=np.int64))
    d["single"] = (d["wine_prob"][0][:1], d["wine_prob"][1][:1])
    files = {}
    for name, (p, t) in d.items():
        files[name] = {"preds": save(DATA, f"{name}_preds.npy", p),
                       "target": save(DATA, f"{name}_target.npy", np.asarray(t, dtype=np.int64))}
    return d, files


def case_list(files):
    cases = []

    def add(metric, data, params, suffix=""):
        name = f"{metric}_{data}" + (f"_{suffix}" if suffix else "")
        cases.append({"name": name, "metric": metric, "params": params, "inputs": files[data]})

    binary = {"task": "binary"}
    mc = lambda c: {"task": "multiclass", "num_classes": c}  # noqa: E731
    ml = {"task": "multilabel", "num_labels": 5}
    averaged = ["StatScores", "Specificity", "FBetaScore", "HammingDistance", "JaccardIndex",
                "Accuracy", "Precision", "Recall", "F1Score"]
    three = averaged + ["MatthewsCorrCoef"]
    for m in three:
        for data in ["bc_prob", "bc_logit", "bc_f32", "bc_labels", "allone", "perfect", "allwrong",
                     "allone_right"]:
            add(m, data, dict(binary))
        add(m, "ties", dict(binary), "thr0.5")
        add(m, "ties", dict(binary, threshold=0.0), "thr0")
        add(m, "ties", dict(binary, threshold=1.0), "thr1")
        add(m, "bc_ignore", dict(binary, ignore_index=-1))
        avgs = ["micro", "macro", "weighted", "none"] if m in averaged else [None]
        for a in avgs:
            extra = {"average": a} if a else {}
            sfx = a or ""
            add(m, "wine_prob", dict(mc(3), **extra), sfx)
            add(m, "ml_prob", dict(ml, **extra), sfx)
            if a in ("weighted", "none"):  # the edge cases with micro and macro only
                continue
            add(m, "absent", dict(mc(5), **extra), sfx)
            add(m, "wine_ignore", dict(mc(3), ignore_index=-1, **extra), (sfx + "_ignore").strip("_"))
            add(m, "wine_prob", dict(mc(3), ignore_index=0, **extra), (sfx + "_ignore0").strip("_"))
            add(m, "ml_ignore", dict(ml, ignore_index=-1, **extra), (sfx + "_ignore").strip("_"))
        add(m, "wine_logit", dict(mc(3), **({"average": "macro"} if m in averaged else {})))
        add(m, "wine_labels", dict(mc(3), **({"average": "macro"} if m in averaged else {})))
        add(m, "digits_prob", dict(mc(10), **({"average": "macro"} if m in averaged else {})))
        add(m, "ml_logit", dict(ml, **({"average": "macro"} if m in averaged else {})))
        add(m, "ml_labels", dict(ml, **({"average": "micro"} if m in averaged else {})))
        add(m, "single", dict(mc(3), **({"average": "macro"} if m in averaged else {})))
        if m in averaged and m != "JaccardIndex":
            for a in ["micro", "macro"]:
                add(m, "digits_prob", dict(mc(10), average=a, top_k=3), f"{a}_top3")
    for m in ["StatScores", "JaccardIndex"]:
        add(m, "absent", dict(mc(5), average="weighted"), "weighted")
        add(m, "absent", dict(mc(5), average="none"), "none")
        add(m, "wine_prob", dict(mc(3), ignore_index=0, average="weighted"), "weighted_ignore0")
    for a in ["micro", "macro"]:
        add("FBetaScore", "wine_prob", dict(mc(3), beta=0.5, average=a), f"{a}_beta0.5")
        add("FBetaScore", "ml_prob", dict(ml, beta=2.0, average=a), f"{a}_beta2")
    add("FBetaScore", "bc_prob", dict(binary, beta=2.0), "beta2")
    add("FBetaScore", "allwrong", dict(binary, zero_division=1.0), "zero1")
    add("JaccardIndex", "allwrong", dict(binary, zero_division=1.0), "zero1")
    for m in ["Precision", "Recall", "F1Score"]:
        add(m, "allwrong", dict(binary, zero_division=1.0), "zero1")
        add(m, "absent", dict(mc(5), average="macro", zero_division=1.0), "macro_zero1")
    for data, p in [("wine_prob", mc(3)), ("wine_labels", mc(3)), ("digits_prob", mc(10)),
                    ("absent", mc(5)), ("wine_ignore", dict(mc(3), ignore_index=-1)),
                    ("ml_prob", ml), ("ml_logit", ml), ("ml_labels", ml),
                    ("ml_ignore", dict(ml, ignore_index=-1)), ("single", mc(3))]:
        add("ExactMatch", data, dict(p))
    for w in ["none", "linear", "quadratic"]:
        add("CohenKappa", "wine_prob", dict(mc(3), weights=w), w)
        add("CohenKappa", "digits_prob", dict(mc(10), weights=w), w)
        add("CohenKappa", "absent", dict(mc(5), weights=w), w)
    for data in ["bc_prob", "bc_logit", "bc_labels", "ties", "allone", "perfect", "allwrong"]:
        add("CohenKappa", data, dict(binary))
    add("CohenKappa", "bc_ignore", dict(binary, ignore_index=-1))
    add("CohenKappa", "wine_ignore", dict(mc(3), ignore_index=-1, weights="quadratic"))
    for norm in ["l1", "l2", "max"]:
        add("CalibrationError", "bc_prob", dict(binary, norm=norm), norm)
        add("CalibrationError", "wine_prob", dict(mc(3), norm=norm), norm)
        add("CalibrationError", "digits_prob", dict(mc(10), norm=norm, n_bins=10), f"{norm}_bins10")
    for data in ["bc_logit", "ties", "allone"]:
        add("CalibrationError", data, dict(binary))
    add("CalibrationError", "ties", dict(binary, n_bins=4), "bins4")
    add("CalibrationError", "bc_ignore", dict(binary, ignore_index=-1))
    add("CalibrationError", "wine_logit", dict(mc(3)))
    add("CalibrationError", "wine_ignore", dict(mc(3), ignore_index=-1, n_bins=5))
    add("CalibrationError", "single", dict(mc(3), n_bins=1))
    # tally's own parameter, at its only value.
    add("StatScores", "wine_prob", dict(mc(3), average="macro", multidim_average="global"), "global")
    return cases


# ---- scikit-learn cross-checks (float64) ----------------------------------------------------

def labels_of(case, d_preds, d_target):
    p = np.asarray(d_preds)
    t = np.asarray(d_target)
    params = case["params"]
    task = params["task"]
    if np.issubdtype(p.dtype, np.floating):
        if task == "multiclass":
            p = p.argmax(1)
        else:
            p64 = p.astype(np.float64)
            if ((p64 < 0) | (p64 > 1)).any():
                p64 = 1 / (1 + np.exp(-p64))
            p = (p64 > params.get("threshold", 0.5)).astype(np.int64)
    return p, t


def sklearn_check(case, d):
    """scikit-learn's value where it computes the same thing; None otherwise."""
    from sklearn import metrics as M
    params = case["params"]
    if params.get("ignore_index") is not None or params.get("top_k", 1) != 1:
        return None
    name = case["inputs"]["preds"].split("/")[-1][: -len("_preds.npy")]
    p, t = labels_of(case, *d[name])
    task, m, a = params["task"], case["metric"], params.get("average", "micro")
    c = params.get("num_classes")
    if m == "FBetaScore":
        beta = params.get("beta", 1.0)
        if task == "binary":
            return ("sklearn.metrics.fbeta_score(target, pred_labels, beta=beta)",
                    M.fbeta_score(t, p, beta=beta, zero_division=params.get("zero_division", 0)))
        if a in ("micro", "weighted") or task == "multilabel":
            v = M.fbeta_score(t, p, beta=beta, average=None if a == "none" else a,
                              labels=list(range(c)) if c else None, zero_division=0)
            return (f"sklearn.metrics.fbeta_score(target, pred_labels, beta=beta, average={a!r})",
                    v.tolist() if a == "none" else float(v))
    if m in ("Precision", "Recall", "F1Score") and (task == "binary" or a in ("micro", "weighted")):
        fn = {"Precision": "precision_score", "Recall": "recall_score", "F1Score": "f1_score"}[m]
        avg = "binary" if task == "binary" else a
        zd = params.get("zero_division", 0)
        return (f"sklearn.metrics.{fn}(target, pred_labels, average={avg!r})",
                float(getattr(M, fn)(t, p, average=avg, zero_division=zd,
                                     labels=list(range(c)) if c else None)))
    if m == "Accuracy" and (task == "binary" or (task == "multiclass" and a == "micro")):
        return ("sklearn.metrics.accuracy_score(target, pred_labels)", float(M.accuracy_score(t, p)))
    if m == "HammingDistance" and (task == "binary" or a == "micro"):
        return ("sklearn.metrics.hamming_loss(target, pred_labels)", float(M.hamming_loss(t, p)))
    if m == "JaccardIndex" and (task == "binary" or a in ("micro", "weighted")):
        return (f"sklearn.metrics.jaccard_score(target, pred_labels, average={'binary' if task == 'binary' else a!r})",
                float(M.jaccard_score(t, p, average="binary" if task == "binary" else a,
                                      zero_division=params.get("zero_division", 0))))
    if m == "ExactMatch":
        return ("sklearn.metrics.accuracy_score(target, pred_labels)", float(M.accuracy_score(t, p)))
    if m == "MatthewsCorrCoef":
        if task == "multilabel":
            t, p = t.ravel(), p.ravel()
        return ("sklearn.metrics.matthews_corrcoef(target, pred_labels)",
                float(M.matthews_corrcoef(t, p)))
    if m == "CohenKappa":
        w = params.get("weights", "none")
        return (f"sklearn.metrics.cohen_kappa_score(target, pred_labels, weights={None if w == 'none' else w!r})",
                float(M.cohen_kappa_score(t, p, weights=None if w == "none" else w,
                                          labels=list(range(c)) if c else None)))
    if m == "Specificity" and task == "binary":
        return ("sklearn.metrics.recall_score(1 - target, 1 - pred_labels)",
                float(M.recall_score(1 - t, 1 - p, zero_division=0)))
    if m == "StatScores" and task == "binary":
        tn, fp, fn, tp = M.confusion_matrix(t, p, labels=[0, 1]).ravel().tolist()
        return ("sklearn.metrics.confusion_matrix(target, pred_labels, labels=[0, 1]).ravel()",
                {"tp": tp, "fp": fp, "tn": tn, "fn": fn, "support": tp + fn})
    return None


def rel_diff(a, b):
    if isinstance(a, dict):
        return max(rel_diff(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return max([rel_diff(x, y) for x, y in zip(a, b)] + [0.0])
    if a is None or b is None:
        return 0.0 if a is None and b is None else float("inf")
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


def call_of(case):
    kw = ", ".join(f"{k}={v!r}" for k, v in case["params"].items() if k not in NOT_TM)
    return (f"torchmetrics.functional.{FUNCS[case['metric']]}(torch.from_numpy(preds).double() "
            f"if float else torch.from_numpy(preds), torch.from_numpy(target), {kw}) with "
            "torch.set_default_dtype(torch.float64) and Tensor.float -> float64")


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
        case["cross_check"] = {"torchmetrics_float32": r["float32"],
                               "rel_diff_float32": rel_diff(r["expected"], r["float32"])}
        if (case["metric"] == "MatthewsCorrCoef" and r["expected"] == r["float32"]
                and r["expected"]["matthews_corrcoef"] not in (1.0, -1.0, 0.0)):
            # torchmetrics' zero-denominator branch: float32 arithmetic in either mode (int64
            # counts and a float32 eps tensor), with torch's own float32 sqrt, which is not
            # correctly rounded: tally computes the branch in float32 with a correctly rounded
            # sqrt, so they agree to float32 precision.
            case["tolerance"] = 1e-6
            case["tolerance_why"] = ("torchmetrics computes this zero-denominator branch in "
                                     "float32 (torch's float32 sqrt is not correctly rounded)")
        sk = sklearn_check(case, d)
        if sk is not None:
            case["cross_check"]["sklearn_call"] = sk[0]
            sv = sk[1] if isinstance(sk[1], dict) else {list(r["expected"])[0]: sk[1]}
            case["cross_check"]["sklearn"] = sv
            case["cross_check"]["rel_diff_sklearn"] = rel_diff(r["expected"], sv)
        kept.append(case)

    # The example: wine, probabilities of the model fitted on every second sample.
    p, t = d["wine_prob"]
    ex_inputs = {"preds": save(EXAMPLE, "preds.npy", p), "target": save(EXAMPLE, "target.npy", t)}
    ex_metrics = [
        {"label": "stat_scores", "metric": "StatScores", "params": {"task": "multiclass", "num_classes": 3}},
        {"label": "specificity_macro", "metric": "Specificity", "params": {"task": "multiclass", "num_classes": 3, "average": "macro"}},
        {"label": "f2_macro", "metric": "FBetaScore", "params": {"task": "multiclass", "num_classes": 3, "beta": 2.0, "average": "macro"}},
        {"label": "hamming", "metric": "HammingDistance", "params": {"task": "multiclass", "num_classes": 3}},
        {"label": "jaccard", "metric": "JaccardIndex", "params": {"task": "multiclass", "num_classes": 3}},
        {"label": "exact_match", "metric": "ExactMatch", "params": {"task": "multiclass", "num_classes": 3}},
        {"label": "mcc", "metric": "MatthewsCorrCoef", "params": {"task": "multiclass", "num_classes": 3}},
        {"label": "kappa_quadratic", "metric": "CohenKappa", "params": {"task": "multiclass", "num_classes": 3, "weights": "quadratic"}},
        {"label": "ece", "metric": "CalibrationError", "params": {"task": "multiclass", "num_classes": 3}},
    ]
    ex_cases = [{"name": m["label"], "metric": m["metric"], "params": m["params"], "inputs": ex_inputs}
                for m in ex_metrics]
    ex_tm = run_torch(ex_cases)
    example = {"config": "configs/examples/classification_torchmetrics.yaml", "inputs": ex_inputs,
               "samples": int(len(t)), "metrics": ex_metrics, "results": {}, "calls": {}}
    for m, c, r in zip(ex_metrics, ex_cases, ex_tm["results"]):
        example["results"][m["label"]] = r["expected"]
        example["calls"][m["label"]] = call_of(c)

    doc = {
        "generator": "tests/reference/classification_torchmetrics.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "scikit-learn": sklearn.__version__, **tm["versions"]},
        "notes": ["preds / target: the case's files; pred_labels: preds thresholded (sigmoid "
                  "first when outside [0, 1]) or argmax, for the scikit-learn cross-checks.",
                  "expected: torchmetrics computed in float64 (see 'call'); cross_check: "
                  "torchmetrics in float32 as it ships, and scikit-learn where it has the metric "
                  "(macro averages differ where torchmetrics leaves out absent classes)."],
        "cases": kept,
        "example": example,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    worst = max((c["cross_check"].get("rel_diff_sklearn", 0.0), c["name"]) for c in kept)
    print(f"{len(kept)} cases -> {rel(OUT)}; largest difference to scikit-learn: {worst}")


if __name__ == "__main__":
    if "--torch" in sys.argv:
        torch_main()
    else:
        main()
