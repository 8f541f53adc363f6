#!/usr/bin/env python3
"""Reference data and expected values for the nominal plugin (plugins/nominal): CramersV,
TschuprowsT, PearsonsContingencyCoefficient, TheilsU and FleissKappa.

(a) Writes test data to tests/data/nominal/*.npy, deterministically:
      wine_*      scikit-learn's wine data (178 wines, 3 cultivars): quantile bins of alcohol (5)
                  and of flavanoids (4) against the cultivar (num_classes 5: empty table rows)
      iris_*      iris: petal length in 3 bins against the species
      digits_*    digits: the held-out predictions of a LogisticRegression ([N, 10] probabilities,
                  argmax) against the digit: 10 x 10 tables with empty cells
      cancer_*    breast_cancer: mean radius above its median against the diagnosis (2 x 2: Yates'
                  correction under bias_correction)
      nan_*       float64 class ids with NaNs (nan_strategy replace / drop)
      edge cases  one preds class, a single sample, a perfect association, a 2 x 2 table equal to
                  its expected counts, int32 / uint8 ids
      raters_*    Fleiss' kappa: 300 items of a 4-category task, each rated by 6 annotators who
                  answer through their own confusion matrix (counts [N, 4]); a variant where some
                  items miss ratings; per-rater scores [N, 3, 5] for mode probs
(b) Writes configs/examples/data/nominal/{preds,target,ratings}.npy for
    configs/examples/nominal.yaml (wine: alcohol bins vs cultivar; 5 simulated annotators).
(c) Writes tests/reference/expected_nominal.json: per case the metric, its parameters, inputs,
    expected values (torchmetrics 1.9.0, torch's default dtype float64, so its tables and sums
    are float64), the exact call, versions, and a cross-check where a second library computes it
    (SciPy's scipy.stats.contingency.association without correction, on the table without empty
    rows and columns; statsmodels' fleiss_kappa, which has no 1e-5 guard in its denominator).

torchmetrics runs in .venv-torch (a subprocess of this script). Run from the repository root:

    .venv-ref/bin/python tests/reference/nominal.py
"""

import json
import platform
import subprocess
from pathlib import Path

import numpy as np
import scipy
import sklearn
import statsmodels
from scipy.stats.contingency import association
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.linear_model import LogisticRegression
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "nominal"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "nominal"
OUT = ROOT / "tests" / "reference" / "expected_nominal.json"
TORCH_PY = ROOT / ".venv-torch" / "bin" / "python"

KEYS = {"CramersV": "cramers_v", "TschuprowsT": "tschuprows_t",
        "PearsonsContingencyCoefficient": "pearsons_contingency_coefficient",
        "TheilsU": "theils_u", "FleissKappa": "fleiss_kappa"}
SCIPY_METHOD = {"CramersV": "cramer", "TschuprowsT": "tschuprow",
                "PearsonsContingencyCoefficient": "pearson"}

TORCH_RUNNER = r"""
import json, sys, warnings
import numpy as np, torch, torchmetrics
from torchmetrics import nominal
warnings.simplefilter("ignore")
torch.set_default_dtype(torch.float64)
out = []
for j in json.load(sys.stdin):
    m = getattr(nominal, j["metric"])(**j["params"])
    args = {}
    for field, path in j["inputs"].items():
        a = np.load(path)
        args[field] = torch.from_numpy(a.astype(np.float64) if a.dtype.kind == "f" else a.astype(np.int64))
    try:
        m.update(**args)
        v = m.compute()
        out.append({"value": float(v)})
    except Exception as e:
        out.append({"error": type(e).__name__ + ": " + str(e)})
print(json.dumps({"version": torchmetrics.__version__, "torch": torch.__version__, "out": out}))
"""


def torchmetrics_run(jobs):
    r = subprocess.run([str(TORCH_PY), "-c", TORCH_RUNNER], input=json.dumps(jobs),
                       capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(r.stdout)


def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(folder, name, array):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


def qbins(x, k):
    """Quantile bins 0..k-1 of x."""
    edges = np.quantile(x, np.linspace(0, 1, k + 1)[1:-1])
    return np.searchsorted(edges, x, side="right").astype(np.int64)


def annotators(rng, truth, categories, raters, accuracy):
    """Each rater answers through a confusion matrix: right with probability accuracy[r], else a
    category drawn from a rater-specific skewed distribution."""
    n = len(truth)
    answers = np.empty((n, raters), dtype=np.int64)
    for r in range(raters):
        skew = rng.dirichlet(np.ones(categories) * 2.0)
        right = rng.random(n) < accuracy[r]
        wrong = rng.choice(categories, size=n, p=skew)
        answers[:, r] = np.where(right, truth, wrong)
    return answers


def to_counts(answers, categories):
    c = np.zeros((answers.shape[0], categories), dtype=np.int64)
    for r in range(answers.shape[1]):
        c[np.arange(answers.shape[0]), answers[:, r]] += 1
    return c


def table_of(preds, target, k):
    """torchmetrics' confmat (rows: target, columns: preds), from the saved inputs."""
    p = preds.argmax(1) if preds.ndim == 2 else preds
    t = target.argmax(1) if target.ndim == 2 else target
    t_ = np.zeros((k, k), dtype=np.int64)
    np.add.at(t_, (t.astype(np.int64), p.astype(np.int64)), 1)
    return t_


def datasets():
    d = {}
    wine = load_wine()
    X, y = wine.data, wine.target
    d["wine_alcohol"] = dict(preds=qbins(X[:, 0], 5), target=y.astype(np.int64), k=5)
    d["wine_flavanoids"] = dict(preds=qbins(X[:, 6], 4), target=y.astype(np.int64), k=5)
    iris = load_iris()
    d["iris_petal"] = dict(preds=qbins(iris.data[:, 2], 3), target=iris.target.astype(np.int64),
                           k=3)
    digits = load_digits()
    DX, DY = digits.data, digits.target
    clf = LogisticRegression(max_iter=2000).fit(DX[:1200], DY[:1200])
    d["digits_proba"] = dict(preds=clf.predict_proba(DX[1200:1500]),
                             target=DY[1200:1500].astype(np.int64), k=10)
    cancer = load_breast_cancer()
    r = cancer.data[:, 0]
    d["cancer_2x2"] = dict(preds=(r > np.median(r)).astype(np.int64),
                           target=cancer.target.astype(np.int64), k=2)
    rng = np.random.default_rng(20261127)
    p = qbins(X[:, 9], 4).astype(np.float64)
    t = y.astype(np.float64)
    p[rng.choice(len(p), 12, replace=False)] = np.nan
    t[rng.choice(len(t), 9, replace=False)] = np.nan
    d["nan_wine"] = dict(preds=p, target=t, k=4)
    d["one_preds_class"] = dict(preds=np.full(40, 2, dtype=np.int64),
                                target=rng.integers(0, 3, 40).astype(np.int64), k=3)
    d["single_sample"] = dict(preds=np.array([1], dtype=np.int64),
                              target=np.array([0], dtype=np.int64), k=2)
    ident = rng.integers(0, 4, 60).astype(np.int64)
    d["perfect"] = dict(preds=ident, target=ident.copy(), k=4)
    # A 2 x 2 table equal to its expected counts: chi2 = 0, Yates' correction moves nothing.
    d["independent_2x2"] = dict(preds=np.array([0] * 10 + [1] * 10 + [0] * 20 + [1] * 20),
                                target=np.array([0] * 20 + [1] * 40), k=2)
    d["int32_uint8"] = dict(preds=qbins(iris.data[:, 0], 4).astype(np.int32),
                            target=iris.target.astype(np.uint8), k=4)
    return d


def rater_sets():
    rng = np.random.default_rng(20261128)
    truth = rng.choice(4, size=300, p=[0.4, 0.3, 0.2, 0.1])
    ans = annotators(rng, truth, 4, 6, [0.9, 0.85, 0.8, 0.7, 0.6, 0.5])
    counts = to_counts(ans, 4)
    missing = counts.copy()
    # Some items lost one or two ratings (R stays 6: the max over items).
    for i in rng.choice(300, 40, replace=False):
        for _ in range(int(rng.integers(1, 3))):
            nz = np.flatnonzero(missing[i])
            missing[i, rng.choice(nz)] -= 1
    # mode probs: [N, C=3, R=5] scores, each rater's argmax is their answer (torchmetrics one-hot
    # encodes with num_classes = R, so C <= R here).
    truth3 = rng.choice(3, size=200)
    ans3 = annotators(rng, truth3, 3, 5, [0.9, 0.8, 0.7, 0.6, 0.5])
    scores = rng.random((200, 3, 5)) * 0.5
    for r in range(5):
        scores[np.arange(200), ans3[:, r], r] += 0.6
    return {
        "raters_counts": dict(ratings=counts),
        "raters_missing": dict(ratings=missing),
        "raters_probs": dict(ratings=scores, mode="probs"),
        "raters_perfect": dict(ratings=to_counts(np.repeat(truth[:50, None], 4, axis=1), 4)),
        "raters_one": dict(ratings=to_counts(ans[:30, :1], 4)),
    }


def main():
    cases, jobs = [], []
    for name, dset in datasets().items():
        files = {"preds": save(DATA, f"{name}_preds.npy", dset["preds"]),
                 "target": save(DATA, f"{name}_target.npy", dset["target"])}
        table = table_of(dset["preds"], dset["target"], dset["k"]) if not name.startswith(
            "nan") else np.zeros((1, 1), dtype=np.int64)
        nz = table[table.sum(1) != 0][:, table.sum(0) != 0]
        variants = [("CramersV", {"bias_correction": True}), ("CramersV", {"bias_correction": False}),
                    ("TschuprowsT", {"bias_correction": True}),
                    ("TschuprowsT", {"bias_correction": False}),
                    ("PearsonsContingencyCoefficient", {}), ("TheilsU", {})]
        nan_variants = [{"nan_strategy": "replace", "nan_replace_value": 1.0},
                        {"nan_strategy": "drop"}] if name.startswith("nan") else [{}]
        for metric, params in variants:
            for nv in nan_variants:
                p = {"num_classes": dset["k"], **params, **nv}
                tag = "_".join(f"{k}_{v}" for k, v in {**params, **nv}.items()
                               if k != "nan_replace_value")
                c = {"name": f"{metric}_{name}" + (f"_{tag}" if tag else ""), "metric": metric,
                     "params": p, "inputs": files,
                     "call": f"torchmetrics.nominal.{metric}("
                             + ", ".join(f"{k}={v!r}" for k, v in p.items())
                             + ").update(preds, target); .compute()"}
                if metric in SCIPY_METHOD and not params.get("bias_correction", False) and \
                        not name.startswith("nan") and min(nz.shape) >= 2:
                    c["cross_check"] = {
                        "value": float(association(nz, method=SCIPY_METHOD[metric],
                                                   correction=False)),
                        "call": f"scipy.stats.contingency.association(table, "
                                f"method={SCIPY_METHOD[metric]!r}, correction=False)"}
                cases.append(c)
                jobs.append({"metric": metric, "params": p, "inputs": files})
    for name, dset in rater_sets().items():
        mode = dset.get("mode", "counts")
        files = {"ratings": save(DATA, f"{name}.npy", dset["ratings"])}
        c = {"name": f"FleissKappa_{name}", "metric": "FleissKappa", "params": {"mode": mode},
             "inputs": files,
             "call": f"torchmetrics.nominal.FleissKappa(mode={mode!r}).update(ratings); .compute()"}
        if mode == "counts" and len(set(dset["ratings"].sum(1))) == 1 and dset["ratings"].sum(1)[0] > 1:
            c["cross_check"] = {"value": float(sm_fleiss_kappa(dset["ratings"], method="fleiss")),
                                "call": "statsmodels.stats.inter_rater.fleiss_kappa(ratings, "
                                        "method='fleiss') (no 1e-5 guard)"}
        cases.append(c)
        jobs.append({"metric": "FleissKappa", "params": {"mode": mode}, "inputs": files})

    # The example config's data.
    wine = load_wine()
    rng = np.random.default_rng(20261129)
    ex_preds, ex_target = qbins(wine.data[:, 0], 5), wine.target.astype(np.int64)
    ex_ratings = to_counts(annotators(rng, wine.target, 3, 5, [0.95, 0.9, 0.8, 0.7, 0.6]), 3)
    ex_files = {"preds": save(EXAMPLE, "preds.npy", ex_preds),
                "target": save(EXAMPLE, "target.npy", ex_target),
                "ratings": save(EXAMPLE, "ratings.npy", ex_ratings)}
    ex_metrics = [
        {"label": "CramersV", "metric": "CramersV", "params": {"num_classes": 5}},
        {"label": "TschuprowsT", "metric": "TschuprowsT", "params": {"num_classes": 5}},
        {"label": "PearsonsContingencyCoefficient", "metric": "PearsonsContingencyCoefficient",
         "params": {"num_classes": 5}},
        {"label": "TheilsU", "metric": "TheilsU", "params": {"num_classes": 5}},
        {"label": "FleissKappa", "metric": "FleissKappa", "params": {}},
    ]
    for m in ex_metrics:
        ins = {"ratings": ex_files["ratings"]} if m["metric"] == "FleissKappa" else \
            {"preds": ex_files["preds"], "target": ex_files["target"]}
        jobs.append({"metric": m["metric"], "params": m["params"], "inputs": ins})

    res = torchmetrics_run(jobs)
    out = res["out"]
    for c, r in zip(cases, out):
        if "error" in r:
            raise SystemExit(f"{c['name']}: torchmetrics raised {r['error']}")
        v = r["value"]
        c["expected"] = {KEYS[c["metric"]]: None if np.isnan(v) else v}
        if "cross_check" in c:
            cc = c["cross_check"]
            cc["relative_difference"] = abs(cc["value"] - v) / abs(v) if v else abs(cc["value"])
            limit = 1e-4 if c["metric"] == "FleissKappa" else 1e-12
            assert cc["relative_difference"] < limit, (c["name"], v, cc["value"])
    ex_out = out[len(cases):]
    example = {
        "config": "configs/examples/nominal.yaml",
        "inputs": ex_files,
        "samples": int(len(ex_target)),
        "results": {m["label"]: {KEYS[m["metric"]]: r["value"]} for m, r in zip(ex_metrics, ex_out)},
        "calls": {m["label"]: f"torchmetrics.nominal.{m['metric']}("
                              + ", ".join(f"{k}={v!r}" for k, v in m["params"].items()) + ")"
                  for m in ex_metrics},
        "metrics": ex_metrics,
    }
    doc = {
        "generator": "tests/reference/nominal.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "scikit-learn": sklearn.__version__, "scipy": scipy.__version__,
                     "statsmodels": statsmodels.__version__, "torchmetrics": res["version"],
                     "torch": res["torch"]},
        "notes": ["torchmetrics runs with torch.set_default_dtype(torch.float64); integer inputs "
                  "as int64 tensors, float inputs as float64.",
                  "null: NaN.",
                  "cross_check: a second library on the same table (SciPy without empty rows and "
                  "columns; statsmodels without torchmetrics' 1e-5 guard)."],
        "cases": cases,
        "example": example,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {rel(OUT)}: {len(cases)} cases")
    for c in cases:
        print(f"  {c['name']}: {c['expected']}")
    print("example:", example["results"])


if __name__ == "__main__":
    main()
