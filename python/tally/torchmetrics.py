"""torchmetrics' classes by name over tally's engine: switch with one import.

    from tally import torchmetrics          # instead of: import torchmetrics

    acc = torchmetrics.Accuracy(task="multiclass", num_classes=3)
    batch_acc = acc(preds, target)          # forward: this batch's value, and accumulates it
    acc.update(preds, target)
    acc.compute()                           # tensor(...), on every rank the same

Every class torchmetrics 1.9 has for a metric that a tally plugin computes under the same name
(``tally.torchmetrics.__all__``; ``_torchmetrics_api.json`` records torchmetrics' constructor
and update() signatures) takes torchmetrics' arguments, in its order, with its defaults:
task wrappers (``Accuracy(task=...)``, returning the ``Binary*``/``Multiclass*``/``Multilabel*``
instance, as torchmetrics does) and the concrete classes. No value is computed in Python: each
comes from the plugin's C++ (``tally plugins`` lists them with their references).

Differences from torchmetrics, all on purpose:

- ``compute()`` syncs the states through tally's backend (``auto``: mpi under mpirun, gloo under
  torchrun; ``sync_on_compute=False`` keeps it local), so the value is the same on every rank and
  for any number of ranks; torchmetrics' float32 sums can differ in the last bits between world
  sizes. Values are computed in float64 and returned in torch's default dtype (float32 unless
  changed, or ``set_dtype``), on the device of the last tensor updated (or ``to(device)``).
- ``state_dict()`` is tally's checkpoint of this rank's state (``{"tally_state": bytes, ...}``),
  which ``load_state_dict`` restores on any number of ranks (see :class:`tally.Evaluator`).
- The objects are not ``torch.nn.Module``s: torch is not needed (NumPy arrays work too, and then
  values come back as NumPy arrays).

``Metric(config, inputs=...)`` is the same base over a whole tally config (several metrics of any
plugin, ``compute()`` returning ``{label: {key: value}}``).
"""

from __future__ import annotations

import copy as _copy
import functools as _functools
import inspect as _inspect
import json as _json
import os as _os
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Tuple, Union

from . import Evaluator as _Evaluator
from . import _launcher_world_size, _override_items
from . import plugins as _plugins
from . import validate as _validate

_API_FILE = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "_torchmetrics_api.json")
# Keyword arguments every torchmetrics metric takes (torchmetrics.Metric.__init__'s **kwargs).
_METRIC_KWARGS = {
    "compute_on_cpu": False,
    "dist_sync_on_step": False,
    "process_group": None,
    "dist_sync_fn": None,
    "distributed_available_fn": None,
    "sync_on_compute": True,
    "compute_with_cache": True,
}
# Metrics whose several keys torchmetrics returns as a tuple, in the plugin's key order.
_TUPLE_RESULTS = {
    "PrecisionRecallCurve",
    "ROC",
    "PrecisionAtFixedRecall",
    "RecallAtFixedPrecision",
    "SensitivityAtSpecificity",
    "SpecificityAtSensitivity",
    "KendallRankCorrCoef",
}
_CURVES = {"PrecisionRecallCurve", "ROC"}


@_functools.lru_cache(maxsize=None)
def _api() -> dict:
    with open(_API_FILE, encoding="utf-8") as f:
        return _json.load(f)


@_functools.lru_cache(maxsize=None)
def _plugin_metrics() -> Dict[str, dict]:
    return {c["name"]: c for c in _plugins() if c["kind"] == "metric"}


def _torch():
    try:
        import torch
    except ImportError:  # NumPy in, NumPy out
        return None
    return torch


def _tensor_device(value: Any):
    """The torch device of a tensor argument (or of the first tensor in a list), else None."""
    torch = _torch()
    if torch is None:
        return None
    if isinstance(value, torch.Tensor):
        return value.device
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], torch.Tensor):
        return value[0].device
    return None


class Metric:
    """The base of tally's torchmetrics classes, and a torchmetrics-style object over any tally
    config.

    Directly, over a config: ``update`` fills ``inputs`` (field names) in order, ``compute()``
    returns ``{label: {key: value}}`` (``flatten=True``: ``{"label/key": value}``)::

        >>> import numpy as np
        >>> from tally.torchmetrics import Metric
        >>> m = Metric({"metrics": [{"type": "Accuracy", "topk": [1]}]},
        ...            inputs=("pred_scores", "gt_labels"))
        >>> m.update(np.array([[0.1, 0.9], [0.8, 0.2]]), np.array([1, 1]))
        >>> m.compute()
        {'Accuracy': {'top1': 0.5}}
    """

    higher_is_better: Optional[bool] = None
    is_differentiable = False
    full_state_update = False
    _spec: Optional[dict] = None  # the torchmetrics API entry of a generated class

    def __init__(
        self,
        config: Any,
        overrides: Any = None,
        *,
        inputs: Sequence[str] = ("pred_scores", "gt_labels"),
        padded_sampler: bool = False,
        flatten: bool = False,
    ) -> None:
        self._init_state(config, overrides, tuple(inputs), padded_sampler)
        self.flatten = flatten

    def _init_state(self, config, overrides, fields, padded_sampler=False) -> None:
        self._config = config
        self._overrides = _override_items(overrides)  # KEY=VALUE strings, as Evaluator takes them
        self._params: dict = {}  # a generated class's plugin parameters
        self._padded = padded_sampler
        self._fields = fields
        self._ev: Optional[_Evaluator] = None
        self._local: Optional[_Evaluator] = None
        self._device = None
        self._explicit_device = False
        self._dtype = None
        self._torch_out = False
        self._updates = 0
        self._collection = None  # (MetricCollection, label) once a member of one

    # ---- the engine -------------------------------------------------------------------------
    @property
    def evaluator(self) -> _Evaluator:
        """The :class:`tally.Evaluator` that accumulates this metric (made at first use: its
        backend joins the other ranks then)."""
        if self._collection is not None:
            return self._collection[0].evaluator
        if self._ev is None:
            self._ev = _Evaluator(self._config, self._overrides, padded_sampler=self._padded)
        return self._ev

    def _local_evaluator(self) -> _Evaluator:
        if self._local is None:
            overrides = _local_overrides(self._overrides)
            self._local = _Evaluator(self._config, overrides)
        return self._local

    def _batch(self, args: tuple, kwargs: dict) -> dict:
        if self._spec is not None and self._spec["module"] == "text":
            args, kwargs = _text_inputs(self._spec["name"], self._spec["update"], args, kwargs)
        if len(args) > len(self._fields):
            raise TypeError(
                f"{type(self).__name__}.update() takes {len(self._fields)} positional arguments "
                f"({', '.join(self._update_names())}), {len(args)} were given"
            )
        batch = {}
        names = self._update_names()
        for i, value in enumerate(args):
            batch[self._fields[i]] = value
        for name, value in kwargs.items():
            if name in names:
                batch[self._fields[names.index(name)]] = value
            elif name in self._fields:
                batch[name] = value
            else:
                raise TypeError(
                    f"{type(self).__name__}.update() got an unexpected keyword argument '{name}'"
                )
        self._note_inputs(batch)
        return batch

    def _note_inputs(self, batch: dict) -> None:
        """Tensors come back where the inputs were: torch (on the last tensor's device) unless a
        NumPy array was given; lists (text) give tensors where torch is installed."""
        numpy_given = False
        for value in batch.values():
            device = _tensor_device(value)
            if device is not None and not self._explicit_device:
                self._device = device
            numpy_given = numpy_given or type(value).__module__ == "numpy"
        self._torch_out = not numpy_given and _torch() is not None

    def _update_names(self) -> list:
        return list(self._spec["update"]) if self._spec else list(self._fields)

    # ---- torchmetrics' interface ------------------------------------------------------------
    def update(self, *args: Any, **kwargs: Any) -> None:
        """Adds one batch: torchmetrics' ``update`` arguments, positionally or by name."""
        if self._collection is not None:
            raise RuntimeError(
                f"{type(self).__name__} is a member of a MetricCollection: update the collection"
            )
        self.evaluator.add(self._batch(args, kwargs))
        self._updates += 1

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Adds the batch, as ``update``, and returns the batch's own value (computed on this
        rank alone, without a collective, as torchmetrics' forward)."""
        batch = self._batch(args, kwargs)
        self.evaluator.add(batch)
        self._updates += 1
        local = self._local_evaluator()
        local.reset()
        local.add(batch)
        return self._result(local.compute())

    __call__ = forward

    def compute(self, dataset_size: Optional[int] = None) -> Any:
        """Collective: syncs every rank's state through tally's backend and returns the value
        (the same on every rank)."""
        if self._collection is not None:
            coll, label = self._collection
            return self._value(coll.evaluator.compute(dataset_size)[label])
        return self._result(self.evaluator.compute(dataset_size))

    def _result(self, results: dict) -> Any:
        if self._spec is None:
            if not self.flatten:
                return results
            return {f"{lb}/{k}": v for lb, keys in results.items() for k, v in keys.items()}
        return self._value(results[self._spec["name"]])

    def reset(self) -> None:
        """Clears the accumulated state (a new epoch)."""
        if self._ev is not None:
            self._ev.reset()
        self._updates = 0

    @property
    def update_count(self) -> int:
        """The number of update() and forward() calls since the last reset."""
        return self._updates

    @property
    def update_called(self) -> bool:
        return self._updates > 0

    def state_dict(self) -> dict:
        """This rank's state as tally's checkpoint (see :meth:`tally.Evaluator.state_dict`)."""
        return self.evaluator.state_dict()

    def load_state_dict(self, state: Any, strict: bool = True) -> None:
        """Restores a :meth:`state_dict`: this rank's, or the list of every rank's of a run on
        any number of ranks."""
        self.evaluator.load_state_dict(state)

    @property
    def device(self):
        """Where compute() puts its tensors: ``to(device)``'s, else the last tensor updated's."""
        torch = _torch()
        if self._device is None and torch is not None:
            return torch.device("cpu")
        return self._device

    def to(self, *args: Any, **kwargs: Any) -> "Metric":
        """``to(device)`` / ``to(dtype)``: where and in what dtype compute() returns tensors (the
        inputs are read where they are, CPU or CUDA)."""
        torch = _torch()
        for a in list(args) + list(kwargs.values()):
            if torch is not None and isinstance(a, torch.dtype):
                self._dtype = a
            elif a is not None:
                self._device = torch.device(a) if torch is not None else a
                self._explicit_device = True
        return self

    def cpu(self) -> "Metric":
        return self.to("cpu")

    def cuda(self, device: Any = None) -> "Metric":
        return self.to("cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device)

    def set_dtype(self, dst_type: Any) -> "Metric":
        """The dtype of compute()'s floating-point tensors."""
        self._dtype = dst_type
        return self

    def double(self) -> "Metric":
        torch = _torch()
        return self.set_dtype(torch.float64) if torch is not None else self

    def float(self) -> "Metric":
        torch = _torch()
        return self.set_dtype(torch.float32) if torch is not None else self

    def clone(self) -> "Metric":
        """A new metric of the same arguments, with no state."""
        other = _copy.copy(self)
        other._init_state(self._config, self._overrides, self._fields, self._padded)
        other._params = self._params
        return other

    def plot(self, val: Any = None, ax: Any = None):
        """Plots ``val`` (default: :meth:`compute`) with matplotlib; returns ``(fig, ax)``.
        A number is one point, a sequence of numbers (values over steps) a line, per-class
        values bars, a curve (``(x, y, thresholds)``) its line."""
        return _plot(self, self.compute() if val is None else val, ax)

    # ---- values -----------------------------------------------------------------------------
    def _value(self, keys: dict) -> Any:
        """The plugin's keys as torchmetrics returns the value."""
        metric = self._spec["metric"]
        if metric == "StatScores":
            return self._stack([keys[k] for k in ("tp", "fp", "tn", "fn", "support")])
        if len(keys) == 1:
            return self._out(next(iter(keys.values())))
        if metric in _TUPLE_RESULTS:
            return tuple(self._out(v, curve=metric in _CURVES) for v in keys.values())
        return {k: self._out(v) for k, v in keys.items()}

    def _out(self, v: Any, curve: bool = False) -> Any:
        if curve and isinstance(v, list) and v and isinstance(v[0], list):
            if self._params.get("thresholds") is None:  # exact curves: one tensor a class
                return [self._out(x) for x in v]
        return _to_array(v, self._torch_out, self._device, self._dtype)

    def _stack(self, columns: list) -> Any:
        rows = list(map(list, zip(*columns))) if isinstance(columns[0], list) else columns
        return _to_array(rows, self._torch_out, self._device, self._dtype)

    def __repr__(self) -> str:
        if self._spec is None:
            return f"tally.torchmetrics.Metric({self._config!r})"
        args = ", ".join(f"{k}={v!r}" for k, v in self._tm_args.items())
        return f"{type(self).__name__}({args})"


def _squad_inputs(preds: Any, target: Any) -> Tuple[list, list]:
    """torchmetrics' SQuAD format (preds ``[{"prediction_text", "id"}]``, target ``[{"answers":
    {"text": [...]}, "id"}]``) as tally's fields: one predicted string and the gold strings per
    question, in the targets' order (a question without a prediction scores 0, as there)."""
    if isinstance(preds, Mapping):
        preds = [preds]
    if isinstance(target, Mapping):
        target = [target]
    by_id = {p["id"]: p["prediction_text"] for p in preds}
    texts, golds = [], []
    for t in target:
        texts.append(by_id.get(t["id"], ""))
        golds.append(list(t["answers"]["text"]))
    return texts, golds


def _text_inputs(name: str, names: list, args: tuple, kwargs: dict) -> Tuple[tuple, dict]:
    """A text metric's arguments as lists of strings: a single string is one sample."""
    values = dict(zip(names, args))
    values.update(kwargs)
    if name == "SQuAD" and "preds" in values and "target" in values:
        values["preds"], values["target"] = _squad_inputs(values["preds"], values["target"])
    for k, v in values.items():
        if isinstance(v, str):
            values[k] = [v]
    return (), values


def _local_overrides(overrides: list) -> list:
    """``overrides`` with the backend made nondist: forward()'s and the functional API's value of
    one batch on this rank, no collective."""
    return overrides + ["backend.type=nondist"]


def _has_int_leaves(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return True
    if isinstance(v, list) and v:
        return all(_has_int_leaves(x) for x in v)
    return False


def _nan_for_none(v: Any) -> Any:
    if v is None:
        return float("nan")
    if isinstance(v, list):
        return [_nan_for_none(x) for x in v]
    return v


def _to_array(v: Any, torch_out: bool, device: Any, dtype: Any) -> Any:
    integer = _has_int_leaves(v)
    v = _nan_for_none(v)
    torch = _torch() if torch_out else None
    if torch is not None:
        kind = torch.int64 if integer else (dtype or torch.get_default_dtype())
        return torch.tensor(v, dtype=kind, device=device)
    import numpy as np

    return np.asarray(v, dtype=np.int64 if integer else (dtype or np.float64))


def _plot(metric: Any, val: Any, ax: Any):
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ModuleNotFoundError(
            "plot() needs matplotlib (pip install matplotlib); tally computes without it"
        ) from e
    import numpy as np

    fig, ax = plt.subplots() if ax is None else (ax.get_figure(), ax)
    name = type(metric).__name__
    if isinstance(val, tuple) and len(val) >= 2:
        x, y = np.asarray(val[0], dtype=float), np.asarray(val[1], dtype=float)
        if x.ndim == 1:
            ax.plot(x, y)
        else:
            for c in range(x.shape[0]):
                ax.plot(x[c], y[c], label=str(c))
            ax.legend()
    elif isinstance(val, Mapping):
        ax.bar(list(val.keys()), [float(np.asarray(v)) for v in val.values()])
    else:
        arr = np.asarray([np.asarray(v, dtype=float) for v in val] if isinstance(val, list) else val, dtype=float)
        if arr.ndim == 0:
            ax.plot([0], [float(arr)], marker="o")
            ax.set_xticks([])
        elif isinstance(val, list):  # values over steps
            ax.plot(np.arange(len(arr)), arr, marker="o")
            ax.set_xlabel("step")
        else:  # per class
            ax.bar(np.arange(arr.shape[-1]), arr.reshape(-1, arr.shape[-1])[0])
            ax.set_xlabel("class")
    ax.set_title(name)
    return fig, ax


# ---- the generated classes -------------------------------------------------------------------
def _default(entry: list) -> Any:
    d = entry[1]
    if isinstance(d, dict) and d.get("required"):
        return _inspect.Parameter.empty
    return d


def _signature(spec: dict) -> _inspect.Signature:
    params = []
    for entry in spec["init"]:
        kind = (
            _inspect.Parameter.KEYWORD_ONLY
            if len(entry) > 2
            else _inspect.Parameter.POSITIONAL_OR_KEYWORD
        )
        params.append(_inspect.Parameter(entry[0], kind, default=_default(entry)))
    params.append(_inspect.Parameter("kwargs", _inspect.Parameter.VAR_KEYWORD))
    return _inspect.Signature(params)


def _bind(spec: dict, args: tuple, kwargs: dict) -> Tuple[dict, dict]:
    """torchmetrics' constructor arguments (each by name, defaults filled) and its Metric kwargs."""
    names = [e[0] for e in spec["init"]]
    extra = {k: kwargs.pop(k) for k in list(kwargs) if k not in names}
    try:
        bound = _signature(spec).bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{spec['name']}: {e}") from None
    bound.apply_defaults()
    tm = dict(bound.arguments)
    tm.pop("kwargs", None)
    plugin_params = {p["name"] for p in _plugin_metrics()[spec["metric"]]["params"]}
    for k in extra:
        # torchmetrics' Metric kwargs; the plugin's own parameters, which torchmetrics takes
        # through **kwargs too (zero_division of BinaryPrecision); a task wrapper passes the rest
        # on to its class.
        if k not in _METRIC_KWARGS and k not in plugin_params and spec["task"] != "any":
            raise ValueError(f"{spec['name']}: unexpected keyword argument '{k}'")
    return tm, extra


def _plain(v: Any) -> Any:
    """A config value: tensors and tuples as lists, callables (PIT's metric_func) by name."""
    torch = _torch()
    if torch is not None and isinstance(v, torch.Tensor):
        return v.tolist()
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if callable(v):  # torchmetrics' deprecated shims are named _<name>
        return getattr(v, "__name__", str(v)).lstrip("_")
    return v


def _choices(metric: str, param: str) -> list:
    info = _plugin_metrics().get(metric, {})
    return next((p["choices"] for p in info.get("params", []) if p["name"] == param), [])


def _plugin_params(spec: dict, tm: dict, extra: dict) -> Tuple[str, dict]:
    """The tally metric and its parameters for torchmetrics' arguments ``tm``."""
    metric = spec["metric"]
    tm_defaults = {e[0]: _default(e) for e in spec["init"]}
    params = {}
    for name, value in tm.items():
        if name in ("validate_args",):
            continue  # tally checks every input, always
        if name in spec["tm_only"]:
            if metric == "RegressionMSE" and name == "squared" and value is False:
                metric = "RMSE"
                continue
            if value != tm_defaults[name]:
                raise ValueError(
                    f"{spec['name']}: {name}={value!r} is not supported by tally's {metric} "
                    f"(only the default, {tm_defaults[name]!r})"
                )
            continue
        if value is None and name == "average" and "none" in _choices(metric, "average"):
            value = "none"  # torchmetrics' average=None: one value a class
        if value is None:
            continue  # the plugin's default: absent
        params[spec["param_renames"].get(name, name)] = _plain(value)
    if spec["task"] not in (None, "any"):
        params["task"] = spec["task"]
    params.update(spec.get("fixed", {}))
    params.update({k: _plain(v) for k, v in extra.items() if k not in _METRIC_KWARGS})
    return metric, params


def _generated_init(self, *args: Any, **kwargs: Any) -> None:
    spec = self._spec
    tm, extra = _bind(spec, args, kwargs)
    metric, params = _plugin_params(spec, tm, extra)
    self._tm_args = tm
    backend = "auto" if extra.get("sync_on_compute", True) else "nondist"
    config = {
        "metrics": [{"type": metric, "name": spec["name"], **params}],
        "backend": {"type": backend},
    }
    fields = tuple(spec["fields"][u] for u in spec["update"])
    self._init_state(config, [], fields)
    self._params = params
    self.higher_is_better = _higher_is_better(metric)
    # The parameters are checked now, as torchmetrics checks them: a ConfigError names the one.
    # In a world of one the evaluator is made at once (that checks them); under a launcher only
    # the check, and the evaluator (whose backend joins the other ranks) at the first update, so
    # that making a metric is never collective (a metric made on rank 0 alone does not wait).
    if backend == "nondist" or _launcher_world_size() == 1:
        self._ev = _Evaluator(config)
    else:
        _validate(config)


def _higher_is_better(metric: str) -> Optional[bool]:
    info = _plugin_metrics().get(metric)
    better = {r["better"] for r in info["results"]} if info else set()
    return True if better == {"higher"} else False if better == {"lower"} else None


def _task_new(cls, *args: Any, **kwargs: Any):
    """A task wrapper (Accuracy(task=...)): the concrete class's instance, as torchmetrics."""
    spec = cls._spec
    tm, extra = _bind(spec, args, kwargs)
    task = tm.pop("task")
    prefix = {"binary": "Binary", "multiclass": "Multiclass", "multilabel": "Multilabel"}.get(task)
    concrete = _class(prefix + spec["name"]) if prefix else None
    if concrete is None:
        raise ValueError(
            f"{spec['name']}: task {task!r} is not supported (expected one of "
            f"{', '.join(t for t in _tasks_of(spec['name']))})"
        )
    names = {e[0] for e in concrete._spec["init"]}
    given = {k: v for k, v in tm.items() if k in names}
    for k, v in tm.items():  # the task wrapper's arguments the concrete class does not take
        if k not in names and k not in ("num_classes", "num_labels", "validate_args") and v is not None:
            wrapper_default = {e[0]: _default(e) for e in spec["init"]}[k]
            if v != wrapper_default:
                raise ValueError(f"{spec['name']}: {k} is not an argument of task {task!r}")
    return concrete(**given, **extra)


def _tasks_of(name: str) -> list:
    return [t for t in ("binary", "multiclass", "multilabel") if _class(t.capitalize() + name)]


def _doc(spec: dict) -> str:
    info = _plugin_metrics().get(spec["metric"], {})
    pnames = [e[0] for e in spec["init"]]
    params = {p["name"]: p for p in info.get("params", [])}
    lines = [
        f"torchmetrics' ``{spec['name']}`` (torchmetrics {_api()['torchmetrics']}), computed by "
        f"tally's ``{spec['metric']}``.",
        "",
        info.get("doc", ""),
        "",
        f"``{spec['name']}({', '.join(pnames)})``; ``update({', '.join(spec['update'])})``.",
        "",
        "Parameters:",
    ]
    for n in pnames:
        p = params.get(spec["param_renames"].get(n, n))
        text = p["doc"] if p else (
            "accepted (tally checks every input)" if n == "validate_args"
            else "torchmetrics' argument: only its default is supported"
        )
        lines.append(f"    {n}: {text}")
    lines += ["", "Example::", "", "    from tally import torchmetrics", ""]
    required = [e[0] for e in spec["init"] if _default(e) is _inspect.Parameter.empty]
    lines.append(f"    metric = torchmetrics.{spec['name']}({', '.join(r + '=...' for r in required)})")
    lines.append(f"    metric.update({', '.join(spec['update'])})")
    lines.append("    value = metric.compute()")
    return "\n".join(lines)


@_functools.lru_cache(maxsize=None)
def _specs() -> Dict[str, dict]:
    return {c["name"]: c for c in _api()["classes"]}


@_functools.lru_cache(maxsize=None)
def _class(name: str) -> Optional[type]:
    spec = _specs().get(name)
    if spec is None:
        return None
    ns = {"_spec": spec, "__doc__": _doc(spec), "__module__": __name__, "__qualname__": name}
    if spec["task"] == "any":
        ns["__new__"] = _task_new
        ns["__signature__"] = _signature(spec)
    else:
        ns["__init__"] = _generated_init
        ns["__signature__"] = _signature(spec)
    return type(name, (Metric,), ns)


class MetricCollection:
    """torchmetrics' ``MetricCollection``: several metrics updated together, in one engine pass
    (one :class:`tally.Evaluator` for all, one sync at compute()).

        >>> import numpy as np
        >>> from tally import torchmetrics
        >>> mc = torchmetrics.MetricCollection([torchmetrics.BinaryAccuracy(),
        ...                                     torchmetrics.BinaryPrecision()], prefix="val_")
        >>> mc.update(np.array([0.2, 0.8, 0.6]), np.array([0, 1, 0]))
        >>> {k: round(float(v), 4) for k, v in mc.compute().items()}
        {'val_BinaryAccuracy': 0.6667, 'val_BinaryPrecision': 0.5}
    """

    def __init__(
        self,
        metrics: Union[Metric, Sequence[Metric], Mapping[str, Metric]],
        *additional_metrics: Metric,
        prefix: Optional[str] = None,
        postfix: Optional[str] = None,
        compute_groups: Any = True,
    ) -> None:
        if isinstance(metrics, Metric):
            metrics = [metrics]
        if isinstance(metrics, Mapping):
            members = dict(metrics)
        else:
            members = {}
            for m in list(metrics) + list(additional_metrics):
                name = type(m).__name__
                if name in members:
                    raise ValueError(f"MetricCollection: two metrics named {name}")
                members[name] = m
        for name, m in members.items():
            if not isinstance(m, Metric) or m._spec is None:
                raise ValueError(
                    f"MetricCollection: {name} is not one of tally.torchmetrics' classes"
                )
        self.prefix, self.postfix = prefix or "", postfix or ""
        self._members = members
        self._ev: Optional[_Evaluator] = None
        self._local: Optional[_Evaluator] = None
        self._config, self._keys = self._build()
        for name, m in members.items():
            m._collection = (self, name)

    def _build(self):
        """One config of every member (named by its key), and each member's update argument ->
        batch field: the plugin's field name, or name.field where two members read different
        arguments under one field name."""
        position: Dict[str, set] = {}
        for m in self._members.values():
            for i, f in enumerate(m._fields):
                position.setdefault(f, set()).add(i)
        metrics, keys = [], {}
        for name, m in self._members.items():
            entry = dict(m._config["metrics"][0], name=name)
            keys[name] = tuple(
                f if len(position[f]) == 1 else f"{name}.{f}" for f in m._fields
            )
            renamed = {f: k for f, k in zip(m._fields, keys[name]) if f != k}
            if renamed:
                entry["inputs"] = renamed
            metrics.append(entry)
        backends = {m._config["backend"]["type"] for m in self._members.values()}
        backend = "nondist" if backends == {"nondist"} else "auto"
        return {"metrics": metrics, "backend": {"type": backend}}, keys

    @property
    def evaluator(self) -> _Evaluator:
        if self._ev is None:
            self._ev = _Evaluator(self._config)
        return self._ev

    def _batch(self, args: tuple, kwargs: dict) -> dict:
        batch = {}
        for name, m in self._members.items():
            mine = {k: v for k, v in kwargs.items() if k in m._update_names() or k in m._fields}
            for f, v in m._batch(args[: len(m._fields)], mine).items():
                batch[self._keys[name][m._fields.index(f)]] = v
        return batch

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Adds one batch to every member (each takes the arguments its update() takes)."""
        self.evaluator.add(self._batch(args, kwargs))

    def forward(self, *args: Any, **kwargs: Any) -> dict:
        """Adds the batch and returns every member's value on it alone (local, no collective)."""
        batch = self._batch(args, kwargs)
        self.evaluator.add(batch)
        if self._local is None:
            self._local = _Evaluator(self._config, _local_overrides([]))
        self._local.reset()
        self._local.add(batch)
        return self._named(self._local.compute())

    __call__ = forward

    def compute(self) -> dict:
        """Collective: every member's value, ``{prefix + name + postfix: value}`` (a member's dict
        value is merged in under its own keys)."""
        return self._named(self.evaluator.compute())

    def _named(self, results: dict) -> dict:
        out = {}
        for name, m in self._members.items():
            value = m._value(results[name])
            if isinstance(value, dict):
                for k, v in value.items():
                    out[f"{self.prefix}{k}{self.postfix}"] = v
            else:
                out[f"{self.prefix}{name}{self.postfix}"] = value
        return out

    def reset(self) -> None:
        if self._ev is not None:
            self._ev.reset()

    def state_dict(self) -> dict:
        return self.evaluator.state_dict()

    def load_state_dict(self, state: Any, strict: bool = True) -> None:
        self.evaluator.load_state_dict(state)

    def to(self, *args: Any, **kwargs: Any) -> "MetricCollection":
        for m in self._members.values():
            m.to(*args, **kwargs)
        return self

    def plot(self, val: Any = None, ax: Any = None, together: bool = False):
        """One plot per member (``[(fig, ax), ...]``)."""
        val = self.compute() if val is None else val
        return [
            _plot(m, val[f"{self.prefix}{n}{self.postfix}"], ax) for n, m in self._members.items()
        ]

    def keys(self, keep_base: bool = False) -> Iterable[str]:
        return [n if keep_base else f"{self.prefix}{n}{self.postfix}" for n in self._members]

    def items(self, keep_base: bool = False) -> Iterable[Tuple[str, Metric]]:
        return list(zip(self.keys(keep_base), self._members.values()))

    def values(self) -> Iterable[Metric]:
        return list(self._members.values())

    def __getitem__(self, key: str) -> Metric:
        if key in self._members:
            return self._members[key]
        for k, m in zip(self.keys(), self._members.values()):
            if k == key:
                return m
        raise KeyError(key)

    def __len__(self) -> int:
        return len(self._members)

    def __iter__(self):
        return iter(self.keys())

    def __contains__(self, key: str) -> bool:
        return key in self._members or key in self.keys()

    def __repr__(self) -> str:
        inner = ",\n  ".join(f"{n}: {m!r}" for n, m in self._members.items())
        return f"MetricCollection(\n  {inner},\n  prefix={self.prefix!r}, postfix={self.postfix!r}\n)"


def __getattr__(name: str) -> type:
    cls = _class(name)
    if cls is None:
        raise AttributeError(f"module 'tally.torchmetrics' has no attribute '{name}'")
    globals()[name] = cls
    return cls


def __dir__() -> list:
    return sorted(__all__)


__all__ = ["Metric", "MetricCollection"] + [c["name"] for c in _api()["classes"]]

from ._mean_ap import MeanAveragePrecision  # noqa: E402  (it builds on Metric above)

__all__ += ["MeanAveragePrecision"]
