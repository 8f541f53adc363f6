#!/usr/bin/env python3
"""Reference data and expected values for the clustering plugin (plugins/clustering).

(a) Writes test data to tests/data/clustering/*.npy, deterministically: clusterings of
    scikit-learn's bundled iris, wine and digits data (KMeans with fixed seeds, agglomerative
    clustering, a random labeling) against the true classes, labels renamed to values such as
    -1 and 10^12, edge cases (one cluster, every sample its own cluster, one sample, permuted
    perfect matches, AMI's degenerate denominators), and points with labels for the intrinsic
    metrics (iris, standardized wine, the first 600 digits projected on 10 principal axes,
    float32 copies, constant clusters).
(b) Writes configs/examples/data/clustering/{preds,target,data}.npy for
    configs/examples/clustering.yaml: standardized wine, KMeans(3) against the cultivars.
(c) Writes tests/reference/expected_clustering.json: for every case the metric, its parameters,
    its inputs, the expected value from scikit-learn 1.7.2 (DunnIndex: torchmetrics 1.9.0) and
    the exact call; "torchmetrics" records torchmetrics 1.9.0's value of the same case (run in
    .venv-torch, float64 and int64 tensors) as a cross-check. The section "example" holds the
    expected results of the example config.

Run in the reference environment (it runs the torchmetrics part in .venv-torch itself):
    .venv-ref/bin/python tests/reference/clustering.py
"""

import json
import platform
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "clustering"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "clustering"
OUT = ROOT / "tests" / "reference" / "expected_clustering.json"
TORCH_PY = ROOT / ".venv-torch" / "bin" / "python"

# metric -> (result key, scikit-learn function, torchmetrics functional, parameter names)
EXTRINSIC = {
    "AdjustedRandScore": ("adjusted_rand_score", "adjusted_rand_score", "adjusted_rand_score"),
    "RandScore": ("rand_score", "rand_score", "rand_score"),
    "MutualInfoScore": ("mutual_info_score", "mutual_info_score", "mutual_info_score"),
    "NormalizedMutualInfoScore": ("normalized_mutual_info_score", "normalized_mutual_info_score",
                                  "normalized_mutual_info_score"),
    "AdjustedMutualInfoScore": ("adjusted_mutual_info_score", "adjusted_mutual_info_score",
                                "adjusted_mutual_info_score"),
    "HomogeneityScore": ("homogeneity_score", "homogeneity_score", "homogeneity_score"),
    "CompletenessScore": ("completeness_score", "completeness_score", "completeness_score"),
    "VMeasureScore": ("v_measure_score", "v_measure_score", "v_measure_score"),
    "FowlkesMallowsIndex": ("fowlkes_mallows_index", "fowlkes_mallows_score",
                            "fowlkes_mallows_index"),
}
INTRINSIC = {
    "CalinskiHarabaszScore": ("calinski_harabasz_score", "calinski_harabasz_score",
                              "calinski_harabasz_score"),
    "DaviesBouldinScore": ("davies_bouldin_score", "davies_bouldin_score",
                           "davies_bouldin_score"),
    "DunnIndex": ("dunn_index", None, "dunn_index"),
}


def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(folder, name, array):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


def label_sets():
    """name -> (target, preds, note): integer label arrays."""
    from sklearn.cluster import AgglomerativeClustering, KMeans
    from sklearn.datasets import load_digits, load_iris, load_wine
    from sklearn.preprocessing import StandardScaler

    iris_X, iris_y = load_iris(return_X_y=True)
    wine_X, wine_y = load_wine(return_X_y=True)
    digits_X, digits_y = load_digits(return_X_y=True)
    wine_Z = StandardScaler().fit_transform(wine_X)
    rng = np.random.default_rng(20240611)
    km = lambda X, k, seed=0: KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(X)
    agg = lambda X, k: AgglomerativeClustering(n_clusters=k).fit_predict(X)
    iris_km = km(iris_X, 3)
    sets = {
        "iris_kmeans3": (iris_y, iris_km, "iris: KMeans(3, n_init=10, random_state=0)"),
        "iris_agglo4": (iris_y, agg(iris_X, 4), "iris: AgglomerativeClustering(4) (ward)"),
        "wine_kmeans3": (wine_y, km(wine_Z, 3), "wine, standardized: KMeans(3, random_state=0)"),
        "wine_raw_kmeans5": (wine_y, km(wine_X, 5, 1),
                             "wine, raw features: KMeans(5, random_state=1)"),
        "digits_kmeans10": (digits_y, km(digits_X, 10), "digits: KMeans(10, random_state=0)"),
        "digits_agglo12": (digits_y, agg(digits_X, 12), "digits: AgglomerativeClustering(12)"),
        "digits_random": (digits_y, rng.integers(0, 10, size=len(digits_y)),
                          "digits: a uniformly random labeling into 10 clusters (seeded)"),
        "iris_big_labels": (np.array([-1, 10**12, 7])[iris_y],
                            np.array([10**12, -5, -1])[iris_km],
                            "iris KMeans(3), labels renamed: classes -1, 10^12, 7; "
                            "clusters 10^12, -5, -1"),
        "iris_one_cluster": (iris_y, np.zeros(150, dtype=np.int64),
                             "iris: every sample in one cluster"),
        "iris_singletons": (iris_y, np.arange(150), "iris: every sample its own cluster"),
        "singletons_both": (np.arange(40), np.arange(40)[::-1].copy(),
                            "40 samples, every sample its own class and cluster (AMI: EMI = MI "
                            "= H, sklearn's eps clamps give 1)"),
        "one_label_both": (np.full(12, 3), np.full(12, -2), "12 samples, one class, one cluster"),
        "one_class": (np.full(30, 5), rng.integers(0, 4, size=30),
                      "30 samples, one class, 4 random clusters"),
        "single_sample": (np.array([4]), np.array([9]), "one sample"),
        "permuted_match": (wine_y, np.array([2, 0, 1])[wine_y],
                           "wine classes against themselves, relabelled"),
        "two_samples": (np.array([0, 1]), np.array([0, 1]), "two samples, two classes"),
    }
    return sets


def point_sets():
    """name -> (data, labels, note)."""
    from sklearn.cluster import KMeans
    from sklearn.datasets import load_digits, load_iris, load_wine
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import StandardScaler

    iris_X, iris_y = load_iris(return_X_y=True)
    wine_X, wine_y = load_wine(return_X_y=True)
    digits_X, _ = load_digits(return_X_y=True)
    wine_Z = StandardScaler().fit_transform(wine_X)
    d10 = PCA(n_components=10, random_state=0).fit_transform(digits_X[:600])
    km = lambda X, k: KMeans(n_clusters=k, n_init=10, random_state=0).fit_predict(X)
    const = np.array([[0.5, 1.0], [0.5, 1.0], [2.0, -1.0], [2.0, -1.0], [2.0, -1.0]])
    return {
        "iris_true": (iris_X, iris_y, "iris features, the true species as clusters"),
        "iris_kmeans3": (iris_X, km(iris_X, 3), "iris features, KMeans(3, random_state=0)"),
        "iris_offset": (iris_X + 1000.0, km(iris_X, 3),
                        "iris features + 1000 (far from the origin), KMeans(3) labels"),
        "wine_kmeans3": (wine_Z, km(wine_Z, 3), "wine standardized, KMeans(3, random_state=0)"),
        "wine_raw_true": (wine_X, wine_y, "wine raw features, true cultivars"),
        "digits_pca10_kmeans8": (d10, km(d10, 8),
                                 "digits[:600] on 10 principal axes (PCA(10, random_state=0)), "
                                 "KMeans(8, random_state=0)"),
        "digits_pca10_f32": (d10.astype(np.float32), km(d10, 8),
                             "the same points as float32 (references on their float64 values)"),
        "big_labels": (iris_X, np.array([-1, 10**12, 7])[iris_y],
                       "iris features, species labelled -1, 10^12, 7"),
        "constant_clusters": (const, np.array([0, 0, 1, 1, 1]),
                              "two clusters of identical points (W = 0, every scatter 0)"),
    }


def sklearn_extrinsic(metric, target, preds, params):
    import sklearn.metrics as skm
    key, fname, _ = EXTRINSIC[metric]
    fn = getattr(skm, fname)
    value = float(fn(target, preds, **params))
    args = "".join(f", {k}={v!r}" for k, v in params.items())
    return key, value, f"sklearn.metrics.{fname}(target, preds{args})"


def sklearn_intrinsic(metric, data, labels):
    import sklearn.metrics as skm
    key, fname, _ = INTRINSIC[metric]
    value = float(getattr(skm, fname)(np.asarray(data, dtype=np.float64), labels))
    f64 = ".astype(float64)" if data.dtype != np.float64 else ""
    return key, value, f"sklearn.metrics.{fname}(data{f64}, labels)"


def torch_values(cases):
    """Runs this file in .venv-torch on the cases; returns name -> torchmetrics value (None when
    torchmetrics raises)."""
    spec = [{"name": c["name"], "metric": c["metric"], "params": c["params"],
             "inputs": c["inputs"]} for c in cases]
    out = subprocess.run([str(TORCH_PY), __file__, "--torch"], input=json.dumps(spec), text=True,
                         capture_output=True, check=True, cwd=ROOT)
    return json.loads(out.stdout)


def torch_main():
    import torch
    import torchmetrics
    import torchmetrics.functional.clustering as F

    torch.set_num_threads(1)
    # float64 wherever torchmetrics makes a float from integers (p / n, log(p)): the cross-check
    # then shows its formulas' differences, not float32 rounding.
    torch.set_default_dtype(torch.float64)
    spec = json.loads(sys.stdin.read())
    result = {"versions": {"torch": torch.__version__, "torchmetrics": torchmetrics.__version__},
              "values": {}}
    for c in spec:
        t = {k: torch.from_numpy(np.load(ROOT / v)) for k, v in c["inputs"].items()}
        m = c["metric"]
        try:
            if m in EXTRINSIC:
                fn = getattr(F, EXTRINSIC[m][2])
                v = fn(t["preds"].long(), t["target"].long(), **c["params"])
            else:
                fn = getattr(F, INTRINSIC[m][2])
                params = {k: float(v) for k, v in c["params"].items()}
                v = fn(t["data"].double(), t["labels"].long(), **params)
            v = float(v)
            result["values"][c["name"]] = None if np.isnan(v) else v
        except Exception as e:  # noqa: BLE001 - recorded as what torchmetrics does
            result["values"][c["name"]] = f"raises {type(e).__name__}"
    print(json.dumps(result))


def main():
    import scipy
    import sklearn
    from sklearn.cluster import KMeans
    from sklearn.datasets import load_wine
    from sklearn.preprocessing import StandardScaler

    warnings.simplefilter("ignore")  # sklearn warns on one-label inputs; values are what count
    cases = []
    notes = {}
    for name, (target, preds, note) in label_sets().items():
        notes[f"labels:{name}"] = note
        dt = np.int32 if name.startswith("wine") else np.int64
        files = {"preds": save(DATA, f"{name}_preds.npy", np.asarray(preds).astype(dt)),
                 "target": save(DATA, f"{name}_target.npy", np.asarray(target).astype(dt))}
        for metric in EXTRINSIC:
            # Parameter variants on a few label sets (each case runs on 1..7 ranks under ASan).
            variants = [{}]
            if metric in ("NormalizedMutualInfoScore", "AdjustedMutualInfoScore") and name in (
                    "iris_kmeans3", "digits_random", "iris_singletons", "singletons_both",
                    "one_label_both", "two_samples"):
                variants = [{}] + [{"average_method": a} for a in ("geometric", "min", "max")]
            if metric == "VMeasureScore" and name in ("iris_kmeans3", "digits_agglo12",
                                                      "iris_singletons"):
                variants = [{}, {"beta": 0.5}, {"beta": 2.0}]
            for params in variants:
                key, value, call = sklearn_extrinsic(metric, target, preds, params)
                suffix = "".join(f"_{v}" for v in params.values()).replace(".", "p")
                cases.append({"name": f"{metric}_{name}{suffix}", "metric": metric,
                              "params": params, "inputs": files, "expected": {key: value},
                              "calls": {key: call}})
    for name, (data, labels, note) in point_sets().items():
        notes[f"points:{name}"] = note
        files = {"data": save(DATA, f"points_{name}_data.npy", data),
                 "labels": save(DATA, f"points_{name}_labels.npy", np.asarray(labels, np.int64))}
        for metric in INTRINSIC:
            variants = [{}]
            if metric == "DunnIndex" and name in ("iris_kmeans3", "wine_kmeans3",
                                                  "digits_pca10_kmeans8"):
                # p = inf is written "inf" (JSON has no infinity); the test reads it back.
                variants = [{}, {"p": 1.0}, {"p": "inf"}, {"p": 3.0}]
            for params in variants:
                if metric == "DunnIndex" and name == "constant_clusters":
                    continue  # every point on its centroid: inf (0 / 0 would be NaN)
                suffix = "".join(f"_p{v}" for v in params.values()).replace(".", "p")
                case = {"name": f"{metric}_{name}{suffix}", "metric": metric, "params": params,
                        "inputs": files}
                if INTRINSIC[metric][1] is not None:
                    key, value, call = sklearn_intrinsic(metric, data, labels)
                    case["expected"] = {key: value}
                    case["calls"] = {key: call}
                cases.append(case)
    # The example: standardized wine, KMeans(3) against the cultivars.
    X, y = load_wine(return_X_y=True)
    Z = StandardScaler().fit_transform(X)
    pred = KMeans(n_clusters=3, n_init=10, random_state=0).fit_predict(Z)
    ex_inputs = {"preds": save(EXAMPLE, "preds.npy", pred.astype(np.int64)),
                 "target": save(EXAMPLE, "target.npy", y.astype(np.int64)),
                 "data": save(EXAMPLE, "data.npy", Z)}
    example = {"config": "configs/examples/clustering.yaml", "inputs": ex_inputs,
               "samples": int(len(y)), "results": {}, "calls": {}, "metrics": []}
    for metric in EXTRINSIC:
        key, value, call = sklearn_extrinsic(metric, y, pred, {})
        example["results"][metric] = {key: value}
        example["calls"][metric] = call
        example["metrics"].append({"label": metric, "metric": metric, "params": {}})
    for metric in ("CalinskiHarabaszScore", "DaviesBouldinScore"):
        key, value, call = sklearn_intrinsic(metric, Z, pred)
        example["results"][metric] = {key: value}
        example["calls"][metric] = call.replace("labels)", "preds)")
        example["metrics"].append({"label": metric, "metric": metric, "params": {},
                                   "inputs": {"labels": "preds"}})
    ex_case = {"name": "example_dunn", "metric": "DunnIndex", "params": {},
               "inputs": {"data": ex_inputs["data"], "labels": ex_inputs["preds"]}}

    torch = torch_values(cases + [ex_case])
    values = torch["values"]
    for c in cases:
        tv = values[c["name"]]
        key = (EXTRINSIC.get(c["metric"]) or INTRINSIC[c["metric"]])[0]
        if "expected" not in c:  # DunnIndex: torchmetrics is the reference
            c["expected"] = {key: tv}
            args = "".join(f", {k}={v!r}" for k, v in c["params"].items())
            c["calls"] = {key: "torchmetrics.functional.clustering.dunn_index("
                               f"torch.from_numpy(data).double(), torch.from_numpy(labels)"
                               f"{args})"}
        else:
            c["torchmetrics"] = {key: tv}
    example["results"]["DunnIndex"] = {"dunn_index": values["example_dunn"]}
    example["calls"]["DunnIndex"] = ("torchmetrics.functional.clustering.dunn_index("
                                     "torch.from_numpy(data), torch.from_numpy(preds))")
    example["metrics"].append({"label": "DunnIndex", "metric": "DunnIndex", "params": {},
                               "inputs": {"labels": "preds"}})
    # The harness maps a metric's inputs by name: the example metrics that read 'labels' from
    # the 'preds' file get their own inputs in the test (see test_clustering_metrics.cpp).

    doc = {
        "generator": "tests/reference/clustering.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "scipy": scipy.__version__, "scikit-learn": sklearn.__version__,
                     **torch["versions"]},
        "notes": ["target: the true classes (scikit-learn's labels_true), preds: the clustering "
                  "(labels_pred); data, labels: points and their clusters.",
                  "torchmetrics: torchmetrics 1.9.0's value of the same case (functional API, "
                  "float64/int64 tensors), a cross-check; 'raises ...' where it raises.",
                  notes],
        "cases": cases,
        "example": example,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(cases)} cases -> {rel(OUT)}")


if __name__ == "__main__":
    if "--torch" in sys.argv:
        torch_main()
    else:
        main()
