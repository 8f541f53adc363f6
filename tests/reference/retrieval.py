#!/usr/bin/env python3
"""Reference data and expected values for the retrieval plugin (plugins/retrieval).

(a) Writes test data to tests/data/retrieval/*.npy, deterministically (numpy seed 20261127):
    realistic retrieval runs, the samples of every query scattered over the file in random order:
    - bm25:  40 queries of 5..200 candidate documents (log-uniform), graded relevance 0..3
             (about 80 % 0 among mixed queries), lexical scores as BM25 gives them: 0 for a document that shares no
             term with the query (most non-relevant ones), else a positive score growing with the
             relevance, rounded to 2 decimals (so scores tie, within and across grades); 4
             queries with no relevant document, 3 with only relevant ones.
    - dense: 30 queries of 5..120 documents, cosine similarities of a dense retriever in
             [-1, 1] rounded to 3 decimals (ties; many scores <= 0, which torchmetrics' MAP, MRR,
             precision and recall count as not retrieved), graded relevance 0..3.
    - ties:  24 queries of 17..150 documents scored on a 5-level scale (0, 0.25, ..., 1): nearly
             every cut-off falls inside a tie, so the value depends on the order torchmetrics
             gives tied scores (torch.sort / topk / argsort on the CPU).
    - edge:  hand-made queries: one document, negative and huge query ids, all relevant, none
             relevant, infinite scores, ignore_index (-100) targets.
    Scores are float32 (as models give them); indexes int32 and targets uint8 / bool, widened
    to int64 (torch.long) for torchmetrics. The "tiled" cases repeat bm25 13 times (query ids
    shifted by 1e6 per copy: 33 930 samples), where torch.sort of the ids becomes a stable radix
    sort (32768 samples and more): the C++ test builds the same tiling.
(b) Writes configs/examples/data/retrieval/{preds,target,indexes}.npy for
    configs/examples/retrieval.yaml: the bm25 run, in query order.
(c) Writes tests/reference/expected_retrieval.json: per case the metric, its parameters, inputs,
    the expected value and the exact call; "example": the example config's results.

Reference: torchmetrics 1.9.0 (torch 2.15, CPU, one thread), run in float64. Stock torchmetrics
casts scores to float32 and computes several values in float32 (AP, 1/rank, the nDCG gains, the
ROC rates, the final mean); float64_torchmetrics() below runs the same torchmetrics code with
float64 in their place (torch's default dtype, Tensor.float and the explicit torch.float32 of
average_precision.py and ndcg.py), which changes nothing else: the scores are float32 values, so
their order and ties are the same. Each case also records stock torchmetrics' value
("torchmetrics_float32"); the script checks it is within 1e-6 (relative) of the float64 one.
Cross-checks (in .venv-ref, scikit-learn 1.7.2): per query, sklearn.metrics.ndcg_score([t],
[p], k=top_k) against torchmetrics' retrieval_normalized_dcg, and roc_auc_score(t, p,
max_fpr=...) against retrieval_auroc; the largest differences go to "cross_checks".

Run:   .venv-torch/bin/python tests/reference/retrieval.py
       (it calls .venv-ref/bin/python tests/reference/retrieval.py --sklearn FILE itself)
"""

import contextlib
import json
import platform
import subprocess
import sys
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "retrieval"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "retrieval"
OUT = ROOT / "tests" / "reference" / "expected_retrieval.json"
SEED = 20261127
TILES, TILE_STRIDE = 13, 1_000_000

KEYS = {
    "RetrievalMAP": "retrieval_average_precision",
    "RetrievalMRR": "retrieval_reciprocal_rank",
    "RetrievalNormalizedDCG": "retrieval_normalized_dcg",
    "RetrievalPrecision": "retrieval_precision",
    "RetrievalRecall": "retrieval_recall",
    "RetrievalHitRate": "retrieval_hit_rate",
    "RetrievalFallOut": "retrieval_fall_out",
    "RetrievalRPrecision": "retrieval_r_precision",
    "RetrievalAUROC": "retrieval_auroc",
}


def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(folder, name, array):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


# ---- data --------------------------------------------------------------------------------------


def query_sizes(rng, count, lo, hi):
    return np.exp(rng.uniform(np.log(lo), np.log(hi + 1), size=count)).astype(np.int64).clip(lo, hi)


def grades_for(rng, m, kind):
    if kind == "none":
        return np.zeros(m, np.int64)
    if kind == "all":
        return rng.choice([1, 2, 3], size=m, p=[0.5, 0.3, 0.2])
    g = rng.choice([0, 1, 2, 3], size=m, p=[0.8, 0.1, 0.06, 0.04])
    if g.sum() == 0:
        g[rng.integers(m)] = rng.integers(1, 4)
    return g


def make_run(rng, count, lo, hi, score_fn, n_none, n_all):
    ids = rng.choice(np.arange(1, 50_000), size=count, replace=False)
    sizes = query_sizes(rng, count, lo, hi)
    kinds = ["none"] * n_none + ["all"] * n_all + ["mixed"] * (count - n_none - n_all)
    rng.shuffle(kinds)
    idx, pred, grade = [], [], []
    for q, m, kind in zip(ids, sizes, kinds):
        g = grades_for(rng, m, kind)
        idx.append(np.full(m, q))
        grade.append(g)
        pred.append(score_fn(rng, g))
    idx, pred, grade = np.concatenate(idx), np.concatenate(pred), np.concatenate(grade)
    perm = rng.permutation(len(idx))  # a query's documents anywhere in the file
    return idx[perm], pred[perm].astype(np.float32), grade[perm]


def bm25_scores(rng, g):
    overlap = rng.random(len(g)) < np.where(g > 0, 0.97, 0.55)
    s = rng.gamma(2.0 + 1.2 * g, 1.6) * overlap
    return np.round(s, 2)


def dense_scores(rng, g):
    s = np.tanh(0.25 * g + rng.normal(-0.1, 0.35, size=len(g)))
    return np.round(s, 3)


def tie_scores(rng, g):
    return np.round(np.clip(0.25 * g + rng.normal(0.1, 0.3, size=len(g)), 0, 1) * 4) / 4


def edge_run():
    # (query id, score, grade), in file order: one-document queries, negative and huge ids,
    # infinite scores, ignore_index targets (-100), a query whose only relevant document scores
    # 0 (not retrieved for MAP/MRR/precision/recall) and one with all documents tied.
    rows = [
        (7, 0.9, 1), (-3, 0.4, 0), (7, 0.1, 0), (2**40, 0.5, 2), (-3, 0.4, 1), (7, 0.9, 0),
        (11, 0.3, 0), (-3, float("inf"), 0), (2**40, 0.5, 0), (12, 0.0, 1), (12, 0.0, 0),
        (12, -0.5, 0), (11, 0.2, -100), (13, 0.7, 3), (13, 0.7, 1), (13, 0.7, 0), (13, 0.7, 2),
        (7, float("-inf"), 1), (14, 0.2, 1), (15, 0.6, 2), (15, 0.6, -100), (16, 0.8, 0),
        (16, 0.2, -100), (-3, 0.3, 2), (7, 0.6, 0), (17, 1.5, 1), (17, -2.0, 0), (17, 0.5, 0),
    ]
    idx = np.array([r[0] for r in rows], np.int64)
    pred = np.array([r[1] for r in rows], np.float32)
    grade = np.array([r[2] for r in rows], np.int64)
    return idx, pred, grade


def datasets():
    rng = np.random.default_rng(SEED)
    runs = {
        "bm25": make_run(rng, 40, 5, 200, bm25_scores, 4, 3),
        "dense": make_run(rng, 30, 5, 120, dense_scores, 3, 2),
        "ties": make_run(rng, 24, 17, 150, tie_scores, 2, 2),
        "edge": edge_run(),
    }
    files = {}
    for name, (idx, pred, grade) in runs.items():
        ignored = grade == -100
        binary = np.where(ignored, -100, grade > 0).astype(np.int8)
        f = {
            "indexes": save(DATA, f"{name}_indexes.npy",
                            idx if name == "edge" else idx.astype(np.int32)),
            "preds": save(DATA, f"{name}_preds.npy", pred),
        }
        if name == "edge":  # ignore_index -100 needs a signed target
            f["graded"] = save(DATA, f"{name}_graded.npy", grade.astype(np.int16))
            f["binary"] = save(DATA, f"{name}_binary.npy", binary)
        else:
            f["graded"] = save(DATA, f"{name}_graded.npy", grade.astype(np.uint8))
            f["binary"] = save(DATA, f"{name}_binary.npy", grade > 0)
        files[name] = f
    return runs, files


# ---- torchmetrics, float64 ---------------------------------------------------------------------


@contextlib.contextmanager
def float64_torchmetrics():
    """torchmetrics' own code with float64 where it writes float32 (see the module docstring)."""
    import torch
    import torchmetrics.functional.retrieval.average_precision as ap
    import torchmetrics.functional.retrieval.ndcg as nd

    class Torch64(types.ModuleType):
        float32 = torch.float64

        def __getattr__(self, name):
            return getattr(torch, name)

    proxy = Torch64("torch")
    old = (torch.get_default_dtype(), torch.Tensor.float, ap.torch, nd.torch)
    torch.set_default_dtype(torch.float64)
    torch.Tensor.float = lambda self, *a, **k: self.to(torch.float64)
    ap.torch = nd.torch = proxy
    try:
        yield
    finally:
        torch.set_default_dtype(old[0])
        torch.Tensor.float, ap.torch, nd.torch = old[1], old[2], old[3]


def torchmetrics_value(metric, params, idx, pred, target, f64):
    import torch
    import torchmetrics.retrieval as R

    kwargs = dict(params)
    m = getattr(R, metric)(**kwargs)
    t = torch.tensor(target.astype(np.int64))
    p = torch.tensor(pred.astype(np.float64))
    i = torch.tensor(idx.astype(np.int64))
    ctx = float64_torchmetrics() if f64 else contextlib.nullcontext()
    with ctx:
        m.update(p, t, indexes=i)
        v = m.compute()
    return float(v)


def call_text(metric, params, f64):
    args = ", ".join(f"{k}={v!r}" for k, v in params.items())
    return (f"torchmetrics.retrieval.{metric}({args})(preds, target, indexes=indexes)"
            f"{' in float64 (float64_torchmetrics())' if f64 else ''}; preds float64, target and "
            "indexes int64 (torch.long)")


# ---- cases -------------------------------------------------------------------------------------

PARAMS = {
    "RetrievalMAP": [{}, {"top_k": 10}, {"top_k": 3, "aggregation": "median"},
                     {"empty_target_action": "skip"}, {"empty_target_action": "pos",
                                                       "aggregation": "min"}],
    "RetrievalMRR": [{}, {"top_k": 5}, {"empty_target_action": "skip", "aggregation": "max"}],
    "RetrievalNormalizedDCG": [{}, {"top_k": 10}, {"top_k": 1}, {"empty_target_action": "skip",
                                                                 "aggregation": "median"}],
    "RetrievalPrecision": [{}, {"top_k": 5}, {"top_k": 50}, {"top_k": 50, "adaptive_k": True},
                           {"top_k": 10, "empty_target_action": "skip"}],
    "RetrievalRecall": [{}, {"top_k": 5}, {"top_k": 20, "aggregation": "median"}],
    "RetrievalHitRate": [{}, {"top_k": 1}, {"top_k": 3, "empty_target_action": "skip"}],
    "RetrievalFallOut": [{}, {"top_k": 5}, {"top_k": 10, "empty_target_action": "neg"},
                         {"top_k": 10, "empty_target_action": "skip"}],
    "RetrievalRPrecision": [{}, {"empty_target_action": "pos", "aggregation": "min"}],
    "RetrievalAUROC": [{}, {"top_k": 10}, {"max_fpr": 0.5}, {"max_fpr": 0.25, "top_k": 40},
                       {"empty_target_action": "skip", "aggregation": "median"}],
}
TILED = [("RetrievalMAP", {}),
         ("RetrievalRecall", {"top_k": 5})]


def target_of(metric, run, files):
    graded = metric == "RetrievalNormalizedDCG"
    return (run[2] if graded else np.where(run[2] == -100, -100, run[2] > 0).astype(np.int64),
            files["graded" if graded else "binary"])


def case_name(metric, data, params):
    tail = "_".join(f"{k}_{v}" for k, v in params.items()).replace("-", "minus")
    return f"{metric}_{data}" + (f"_{tail}" if tail else "")


def make_case(metric, data, params, idx, pred, target, inputs, extra=None):
    f64 = torchmetrics_value(metric, params, idx, pred, target, True)
    f32 = torchmetrics_value(metric, params, idx, pred, target, False)
    assert abs(f32 - f64) <= 1e-6 * max(1.0, abs(f64)), (metric, data, params, f32, f64)
    c = {"name": case_name(metric, data, params), "metric": metric, "params": params,
         "inputs": inputs, "expected": {KEYS[metric]: f64},
         "calls": {KEYS[metric]: call_text(metric, params, True)},
         "torchmetrics_float32": f32}
    if extra:
        c.update(extra)
    return c


def main():
    import torch
    import torchmetrics

    torch.set_num_threads(1)
    runs, files = datasets()
    cases, errors = [], []
    for metric, plist in PARAMS.items():
        for data in ["bm25", "dense", "ties", "edge"]:
            # Every dataset with the defaults; the other parameters on the tie-heavy run, where
            # the cut-offs fall inside ties (the C++ test runs each case on 1..7 ranks: few
            # cases keep it fast under ASan).
            for params in plist if data == "ties" else plist[:1]:
                p = dict(params)
                if data == "edge":
                    p["ignore_index"] = -100
                idx, pred, _ = runs[data]
                target, tfile = target_of(metric, runs[data], files[data])
                inputs = {"preds": files[data]["preds"], "target": tfile,
                          "indexes": files[data]["indexes"]}
                cases.append(make_case(metric, data, p, idx, pred, target, inputs))
    # The stable radix-sort path of torch.sort: bm25 tiled past 32768 samples.
    idx, pred, grade = runs["bm25"]
    tidx = np.concatenate([idx.astype(np.int64) + r * TILE_STRIDE for r in range(TILES)])
    tpred = np.tile(pred, TILES)
    tgrade = np.tile(grade, TILES)
    assert len(tidx) >= 32768
    for metric, params in TILED:
        target, tfile = target_of(metric, (tidx, tpred, tgrade), files["bm25"])
        inputs = {"preds": files["bm25"]["preds"], "target": tfile,
                  "indexes": files["bm25"]["indexes"]}
        c = make_case(metric, "tiled", params, tidx, tpred, target, inputs,
                      {"tile": {"copies": TILES, "index_stride": TILE_STRIDE}})
        cases.append(c)
    # empty_target_action='error': torchmetrics raises ValueError.
    for metric in ["RetrievalMAP", "RetrievalFallOut", "RetrievalNormalizedDCG"]:
        idx, pred, _ = runs["bm25"]
        target, tfile = target_of(metric, runs["bm25"], files["bm25"])
        try:
            torchmetrics_value(metric, {"empty_target_action": "error"}, idx, pred, target, True)
            raise AssertionError("torchmetrics did not raise")
        except ValueError as e:
            errors.append({"name": f"{metric}_bm25_error", "metric": metric,
                           "params": {"empty_target_action": "error"},
                           "inputs": {"preds": files["bm25"]["preds"], "target": tfile,
                                      "indexes": files["bm25"]["indexes"]},
                           "torchmetrics_raises": f"ValueError: {e}"})

    # The example: bm25 in query order, with the metrics of configs/examples/retrieval.yaml.
    idx, pred, grade = runs["bm25"]
    order = np.argsort(idx, kind="stable")
    ex_idx, ex_pred, ex_grade = idx[order].astype(np.int64), pred[order], grade[order]
    ex_inputs = {"preds": save(EXAMPLE, "preds.npy", ex_pred),
                 "target": save(EXAMPLE, "target.npy", ex_grade.astype(np.int64)),
                 "binary": save(EXAMPLE, "binary.npy", ex_grade > 0),
                 "indexes": save(EXAMPLE, "indexes.npy", ex_idx)}
    ex_metrics = [("ndcg@10", "RetrievalNormalizedDCG", {"top_k": 10}),
                  ("map", "RetrievalMAP", {}), ("mrr@10", "RetrievalMRR", {"top_k": 10}),
                  ("recall@20", "RetrievalRecall", {"top_k": 20})]
    example = {"config": "configs/examples/retrieval.yaml", "inputs": ex_inputs,
               "samples": int(len(ex_idx)), "results": {}, "calls": {}, "metrics": []}
    for label, metric, params in ex_metrics:
        graded = metric == "RetrievalNormalizedDCG"
        t = ex_grade if graded else (ex_grade > 0).astype(np.int64)
        v = torchmetrics_value(metric, params, ex_idx, ex_pred, t, True)
        example["results"][label] = {KEYS[metric]: v}
        example["calls"][label] = call_text(metric, params, True) + (
            "; target = target.npy (graded)" if graded else "; target = binary.npy (grade > 0)")
        # The binary metrics read the field `binary` as their target (the config's `inputs:`).
        example["metrics"].append({"label": label, "metric": metric, "params": params,
                                   "inputs": {} if graded else {"target": "binary"}})

    doc = {
        "generator": "tests/reference/retrieval.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "torch": torch.__version__, "torchmetrics": torchmetrics.__version__},
        "notes": [
            "Expected values: torchmetrics 1.9.0 on CPU run in float64 (float64_torchmetrics() in "
            "the generator); torchmetrics_float32 is stock torchmetrics on the same inputs.",
            "A case with 'tile' repeats its inputs 'copies' times, adding copy * index_stride to "
            "the query ids of each copy.",
            "Binary metrics read *_binary.npy (relevance > 0), RetrievalNormalizedDCG "
            "*_graded.npy (0..3); edge cases use ignore_index -100.",
        ],
        "cases": cases,
        "error_cases": errors,
        "example": example,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    # Cross-check with scikit-learn (its own venv).
    per_query = cross_check_inputs(runs)
    tmp = ROOT / "tests" / "reference" / ".retrieval_crosscheck.json"
    tmp.write_text(json.dumps(per_query))
    try:
        res = subprocess.run([str(ROOT / ".venv-ref" / "bin" / "python"), __file__, "--sklearn",
                              str(tmp)], check=True, capture_output=True, text=True)
    finally:
        tmp.unlink()
    doc["cross_checks"] = json.loads(res.stdout)
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(cases)} cases, {len(errors)} error cases -> {rel(OUT)}; "
          f"cross-checks {doc['cross_checks']}")


def cross_check_inputs(runs):
    """Per query of bm25, dense and ties: torchmetrics' functional nDCG and AUROC in float64."""
    import torch
    from torchmetrics.functional.retrieval import retrieval_auroc, retrieval_normalized_dcg

    out = []
    for data in ["bm25", "dense", "ties"]:
        idx, pred, grade = runs[data]
        for q in np.unique(idx):
            sel = idx == q
            p, g = pred[sel].astype(np.float64), grade[sel]
            if len(p) < 2:
                continue
            row = {"data": data, "query": int(q), "preds": p.tolist(), "grades": g.tolist()}
            with float64_torchmetrics():
                pt, gt = torch.tensor(p), torch.tensor(g.astype(np.int64))
                if g.sum() > 0:
                    row["ndcg"] = {str(k): float(retrieval_normalized_dcg(pt, gt, top_k=k))
                                   for k in (None, 10)}
                b = (g > 0).astype(np.int64)
                if 0 < b.sum() < len(b):
                    row["auroc"] = {str(f): float(retrieval_auroc(pt, torch.tensor(b), max_fpr=f))
                                    for f in (None, 0.5, 0.25)}
            out.append(row)
    return out


def sklearn_cross_check(path):
    import sklearn
    from sklearn.metrics import ndcg_score, roc_auc_score

    rows = json.loads(Path(path).read_text())
    worst = {"ndcg": 0.0, "auroc": 0.0}
    counts = {"ndcg": 0, "auroc": 0}
    for r in rows:
        p, g = np.array(r["preds"]), np.array(r["grades"])
        for k, v in r.get("ndcg", {}).items():
            s = ndcg_score([g], [p], k=None if k == "None" else int(k))
            worst["ndcg"] = max(worst["ndcg"], abs(s - v) / max(abs(v), 1e-300))
            counts["ndcg"] += 1
        for f, v in r.get("auroc", {}).items():
            s = roc_auc_score(g > 0, p, max_fpr=None if f == "None" else float(f))
            worst["auroc"] = max(worst["auroc"], abs(s - v) / max(abs(v), 1e-300))
            counts["auroc"] += 1
    assert worst["ndcg"] < 1e-12 and worst["auroc"] < 1e-12, worst
    print(json.dumps({
        "scikit-learn": sklearn.__version__,
        "ndcg": {"call": "sklearn.metrics.ndcg_score([target], [preds], k=top_k) per query "
                         "(top_k None and 10) vs torchmetrics.functional.retrieval."
                         "retrieval_normalized_dcg in float64",
                 "queries_x_params": counts["ndcg"], "max_rel_diff": worst["ndcg"]},
        "auroc": {"call": "sklearn.metrics.roc_auc_score(target > 0, preds, max_fpr=f) per "
                          "query (f None, 0.5, 0.25) vs torchmetrics.functional.retrieval."
                          "retrieval_auroc in float64",
                  "queries_x_params": counts["auroc"], "max_rel_diff": worst["auroc"]},
    }))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--sklearn":
        sklearn_cross_check(sys.argv[2])
    else:
        main()
