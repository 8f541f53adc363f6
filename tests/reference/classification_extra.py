#!/usr/bin/env python3
"""Reference data and expected values for MultiLabelMetric, AveragePrecision, ROCAUC and F1Score
(plugins/classification), and the data of configs/examples/multilabel.yaml.

(a) Writes small datasets to tests/data/classification_extra/*.npy, deterministically (fixed
    seeds): tied scores (a 0.1 grid), scores equal to a threshold, a class with no positives, a
    class absent from multi-class labels, float32 and float64 scores, uneven sizes (103, 97, 89),
    negative ground-truth labels for F1Score. Also tests/data/classification_extra/npz/: .npz
    archives (np.savez: stored members; np.savez_compressed: deflated members) for the npy
    reader's tests.
(b) Writes configs/examples/data/multilabel/digits.npz from scikit-learn's digits (see
    make_multilabel_example() and configs/examples/data/README.md).
(c) Writes tests/reference/expected_classification_extra.json: per test case the metric, its
    parameters, its input files, the expected values and, for each value, the exact call that
    produced it (scikit-learn 1.7.2 and/or mmeval 0.2.1; "checks" records how the other library
    agreed). NaN (scikit-learn's value for an undefined AUC) is written as null.

    .venv-ref/bin/python tests/reference/classification_extra.py
"""

import json
import platform
import warnings
from pathlib import Path

import mmeval
import numpy as np
import sklearn
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import (average_precision_score, f1_score,
                             precision_recall_fscore_support, roc_auc_score)
from sklearn.preprocessing import label_binarize

warnings.filterwarnings("ignore", category=UndefinedMetricWarning)
warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=UserWarning)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "classification_extra"
OUT = ROOT / "tests" / "reference" / "expected_classification_extra.json"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "multilabel"

# Largest |mmeval - tally| seen per metric (mmeval reports rounded percent: 4 decimals).
MMEVAL_DIFF = {}


def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(name, array):
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / name
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


def clean(v):
    """JSON-ready: numpy scalars to Python, NaN to None."""
    if isinstance(v, (list, tuple, np.ndarray)):
        return [clean(x) for x in v]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if np.isnan(v) else float(v)
    return v


def note_mmeval(metric, got, want):
    """Records |mmeval/100 - sklearn| (mmeval: percent rounded to 4 decimals, so <= 5e-7 + float32
    error is agreement)."""
    d = float(np.max(np.abs(np.asarray(got, dtype=np.float64) - np.asarray(want, np.float64))))
    MMEVAL_DIFF[metric] = max(MMEVAL_DIFF.get(metric, 0.0), d)
    assert d < 2e-6, (metric, got, want)
    return d


# ---- (a) datasets ------------------------------------------------------------------------------

def make_multilabel():
    """N=103, C=6 multi-label: class 4 has no positives; scores on a 0.1 grid (ties, and values
    equal to the thresholds 0.5 and 0.3) and smooth scores (no ties) for top-k and mmeval's AP."""
    rng = np.random.default_rng(20240611)
    n, c = 103, 6
    y = (rng.random((n, c)) < np.array([0.5, 0.3, 0.2, 0.6, 0.0, 0.4])).astype(np.uint8)
    y[0, 5] = 1
    noise = rng.random((n, c))
    smooth = 0.5 * y + 0.45 * noise  # below 1: mmeval reads a matrix with values > 1 as labels
    tied = np.round(np.clip(0.3 * y + 0.8 * noise, 0, 1) * 10) / 10
    assert y[:, 4].sum() == 0 and all(y[:, k].sum() > 0 for k in (0, 1, 2, 3, 5))
    assert np.any(tied == 0.5) and np.any(np.float32(tied) == np.float32(0.3))
    for k in range(c):  # ties within every column
        assert len(np.unique(tied[:, k])) < n // 4
        assert len(np.unique(smooth[:, k])) == n
    # top-2 never has a tie at its boundary on the smooth scores
    srt = np.sort(smooth, axis=1)
    assert np.all(srt[:, -2] != srt[:, -3])
    return y, tied, smooth


def make_multiclass():
    """N=97, C=5 multi-class probabilities (rows sum to 1) made of small integers / their sum:
    many ties in every column. Also a C=6 variant whose class 5 never occurs."""
    rng = np.random.default_rng(20240612)
    n, c = 97, 5
    y = rng.integers(0, c, size=n)
    k = rng.integers(0, 4, size=(n, c)).astype(np.float64)
    k[np.arange(n), y] += rng.integers(0, 3, size=n)
    k[k.sum(1) == 0, 0] = 1
    p = k / k.sum(1, keepdims=True)
    assert np.allclose(p.sum(1), 1)
    k6 = np.concatenate([k, rng.integers(0, 2, size=(n, 1)).astype(np.float64)], axis=1)
    p6 = k6 / k6.sum(1, keepdims=True)
    return y, p, p6


def make_binary():
    """N=89 binary: scores on a 0.05 grid (ties across both classes), labels 0/1."""
    rng = np.random.default_rng(20240613)
    n = 89
    y = (rng.random(n) < 0.4).astype(np.int64)
    s = np.round(np.clip(0.35 * y + 0.7 * rng.random(n), 0, 1) * 20) / 20
    assert len(np.unique(s)) < 30
    return y, s


def make_f1():
    """N=53 samples of 7 labels each (token-level labels), classes 0..5, some ground-truth -1
    (mmeval: no class, but still a miss for the predicted class)."""
    rng = np.random.default_rng(20240614)
    n, l, c = 53, 7, 6
    gt = rng.integers(0, c, size=(n, l))
    gt[rng.random((n, l)) < 0.08] = -1
    pred = np.where(rng.random((n, l)) < 0.6, np.maximum(gt, 0), rng.integers(0, c, size=(n, l)))
    pred[:, :] = np.where(pred == 5, 4, pred)  # class 5 never predicted
    return gt.astype(np.int64), pred.astype(np.int32)


# ---- (c) expected values -----------------------------------------------------------------------

def prf_keys(suffix, avg, items):
    avg_suffix = {"macro": "", "micro": "_micro", None: "_classwise"}[avg]
    return [(item, item + suffix + avg_suffix) for item in items]


def multilabel_expected(y_onehot, pos, avg, items, suffix, mmeval_kwargs, mm_preds, mm_labels):
    """scikit-learn's precision_recall_fscore_support on the indicator matrices; support as mmeval
    (total positives for macro/micro); checked against mmeval's MultiLabelMetric."""
    c = y_onehot.shape[1]
    p, r, f, s = precision_recall_fscore_support(y_onehot, pos, average=avg, zero_division=0,
                                                 labels=list(range(c)))
    _, _, _, s_none = precision_recall_fscore_support(y_onehot, pos, average=None,
                                                      zero_division=0, labels=list(range(c)))
    vals = {"precision": p, "recall": r, "f1-score": f,
            "support": s_none if avg is None else int(np.sum(s_none))}
    exp, calls = {}, {}
    call = (f"sklearn.metrics.precision_recall_fscore_support(Y, P, average={avg!r}, "
            f"labels=range({c}), zero_division=0)")
    for item, key in prf_keys(suffix, avg, items):
        exp[key] = clean(vals[item])
        if item != "support":
            calls[key] = call
        else:
            per_class = call.replace(f"average={avg!r}", "average=None") + "[3]"
            calls[key] = per_class if avg is None else "sum of " + per_class
    mm = mmeval.MultiLabelMetric(num_classes=c, average=avg, items=items, **mmeval_kwargs)
    got = mm(mm_preds, mm_labels)
    assert list(got) == list(exp), (list(got), list(exp))
    for key, want in exp.items():
        g = got[key]
        if key.startswith("support"):
            assert np.array_equal(np.asarray(g), np.asarray(want)), (key, g, want)
        else:
            note_mmeval("MultiLabelMetric", np.asarray(g) / 100.0, want)
    return exp, calls


def onehot(y, c):
    return label_binarize(y, classes=list(range(c))).astype(np.uint8)


def main():
    cases = []

    def case(name, metric, params, inputs, expected, calls, checks=""):
        cases.append({"name": name, "metric": metric, "params": params, "inputs": inputs,
                      "expected": expected, "calls": calls, "checks": checks})

    # ---- data
    ml_y, ml_tied, ml_smooth = make_multilabel()
    f_ml_y = save("ml_labels_u8.npy", ml_y)
    f_ml_yb = save("ml_labels_bool.npy", ml_y.astype(bool))
    f_ml_t64 = save("ml_tied_f64.npy", ml_tied)
    f_ml_t32 = save("ml_tied_f32.npy", ml_tied.astype(np.float32))
    f_ml_s64 = save("ml_smooth_f64.npy", ml_smooth)
    ml_pred_onehot = (ml_smooth >= 0.6).astype(np.uint8)
    f_ml_p = save("ml_pred_onehot_u8.npy", ml_pred_onehot)
    mc_y, mc_p, mc_p6 = make_multiclass()
    f_mc_y = save("mc_labels_i64.npy", mc_y)
    f_mc_y32 = save("mc_labels_i32.npy", mc_y.astype(np.int32))
    f_mc_p64 = save("mc_scores_f64.npy", mc_p)
    f_mc_p32 = save("mc_scores_f32.npy", mc_p.astype(np.float32))
    f_mc_p6 = save("mc6_scores_f64.npy", mc_p6)
    bin_y, bin_s = make_binary()
    f_bin_y = save("bin_labels_i64.npy", bin_y)
    f_bin_s64 = save("bin_scores_f64.npy", bin_s)
    f_bin_s32 = save("bin_scores_f32.npy", bin_s.astype(np.float32))
    f1_gt, f1_pred = make_f1()
    f_f1_gt = save("f1_gt_i64.npy", f1_gt)
    f_f1_pred = save("f1_pred_i32.npy", f1_pred)

    mm_ml_y = [ml_y[i] for i in range(len(ml_y))]

    # ---- MultiLabelMetric
    for name, scores, s_file, kwargs, params, suffix, avg, items in [
        ("mlm_tied_f64_thr05_macro", ml_tied, f_ml_t64, {"thr": 0.5}, {}, "", "macro",
         ["precision", "recall", "f1-score", "support"]),
        ("mlm_tied_f32_thr03_micro", ml_tied.astype(np.float32), f_ml_t32, {"thr": 0.3},
         {"thr": 0.3, "average": "micro"}, "_thr-0.30", "micro",
         ["precision", "recall", "f1-score", "support"]),
        ("mlm_tied_f64_thr03_none", ml_tied, f_ml_t64, {"thr": 0.3},
         {"thr": 0.3, "average": "none", "items": ["precision", "recall", "f1-score", "support"]},
         "_thr-0.30", None, ["precision", "recall", "f1-score", "support"]),
        ("mlm_smooth_top2_none", ml_smooth, f_ml_s64, {"topk": 2},
         {"topk": 2, "average": "none"}, "_top2", None, ["precision", "recall", "f1-score"]),
        ("mlm_smooth_top1_macro", ml_smooth, f_ml_s64, {"topk": 1},
         {"topk": 1, "items": ["f1-score", "recall"]}, "_top1", "macro", ["recall", "f1-score"]),
        ("mlm_smooth_top3_micro", ml_smooth, f_ml_s64, {"topk": 3},
         {"topk": 3, "average": "micro"}, "_top3", "micro", ["precision", "recall", "f1-score"]),
    ]:
        if "thr" in kwargs:
            thr = scores.dtype.type(kwargs["thr"])
            pos = (scores >= thr).astype(np.int64)
            rule = f"P = (s >= {kwargs['thr']}) in the scores' dtype"
        else:
            k = kwargs["topk"]
            order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
            pos = np.zeros(scores.shape, np.int64)
            np.put_along_axis(pos, order, 1, axis=1)
            rule = f"P = the top {k} scores of each row (no ties at the boundary in this data)"
        if "items" not in params and items != ["precision", "recall", "f1-score"]:
            params = dict(params, items=items)
        exp, calls = multilabel_expected(ml_y, pos, avg, items, suffix, kwargs,
                                         [scores[i] for i in range(len(scores))], mm_ml_y)
        case(name, "MultiLabelMetric", params, {"pred_scores": s_file, "gt_labels": f_ml_y},
             exp, calls, f"Y = gt_labels (indicator), {rule}; mmeval.metrics.MultiLabelMetric("
             f"num_classes=6, {', '.join(f'{a}={b!r}' for a, b in kwargs.items())}, "
             f"average={avg!r}) agrees (percent/100, rounded to 4 decimals there)")
    # predictions as an indicator matrix
    exp, calls = multilabel_expected(ml_y, ml_pred_onehot, "macro",
                                     ["precision", "recall", "f1-score"], "", {},
                                     [ml_pred_onehot[i] for i in range(len(ml_y))], mm_ml_y)
    case("mlm_pred_onehot_macro", "MultiLabelMetric", {},
         {"pred_labels": f_ml_p, "gt_labels": f_ml_yb}, exp, calls,
         "P = pred_labels (indicator); mmeval MultiLabelMetric(num_classes=6) on one-hot "
         "predictions agrees")

    # ---- AveragePrecision
    c = ml_y.shape[1]
    for name, scores, s_file, y_file in [("ap_ml_tied_f64", ml_tied, f_ml_t64, f_ml_y),
                                         ("ap_ml_tied_f32", ml_tied.astype(np.float32),
                                          f_ml_t32, f_ml_yb),
                                         ("ap_ml_smooth_f64", ml_smooth, f_ml_s64, f_ml_y)]:
        for avg in ("macro", None):
            v = average_precision_score(ml_y, scores, average=avg)
            key = "mAP" if avg else "AP_classwise"
            checks = "class 4 has no positives: AP 0 (scikit-learn warns), as mmeval"
            if name == "ap_ml_smooth_f64":
                mm = mmeval.AveragePrecision(average=avg)([scores[i] for i in range(len(scores))],
                                                          mm_ml_y)
                note_mmeval("AveragePrecision", np.asarray(mm[key]) / 100.0, v)
                checks += "; no ties: mmeval.metrics.AveragePrecision agrees (percent/100)"
            else:
                checks += ("; tied scores: scikit-learn's rule (one point per distinct score), "
                           "mmeval (argsort order) differs")
            case(f"{name}_{avg or 'none'}", "AveragePrecision",
                 {} if avg else {"average": "none"}, {"pred_scores": s_file, "gt_labels": y_file},
                 {key: clean(v)},
                 {key: f"sklearn.metrics.average_precision_score(Y, s, average={avg!r})"}, checks)
    # multi-class labels (one-vs-rest), and the variant with an absent class
    for name, scores, s_file, y_file, cc in [("ap_mc_f64", mc_p, f_mc_p64, f_mc_y, 5),
                                             ("ap_mc_f32", mc_p.astype(np.float32), f_mc_p32,
                                              f_mc_y32, 5),
                                             ("ap_mc6_absent", mc_p6, f_mc_p6, f_mc_y, 6)]:
        for avg in ("macro", None):
            key = "mAP" if avg else "AP_classwise"
            if cc == 5:
                v = average_precision_score(mc_y, scores, average=avg)
                call = f"sklearn.metrics.average_precision_score(y, s, average={avg!r})"
                assert np.allclose(v, average_precision_score(onehot(mc_y, cc), scores,
                                                              average=avg))
            else:
                v = average_precision_score(onehot(mc_y, cc), scores, average=avg)
                call = (f"sklearn.metrics.average_precision_score(label_binarize(y, "
                        f"classes=range({cc})), s, average={avg!r})")
            case(f"{name}_{avg or 'none'}", "AveragePrecision",
                 {} if avg else {"average": "none"}, {"pred_scores": s_file, "gt_labels": y_file},
                 {key: clean(v)}, {key: call},
                 "multi-class labels, one-vs-rest" + ("; class 5 absent: AP 0" if cc == 6 else ""))
    for name, s, s_file in [("ap_bin_f64", bin_s, f_bin_s64),
                            ("ap_bin_f32", bin_s.astype(np.float32), f_bin_s32)]:
        v = average_precision_score(bin_y, s)
        case(name, "AveragePrecision", {}, {"pred_scores": s_file, "gt_labels": f_bin_y},
             {"mAP": clean(v)}, {"mAP": "sklearn.metrics.average_precision_score(y, s)"},
             "binary: 1-D scores of class 1")

    # ---- ROCAUC
    for name, s, s_file in [("auc_bin_f64", bin_s, f_bin_s64),
                            ("auc_bin_f32", bin_s.astype(np.float32), f_bin_s32)]:
        case(name, "ROCAUC", {}, {"pred_scores": s_file, "gt_labels": f_bin_y},
             {"AUC": clean(roc_auc_score(bin_y, s))},
             {"AUC": "sklearn.metrics.roc_auc_score(y, s)"}, "binary, tied scores")
    for s_tag, scores, s_file, y_file in [("f64", mc_p, f_mc_p64, f_mc_y),
                                          ("f32", mc_p.astype(np.float32), f_mc_p32, f_mc_y32)]:
        for mc, avg in [("ovr", "macro"), ("ovr", "weighted"), ("ovr", "micro"), ("ovr", None),
                        ("ovo", "macro"), ("ovo", "weighted")]:
            v = roc_auc_score(mc_y, scores, multi_class=mc, average=avg, labels=list(range(5)))
            key = "AUC" if avg else "AUC_classwise"
            params = {"multi_class": mc, "average": avg or "none"}
            case(f"auc_mc_{s_tag}_{mc}_{avg or 'none'}", "ROCAUC", params,
                 {"pred_scores": s_file, "gt_labels": y_file}, {key: clean(v)},
                 {key: f"sklearn.metrics.roc_auc_score(y, s, multi_class={mc!r}, "
                       f"average={avg!r}, labels=range(5))"}, "multi-class, tied scores")
    for mc, avg in [("ovr", "macro"), ("ovr", "weighted"), ("ovr", "micro"), ("ovr", None),
                    ("ovo", "macro"), ("ovo", "weighted")]:
        v = roc_auc_score(mc_y, mc_p6, multi_class=mc, average=avg, labels=list(range(6)))
        key = "AUC" if avg else "AUC_classwise"
        case(f"auc_mc6_absent_{mc}_{avg or 'none'}", "ROCAUC",
             {"multi_class": mc, "average": avg or "none"},
             {"pred_scores": f_mc_p6, "gt_labels": f_mc_y}, {key: clean(v)},
             {key: f"sklearn.metrics.roc_auc_score(y, s, multi_class={mc!r}, average={avg!r}, "
                   f"labels=range(6))"},
             "class 5 absent from y: undefined (NaN) for it in ovr; ovo pairs present classes only")
    for s_tag, scores, s_file, y_file in [("tied_f64", ml_tied, f_ml_t64, f_ml_y),
                                          ("tied_f32", ml_tied.astype(np.float32), f_ml_t32,
                                           f_ml_yb),
                                          ("smooth_f64", ml_smooth, f_ml_s64, f_ml_y)]:
        for avg in ("macro", "weighted", "micro", None):
            v = roc_auc_score(ml_y, scores, average=avg)
            key = "AUC" if avg else "AUC_classwise"
            case(f"auc_ml_{s_tag}_{avg or 'none'}", "ROCAUC", {"average": avg or "none"},
                 {"pred_scores": s_file, "gt_labels": y_file}, {key: clean(v)},
                 {key: f"sklearn.metrics.roc_auc_score(Y, s, average={avg!r})"},
                 "multi-label indicator; class 4 has no positives: NaN for it (macro NaN)")

    # ---- F1Score
    for name, params, kwargs in [
        ("f1_micro", {}, {}),
        ("f1_both", {"mode": ["macro", "micro"]}, {"mode": ["macro", "micro"]}),
        ("f1_cared", {"mode": ["micro", "macro"], "cared_classes": [4, 1, 5]},
         {"mode": ["micro", "macro"], "cared_classes": [4, 1, 5]}),
        ("f1_ignored", {"mode": "macro", "ignored_classes": [0, 3]},
         {"mode": "macro", "ignored_classes": [0, 3]}),
    ]:
        mm = mmeval.F1Score(num_classes=6, **kwargs)
        got = mm([f1_pred[i] for i in range(len(f1_pred))], [f1_gt[i] for i in range(len(f1_gt))])
        cared = sorted(kwargs.get("cared_classes", [])) or sorted(
            set(range(6)) - set(kwargs.get("ignored_classes", [])))
        exp, calls = {}, {}
        for key, v in got.items():
            sk = f1_score(f1_gt.ravel(), f1_pred.ravel(), labels=cared,
                          average=key.split("_")[0], zero_division=0)
            assert abs(sk - v) <= 1e-15 * max(1, abs(v)), (key, sk, v)
            exp[key] = float(v)
            calls[key] = (f"mmeval.metrics.F1Score(num_classes=6, "
                          f"{', '.join(f'{a}={b!r}' for a, b in kwargs.items())})(preds, gts)"
                          f"['{key}'] on the per-sample arrays")
        case(name, "F1Score", dict(params, num_classes=6),
             {"pred_labels": f_f1_pred, "gt_labels": f_f1_gt}, exp, calls,
             f"sklearn.metrics.f1_score(gt.ravel(), pred.ravel(), labels={cared}, "
             f"average=..., zero_division=0) agrees to 1e-15")

    # ---- npz archives for the npy reader tests
    npz = DATA / "npz"
    npz.mkdir(parents=True, exist_ok=True)
    arrays = {"scores": mc_p.astype(np.float32), "labels": mc_y, "mask": mc_y % 2 == 0,
              "f64": mc_p}
    np.savez(npz / "stored.npz", **arrays)
    np.savez_compressed(npz / "deflated.npz", **arrays)

    example = make_multilabel_example()

    doc = {
        "generator": "tests/reference/classification_extra.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "scikit-learn": sklearn.__version__, "mmeval": mmeval.__version__},
        "notes": [
            "Y: the gt_labels file as an indicator matrix; y: class ids; s: the pred_scores "
            "file; null: NaN (undefined).",
            "Values are fractions in [0, 1] (mmeval reports percent); counts are integers.",
            "mmeval agreement, largest |mmeval/100 - expected|: " + json.dumps(MMEVAL_DIFF),
        ],
        "cases": cases,
        "example": example,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {rel(OUT)}: {len(cases)} cases; mmeval agreement {MMEVAL_DIFF}")


# ---- (b) the example ---------------------------------------------------------------------------

# Properties of a digit, each a label of the multi-label target.
PROPERTIES = {
    "even": [0, 2, 4, 6, 8],
    "large": [5, 6, 7, 8, 9],
    "prime": [2, 3, 5, 7],
    "closed_loop": [0, 6, 8, 9],
    "multiple_of_3": [0, 3, 6, 9],
}


def make_multilabel_example():
    """scikit-learn's digits: the first 900 samples train, the other 897 are evaluated.
    Multi-label target: 5 properties of the digit (PROPERTIES); scores from a one-vs-rest
    logistic regression. Also the digit itself: multinomial probabilities and the argmax."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    x, digit = load_digits(return_X_y=True)
    props = np.stack([np.isin(digit, v) for v in PROPERTIES.values()], axis=1).astype(np.uint8)
    n_train = 900
    ovr = OneVsRestClassifier(LogisticRegression(max_iter=5000)).fit(x[:n_train], props[:n_train])
    ml_scores = ovr.predict_proba(x[n_train:]).astype(np.float32)
    mc = LogisticRegression(max_iter=5000).fit(x[:n_train], digit[:n_train])
    digit_proba = mc.predict_proba(x[n_train:])  # float64: rows sum to 1 for sklearn's check
    digit_true = digit[n_train:].astype(np.int64)
    digit_pred = digit_proba.argmax(1).astype(np.int64)
    ml_labels = props[n_train:]
    EXAMPLE.mkdir(parents=True, exist_ok=True)
    c = np.ascontiguousarray  # predict_proba returns Fortran-ordered arrays
    np.savez(EXAMPLE / "digits.npz", ml_scores=c(ml_scores), ml_labels=c(ml_labels),
             digit_proba=c(digit_proba), digit_true=digit_true, digit_pred=digit_pred)

    y, s = ml_labels, ml_scores
    pos = (s >= np.float32(0.5)).astype(np.int64)
    p, r, f, _ = precision_recall_fscore_support(y, pos, average="macro", zero_division=0)
    pn, rn, fn, sn = precision_recall_fscore_support(y, pos, average=None, zero_division=0)
    mm = mmeval.MultiLabelMetric(num_classes=5, items=("precision", "recall", "f1-score",
                                                       "support"))([s[i] for i in range(len(s))],
                                                                   [y[i] for i in range(len(y))])
    results = {
        "MultiLabelMetric": {"precision": float(p), "recall": float(r), "f1-score": float(f),
                             "support": int(sn.sum())},
        "mlm_classwise": {"precision_classwise": clean(pn), "recall_classwise": clean(rn),
                          "f1-score_classwise": clean(fn)},
        "AveragePrecision": {"mAP": float(average_precision_score(y, s))},
        "ap_classwise": {"AP_classwise": clean(average_precision_score(y, s, average=None))},
        "ROCAUC": {"AUC": float(roc_auc_score(y, s))},
        "auc_digits_ovo": {"AUC": float(roc_auc_score(digit_true, digit_proba,
                                                      multi_class="ovo"))},
        "F1Score": {"macro_f1": None, "micro_f1": None},
    }
    f1 = mmeval.F1Score(num_classes=10, mode=["macro", "micro"], ignored_classes=[0])(
        [digit_pred], [digit_true])
    results["F1Score"] = {k: float(v) for k, v in f1.items()}
    for key in ("precision", "recall", "f1-score"):
        note_mmeval("MultiLabelMetric", mm[key] / 100.0, results["MultiLabelMetric"][key])
    assert mm["support"] == results["MultiLabelMetric"]["support"]
    f = "configs/examples/data/multilabel/digits.npz"
    return {
        "config": "configs/examples/multilabel.yaml",
        "archive": f,
        "samples": int(len(y)),
        "results": results,
        "calls": {
            "MultiLabelMetric": "sklearn.metrics.precision_recall_fscore_support(Y, s >= 0.5, "
                                "average='macro', zero_division=0); support = Y.sum(); mmeval "
                                "MultiLabelMetric(num_classes=5) agrees",
            "mlm_classwise": "sklearn.metrics.precision_recall_fscore_support(Y, s >= 0.5, "
                             "average=None, zero_division=0)",
            "AveragePrecision": "sklearn.metrics.average_precision_score(Y, s)",
            "ap_classwise": "sklearn.metrics.average_precision_score(Y, s, average=None)",
            "ROCAUC": "sklearn.metrics.roc_auc_score(Y, s)",
            "auc_digits_ovo": "sklearn.metrics.roc_auc_score(digit_true, digit_proba, "
                              "multi_class='ovo')",
            "F1Score": "mmeval.metrics.F1Score(num_classes=10, mode=['macro', 'micro'], "
                       "ignored_classes=[0])([digit_pred], [digit_true])",
        },
        "where": "Y = ml_labels, s = ml_scores (members of " + f + ")",
    }


if __name__ == "__main__":
    main()
