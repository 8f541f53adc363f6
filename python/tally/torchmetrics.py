"""A torchmetrics-style object over a tally :class:`~tally.Evaluator`: ``update``, ``compute``,
``reset``, ``state_dict``.

    from tally.torchmetrics import Metric
    acc = Metric({"metrics": [{"type": "Accuracy", "topk": [1, 5]}]},
                 inputs=("pred_scores", "gt_labels"))
    for x, y in loader:
        acc.update(model(x), y)           # positional arguments in the order of ``inputs``
    acc.compute()                         # {"Accuracy": {"top1": ..., "top5": ...}}

Unlike torchmetrics, ``compute()`` syncs through tally's backend (its config's ``backend:``),
so the result is the same on every rank and for any number of ranks; ``forward`` (a per-batch
value) is not offered: it would be a collective per batch.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from . import Evaluator


class Metric:
    def __init__(
        self,
        config: Any,
        overrides: Any = None,
        *,
        inputs: Sequence[str] = ("pred_scores", "gt_labels"),
        padded_sampler: bool = False,
        flatten: bool = False,
    ) -> None:
        """``inputs``: the field names ``update``'s positional arguments fill, in order.
        ``flatten=True``: ``compute()`` returns ``{"label/key": value}``."""
        self.evaluator = Evaluator(config, overrides, padded_sampler=padded_sampler)
        self.inputs = tuple(inputs)
        self.flatten = flatten
        self._updates = 0

    def update(self, *args: Any, **fields: Any) -> None:
        if len(args) > len(self.inputs):
            raise TypeError(
                f"update(): {len(args)} positional arguments, but inputs names {len(self.inputs)}: "
                f"{', '.join(self.inputs)}"
            )
        batch = dict(zip(self.inputs, args))
        batch.update(fields)
        self.evaluator.add(batch)
        self._updates += 1

    def compute(self, dataset_size: Optional[int] = None) -> dict:
        results = self.evaluator.compute(dataset_size)
        if not self.flatten:
            return results
        return {f"{label}/{key}": v for label, keys in results.items() for key, v in keys.items()}

    def reset(self) -> None:
        self.evaluator.reset()
        self._updates = 0

    @property
    def update_count(self) -> int:
        return self._updates

    def state_dict(self) -> dict:
        return self.evaluator.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.evaluator.load_state_dict(state)

    def to(self, *args: Any, **kwargs: Any) -> "Metric":
        """No-op (for code that moves metrics with the model): tally reads each tensor where it
        is, CPU or CUDA."""
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "tally.torchmetrics.Metric has no forward(): call update() per batch and compute() "
            "at the end (a per-batch value would need a collective per batch)"
        )
