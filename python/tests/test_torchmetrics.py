"""tally.torchmetrics and tally.functional, the drop-ins for torchmetrics' classes and functions.

Without torch: every generated class is made from the committed API file and the plugins, and
the classification classes give tally's committed torchmetrics reference values
(tests/reference/expected_classification_torchmetrics.json: torchmetrics 1.9.0's functional
calls in float64, written by tests/reference/classification_torchmetrics.py) to 1e-9 with NumPy
inputs in uneven batches.

With torch (.venv-torch, torchmetrics 1.9.0): every drop-in class against torchmetrics' own class
of the same name on the same generated inputs, in three uneven batches: forward()'s value on
the first batch, then compute() over all; the functional twins against torchmetrics.functional;
MetricCollection against torchmetrics' MetricCollection; and the committed API file against the
installed torchmetrics' signatures. torchmetrics computes in float32, tally in float64 and
returns float32: they agree to float32 rounding (rtol 1e-4 over accumulated float32 sums).
"""

import inspect
import json

import numpy as np
import pytest

from conftest import ROOT, have, requires_torch
from tally import functional as F
from tally import torchmetrics as T

API = json.loads((ROOT / "python" / "tally" / "_torchmetrics_api.json").read_text())
CLASSES = [c["name"] for c in API["classes"]]
requires_torchmetrics = pytest.mark.skipif(
    not have("torchmetrics"),
    reason="torchmetrics is not installed in this venv (scripts/setup-torch-venv.sh makes "
    ".venv-torch with torchmetrics 1.9.0; scripts/python-tests.sh runs these tests there too)",
)


# ---- without torch ---------------------------------------------------------------------------
def test_every_class_and_function_is_generated_with_torchmetrics_signature():
    import tally

    metrics = {c["name"]: c for c in tally.plugins() if c["kind"] == "metric"}
    assert len(CLASSES) >= 150
    for c in API["classes"]:
        cls = getattr(T, c["name"])
        assert cls.__name__ == c["name"] and cls.__doc__
        assert [p for p in inspect.signature(cls).parameters][:-1] == [e[0] for e in c["init"]]
        inputs = {i["name"] for i in metrics[c["metric"]]["inputs"]}
        assert set(c["fields"].values()) <= inputs, c["name"]
        if c["functional"]:
            assert callable(getattr(F, c["functional"]["name"]))
    assert set(dir(T)) == set(T.__all__)
    with pytest.raises(AttributeError):
        T.NoSuchMetric  # noqa: B018


def _classification_cases():
    doc = json.loads((ROOT / "tests/reference/expected_classification_torchmetrics.json").read_text())
    return [c for c in doc["cases"] if "expected" in c]


CLASSIFICATION = _classification_cases()


@pytest.mark.parametrize("case", CLASSIFICATION, ids=[c["name"] for c in CLASSIFICATION])
def test_classification_class_gives_the_committed_torchmetrics_values(case):
    params = {k: v for k, v in case["params"].items() if k != "multidim_average"}
    if params.get("average") == "none":
        params["average"] = None  # torchmetrics' spelling
    metric = getattr(T, case["metric"])(**params)
    preds = np.load(ROOT / case["inputs"]["preds"])
    target = np.load(ROOT / case["inputs"]["target"])
    cuts = [0, len(preds) // 3, len(preds) // 3 + 1, len(preds)]  # uneven, one of one sample
    for a, b in zip(cuts, cuts[1:]):
        if b > a:
            metric.update(preds[a:b], target[a:b])
    got = metric.compute()
    if case["metric"] == "StatScores":
        keys = ["tp", "fp", "tn", "fn", "support"]
        want = np.stack([np.asarray(case["expected"][k], dtype=float) for k in keys], axis=-1)
    else:
        want = np.asarray(next(iter(case["expected"].values())), dtype=float)
    # A case with "tolerance": torchmetrics' own float32 step (see the reference script).
    rtol = case.get("tolerance", 1e-9)
    np.testing.assert_allclose(np.asarray(got, dtype=float), want, rtol=rtol, atol=1e-12)


def _text_cases():
    doc = json.loads((ROOT / "tests/reference/expected_text_torchmetrics.json").read_text())
    return [c for c in doc["cases"]
            if (c.get("cross_check") or {}).get("call", "").startswith("torchmetrics.text")
            and c["metric"] != "TranslationEditRate"]


TEXT = _text_cases()


@pytest.mark.parametrize("case", TEXT, ids=[c["name"] for c in TEXT])
def test_text_class_gives_torchmetrics_value_where_tallys_default_convention_differs(case):
    """MatchErrorRate, WordInfoLost, WordInfoPreserved and CHRFScore: the drop-in sets the
    plugin's torchmetrics convention, and gives the value torchmetrics 1.9.0 computed in float64
    on the committed data (the case's cross_check, written by tests/reference/
    text_torchmetrics.py), where tally's default (jiwer's, sacrebleu's) differs by up to 5%."""
    rows = [json.loads(line) for line in (ROOT / case["data"]).read_text().splitlines() if line]
    metric = getattr(T, case["metric"])(**case["params"]).double()  # float64 tensors with torch
    cut = len(rows) // 3
    for part in (rows[:cut], rows[cut:]):
        metric.update([r["preds"] for r in part], [r["target"] for r in part])
    want = next(iter(case["cross_check"]["value"].values()))
    # MatchErrorRate's torchmetrics state is float32 whatever the default dtype
    # (_mer_update: tensor(0, dtype=torch.float)): its value is rounded to float32 there.
    rel = 1e-7 if case["metric"] == "MatchErrorRate" else 1e-9
    assert float(metric.compute()) == pytest.approx(want, rel=rel)


def test_task_wrapper_returns_the_concrete_class_and_checks_its_arguments():
    m = T.Accuracy(task="multiclass", num_classes=3)
    assert type(m).__name__ == "MulticlassAccuracy" and m._params["average"] == "micro"
    assert T.MulticlassAccuracy(3)._params["average"] == "macro"  # the concrete class's default
    with pytest.raises(ValueError, match="task 'binary' is not supported"):
        T.ExactMatch(task="binary")
    with pytest.raises(TypeError, match="num_labels"):
        T.MultilabelAccuracy()  # required, as in torchmetrics
    with pytest.raises(ValueError, match="num_outputs=2 is not supported"):
        T.MeanSquaredError(num_outputs=2)
    import tally

    with pytest.raises(tally.ConfigError, match="num_classes"):
        T.MulticlassAccuracy(num_classes=1)


def test_forward_is_the_batch_value_and_accumulates():
    preds = np.array([0.9, 0.2, 0.7, 0.4, 0.6, 0.1])
    target = np.array([1, 0, 0, 1, 1, 0])
    m = T.BinaryAccuracy()
    assert float(m(preds[:2], target[:2])) == 1.0
    assert float(m(preds[2:], target[2:])) == 0.5
    assert float(m.compute()) == pytest.approx(4 / 6, rel=1e-12) and m.update_count == 2
    m.reset()
    m.update(preds[:1], target[:1])
    assert float(m.compute()) == 1.0


def test_state_dict_resumes_and_collection_is_one_pass():
    preds = np.random.default_rng(0).random(50)
    target = (np.random.default_rng(1).random(50) > 0.5).astype(np.int64)
    a = T.BinaryAUROC()
    a.update(preds[:20], target[:20])
    b = T.BinaryAUROC()
    b.load_state_dict(a.state_dict())
    b.update(preds[20:], target[20:])
    whole = T.BinaryAUROC()
    whole.update(preds, target)
    assert float(b.compute()) == float(whole.compute())
    mc = T.MetricCollection({"auc": T.BinaryAUROC(), "f1": T.BinaryF1Score()}, postfix="_v")
    out = mc(preds[:20], target[:20])
    assert set(out) == {"auc_v", "f1_v"}
    mc.update(preds[20:], target[20:])
    assert float(mc.compute()["auc_v"]) == float(whole.compute())
    assert float(mc["auc"].compute()) == float(whole.compute())
    assert len(mc._config["metrics"]) == 2  # one evaluator for both


# ---- against torchmetrics (torch venv) --------------------------------------------------------
REQUIRED = {
    "num_classes": 4, "num_labels": 3, "beta": 2.0, "min_recall": 0.5, "min_precision": 0.5,
    "min_specificity": 0.5, "min_sensitivity": 0.5, "p": 3.0, "fs": 10000,
}


def _args(spec, task=None):
    kw = {}
    for e in spec["init"]:
        if isinstance(e[1], dict) and e[1].get("required"):
            if e[0] == "task":
                kw["task"] = task
            elif e[0] == "metric_func":
                import torchmetrics.functional as TF

                kw["metric_func"] = TF.scale_invariant_signal_distortion_ratio
            elif e[0] in REQUIRED:
                kw[e[0]] = REQUIRED[e[0]]
    if spec["module"] in ("nominal",) and "num_classes" in [e[0] for e in spec["init"]]:
        kw["num_classes"] = 4
    if spec["module"] == "segmentation":
        kw["num_classes"] = 3
    if spec["name"] in DATA_RANGE:
        kw["data_range"] = 1.0
    if task == "multiclass" and "num_classes" in [e[0] for e in spec["init"]]:
        kw["num_classes"] = 4
    if spec["task"] == "any" and task != "multiclass":
        kw.pop("num_classes", None)
    if spec["task"] == "any" and task == "multiclass":
        kw["num_classes"] = 4
    if spec["task"] == "any" and task == "multilabel":
        kw["num_labels"] = 3
    return kw


def _inputs(spec, task, torch):
    """Three batches (13, 1 and 16 samples) of update() arguments for the class."""
    g = torch.Generator().manual_seed(sum(map(ord, spec["name"])))
    name, module = spec["name"], spec["module"]

    def batch(n):
        if module == "classification":
            if task == "binary":
                return torch.rand(n, generator=g), torch.randint(0, 2, (n,), generator=g)
            if task == "multiclass":
                return (torch.softmax(torch.randn(n, 4, generator=g), 1),
                        torch.randint(0, 4, (n,), generator=g))
            return torch.rand(n, 3, generator=g), torch.randint(0, 2, (n, 3), generator=g)
        if module == "retrieval":
            return (torch.rand(n, generator=g), torch.randint(0, 2, (n,), generator=g),
                    torch.randint(0, 3, (n,), generator=g))
        if module == "regression":
            if name == "KLDivergence":
                return (torch.softmax(torch.randn(n, 5, generator=g), 1),
                        torch.softmax(torch.randn(n, 5, generator=g), 1))
            if name == "CosineSimilarity":
                return torch.randn(n, 5, generator=g), torch.randn(n, 5, generator=g)
            lo = 0.1
            return torch.rand(n, generator=g) + lo, torch.rand(n, generator=g) + lo
        if module == "clustering":
            if name in ("CalinskiHarabaszScore", "DaviesBouldinScore", "DunnIndex"):
                return torch.randn(n, 3, generator=g), torch.arange(n) % 3
            return torch.randint(0, 3, (n,), generator=g), torch.randint(0, 3, (n,), generator=g)
        if module == "nominal":
            if name == "FleissKappa":
                raters = [torch.randint(0, 4, (5,), generator=g) for _ in range(n)]
                return (torch.stack([torch.bincount(r, minlength=4) for r in raters]),)
            return torch.randint(0, 4, (n,), generator=g), torch.randint(0, 4, (n,), generator=g)
        if module == "audio":
            if name == "PermutationInvariantTraining":
                return torch.randn(n, 2, 200, generator=g), torch.randn(n, 2, 200, generator=g)
            t = 12000 if name == "ShortTimeObjectiveIntelligibility" else 300
            x = torch.randn(n, t, generator=g)
            return x + 0.5 * torch.randn(n, t, generator=g), x
        if module == "image":
            size = 180 if name == "MultiScaleStructuralSimilarityIndexMeasure" else 48
            x = torch.rand(n, 3, size, size, generator=g)
            if name == "TotalVariation":
                return (x,)
            return (x * 0.8 + 0.2 * torch.rand(n, 3, size, size, generator=g)).clamp(0, 1), x
        if module == "segmentation":
            p = torch.randint(0, 3, (n, 12, 12), generator=g)
            t = torch.randint(0, 3, (n, 12, 12), generator=g)
            t[::2] = t[::2] % 2  # class 2 absent from every other target
            oh = torch.nn.functional.one_hot
            return oh(p, 3).permute(0, 3, 1, 2), oh(t, 3).permute(0, 3, 1, 2)
        if module == "text":
            words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]
            def sent():
                k = int(torch.randint(1, 7, (1,), generator=g))
                return " ".join(words[int(i)] for i in torch.randint(0, 8, (k,), generator=g))
            preds = [sent() for _ in range(n)]
            if name == "SQuAD":
                return ([{"prediction_text": p, "id": str(i)} for i, p in enumerate(preds)],
                        [{"answers": {"answer_start": [0], "text": [sent()]}, "id": str(i)}
                         for i in range(n)])
            if name in ("CHRFScore", "TranslationEditRate", "ExtendedEditDistance"):
                return preds, [[sent(), sent()] for _ in range(n)]
            return preds, [sent() for _ in range(n)]
        raise AssertionError(module)

    return [batch(n) for n in (13, 1, 16)]


# torchmetrics' GeneralizedDiceScore depends on how the images are batched where a class is absent
# from a target (it weights that class by the other images of the update): tally's definition is
# torchmetrics' with one image an update (docs/torchmetrics.md), so it is compared that way, on
# targets where class 2 is absent from every other image.
PER_IMAGE = {"GeneralizedDiceScore"}


# data_range=None: torchmetrics takes the range of each update's whole batch (so its value depends
# on the batching), tally each image's at each scale; with a data_range they are the same metric.
DATA_RANGE = {"MultiScaleStructuralSimilarityIndexMeasure"}


def _cases():
    out = []
    for c in API["classes"]:
        if c["task"] == "any":
            tasks = [t for t in ("binary", "multiclass", "multilabel")
                     if any(x["name"] == t.capitalize() + c["name"] for x in API["classes"])]
        else:
            tasks = [c["task"]]
        for t in tasks:
            out.append(pytest.param(c, t, id=f"{c['name']}-{t}" if t else c["name"]))
    return out


def _close(a, b, name):
    if isinstance(b, dict):
        assert set(a) == set(b), name
        for k in b:
            _close(a[k], b[k], f"{name}.{k}")
        return
    if isinstance(b, (tuple, list)):
        assert isinstance(a, (tuple, list)) and len(a) == len(b), name
        for x, y in zip(a, b):
            _close(x, y, name)
        return
    x = np.asarray(a.detach().cpu().double() if hasattr(a, "detach") else a, dtype=float)
    y = np.asarray(b.detach().cpu().double() if hasattr(b, "detach") else b, dtype=float)
    assert x.shape == y.shape, f"{name}: shape {x.shape} != torchmetrics' {y.shape}"
    np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5, equal_nan=True, err_msg=name)


TM_BETTER_IS_WRONG = {"DaviesBouldinScore", "SpectralDistortionIndex", "WordInfoPreserved"}


@requires_torch
@requires_torchmetrics
@pytest.mark.parametrize("spec,task", _cases())
def test_class_equals_torchmetrics(spec, task):
    import torch

    name = spec["name"]
    import importlib

    theirs_cls = getattr(importlib.import_module(f"torchmetrics.{spec['module']}"), name)
    kw = _args(spec, task)
    ours, theirs = getattr(T, name)(**kw), theirs_cls(**kw)
    assert type(ours).__name__ == type(theirs).__name__
    batches = _inputs(spec, task, torch)
    if name in PER_IMAGE:
        batches = [tuple(x[i : i + 1] for x in b) for b in batches for i in range(len(b[0]))]
    _close(ours(*batches[0]), theirs(*batches[0]), f"{name} forward")
    for b in batches[1:]:
        ours.update(*b)
        theirs.update(*b)
    _close(ours.compute(), theirs.compute(), f"{name} compute")
    # torchmetrics 1.9 marks DaviesBouldinScore higher_is_better=True; a lower index is the better
    # clustering (scikit-learn's davies_bouldin_score: "the minimum score is zero, with lower
    # values indicating better clustering"): tally says lower.
    # SpectralDistortionIndex likewise (0 is no distortion), and WordInfoPreserved the other way
    # (1 is every word preserved).
    if name not in TM_BETTER_IS_WRONG and None not in (ours.higher_is_better, theirs.higher_is_better):
        assert ours.higher_is_better == theirs.higher_is_better, name


@requires_torch
@requires_torchmetrics
def test_committed_api_file_is_the_installed_torchmetrics():
    import importlib

    import torchmetrics

    assert torchmetrics.__version__ == API["torchmetrics"]
    for c in API["classes"]:
        cls = getattr(importlib.import_module(f"torchmetrics.{c['module']}"), c["name"])
        init = cls.__dict__.get("__new__") or cls.__init__
        names = [p for p in inspect.signature(init).parameters if p not in ("self", "cls", "args", "kwargs")]
        assert names == [e[0] for e in c["init"]], c["name"]


@requires_torch
@requires_torchmetrics
def test_functional_equals_torchmetrics_functional():
    import torch
    import torchmetrics.functional as TF

    g = torch.Generator().manual_seed(3)
    p, t = torch.rand(40, generator=g), torch.randint(0, 2, (40,), generator=g)
    pm, tm = torch.softmax(torch.randn(40, 4, generator=g), 1), torch.randint(0, 4, (40,), generator=g)
    for fn, args, kw in [
        ("accuracy", (pm, tm), {"task": "multiclass", "num_classes": 4}),
        ("binary_f1_score", (p, t), {}),
        ("multiclass_auroc", (pm, tm), {"num_classes": 4}),
        ("precision_recall_curve", (p, t), {"task": "binary"}),
        ("retrieval_average_precision", (p, t), {}),
        ("pearson_corrcoef", (p, t.double()), {}),
    ]:
        theirs = getattr(TF, fn, None) or getattr(TF.classification, fn)
        _close(getattr(F, fn)(*args, **kw), theirs(*args, **kw), fn)


@requires_torch
@requires_torchmetrics
def test_metric_collection_equals_torchmetrics():
    import torch
    import torchmetrics

    g = torch.Generator().manual_seed(5)
    pm, tm = torch.softmax(torch.randn(60, 4, generator=g), 1), torch.randint(0, 4, (60,), generator=g)
    ours = T.MetricCollection([T.MulticlassAccuracy(4), T.MulticlassF1Score(4, average="micro")], prefix="val/")
    theirs = torchmetrics.MetricCollection(
        [torchmetrics.classification.MulticlassAccuracy(4),
         torchmetrics.classification.MulticlassF1Score(4, average="micro")], prefix="val/")
    _close(ours(pm[:25], tm[:25]), theirs(pm[:25], tm[:25]), "forward")
    ours.update(pm[25:], tm[25:])
    theirs.update(pm[25:], tm[25:])
    _close(ours.compute(), theirs.compute(), "compute")


@requires_torch
def test_plot_draws_with_matplotlib():
    pytest.importorskip("matplotlib", reason="matplotlib is not installed in this venv")
    import torch

    m = T.BinaryROC()
    m.update(torch.rand(30), torch.randint(0, 2, (30,)))
    fig, ax = m.plot()
    assert len(ax.lines) == 1
    a = T.BinaryAccuracy()
    a.update(torch.rand(30), torch.randint(0, 2, (30,)))
    fig, ax = a.plot()
    assert ax.get_title() == "BinaryAccuracy"


def test_docstring_examples_run():
    import doctest

    import tally.functional
    import tally.mmengine
    import tally.torchmetrics

    for module in (tally.torchmetrics, tally.functional, tally.mmengine):
        failed, attempted = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert attempted > 0 and failed == 0, module.__name__


def test_clone_keeps_the_arguments_and_a_config_metric_takes_overrides_as_evaluator_does():
    m = T.MulticlassAccuracy(num_classes=3, average="micro")
    m.update(np.array([0, 1, 2]), np.array([0, 1, 1]))
    c = m.clone()
    assert c._params == m._params and c.update_count == 0
    c.update(np.array([0, 1]), np.array([0, 0]))
    assert float(c.compute()) == 0.5
    # A single "KEY=VALUE" string is one override (as tally.Evaluator reads it), also in forward.
    cfg = T.Metric({"metrics": [{"type": "Accuracy"}]}, "metrics.0.topk=[1,2]")
    got = cfg(np.array([[0.2, 0.5, 0.3]]), np.array([2]))  # class 2 is second
    assert got == {"Accuracy": {"top1": 0.0, "top2": 1.0}}
