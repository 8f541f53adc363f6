"""An mmengine-style metric over a tally :class:`~tally.Evaluator`.

mmengine's evaluation loop calls ``process(data_batch, data_samples)`` for each batch and
``evaluate(size)`` once at the end (mmengine's ``Evaluator``, ``ValLoop``/``TestLoop``). This
metric feeds each batch to tally, and ``evaluate(size)`` computes across ranks (tally's backend,
not ``torch.distributed``'s) with mmengine's padding rule: ``DefaultSampler`` pads every rank's
shard to one size, and ``size = len(dataset)`` drops the padding. Results are flattened to
``{"prefix/label/key": value}`` as mmengine metrics return them.

    from tally.mmengine import TallyMetric
    val_evaluator = TallyMetric(
        {"backend": {"type": "auto"}, "metrics": [{"type": "Accuracy", "topk": [1, 5]}]},
        field_map={"pred_score": "pred_scores", "gt_label": "gt_labels"})

With mmengine installed the class derives from ``mmengine.evaluator.BaseMetric`` and is
registered in mmengine's ``METRICS`` registry as ``TallyMetric`` (a child registry, mmdet's or
mmpretrain's, finds it there too), so an mmengine config names it::

    custom_imports = dict(imports=["tally.mmengine"], allow_failed_imports=False)
    val_evaluator = dict(type="TallyMetric", config=dict(metrics=[dict(type="Accuracy")]),
                         field_map=dict(pred_score="pred_scores", gt_label="gt_labels"))

Without mmengine it works on its own.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from . import Evaluator
from ._fields import FieldsFn, samples_to_batch

try:  # pragma: no cover - exercised only where mmengine is installed
    from mmengine.evaluator import BaseMetric as _Base

    _HAVE_MMENGINE = True
except Exception:  # noqa: BLE001 - any import failure means: no mmengine
    _Base = object
    _HAVE_MMENGINE = False


__all__ = ["TallyMetric", "flatten"]


def flatten(results: Mapping[str, Any], prefix: Optional[str] = None) -> dict:
    """``{label: {key: v}}`` as mmengine's flat ``{"prefix/label/key": v}``.

    >>> flatten({"Accuracy": {"top1": 0.5}}, "val")
    {'val/Accuracy/top1': 0.5}
    """
    out = {}
    for label, keys in results.items():
        for key, value in keys.items():
            name = f"{label}/{key}"
            out[f"{prefix}/{name}" if prefix else name] = value
    return out


class TallyMetric(_Base):  # type: ignore[misc, valid-type]
    """mmengine's metric interface over a tally config: ``process(data_batch, data_samples)`` per
    batch, ``evaluate(size)`` once (collective; the padding of mmengine's DefaultSampler dropped).

    >>> import numpy as np
    >>> m = TallyMetric({"metrics": [{"type": "Accuracy"}]}, prefix="val",
    ...                 field_map={"pred_score": "pred_scores", "gt_label": "gt_labels"})
    >>> m.process({}, [{"pred_score": np.array([0.2, 0.8]), "gt_label": 1},
    ...                {"pred_score": np.array([0.9, 0.1]), "gt_label": 1}])
    >>> m.evaluate(2)
    {'val/Accuracy/top1': 0.5}
    """

    default_prefix: Optional[str] = None

    def __init__(
        self,
        config: Any,
        overrides: Any = None,
        *,
        field_map: Optional[Mapping[str, str]] = None,
        fields: Optional[FieldsFn] = None,
        prefix: Optional[str] = None,
        padded_sampler: bool = True,
        collect_device: str = "cpu",
    ) -> None:
        """``config``: a tally config (path, YAML text or dict) with its ``metrics`` and
        ``backend``. ``fields(data_batch, data_samples) -> {field: values}`` builds each batch;
        by default the data samples' keys, renamed by ``field_map``, stacked
        (:func:`tally._fields.samples_to_batch`)."""
        if _HAVE_MMENGINE:
            super().__init__(collect_device=collect_device, prefix=prefix)
        else:
            self.prefix = prefix or self.default_prefix
            self.results: list = []
            self.dataset_meta: Optional[dict] = None
        self.evaluator = Evaluator(config, overrides, padded_sampler=padded_sampler)
        self._field_map = dict(field_map or {})
        self._fields = fields

    def process(self, data_batch: Any, data_samples: Sequence[Any]) -> None:
        if self._fields is not None:
            batch = self._fields(data_batch, data_samples)
        else:
            batch = samples_to_batch(data_samples, self._field_map)
        self.evaluator.add(batch)

    def compute_metrics(self, results: list) -> dict:
        raise NotImplementedError(
            "TallyMetric computes in evaluate(size): tally syncs the states across ranks itself"
        )

    def evaluate(self, size: int) -> dict:
        """Collective: the metrics over every rank's samples, the padding dropped; the same dict
        on every rank. The state is then cleared for the next evaluation."""
        try:
            results = self.evaluator.compute(dataset_size=size)
        finally:
            self.evaluator.reset()
        return flatten(results, self.prefix)


if _HAVE_MMENGINE:  # pragma: no cover - exercised only where mmengine is installed
    from mmengine.registry import METRICS as _METRICS

    _METRICS.register_module(name="TallyMetric", module=TallyMetric, force=True)
