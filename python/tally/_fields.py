"""Turning a loop's per-sample outputs (mmengine data samples, dicts) into one tally batch."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence


def _as_dict(sample: Any) -> Mapping[str, Any]:
    if isinstance(sample, Mapping):
        return sample
    to_dict = getattr(sample, "to_dict", None)  # mmengine's BaseDataElement
    if callable(to_dict):
        return to_dict()
    raise TypeError(
        f"expected each data sample to be a dict or to have to_dict(); found {type(sample).__name__}"
    )


def _stack(values: list) -> Any:
    first = values[0]
    if isinstance(first, str):
        return values
    if isinstance(first, (list, tuple)) and first and isinstance(first[0], str):
        return [list(v) for v in values]
    mod = type(first).__module__.split(".")[0]
    if mod == "torch":
        import torch

        shapes = {tuple(v.shape) for v in values}
        if len(shapes) == 1:
            return torch.stack(values)
        return list(values)  # ragged: one tensor per sample
    import numpy as np

    if hasattr(first, "__array_interface__") or hasattr(first, "__dlpack__"):
        shapes = {tuple(np.shape(v)) for v in values}
        if len(shapes) == 1:
            return np.stack([np.asarray(v) for v in values])
        return list(values)
    return np.asarray(values)


def samples_to_batch(
    samples: Sequence[Any],
    field_map: Optional[Mapping[str, str]] = None,
) -> dict:
    """One batch from per-sample dicts (or mmengine data elements): every key kept (renamed by
    ``field_map``, ``{"pred_score": "pred_scores"}``; a key mapped to ``None`` is dropped), its
    values stacked along a new first dimension (tensors or arrays of one shape), kept as a list
    (arrays of several shapes: a ragged field; strings: a text field)."""
    if not samples:
        return {}
    dicts = [_as_dict(s) for s in samples]
    keys = list(dicts[0].keys())
    out = {}
    for key in keys:
        name = field_map.get(key, key) if field_map else key
        if name is None:
            continue
        values = [d[key] for d in dicts if key in d]
        if len(values) != len(dicts):
            continue  # not every sample has it: not a field
        out[name] = _stack(values)
    return out


FieldsFn = Callable[[Any, Sequence[Any]], Mapping[str, Any]]
