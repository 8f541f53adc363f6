"""torchmetrics.functional's functions by name over tally's engine: one batch in, its value out,
on this rank alone (no collective), as torchmetrics' functional API.

    >>> import numpy as np
    >>> from tally import functional as F
    >>> float(F.binary_accuracy(np.array([0.2, 0.8, 0.6]), np.array([0, 1, 0])))
    0.6666666666666666

Each function is the twin of a class of :mod:`tally.torchmetrics` (``accuracy`` of ``Accuracy``,
``retrieval_average_precision`` of ``RetrievalMAP``), with torchmetrics 1.9's functional
arguments: ``fn(<update arguments>, **the constructor's arguments)``. Where torchmetrics'
functional takes one query (the retrieval functions), every sample is one query's. The metric
behind a function is made once per set of arguments and reused (``reset`` between calls).
"""

from __future__ import annotations

import functools as _functools
import inspect as _inspect
from typing import Any, Callable, Dict

from . import torchmetrics as _tm

_CACHE_SIZE = 64


def _hashable(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    if callable(v):
        return getattr(v, "__name__", repr(v))
    try:
        hash(v)
    except TypeError:
        return repr(v)
    return v


@_functools.lru_cache(maxsize=_CACHE_SIZE)
def _metric(cls_name: str, frozen: tuple) -> Any:
    cls = getattr(_tm, cls_name)
    return cls(**dict(frozen), sync_on_compute=False)


def _make(spec: dict) -> Callable[..., Any]:
    fn = spec["functional"]
    names = [p[0] for p in fn["params"]]
    update = [u for u in spec["update"] if u in names]
    missing = [u for u in spec["update"] if u not in names]  # retrieval's indexes
    sig = _inspect.Signature(
        [
            _inspect.Parameter(
                p[0],
                _inspect.Parameter.KEYWORD_ONLY if len(p) > 2 else
                _inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=_tm._default(p),
            )
            for p in fn["params"]
        ]
    )
    init_names = {e[0] for e in spec["init"]}

    def f(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{fn['name']}: {e}") from None
        inputs = [bound.arguments.pop(u) for u in update]
        ctor = {k: v for k, v in bound.arguments.items() if k in init_names}
        metric = _metric(spec["name"], _hashable_items(ctor))
        if missing:  # one query (the retrieval functions): every sample's index 0
            import numpy as np

            inputs += [np.zeros(len(inputs[0]), dtype=np.int64) for _ in missing]
        metric.update(*inputs)
        value = metric.compute()
        metric.reset()
        return value

    f.__name__ = f.__qualname__ = fn["name"]
    f.__signature__ = sig  # type: ignore[attr-defined]
    f.__doc__ = (
        f"torchmetrics.functional's ``{fn['name']}`` (torchmetrics {_tm._api()['torchmetrics']}): "
        f"the value of one batch, by tally's ``{spec['metric']}`` as "
        f":class:`tally.torchmetrics.{spec['name']}` computes it.\n\n"
        f"Example::\n\n    from tally import functional as F\n    "
        f"value = F.{fn['name']}({', '.join(update)}, ...)\n"
    )
    return f


def _hashable_items(d: dict) -> tuple:
    return tuple(sorted((k, _hashable(v)) for k, v in d.items()))


@_functools.lru_cache(maxsize=None)
def _functions() -> Dict[str, dict]:
    return {c["functional"]["name"]: c for c in _tm._api()["classes"] if c.get("functional")}


def __getattr__(name: str) -> Callable[..., Any]:
    spec = _functions().get(name)
    if spec is None:
        raise AttributeError(f"module 'tally.functional' has no attribute '{name}'")
    f = _make(spec)
    globals()[name] = f
    return f


def __dir__() -> list:
    return sorted(__all__)


__all__ = sorted(_functions())
