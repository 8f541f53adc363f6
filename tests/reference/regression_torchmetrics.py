#!/usr/bin/env python3
"""Reference data and expected values for the torchmetrics-named metrics of the regression plugin
(plugins/regression: PearsonCorrCoef ... RelativeSquaredError).

(a) Writes test data to tests/data/regression_tm/*.npy, deterministically (seeds below):
    scikit-learn's diabetes data (442 patients; integer targets with ties) with the predictions of
    a LinearRegression fitted on samples 0..299, the same rounded to multiples of 25 (heavy ties),
    a PoissonRegressor's (positive) predictions, two outputs (target and 100 x bmi) predicted by a
    Ridge, linnerud (20 x 3), iris and wine class probabilities of two models (KLDivergence), wine's
    standardised features and their rank-3 PCA reconstruction (CosineSimilarity), values around 1e6
    spread by 1e-2 (cancellation), and small edge cases (constant inputs, a single sample, ties
    only, zeros).
(b) Writes configs/examples/data/regression_torchmetrics/{preds,target}.npy for
    configs/examples/regression_torchmetrics.yaml: diabetes samples 300..441 and a PoissonRegressor
    fitted on 0..299.
(c) Writes tests/reference/expected_regression_torchmetrics.json: for each case the metric, its
    parameters, its inputs, the expected values, the exact reference call ("reference") and the
    cross-checks against the other library ("cross_checks": call, value, relative difference).

The reference of each metric (see its source's header comment): torchmetrics 1.9.0 on float64
tensors for PearsonCorrCoef, ConcordanceCorrCoef, the percentage errors, MeanSquaredLogError,
TweedieDevianceScore, LogCoshError, MinkowskiDistance, KLDivergence and RelativeSquaredError;
its float64 formula _cosine_similarity_compute for CosineSimilarity (the class casts to float32);
SciPy 1.16.3 for SpearmanCorrCoef and KendallRankCorrCoef b/c (torchmetrics computes them in
float32); torchmetrics' kendall formulas in float64 on its exact pair counts for variant a;
scikit-learn 1.7.2 for ExplainedVariance. Cases "*_large_mean" take their expected value from
exact rational arithmetic (fractions.Fraction, square roots in 60-digit decimals) and record
both libraries' values as cross-checks.

Run in the reference environment:   .venv-ref/bin/python tests/reference/regression_torchmetrics.py
It runs the torchmetrics calls in .venv-torch (torch 2.15.0, torchmetrics 1.9.0: the venv of
scripts/setup-torch-venv.sh) as a subprocess: this same file with --torch.
"""

import json
import math
import platform
import subprocess
import sys
import warnings
from decimal import Decimal, getcontext
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "regression_tm"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "regression_torchmetrics"
OUT = ROOT / "tests" / "reference" / "expected_regression_torchmetrics.json"
TORCH_PYTHON = ROOT / ".venv-torch" / "bin" / "python"


def rel(path):
    return str(Path(path).relative_to(ROOT))


# ---- the torchmetrics side (run in .venv-torch) -----------------------------------------------

def torch_main():
    """Reads jobs [{"id", "inputs": {name: npy path}, "code": expression}] on stdin; evaluates each
    expression with the inputs as float64 tensors; prints {"id": value} (floats, lists, NaN as
    null)."""
    import torch
    import torchmetrics
    import importlib

    # The modules (the package's names of the same spelling are its functions).
    cos_mod = importlib.import_module("torchmetrics.functional.regression.cosine_similarity")
    kendall_mod = importlib.import_module("torchmetrics.functional.regression.kendall")

    torch.set_num_threads(1)

    def run(metric, *args):
        # A Metric's states are float32 unless set otherwise (Metric.double() is a no-op).
        metric.set_dtype(torch.float64)
        metric.update(*args)
        return metric.compute()

    def plain(v):
        if isinstance(v, (tuple, list)):
            return [plain(x) for x in v]
        if isinstance(v, torch.Tensor):
            v = v.double().tolist()
        if isinstance(v, list):
            return [plain(x) for x in v]
        v = float(v)
        return None if math.isnan(v) else v

    jobs = json.load(sys.stdin)
    out = {"versions": {"torch": torch.__version__, "torchmetrics": torchmetrics.__version__}}
    for job in jobs:
        env = {name: torch.from_numpy(np.load(ROOT / path)) for name, path in
               job["inputs"].items()}
        env.update(torch=torch, torchmetrics=torchmetrics, run=run, cos_mod=cos_mod,
                   kendall_mod=kendall_mod)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out[job["id"]] = plain(eval(job["code"], env))  # noqa: S307 (our own expressions)
    json.dump(out, sys.stdout)


# ---- data ------------------------------------------------------------------------------------

def save(folder, name, array):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


def datasets():
    from sklearn.datasets import load_diabetes, load_iris, load_linnerud, load_wine
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LinearRegression, LogisticRegression, PoissonRegressor, Ridge
    from sklearn.naive_bayes import GaussianNB
    from sklearn.preprocessing import StandardScaler

    X, y = load_diabetes(return_X_y=True)
    p = LinearRegression().fit(X[:300], y[:300]).predict(X)
    pois = PoissonRegressor(alpha=1e-3, max_iter=1000).fit(X[:300], y[:300]).predict(X)
    two_t = np.stack([y, 100 * X[:, 2]], axis=1)
    two_p = Ridge(alpha=0.1).fit(X[:300], two_t[:300]).predict(X)
    lin = load_linnerud()
    LX, LY = lin.data.astype(np.float64), lin.target.astype(np.float64)
    LP = Ridge(alpha=1.0).fit(LX, LY).predict(LX)

    def probs(loader):
        A, c = loader(return_X_y=True)
        A = StandardScaler().fit_transform(A)
        pa = LogisticRegression(C=0.5, max_iter=2000).fit(A, c).predict_proba(A)
        pb = GaussianNB().fit(A, c).predict_proba(A)
        # GaussianNB is often certain: keep q > 0 where p > 0 (a finite divergence), as a model
        # with label smoothing would.
        pb = 0.98 * pb + 0.02 / pb.shape[1]
        return pa, pb

    iris_p, iris_q = probs(load_iris)
    wine_p, wine_q = probs(load_wine)
    W = StandardScaler().fit_transform(load_wine(return_X_y=True)[0])
    pca = PCA(n_components=3, random_state=0).fit(W)
    W_rec = pca.inverse_transform(pca.transform(W))

    rng = np.random.default_rng(20261127)
    big_x = 1e6 + rng.normal(0, 1e-2, 400)
    big_y = 1e6 + 0.3 + 0.8 * (big_x - 1e6) + rng.normal(0, 6e-3, 400)

    d = {
        "diabetes": dict(preds=p, target=y),
        "diabetes_ties": dict(preds=np.round(p / 25) * 25, target=np.round(y / 25) * 25),
        "diabetes_pos": dict(preds=pois, target=y),
        "diabetes_2out": dict(preds=two_p, target=two_t),
        "linnerud": dict(preds=LP, target=LY),
        "large_mean": dict(preds=big_x, target=big_y),
        "iris_probs": dict(p=iris_p, q=iris_q, logp=np.log(iris_p), logq=np.log(iris_q)),
        "wine_probs": dict(p=wine_p, q=wine_q),
        "wine_embed": dict(preds=W_rec, target=W),
        # Edge cases.
        "constant_target": dict(preds=np.array([1.0, 2.0, 3.0, 4.0, 5.0]),
                                target=np.array([2.0, 2.0, 2.0, 2.0, 2.0])),
        "single": dict(preds=np.array([2.5]), target=np.array([3.0])),
        "pair": dict(preds=np.array([1.0, 2.0]), target=np.array([1.0, 3.0])),
        "all_ties": dict(preds=np.array([1.0, 1.0, 2.0, 2.0, 3.0, 3.0]),
                         target=np.array([5.0, 5.0, 5.0, 7.0, 7.0, 7.0])),
        "zeros": dict(preds=np.array([0.0, 0.5, 0.0, 2.0]), target=np.array([0.0, 0.0, 1.0, 2.0])),
        "zeros_target": dict(preds=np.array([0.5, 1.0, 0.25, 2.0]),
                             target=np.array([0.0, 0.0, 1.0, 2.0])),
        "cos_zero": dict(preds=np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [1.0, -1.0, 0.5]]),
                         target=np.array([[3.0, 2.0, 1.0], [1.0, 1.0, 1.0], [-2.0, 2.0, -1.0]])),
        "kl_zero_p": dict(p=np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]),
                          q=np.array([[0.25, 0.25, 0.5], [0.3, 0.3, 0.4]])),
        "kl_zero_q": dict(p=np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]),
                          q=np.array([[0.5, 0.0, 0.5], [0.3, 0.3, 0.4]])),
    }
    files = {}
    for name, arrays in d.items():
        files[name] = {k: save(DATA, f"{name}_{k}.npy", v) for k, v in arrays.items()}
    return d, files


# ---- exact arithmetic for the cancellation cases -----------------------------------------------

getcontext().prec = 60


def exact_centered(x, y):
    n = len(x)
    fx = [Fraction(float(v)) for v in x]
    fy = [Fraction(float(v)) for v in y]
    sx, sy = sum(fx), sum(fy)
    return (sum(a * b for a, b in zip(fx, fy)) - sx * sy / n, sx / n, sy / n)


def dsqrt(f):
    return Decimal(f.numerator).sqrt() / Decimal(f.denominator).sqrt()


def exact_pearson(x, y):
    cxy = exact_centered(x, y)[0]
    cxx = exact_centered(x, x)[0]
    cyy = exact_centered(y, y)[0]
    return float((Decimal(cxy.numerator) / Decimal(cxy.denominator)) / (dsqrt(cxx) * dsqrt(cyy)))


def exact_concordance(x, y):
    n = len(x)
    cxy, mx, my = exact_centered(x, y)
    vx = exact_centered(x, x)[0] / (n - 1)
    vy = exact_centered(y, y)[0] / (n - 1)
    r = Decimal(exact_pearson(x, y))  # as the metric: Pearson's r, then the formula
    num = 2 * r * dsqrt(vx) * dsqrt(vy)
    den = vx + vy + (mx - my) ** 2
    return float(num / (Decimal(den.numerator) / Decimal(den.denominator)))


def exact_explained_variance(p, y):
    e = [float(a) - float(b) for a, b in zip(y, p)]  # y - p rounded, as both libraries
    num = exact_centered(e, e)[0]
    den = exact_centered(y, y)[0]
    return float(1 - Decimal(num.numerator * den.denominator) / Decimal(den.numerator * num.denominator))


def exact_rse(p, y):
    sse = sum(Fraction(float(a) - float(b)) ** 2 for a, b in zip(y, p))
    den = exact_centered(y, y)[0]
    return float(Decimal((sse / den).numerator) / Decimal((sse / den).denominator))


# ---- cases -----------------------------------------------------------------------------------

def make_tau_a(n, alt, D):
    from scipy import stats

    def post(counts):
        C = np.asarray(counts[0], dtype=np.float64)
        Dc = np.asarray(counts[1], dtype=np.float64)
        tau = np.clip((C - Dc) / (C + Dc), -1, 1)
        z = 3 * (C - Dc) / np.sqrt(n * (n - 1) * (2 * n + 5) / 2)
        p = {"two-sided": 2 * stats.norm.sf(np.abs(z)), "greater": stats.norm.sf(z),
             "less": stats.norm.cdf(z)}[alt]
        p = np.where(np.isnan(tau), np.nan, p)
        if D == 1:
            return [float(tau[0]), float(p[0])]
        return [tau.tolist(), p.tolist()]

    post.__doc__ = (f"C, D = the counts above; tau = clip((C - D) / (C + D), -1, 1); "
                    f"z = 3 (C - D) / sqrt(n (n - 1) (2 n + 5) / 2) with n = {n}; p_value = "
                    + {"two-sided": "2 * scipy.stats.norm.sf(abs(z))",
                       "greater": "scipy.stats.norm.sf(z)", "less": "scipy.stats.norm.cdf(z)"}[alt])
    return post


def tm_class(cls, args):
    return f"torchmetrics.regression.{cls}({args})"


def main():
    import scipy
    import sklearn
    from scipy import spatial, stats
    from sklearn import metrics as skm

    warnings.simplefilter("ignore")
    d, files = datasets()
    cases = []
    jobs = []
    posts = {}

    def add(name, metric, params, data, key, ref, cross=(), inputs=None, exact=None, post=None):
        """ref: ("torch", code) or ("py", code): the reference call; cross: more of either."""
        fields = inputs or {"preds": "preds", "target": "target"}
        case = {"name": name, "metric": metric, "params": params,
                "inputs": {f: files[data][src] for f, src in fields.items()},
                "key": key, "reference": None, "cross_checks": []}
        # The calls see each input by its file's name and by the metric's field name.
        env_files = {v: files[data][v] for v in set(fields.values())}
        env_files.update(case["inputs"])
        for role, (kind, code) in [("reference", ref)] + [("cross", c) for c in cross]:
            entry = {"library": kind, "call": code}
            if kind == "torch":
                jobs.append({"id": f"{name}/{role}/{code}", "inputs": env_files, "code": code})
            else:
                env = {k: np.load(ROOT / v) for k, v in env_files.items()}
                env.update(np=np, stats=stats, spatial=spatial, skm=skm)
                v = eval(code, env)  # noqa: S307 (our own expressions)
                entry["value"] = np.asarray(v, dtype=np.float64).tolist()
            if role == "reference":
                case["reference"] = entry
            else:
                case["cross_checks"].append(entry)
        if exact is not None:
            case["exact"] = exact
        if post is not None:
            posts[name] = post
            case["reference"]["then"] = post.__doc__
        cases.append(case)

    sp = "stats.spearmanr(preds{0}, target{0}).statistic"
    # PearsonCorrCoef
    for data in ["diabetes", "diabetes_ties", "linnerud", "diabetes_2out", "large_mean",
                 "constant_target", "single", "pair"]:
        D = d[data]["preds"].shape[1] if d[data]["preds"].ndim == 2 else 1
        cross = [("py", f"[stats.pearsonr(preds[:, k], target[:, k]).statistic for k in "
                        f"range({D})]" if D > 1 else "stats.pearsonr(preds, target).statistic")]
        if data in ("single", "constant_target"):
            cross = []
        ex = exact_pearson(d[data]["preds"], d[data]["target"]) if data == "large_mean" else None
        add(f"pearson_{data}", "PearsonCorrCoef", {"num_outputs": D}, data, "pearson_corrcoef",
            ("torch", f"run({tm_class('PearsonCorrCoef', f'num_outputs={D}')}, preds, target)"),
            cross, exact=ex)
    # ConcordanceCorrCoef
    for data in ["diabetes", "linnerud", "diabetes_2out", "large_mean", "constant_target"]:
        D = d[data]["preds"].shape[1] if d[data]["preds"].ndim == 2 else 1
        ex = exact_concordance(d[data]["preds"], d[data]["target"]) if data == "large_mean" else None
        add(f"concordance_{data}", "ConcordanceCorrCoef", {"num_outputs": D}, data,
            "concordance_corrcoef",
            ("torch", f"run({tm_class('ConcordanceCorrCoef', f'num_outputs={D}')}, preds, target)"),
            exact=ex)
    # SpearmanCorrCoef
    for data in ["diabetes", "diabetes_ties", "linnerud", "diabetes_2out", "large_mean",
                 "all_ties", "pair"]:
        D = d[data]["preds"].shape[1] if d[data]["preds"].ndim == 2 else 1
        ref = (f"[stats.spearmanr(preds[:, k], target[:, k]).statistic for k in range({D})]"
               if D > 1 else sp.format(""))
        add(f"spearman_{data}", "SpearmanCorrCoef", {"num_outputs": D}, data, "spearman_corrcoef",
            ("py", ref),
            [("torch", f"run({tm_class('SpearmanCorrCoef', f'num_outputs={D}')}, preds, target)")])
    add("spearman_constant_target", "SpearmanCorrCoef", {"num_outputs": 1}, "constant_target",
        "spearman_corrcoef", ("py", sp.format("")),
        [("torch", f"run({tm_class('SpearmanCorrCoef', '')}, preds, target)")])
    # KendallRankCorrCoef
    for variant in ["b", "c"]:
        # Two samples: SciPy's test divides by N - 2 and raises (ZeroDivisionError); the
        # coefficient alone.
        add(f"kendall_pair_{variant}", "KendallRankCorrCoef", {"variant": variant}, "pair",
            "kendall_rank_corrcoef",
            ("py", f"stats.kendalltau(preds, target, variant={variant!r}).statistic"),
            [("torch", f"run({tm_class('KendallRankCorrCoef', f'variant={variant!r}')}, preds, "
                       "target)")])
    for data in ["diabetes", "diabetes_ties", "linnerud", "all_ties", "pair", "constant_target"]:
        D = d[data]["preds"].shape[1] if d[data]["preds"].ndim == 2 else 1
        for variant in ["a"] if data == "pair" else ["a", "b", "c"]:
            for alt in (["two-sided", "less", "greater"] if data == "diabetes_ties" else
                        ["two-sided"]):
                params = {"variant": variant, "t_test": True, "alternative": alt,
                          "num_outputs": D}
                kargs = f"variant={variant!r}, t_test=True, alternative={alt!r}, num_outputs={D}"
                tmcall = f"run({tm_class('KendallRankCorrCoef', kargs)}, preds, target)"
                post = None
                if variant == "a":
                    # torchmetrics' own formulas in float64 (it returns float32), on its exact
                    # pair counts C and D: tau = (C - D) / (C + D), z = 3 (C - D) / sqrt(n (n - 1)
                    # (2 n + 5) / 2), p = 2 norm.sf(|z|) | norm.sf(z) (greater) | norm.cdf(z).
                    cols = "preds, target" if D > 1 else "preds[:, None], target[:, None]"
                    ref = ("torch", f"[t.tolist() for t in kendall_mod._get_metric_metadata("
                                    f"{cols}, kendall_mod._MetricVariant.A)[:2]]")
                    n = len(d[data]["preds"])
                    post = make_tau_a(n, alt, D)
                else:
                    ref = ("py", (f"[[stats.kendalltau(preds[:, k], target[:, k], "
                                  f"variant={variant!r}, method='asymptotic', "
                                  f"alternative={alt!r})[j] for k in range({D})] for j in (0, 1)]")
                           if D > 1 else
                           (f"list(stats.kendalltau(preds, target, variant={variant!r}, "
                            f"method='asymptotic', alternative={alt!r}))"))
                add(f"kendall_{data}_{variant}_{alt.replace('-', '_')}", "KendallRankCorrCoef",
                    params, data,
                    ["kendall_rank_corrcoef", "p_value"], ref, [("torch", tmcall)], post=post)
    add("kendall_diabetes_b_no_test", "KendallRankCorrCoef", {}, "diabetes",
        "kendall_rank_corrcoef", ("py", "stats.kendalltau(preds, target).statistic"),
        [("torch", f"run({tm_class('KendallRankCorrCoef', '')}, preds, target)")])
    # ExplainedVariance
    for data in ["diabetes", "linnerud", "diabetes_2out", "large_mean", "constant_target"]:
        for mo in (["uniform_average", "raw_values", "variance_weighted"]
                   if d[data]["preds"].ndim == 2 else ["uniform_average"]):
            ex = (exact_explained_variance(d[data]["preds"], d[data]["target"])
                  if data == "large_mean" else None)
            add(f"explained_variance_{data}_{mo}", "ExplainedVariance", {"multioutput": mo}, data,
                "explained_variance",
                ("py", f"skm.explained_variance_score(target, preds, multioutput={mo!r})"),
                [("torch", f"run({tm_class('ExplainedVariance', f'multioutput={mo!r}')}, "
                           "preds, target)")], exact=ex)
    # The percentage errors, MeanSquaredLogError.
    for data in ["diabetes", "diabetes_pos", "linnerud", "diabetes_2out", "zeros"]:
        add(f"mape_{data}", "MeanAbsolutePercentageError", {}, data,
            "mean_absolute_percentage_error",
            ("torch", f"run({tm_class('MeanAbsolutePercentageError', '')}, preds, target)"),
            [("py", "skm.mean_absolute_percentage_error(target, preds)")])
        add(f"smape_{data}", "SymmetricMeanAbsolutePercentageError", {}, data,
            "symmetric_mean_absolute_percentage_error",
            ("torch", f"run({tm_class('SymmetricMeanAbsolutePercentageError', '')}, preds, "
                      "target)"))
        add(f"wmape_{data}", "WeightedMeanAbsolutePercentageError", {}, data,
            "weighted_mean_absolute_percentage_error",
            ("torch", f"run({tm_class('WeightedMeanAbsolutePercentageError', '')}, preds, "
                      "target)"))
    for data in ["diabetes_pos", "linnerud", "diabetes_2out", "zeros"]:
        if (d[data]["preds"] <= -1).any() or (d[data]["target"] <= -1).any():
            continue
        add(f"msle_{data}", "MeanSquaredLogError", {}, data, "mean_squared_log_error",
            ("torch", f"run({tm_class('MeanSquaredLogError', '')}, preds, target)"),
            [("py", "skm.mean_squared_log_error(target, preds)")])
    # TweedieDevianceScore
    tw = {"preds": "preds", "targets": "target"}
    for power in [0.0, 1.0, 1.5, 2.0, 3.0, -1.0]:
        for data in ["diabetes_pos", "zeros_target"] if power in (1.0, 1.5) else ["diabetes_pos"]:
            add(f"tweedie_{data}_power{power:g}".replace("-", "minus"), "TweedieDevianceScore", {"power": power}, data,
                "tweedie_deviance_score",
                ("torch", f"run({tm_class('TweedieDevianceScore', f'power={power}')}, preds, "
                          "target)"),
                [("py", f"skm.mean_tweedie_deviance(target, preds, power={power})")], inputs=tw)
    # LogCoshError
    for data in ["diabetes", "linnerud", "diabetes_2out", "single"]:
        D = d[data]["preds"].shape[1] if d[data]["preds"].ndim == 2 else 1
        add(f"log_cosh_{data}", "LogCoshError", {"num_outputs": D}, data, "log_cosh_error",
            ("torch", f"run({tm_class('LogCoshError', f'num_outputs={D}')}, preds, target)"))
    # MinkowskiDistance
    mk = {"preds": "preds", "targets": "target"}
    for p in [1.0, 1.5, 2.0, 3.0, 7.0]:
        for data in ["diabetes", "linnerud"]:
            add(f"minkowski_{data}_p{p:g}".replace(".", "_"), "MinkowskiDistance", {"p": p}, data,
                "minkowski_distance",
                ("torch", f"run({tm_class('MinkowskiDistance', f'p={p}')}, preds, target)"),
                [("py", f"spatial.distance.minkowski(preds.ravel(), target.ravel(), p={p})")],
                inputs=mk)
    # RelativeSquaredError
    for data in ["diabetes", "linnerud", "diabetes_2out", "large_mean", "constant_target"]:
        D = d[data]["preds"].shape[1] if d[data]["preds"].ndim == 2 else 1
        for squared in [True, False]:
            ex = None
            if data == "large_mean":
                ex = exact_rse(d[data]["preds"], d[data]["target"])
                ex = ex if squared else float(Decimal(ex).sqrt())
            cross = ([("py", f"float(np.mean(1 - skm.r2_score(target, preds, "
                             f"multioutput='raw_values')))")] if squared and
                     data != "constant_target" else [])
            add(f"rse_{data}_{'squared' if squared else 'root'}", "RelativeSquaredError",
                {"num_outputs": D, "squared": squared}, data, "relative_squared_error",
                ("torch", "run(" + tm_class("RelativeSquaredError",
                                            f"num_outputs={D}, squared={squared}") +
                 ", preds, target)"), cross, exact=ex)
    # CosineSimilarity
    for data in ["wine_embed", "linnerud", "diabetes_2out", "cos_zero"]:
        for red in ["sum", "mean", "none"]:
            cross = [("torch", f"run({tm_class('CosineSimilarity', f'reduction={red!r}')}, "
                               "preds, target)")]
            if data != "cos_zero":
                sc = "[1 - spatial.distance.cosine(a, b) for a, b in zip(preds, target)]"
                cross.append(("py", {"sum": f"sum({sc})", "mean": f"np.mean({sc})",
                                     "none": sc}[red]))
            add(f"cosine_{data}_{red}", "CosineSimilarity", {"reduction": red}, data,
                "cosine_similarity",
                ("torch", f"cos_mod._cosine_similarity_compute(preds, target, {red!r})"), cross)
    # KLDivergence
    kl = {"p": "p", "q": "q"}
    for data in ["iris_probs", "wine_probs", "kl_zero_p", "kl_zero_q"]:
        for red in ["mean", "sum", "none"]:
            cross = []
            if data in ("iris_probs", "wine_probs"):
                sc = "[stats.entropy(a, b) for a, b in zip(p, q)]"
                cross = [("py", {"sum": f"sum({sc})", "mean": f"np.mean({sc})", "none": sc}[red])]
            add(f"kl_{data}_{red}", "KLDivergence", {"log_prob": False, "reduction": red}, data,
                "kl_divergence",
                ("torch", f"run({tm_class('KLDivergence', f'log_prob=False, reduction={red!r}')}, "
                          "p, q)"), cross, inputs=kl)
    for red in ["mean", "sum", "none"]:
        add(f"kl_iris_log_prob_{red}", "KLDivergence", {"log_prob": True, "reduction": red},
            "iris_probs", "kl_divergence",
            ("torch", f"run({tm_class('KLDivergence', f'log_prob=True, reduction={red!r}')}, "
                      "p, q)"), inputs={"p": "logp", "q": "logq"})

    # The example: diabetes 300..441, a PoissonRegressor fitted on 0..299.
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import PoissonRegressor
    X, y = load_diabetes(return_X_y=True)
    ep = PoissonRegressor(alpha=1e-3, max_iter=1000).fit(X[:300], y[:300]).predict(X[300:])
    et = y[300:]
    ex_files = {"preds": save(EXAMPLE, "preds.npy", ep), "target": save(EXAMPLE, "target.npy", et)}
    files["example"] = ex_files
    example_metrics = [
        ("PearsonCorrCoef", {}, "pearson_corrcoef", ("torch", "run(torchmetrics.regression.PearsonCorrCoef(), preds, target)")),
        ("SpearmanCorrCoef", {}, "spearman_corrcoef", ("py", "stats.spearmanr(preds, target).statistic")),
        ("KendallRankCorrCoef", {"t_test": True}, ["kendall_rank_corrcoef", "p_value"],
         ("py", "list(stats.kendalltau(preds, target, method='asymptotic'))")),
        ("ConcordanceCorrCoef", {}, "concordance_corrcoef", ("torch", "run(torchmetrics.regression.ConcordanceCorrCoef(), preds, target)")),
        ("ExplainedVariance", {}, "explained_variance", ("py", "skm.explained_variance_score(target, preds)")),
        ("MeanAbsolutePercentageError", {}, "mean_absolute_percentage_error", ("torch", "run(torchmetrics.regression.MeanAbsolutePercentageError(), preds, target)")),
        ("SymmetricMeanAbsolutePercentageError", {}, "symmetric_mean_absolute_percentage_error", ("torch", "run(torchmetrics.regression.SymmetricMeanAbsolutePercentageError(), preds, target)")),
        ("WeightedMeanAbsolutePercentageError", {}, "weighted_mean_absolute_percentage_error", ("torch", "run(torchmetrics.regression.WeightedMeanAbsolutePercentageError(), preds, target)")),
        ("MeanSquaredLogError", {}, "mean_squared_log_error", ("torch", "run(torchmetrics.regression.MeanSquaredLogError(), preds, target)")),
        ("TweedieDevianceScore", {"power": 1.0}, "tweedie_deviance_score", ("torch", "run(torchmetrics.regression.TweedieDevianceScore(power=1.0), preds, target)")),
        ("LogCoshError", {}, "log_cosh_error", ("torch", "run(torchmetrics.regression.LogCoshError(), preds, target)")),
        ("MinkowskiDistance", {"p": 2.0}, "minkowski_distance", ("torch", "run(torchmetrics.regression.MinkowskiDistance(p=2.0), preds, target)")),
        ("RelativeSquaredError", {}, "relative_squared_error", ("torch", "run(torchmetrics.regression.RelativeSquaredError(), preds, target)")),
    ]
    ex_inputs = {"Tweedie": {"preds": "preds", "targets": "target"},
                 "Minkowski": {"preds": "preds", "targets": "target"}}
    example_cases = []
    for metric, params, key, ref in example_metrics:
        before = len(cases)
        inputs = next((v for k, v in ex_inputs.items() if metric.startswith(k)), None)
        add(f"example_{metric}", metric, params, "example", key, ref, inputs=inputs)
        example_cases.append(cases.pop(before))

    # Run the torchmetrics calls.
    proc = subprocess.run([str(TORCH_PYTHON), __file__, "--torch"], input=json.dumps(jobs),
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit("the torchmetrics subprocess failed:\n" + proc.stderr)
    torch_out = json.loads(proc.stdout)

    def fill(case):
        for role, entry in [("reference", case["reference"])] + [
                ("cross", e) for e in case["cross_checks"]]:
            if entry["library"] == "torch":
                entry["value"] = torch_out[f"{case['name']}/{role}/{entry['call']}"]
                if role == "reference" and case["name"] in posts:
                    entry["counts"] = entry["value"]
                    entry["value"] = posts[case["name"]](entry["value"])
        keys = case.pop("key")
        value = case["reference"]["value"]
        if "exact" in case:
            value = case["exact"]
        expected = ({keys[0]: value[0], keys[1]: value[1]} if isinstance(keys, list) else
                    {keys: value})
        # JSON has no NaN or infinity: NaN is written null (as the other reference files do),
        # +-infinity the strings "inf" and "-inf".
        case["expected"] = json.loads(json.dumps(expected), parse_constant=lambda c: {
            "NaN": None, "Infinity": "inf", "-Infinity": "-inf"}[c])
        # Relative differences of the cross-checks (and of the reference, for exact cases).
        mine = np.asarray(value[0] if isinstance(keys, list) else value, dtype=float)
        checks = case["cross_checks"] + ([case["reference"]] if "exact" in case else [])
        for e in checks:
            other = np.asarray((e["value"][0] if isinstance(keys, list) else e["value"]),
                               dtype=float)
            with np.errstate(all="ignore"):
                diff = np.abs(other - mine) / np.abs(mine)
            e["relative_difference"] = (None if np.all(np.isnan(diff)) else
                                        float(np.nanmax(np.where(mine == other, 0, diff))))
        for e in [case["reference"]] + case["cross_checks"]:
            e["library"] = {"torch": f"torchmetrics {torch_out['versions']['torchmetrics']}",
                            "py": "scipy/scikit-learn"}[e["library"]]
            if "call" in e and e["library"].startswith("scipy"):
                e["library"] = ("scikit-learn " + sklearn.__version__ if "skm." in e["call"]
                                else "SciPy " + scipy.__version__)

    for c in cases + example_cases:
        fill(c)

    example = {
        "config": "configs/examples/regression_torchmetrics.yaml",
        # TweedieDevianceScore and MinkowskiDistance read "targets" (the config maps it to the
        # field target with `inputs:`).
        "inputs": dict(ex_files, targets=ex_files["target"]),
        "samples": int(len(et)),
        "results": {c["metric"]: c["expected"] for c in example_cases},
        "calls": {c["metric"]: c["reference"]["call"] for c in example_cases},
        "metrics": [{"label": c["metric"], "metric": c["metric"], "params": c["params"]}
                    for c in example_cases],
    }
    doc = {
        "generator": "tests/reference/regression_torchmetrics.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "scipy": scipy.__version__, "scikit-learn": sklearn.__version__,
                     "torch": torch_out["versions"]["torch"],
                     "torchmetrics": torch_out["versions"]["torchmetrics"]},
        "notes": [
            "Inputs are float64. In calls, preds/target/p/q are the case's input files as numpy "
            "arrays (SciPy, scikit-learn) or float64 torch tensors (torchmetrics); "
            "run(metric, *args) is metric.set_dtype(torch.float64); metric.update(*args); "
            "metric.compute() (a Metric's states are float32 otherwise). TweedieDevianceScore "
            "and MinkowskiDistance read the target file as their input 'targets'.",
            "Expected values: NaN is written null, +-infinity as the strings \"inf\" and "
            "\"-inf\".",
            "Cases with an 'exact' value (values around 1e6 spread by 1e-2) expect it: exact "
            "rational arithmetic; the libraries' values are recorded with their relative "
            "differences.",
        ],
        "cases": cases,
        "example": example,
    }
    # Strict JSON: every NaN / infinity (expected values and the libraries' values) as above.
    doc = json.loads(json.dumps(doc), parse_constant=lambda c: {
        "NaN": None, "Infinity": "inf", "-Infinity": "-inf"}[c])
    OUT.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    print(f"{len(cases)} cases -> {rel(OUT)}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--torch"]:
        torch_main()
    else:
        main()
