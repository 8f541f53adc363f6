#!/usr/bin/env python3
"""Reference data and expected values for the classification plugin.

(a) Writes small test datasets to tests/data/classification/*.npy, deterministically (fixed
    seeds): ties in the scores, a class never predicted, a class absent from the ground truth,
    uneven sizes, float64 and float32 scores, negative logits, and labels of several integer
    dtypes.
(b) Writes tests/reference/expected_classification.json: for every test case the metric, its
    parameters, its input files, the expected values computed with scikit-learn and, for each
    value, the exact call that produced it. The section "example" holds the expected results of
    configs/examples/classification.yaml (run make_example_data.py first).

Run from anywhere, in the reference environment:

    bash tests/reference/setup_venv.sh
    .venv-ref/bin/python tests/reference/make_example_data.py
    .venv-ref/bin/python tests/reference/classification.py

Semantics (see the header comments of plugins/classification/*.cpp):
  - Accuracy top-k: sklearn.metrics.top_k_accuracy_score (ties: stable argsort, reversed).
    A threshold thr keeps a hit only when the true class's score is > thr; computed with
    scikit-learn by passing the mask as sample_weight and normalize=False, divided by N. For
    float32 scores the comparison is done in float32 (np.float32(thr)), as tally does.
  - SingleLabelMetric: sklearn.metrics.precision_recall_fscore_support(labels=range(C),
    zero_division=0); the prediction is argmax, or -1 (no class) when the max score <= thr.
    support is N for macro/micro (mmeval) and the per-class counts for average none.
  - ConfusionMatrix: sklearn.metrics.confusion_matrix(y, p, labels=range(K)).
"""

import json
import platform
import sys
import warnings
from pathlib import Path

import numpy as np
import sklearn
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import (accuracy_score, confusion_matrix, precision_recall_fscore_support,
                             top_k_accuracy_score)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "classification"
OUT = ROOT / "tests" / "reference" / "expected_classification.json"
EXAMPLE_DATA = ROOT / "configs" / "examples" / "data"

# k >= n_classes is a legitimate (perfect-score) case in the tests.
warnings.filterwarnings("ignore", category=UndefinedMetricWarning)


def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(name, array):
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / name
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


# ---- (a) datasets ------------------------------------------------------------------------------

def make_dataset_a():
    """N=101, C=7 scores on a 0.1 grid (many ties, the true class often tied), class 6 never the
    argmax (its column never exceeds the others' max, and argmax takes the first of equal
    scores), class 5 absent from the ground truth."""
    rng = np.random.default_rng(20240501)
    n, c = 101, 7
    y = rng.choice(np.array([0, 1, 2, 3, 4, 6]), size=n)
    k = rng.integers(0, 10, size=(n, c))
    # Favour the true class for about half of the samples, so top-k is neither 0 nor 1.
    boost = rng.random(n) < 0.5
    k[np.arange(n), y] = np.where(boost, np.minimum(k[np.arange(n), y] + 3, 11), k[np.arange(n), y])
    s = k / 10.0
    s[:, 6] = np.minimum(s[:, 6], s[:, :6].max(axis=1))
    assert not np.any(s.argmax(axis=1) == 6)
    assert not np.any(y == 5)
    # Ties with the true class at the top are what the tie-break rule is about: make sure there are.
    top = s.max(axis=1)
    assert np.sum((s[np.arange(n), y] == top) & ((s == top[:, None]).sum(axis=1) > 1)) >= 5
    return s, y


def make_dataset_b():
    """N=53, C=5 label predictions: class 4 never predicted, class 3 predicted but absent from the
    ground truth (precision 0 by zero_division), about 60 % correct."""
    rng = np.random.default_rng(53)
    n = 53
    y = rng.choice(np.array([0, 1, 2, 4]), size=n)
    p = np.where(rng.random(n) < 0.6, y, rng.choice(np.array([0, 1, 2, 3]), size=n))
    p = np.where(p == 4, 3, p)
    assert not np.any(p == 4) and not np.any(y == 3) and np.any(p == 3)
    return p, y


def make_dataset_c():
    """N=64, C=12 raw logits, mostly negative, continuous (no ties): thresholds default to none,
    so negative true-class scores still count."""
    rng = np.random.default_rng(64)
    n, c = 64, 12
    y = rng.integers(0, c, size=n)
    logits = rng.normal(-4.0, 1.5, size=(n, c))
    logits[np.arange(n), y] += rng.normal(2.0, 1.5, size=n)
    s = logits.astype(np.float32)
    assert np.mean(s[np.arange(n), y] <= 0) > 0.5
    return s, y


# ---- (b) expected values -----------------------------------------------------------------------

def accuracy_expected(s, y, topk, thrs, labels=None):
    c = s.shape[1]
    n = len(y)
    exp, calls = {}, {}
    sy = s[np.arange(n), y]
    for k in topk:
        for thr in thrs:
            key = f"top{k}"
            if len(thrs) > 1:
                key += "_no-thr" if thr is None else f"_thr-{thr:.2f}"
            if thr is None:
                exp[key] = top_k_accuracy_score(y, s, k=k, labels=range(c))
                calls[key] = f"sklearn.metrics.top_k_accuracy_score(y, s, k={k}, labels=range({c}))"
            else:
                # Compared in the scores' precision (float32 scores: float32 threshold).
                w = (sy > s.dtype.type(thr)).astype(np.float64)
                exp[key] = top_k_accuracy_score(y, s, k=k, labels=range(c), normalize=False,
                                                sample_weight=w) / n
                calls[key] = (f"sklearn.metrics.top_k_accuracy_score(y, s, k={k}, "
                              f"labels=range({c}), normalize=False, sample_weight=(s[arange(N), y] "
                              f"> numpy.{s.dtype.name}({thr}))) / N")
    return exp, calls


def predict(s, thr):
    p = s.argmax(axis=1)
    if thr is None:
        return p
    return np.where(s.max(axis=1) > s.dtype.type(thr), p, -1)


def prf_expected(y, p_by_thr, c, average, thrs, items, pred_desc):
    """mmeval's SingleLabelMetric keys, scikit-learn's values."""
    exp, calls = {}, {}
    avg_arg = {"macro": "'macro'", "micro": "'micro'", "none": "None"}[average]
    avg_suffix = {"macro": "", "micro": "_micro", "none": "_classwise"}[average]
    for thr in thrs:
        p = p_by_thr[thr]
        thr_suffix = "" if len(thrs) == 1 else ("_no-thr" if thr is None else f"_thr-{thr:.2f}")
        prec, rec, f1, _ = precision_recall_fscore_support(
            y, p, labels=range(c), average=None if average == "none" else average,
            zero_division=0)
        _, _, _, support = precision_recall_fscore_support(y, p, labels=range(c), average=None,
                                                           zero_division=0)
        pd = pred_desc(thr)
        call = (f"sklearn.metrics.precision_recall_fscore_support(y, {pd}, labels=range({c}), "
                f"average={avg_arg}, zero_division=0)")
        values = {"precision": (prec, call + "[0]"), "recall": (rec, call + "[1]"),
                  "f1-score": (f1, call + "[2]")}
        for item in ["precision", "recall", "f1-score", "support"]:
            if item not in items:
                continue
            key = item + thr_suffix + avg_suffix
            if item == "support":
                if average == "none":
                    exp[key] = [int(v) for v in support]
                    calls[key] = (f"sklearn.metrics.precision_recall_fscore_support(y, {pd}, "
                                  f"labels=range({c}), average=None, zero_division=0)[3]")
                else:
                    exp[key] = int(np.sum(support))
                    calls[key] = (f"int(sum(sklearn.metrics.precision_recall_fscore_support(y, "
                                  f"{pd}, labels=range({c}), average=None, zero_division=0)[3]))"
                                  " (= N, as mmeval reports support for macro/micro)")
            else:
                v, cl = values[item]
                exp[key] = [float(x) for x in v] if average == "none" else float(v)
                calls[key] = cl
    return exp, calls


def prf_scores(s, y, average, thrs=(None,), items=("precision", "recall", "f1-score")):
    thrs = list(thrs)
    p_by_thr = {thr: predict(s, thr) for thr in thrs}

    def desc(thr):
        if thr is None:
            return "s.argmax(1)"
        return (f"numpy.where(s.max(1) > numpy.{s.dtype.name}({thr}), s.argmax(1), -1)")

    return prf_expected(y, p_by_thr, s.shape[1], average, thrs, items, desc)


def prf_labels(p, y, c, average, items=("precision", "recall", "f1-score")):
    return prf_expected(y, {None: p}, c, average, [None], items, lambda thr: "p")


def cm_expected(y, p, k, pred_desc):
    m = confusion_matrix(y, p, labels=range(k))
    return ({"matrix": [[int(v) for v in row] for row in m]},
            {"matrix": f"sklearn.metrics.confusion_matrix(y, {pred_desc}, labels=range({k}))"})


def case(name, metric, params, inputs, expected_calls, note=""):
    expected, calls = expected_calls
    c = {"name": name, "metric": metric, "params": params, "inputs": inputs,
         "expected": expected, "calls": calls}
    if note:
        c["note"] = note
    return c


def main():
    s_a, y_a = make_dataset_a()
    p_b, y_b = make_dataset_b()
    s_c, y_c = make_dataset_c()
    s_a32 = s_a.astype(np.float32)
    # The float32 grid keeps the float64 ties (equal values round to equal floats).
    assert np.array_equal(np.argsort(s_a32, axis=1, kind="mergesort"),
                          np.argsort(s_a, axis=1, kind="mergesort"))

    f = {
        "a_scores_f64": save("a_scores_f64.npy", s_a),
        "a_scores_f32": save("a_scores_f32.npy", s_a32),
        "a_labels_i64": save("a_labels_i64.npy", y_a.astype(np.int64)),
        "a_labels_i32": save("a_labels_i32.npy", y_a.astype(np.int32)),
        "a_labels_u8": save("a_labels_u8.npy", y_a.astype(np.uint8)),
        "b_pred_i32": save("b_pred_i32.npy", p_b.astype(np.int32)),
        "b_pred_i64": save("b_pred_i64.npy", p_b.astype(np.int64)),
        "b_gt_u8": save("b_gt_u8.npy", y_b.astype(np.uint8)),
        "b_gt_i64": save("b_gt_i64.npy", y_b.astype(np.int64)),
        "c_logits_f32": save("c_logits_f32.npy", s_c),
        "c_labels_i16": save("c_labels_i16.npy", y_c.astype(np.int16)),
        "c_labels_u16": save("c_labels_u16.npy", y_c.astype(np.uint16)),
        "c_labels_i8": save("c_labels_i8.npy", y_c.astype(np.int8)),
    }

    def sc(scores, labels):
        return {"pred_scores": f[scores], "gt_labels": f[labels]}

    def lb(pred, labels):
        return {"pred_labels": f[pred], "gt_labels": f[labels]}

    # float32 scores compare with float32(thr): on the 0.1 grid it matters at 0.4 and 0.6
    # (float32(0.4) > 0.4 in float64). Check the cases below exercise it, so that a comparison
    # in float64 would fail them.
    sy32 = s_a32[np.arange(len(y_a)), y_a]
    for thr in (0.4, 0.6):
        w32 = (sy32 > np.float32(thr)).astype(np.float64)
        w64 = (sy32.astype(np.float64) > thr).astype(np.float64)
        assert (top_k_accuracy_score(y_a, s_a32, k=3, labels=range(7), sample_weight=w32)
                != top_k_accuracy_score(y_a, s_a32, k=3, labels=range(7), sample_weight=w64))
        m32 = s_a32.max(axis=1)
        assert np.sum(m32 > np.float32(thr)) != np.sum(m32.astype(np.float64) > thr)

    all_items = ["precision", "recall", "f1-score", "support"]
    cases = [
        # Accuracy
        case("accuracy_a_f64_i64", "Accuracy", {"topk": [1, 2, 3, 5, 7]},
             sc("a_scores_f64", "a_labels_i64"),
             accuracy_expected(s_a, y_a, [1, 2, 3, 5, 7], [None])),
        case("accuracy_a_f32_i32", "Accuracy", {"topk": [1, 2, 3, 5, 7]},
             sc("a_scores_f32", "a_labels_i32"),
             accuracy_expected(s_a32, y_a, [1, 2, 3, 5, 7], [None])),
        case("accuracy_a_f64_u8_int_topk", "Accuracy", {"topk": 2},
             sc("a_scores_f64", "a_labels_u8"), accuracy_expected(s_a, y_a, [2], [None])),
        case("accuracy_a_f64_thrs", "Accuracy", {"topk": [1, 3, 5], "thrs": [None, 0.4, 0.5]},
             sc("a_scores_f64", "a_labels_i64"),
             accuracy_expected(s_a, y_a, [1, 3, 5], [None, 0.4, 0.5])),
        case("accuracy_a_f32_thrs", "Accuracy", {"topk": [1, 3, 5], "thrs": [None, 0.4, 0.5]},
             sc("a_scores_f32", "a_labels_u8"),
             accuracy_expected(s_a32, y_a, [1, 3, 5], [None, 0.4, 0.5]),
             "float32 scores are compared with float32(thr)"),
        case("accuracy_a_single_thr", "Accuracy", {"topk": [1, 2], "thrs": 0.4},
             sc("a_scores_f64", "a_labels_i32"), accuracy_expected(s_a, y_a, [1, 2], [0.4])),
        case("accuracy_b_labels", "Accuracy", {},
             lb("b_pred_i32", "b_gt_u8"),
             ({"top1": accuracy_score(y_b, p_b)},
              {"top1": "sklearn.metrics.accuracy_score(y, p)"})),
        case("accuracy_c_logits", "Accuracy", {"topk": [1, 5]},
             sc("c_logits_f32", "c_labels_i16"),
             accuracy_expected(s_c, y_c, [1, 5], [None]),
             "negative logits: no threshold by default"),
        # SingleLabelMetric
        case("prf_a_macro_f64", "SingleLabelMetric", {"items": all_items},
             sc("a_scores_f64", "a_labels_i64"),
             prf_scores(s_a, y_a, "macro", items=all_items)),
        case("prf_a_micro_f32", "SingleLabelMetric", {"average": "micro", "items": all_items},
             sc("a_scores_f32", "a_labels_i32"),
             prf_scores(s_a32, y_a, "micro", items=all_items)),
        case("prf_a_none_f64", "SingleLabelMetric",
             {"average": "none", "num_classes": 7, "items": all_items},
             sc("a_scores_f64", "a_labels_u8"),
             prf_scores(s_a, y_a, "none", items=all_items)),
        case("prf_a_thrs_macro_f64", "SingleLabelPrecisionRecallF1score",
             {"thrs": [None, 0.5], "items": all_items},
             sc("a_scores_f64", "a_labels_i64"),
             prf_scores(s_a, y_a, "macro", thrs=[None, 0.5], items=all_items),
             "mmeval's class name as the type; a sample whose max score <= thr predicts no class"),
        case("prf_a_thrs_micro_f32", "SingleLabelMetric",
             {"average": "micro", "thrs": [0.4, 0.6]},
             sc("a_scores_f32", "a_labels_i64"),
             prf_scores(s_a32, y_a, "micro", thrs=[0.4, 0.6])),
        case("prf_a_thrs_none_f32", "SingleLabelMetric",
             {"average": "none", "thrs": [0.4, 0.6], "items": ["recall", "precision"]},
             sc("a_scores_f32", "a_labels_u8"),
             prf_scores(s_a32, y_a, "none", thrs=[0.4, 0.6], items=["recall", "precision"])),
        case("prf_b_labels_macro", "SingleLabelMetric", {"num_classes": 5, "items": all_items},
             lb("b_pred_i32", "b_gt_u8"), prf_labels(p_b, y_b, 5, "macro", items=all_items)),
        case("prf_b_labels_micro", "SingleLabelMetric", {"num_classes": 5, "average": "micro"},
             lb("b_pred_i64", "b_gt_i64"), prf_labels(p_b, y_b, 5, "micro")),
        case("prf_b_labels_none", "SingleLabelMetric",
             {"num_classes": 5, "average": "none", "items": all_items},
             lb("b_pred_i64", "b_gt_u8"), prf_labels(p_b, y_b, 5, "none", items=all_items)),
        case("prf_c_logits_macro", "SingleLabelMetric", {},
             sc("c_logits_f32", "c_labels_u16"), prf_scores(s_c, y_c, "macro")),
        # ConfusionMatrix
        case("cm_a_f64_i64", "ConfusionMatrix", {"num_classes": 7},
             sc("a_scores_f64", "a_labels_i64"), cm_expected(y_a, s_a.argmax(1), 7, "s.argmax(1)")),
        case("cm_a_f32_u8", "ConfusionMatrix", {"num_classes": 7},
             sc("a_scores_f32", "a_labels_u8"),
             cm_expected(y_a, s_a32.argmax(1), 7, "s.argmax(1)")),
        case("cm_b_labels", "ConfusionMatrix", {"num_classes": 5},
             lb("b_pred_i32", "b_gt_i64"), cm_expected(y_b, p_b, 5, "p")),
        case("cm_c_logits_i8", "ConfusionMatrix", {"num_classes": 12},
             sc("c_logits_f32", "c_labels_i8"),
             cm_expected(y_c, s_c.argmax(1), 12, "s.argmax(1)")),
    ]

    doc = {
        "generator": "tests/reference/classification.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "scikit-learn": sklearn.__version__},
        "notes": [
            "y: the gt_labels file; s: the pred_scores file; p: the pred_labels file; "
            "N = len(y); range(C) with C the number of classes.",
            "Values are fractions in [0, 1]; counts are integers.",
        ],
        "cases": cases,
    }

    example = example_section()
    if example is not None:
        doc["example"] = example
    else:
        print("classification.py: configs/examples/data has no preds.npy/labels.npy: run "
              "make_example_data.py first; the 'example' section is left out", file=sys.stderr)

    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {rel(OUT)}: {len(cases)} cases; data in {rel(DATA)} "
          f"(numpy {np.__version__}, scikit-learn {sklearn.__version__})")


def example_section():
    """Expected results of configs/examples/classification.yaml, in the shape of the results
    JSON's "results" map (metric label -> key -> value)."""
    preds, labels = EXAMPLE_DATA / "preds.npy", EXAMPLE_DATA / "labels.npy"
    if not preds.exists() or not labels.exists():
        return None
    s = np.load(preds)
    y = np.load(labels)
    c = s.shape[1]
    acc, acc_calls = accuracy_expected(s, y, [1, 3], [None])
    macro, macro_calls = prf_scores(s, y, "macro")
    classwise, classwise_calls = prf_scores(s, y, "none")
    cm, cm_calls = cm_expected(y, s.argmax(1), c, "s.argmax(1)")
    return {
        "config": "configs/examples/classification.yaml",
        "inputs": {"pred_scores": rel(preds), "gt_labels": rel(labels)},
        "samples": int(len(y)),
        "results": {"Accuracy": acc, "SingleLabelMetric": macro, "prf_classwise": classwise,
                    "ConfusionMatrix": cm},
        "calls": {"Accuracy": acc_calls, "SingleLabelMetric": macro_calls,
                  "prf_classwise": classwise_calls, "ConfusionMatrix": cm_calls},
        # The same metrics as cases, for tests that build them without the config.
        "metrics": [
            {"label": "Accuracy", "metric": "Accuracy", "params": {"topk": [1, 3]}},
            {"label": "SingleLabelMetric", "metric": "SingleLabelMetric", "params": {}},
            {"label": "prf_classwise", "metric": "SingleLabelMetric",
             "params": {"average": "none"}},
            {"label": "ConfusionMatrix", "metric": "ConfusionMatrix",
             "params": {"num_classes": c}},
        ],
    }


if __name__ == "__main__":
    main()
