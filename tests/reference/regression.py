#!/usr/bin/env python3
"""Reference data and expected values for the regression plugin (plugins/regression).

(a) Writes test data to tests/data/regression/*.npy, deterministically: scikit-learn's diabetes
    data (442 samples, one target) with the predictions of a LinearRegression fitted on the first
    300 samples, and scikit-learn's linnerud data (20 samples, 3 targets) with the predictions of
    a Ridge(alpha=1.0) fitted on all of it; per-sample weights from a fixed seed; float32 copies;
    and a small multi-output case with constant target columns (R2's zero denominators).
(b) Writes configs/examples/data/regression/{pred,target}.npy for configs/examples/regression.yaml:
    diabetes, a LinearRegression fitted on samples 0..299, predicting samples 300..441.
(c) Writes tests/reference/expected_regression.json: for every case the metric, its parameters,
    its inputs, the expected values from scikit-learn and the exact call for each value; the
    section "example" holds the expected results of the example config.

Run in the reference environment:   .venv-ref/bin/python tests/reference/regression.py

Float32 inputs: tally computes them in float64; scikit-learn keeps float32 arithmetic when every
input is float32, so their expected values are scikit-learn's on the same numbers as float64
(recorded in the call).
"""

import json
import platform
import warnings
from pathlib import Path

import numpy as np
import sklearn
from sklearn.datasets import load_diabetes, load_linnerud
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.metrics import (mean_absolute_error, mean_squared_error, r2_score,
                             root_mean_squared_error)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "regression"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "regression"
OUT = ROOT / "tests" / "reference" / "expected_regression.json"

FUNCS = {
    "RegressionMAE": ("mae", mean_absolute_error, "mean_absolute_error"),
    "RegressionMSE": ("mse", mean_squared_error, "mean_squared_error"),
    "RMSE": ("rmse", root_mean_squared_error, "root_mean_squared_error"),
    "R2": ("r2", r2_score, "r2_score"),
}


def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(folder, name, array):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


def datasets():
    X, y = load_diabetes(return_X_y=True)
    model = LinearRegression().fit(X[:300], y[:300])
    p = model.predict(X)
    w = np.random.default_rng(20240601).uniform(0.25, 4.0, size=len(y))
    lin = load_linnerud()
    LX, LY = lin.data.astype(np.float64), lin.target.astype(np.float64)
    LP = Ridge(alpha=1.0).fit(LX, LY).predict(LX)
    lw = np.random.default_rng(20240602).integers(1, 6, size=len(LY)).astype(np.float64)
    # Constant target columns: column 1 predicted exactly (R2: 0/0 -> 1), column 2 not (-> 0).
    cy = LY[:, :3].copy()
    cp = LP[:, :3].copy()
    cy[:, 1] = 60.0
    cp[:, 1] = 60.0
    cy[:, 2] = 50.0
    d = {
        "diabetes": dict(target=y, pred=p, weight=w),
        "diabetes_f32": dict(target=y.astype(np.float32), pred=p.astype(np.float32),
                             weight=w.astype(np.float32)),
        "linnerud": dict(target=LY, pred=LP, weight=lw),
        "diabetes_col": dict(target=y[:, None], pred=p[:, None], weight=w),
        "constant": dict(target=cy, pred=cp, weight=lw),
    }
    files = {}
    for name, arrays in d.items():
        files[name] = {k: save(DATA, f"{name}_{k}.npy", v) for k, v in arrays.items()}
    return d, files


def expected_value(metric, arrays, weighted, multioutput):
    key, fn, fname = FUNCS[metric]
    y = np.asarray(arrays["target"], dtype=np.float64)
    p = np.asarray(arrays["pred"], dtype=np.float64)
    w = np.asarray(arrays["weight"], dtype=np.float64) if weighted else None
    value = fn(y, p, sample_weight=w, multioutput=multioutput)
    value = [float(v) for v in value] if isinstance(value, np.ndarray) else float(value)
    f32 = arrays["target"].dtype == np.float32
    call = (f"sklearn.metrics.{fname}(y{'.astype(float64)' if f32 else ''}, "
            f"p{'.astype(float64)' if f32 else ''}, sample_weight={'w' if weighted else 'None'}, "
            f"multioutput='{multioutput}')")
    return key, value, call


def main():
    warnings.simplefilter("error")
    d, files = datasets()
    cases = []
    for data in ["diabetes", "diabetes_f32", "diabetes_col", "linnerud", "constant"]:
        for metric in FUNCS:
            modes = ["uniform_average", "raw_values"]
            if metric == "R2":
                modes.append("variance_weighted")
            if data in ("diabetes", "diabetes_f32"):
                modes = ["uniform_average"]
            for mode in modes:
                for weighted in (False, True):
                    key, value, call = expected_value(metric, d[data], weighted, mode)
                    inputs = {"pred": files[data]["pred"], "target": files[data]["target"]}
                    if weighted:
                        inputs["sample_weight"] = files[data]["weight"]
                    cases.append({
                        "name": f"{metric}_{data}_{mode}{'_weighted' if weighted else ''}",
                        "metric": metric,
                        "params": {"multioutput": mode},
                        "inputs": inputs,
                        "expected": {key: value},
                        "calls": {key: call},
                    })

    # The example: diabetes, fitted on samples 0..299, evaluated on 300..441.
    X, y = load_diabetes(return_X_y=True)
    p = LinearRegression().fit(X[:300], y[:300]).predict(X[300:])
    t = y[300:]
    ex_inputs = {"pred": save(EXAMPLE, "pred.npy", p), "target": save(EXAMPLE, "target.npy", t)}
    example = {
        "config": "configs/examples/regression.yaml",
        "inputs": ex_inputs,
        "samples": int(len(t)),
        "results": {},
        "calls": {},
    }
    for metric in FUNCS:
        key, fn, fname = FUNCS[metric]
        example["results"][metric] = {key: float(fn(t, p))}
        example["calls"][metric] = f"sklearn.metrics.{fname}(target, pred)"
    ex_metrics = [{"label": m, "metric": m, "params": {}} for m in FUNCS]
    example["metrics"] = ex_metrics

    doc = {
        "generator": "tests/reference/regression.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "scikit-learn": sklearn.__version__},
        "notes": ["y: the target file; p: the pred file; w: the sample_weight file.",
                  "diabetes: sklearn.datasets.load_diabetes, LinearRegression fitted on samples "
                  "0..299, predicting all 442; linnerud: sklearn.datasets.load_linnerud, "
                  "Ridge(alpha=1.0) fitted and predicting all 20 samples."],
        "cases": cases,
        "example": example,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(cases)} cases -> {rel(OUT)}")


if __name__ == "__main__":
    main()
