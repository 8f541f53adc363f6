"""tally: metrics evaluation with the same numbers on 1 or 64 ranks.

The same engine (libtally) and metric plugins as the ``tally`` command, from a Python loop::

    import tally

    ev = tally.Evaluator({"metrics": [{"type": "Accuracy", "topk": [1, 5]}]})
    for batch in loader:
        logits = model(batch["image"])
        ev.add({"pred_scores": logits, "gt_labels": batch["label"]})   # NumPy or torch, CPU or CUDA
    print(ev.compute())                      # {"Accuracy": {"top1": ..., "top5": ...}}

Arrays are read in place (DLPack / the buffer protocol); ``compute()`` is collective under
``mpirun`` (backend ``mpi``) and ``torchrun`` (``gloo``, or ``nccl`` for CUDA tensors).
"""

from __future__ import annotations

import json as _json
import os as _os
import pickle as _pickle
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from . import _tally
from ._errors import ConfigError, InputError, RegressionError, RuntimeError, TallyError

__version__ = _tally.__version__
__all__ = [
    "Evaluator",
    "run",
    "validate",
    "plugins",
    "cli_path",
    "TallyError",
    "ConfigError",
    "InputError",
    "RuntimeError",
    "RegressionError",
    "__version__",
]

_tally._set_exceptions(ConfigError, InputError, RuntimeError, TallyError)

ConfigLike = Union[str, "_os.PathLike[str]", Mapping[str, Any]]

def _override_items(overrides: Union[None, Mapping[str, Any], Iterable[str]]) -> list:
    """``{"metrics.0.topk": [1, 5]}`` or ``["metrics.0.topk=[1,5]"]`` as ``KEY=VALUE`` strings."""
    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        out = []
        for key, value in overrides.items():
            text = value if isinstance(value, str) else _json.dumps(value)
            out.append(f"{key}={text}")
        return out
    if isinstance(overrides, str):
        return [overrides]
    return [str(o) for o in overrides]


def _config_source(config: ConfigLike):
    """("file", path, "", "") or ("yaml" or "dict", text, source name, base folder) for a config
    given as a path, YAML text or a dict (JSON is YAML: the engine parses it, with its checks and
    messages; a dict's messages name a value by its key path, ``config['metrics'][0]['top_k']``)."""
    if isinstance(config, Mapping):
        return "dict", _json.dumps(config), "config", _os.getcwd()
    if isinstance(config, _os.PathLike):
        return "file", _os.fspath(config), "", ""
    if isinstance(config, str):
        if "\n" not in config and (
            _os.path.exists(config) or config.endswith((".yaml", ".yml", ".json"))
        ):
            return "file", config, "", ""
        return "yaml", config, "<yaml>", _os.getcwd()
    raise TypeError(
        f"config: expected a YAML file path, YAML text or a dict; found {type(config).__name__}"
    )


def _open_config(config: ConfigLike, overrides: list, padded_sampler: bool):
    kind, text, source, base = _config_source(config)
    if kind == "file":
        return _tally._Evaluator.from_file(text, overrides, padded_sampler)
    return _tally._Evaluator.from_yaml(text, source, base, overrides, padded_sampler, kind)


_Path = Union[None, str, "_os.PathLike[str]"]


def _run_options(output, junit, markdown, html, update_baseline, resume, quiet) -> dict:
    """``tally run``'s options by their names there (``--output``, ``--junit``, ...)."""

    def path(p):
        return None if p is None else _os.fspath(p)

    return {
        "output": path(output),
        "junit": path(junit),
        "markdown": path(markdown),
        "html": path(html),
        "update_baseline": bool(update_baseline),
        "resume": bool(resume),
        "quiet": bool(quiet),
    }


def _finish_run(outcome) -> dict:
    """The engine's run outcome (results, exit code, message, comparison) as the command's exit
    code means it: 0 the results; 3 :class:`RegressionError` (a regression, or with
    ``regression.fail_on_drift`` a drift); another code (another rank's failure) the error of that
    code. An error of this rank's own was raised by the engine already, as the command's message
    says it (ConfigError, InputError, RuntimeError)."""
    results, code, message, comparison = outcome
    if code == 0:
        return results
    if code == RegressionError.exit_code:
        raise RegressionError(message, results, comparison)
    raise (ConfigError if code == ConfigError.exit_code else RuntimeError)(message)


class Evaluator:
    """Accumulates batches into the metrics of a tally config and computes them.

    ``config`` is a YAML file path, YAML text, or a dict with the config's sections (``metrics``,
    ``backend``, optionally ``data`` for :meth:`run`). ``overrides`` are ``--set`` overrides: a
    dict ``{"metrics.0.topk": [1, 5]}`` or ``["metrics.0.topk=[1,5]"]``.

    ``padded_sampler=True`` when the loop's sampler pads every rank's shard to one size by
    repeating samples (PyTorch's ``DistributedSampler``, mmengine's ``DefaultSampler``): then
    ``compute(dataset_size=len(dataset))`` drops the padding, as mmengine does.
    """

    def __init__(
        self,
        config: ConfigLike,
        overrides: Union[None, Mapping[str, Any], Iterable[str]] = None,
        *,
        padded_sampler: bool = False,
    ) -> None:
        self._ev = _open_config(config, _override_items(overrides), padded_sampler)
        # Several ranks from a launcher on a backend of one: the command's exit 2, a ConfigError.
        self._ev.check_launcher()

    # ---- accumulate -------------------------------------------------------------------------
    def add(self, batch: Optional[Mapping[str, Any]] = None, /, **fields: Any) -> None:
        """Adds one batch of this rank's samples, in dataset order.

        ``batch`` maps field names (the metrics' inputs, or the names their ``inputs:`` map) to:

        - an array whose first dimension is the sample: NumPy, torch (CPU or CUDA; tensors that
          require grad are detached), or anything with ``__dlpack__`` or the buffer protocol. A
          C-contiguous array of bool, int8-64, uint8-32, float32 or float64 is read in place,
          without a copy; float16/bfloat16 are widened to float32 and strided arrays made
          contiguous (one copy, by the array's library). Lists of numbers go through NumPy.
        - a list of arrays: a ragged field, one array per sample (boxes per image);
        - a list of strings (one per sample), or of lists of strings: a text field.

        Fields may also be given as keywords: ``ev.add(pred_scores=logits, gt_labels=labels)``.
        An error is raised here and also remembered: the next :meth:`compute` fails on every rank
        with it, so that no rank waits for one that failed.
        """
        if batch is None:
            batch = fields
        elif fields:
            batch = {**batch, **fields}
        self._ev.add(batch)

    update = add  # torchmetrics' name

    # ---- compute ----------------------------------------------------------------------------
    def compute(self, dataset_size: Optional[int] = None) -> dict:
        """Collective (every rank calls it): syncs every metric's state, computes on rank 0, and
        returns the same dict on every rank: ``{label: {key: value}}``, the results JSON's
        ``results``. ``dataset_size`` drops a padded sampler's padding (see the class)."""
        return self._ev.compute(dataset_size)

    def reset(self) -> None:
        """Clears every metric's local state (a new epoch)."""
        self._ev.reset()

    @property
    def last_run(self) -> dict:
        """The ``run`` section of the last :meth:`compute`: backend, world size, samples, time."""
        return self._ev.last_run()

    @property
    def intervals(self) -> Optional[dict]:
        """The bootstrap intervals of the last :meth:`compute` with an ``intervals:`` section
        (docs/significance.md): ``{"settings": {...}, "metrics": {label: {key: {"low", "high",
        "standard_error"}}}}``; ``None`` without one."""
        return self._ev.last_intervals()

    def to_json(self) -> str:
        """The results JSON document of the last :meth:`compute` (as ``tally run`` writes it)."""
        return self._ev.last_json()

    def table(self) -> str:
        """The last :meth:`compute`'s results as the table ``tally run`` prints."""
        return self._ev.last_table()

    # ---- checkpoints ------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """This rank's accumulated state, for a checkpoint (``torch.save`` or ``pickle`` it):
        ``{"tally_state": bytes, "rank": r, "world_size": w}``. Not collective."""
        return {
            "tally_state": self._ev.save_state(),
            "rank": self._ev.rank,
            "world_size": self._ev.world_size,
        }

    def load_state_dict(self, state: Union[Mapping[str, Any], Sequence[Mapping[str, Any]]]) -> None:
        """Restores a :meth:`state_dict` of an evaluator with the same metrics: this rank's own
        (saved on the same rank of the same world size), or the list of every rank's state_dict
        of a run on any number of ranks N (gathered, say, with ``torch.distributed
        .all_gather_object`` or saved one file a rank). From the list, rank m of M takes the states
        of ranks ``m*N//M`` to ``(m+1)*N//M - 1`` and merges them in rank order, as if their
        samples had been added one after the other: the ranks' states together are those of the
        run that saved them, so ``compute()`` gives its results on any world size (for the
        samples a host feeds afterwards, their order across ranks is the host's).
        :class:`InputError` when it is not that: other metrics, a missing or repeated rank, bytes
        that changed since they were saved (their CRC-32 is checked before anything is read), or a
        state no run of these metrics could have saved; a failed load leaves the evaluator reset
        or as it was, never half-loaded."""
        if isinstance(state, Mapping):
            self._load_own(state)
            return
        if not isinstance(state, Sequence) or isinstance(state, (str, bytes)) or not state:
            raise InputError(
                "load_state_dict: expected a dict from Evaluator.state_dict(), or a non-empty "
                f"list of every rank's, found {type(state).__name__}"
            )
        for s in state:
            if not isinstance(s, Mapping) or "tally_state" not in s:
                raise InputError("load_state_dict: expected dicts from Evaluator.state_dict()")
        n = len(state)
        got = [(s.get("rank"), s.get("world_size")) for s in state]
        if set(got) != {(r, n) for r in range(n)}:  # n entries: so each rank exactly once
            raise InputError(
                f"load_state_dict: expected the state_dict of every rank 0 .. {n - 1} of a run on "
                f"{n} ranks, found (rank, world_size) {got}"
            )
        by_rank = {s["rank"]: s for s in state}
        m, me = self._ev.world_size, self._ev.rank
        mine = [by_rank[r] for r in range(me * n // m, (me + 1) * n // m)]
        self._ev.load_states([self._blob(s) for s in mine])

    def _load_own(self, state: Mapping[str, Any]) -> None:
        if "tally_state" not in state:
            raise InputError("load_state_dict: expected a dict from Evaluator.state_dict()")
        saved = (state.get("rank"), state.get("world_size"))
        if saved != (self._ev.rank, self._ev.world_size):
            raise InputError(
                f"load_state_dict: the state was saved by rank {saved[0]} of {saved[1]}; this is "
                f"rank {self._ev.rank} of {self._ev.world_size}: pass the list of every rank's "
                "state_dict to resume on another number of ranks"
            )
        self._ev.load_state(self._blob(state))

    @staticmethod
    def _blob(state: Mapping[str, Any]) -> bytes:
        blob = state["tally_state"]
        # Only bytes are read (never bytes(n), which would allocate n zero bytes from a number).
        if not isinstance(blob, (bytes, bytearray, memoryview)):
            raise InputError(
                "load_state_dict: 'tally_state' expects the bytes Evaluator.state_dict() saved, "
                f"found {type(blob).__name__}"
            )
        return blob if isinstance(blob, bytes) else bytes(blob)

    # ---- ranks ------------------------------------------------------------------------------
    @property
    def rank(self) -> int:
        return self._ev.rank

    @property
    def world_size(self) -> int:
        return self._ev.world_size

    @property
    def local_rank(self) -> int:
        """This rank's place on its host: the GPU it uses."""
        return self._ev.local_rank

    @property
    def backend(self) -> str:
        return self._ev.backend

    def barrier(self) -> None:
        """Collective: returns when every rank has called it."""
        self._ev.barrier()

    def all_gather_object(self, obj: Any) -> list:
        """Collective: every rank's picklable ``obj``, in rank order, on every rank (mmeval's
        ``all_gather_object``), over the evaluator's backend."""
        return [_pickle.loads(b) for b in self._ev.all_gather_bytes(_pickle.dumps(obj))]

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        """Collective: rank ``src``'s picklable ``obj`` on every rank."""
        mine = _pickle.dumps(obj) if self._ev.rank == src else b""
        return _pickle.loads(self._ev.broadcast_bytes(mine, src))

    def fail(self, message: str, input_error: bool = False) -> None:
        """Records a failure of this rank's own work (reading its data, say): the next
        :meth:`compute` raises it on every rank instead of leaving the others waiting."""
        self._ev.record_error(2 if input_error else 1, message)

    # ---- the config's own data --------------------------------------------------------------
    def run(
        self,
        output: _Path = None,
        quiet: bool = True,
        resume: bool = False,
        *,
        junit: _Path = None,
        markdown: _Path = None,
        html: _Path = None,
        update_baseline: bool = False,
    ) -> dict:
        """``tally run`` on this evaluator's config, by the same engine function: reads the
        config's ``data:`` section through its reader plugin (this rank's shard), computes,
        compares with the ``regression:`` baseline (paired tests, history and drift), and writes
        the outputs on rank 0, all or none. The options are the command's: ``output``, ``junit``,
        ``markdown``, ``html`` override the config's output paths; ``resume`` continues from the
        last complete checkpoint; ``update_baseline`` writes the results as the baseline;
        ``quiet=False`` prints the tables. Notices go to ``sys.stderr`` ("tally: ..."). Returns
        the results on every rank; the command's exit codes are raised: 3
        :class:`RegressionError`, 2 :class:`ConfigError` or :class:`InputError`, 1
        :class:`RuntimeError`. Collective."""
        return _finish_run(
            self._ev.run(
                _run_options(output, junit, markdown, html, update_baseline, resume, quiet)
            )
        )

    def __repr__(self) -> str:
        return (
            f"tally.Evaluator(backend={self._ev.backend!r}, rank={self._ev.rank}, "
            f"world_size={self._ev.world_size})"
        )


def run(
    config: ConfigLike,
    overrides: Union[None, Mapping[str, Any], Iterable[str]] = None,
    *,
    output: _Path = None,
    junit: _Path = None,
    markdown: _Path = None,
    html: _Path = None,
    update_baseline: bool = False,
    resume: bool = False,
    quiet: bool = True,
) -> dict:
    """``tally run CONFIG`` in this process, by the command's own engine function: reads the
    config's data, computes every metric, compares with its baseline, writes its outputs on rank
    0, and returns the results on every rank. The options are the command's (``--output``,
    ``--junit``, ``--markdown``, ``--html``, ``--update-baseline``, ``--resume``, ``--quiet``;
    no progress bar), and so are the errors: a regression (or, with
    ``regression.fail_on_drift``, a drift) raises :class:`RegressionError` (exit code 3), a bad
    config :class:`ConfigError` (exit code 2), with the command's message."""
    kind, text, source, base = _config_source(config)
    return _finish_run(
        _tally._run(
            text,
            source,
            base,
            kind,
            _override_items(overrides),
            _run_options(output, junit, markdown, html, update_baseline, resume, quiet),
        )
    )


def validate(
    config: ConfigLike, overrides: Union[None, Mapping[str, Any], Iterable[str]] = None
) -> list:
    """``tally validate CONFIG``: parses and checks the config, loads its plugins, makes its
    metrics and its reader (opening the data), runs nothing and starts no backend. Returns the
    fields the reader provides ([] without a ``data:`` section); raises :class:`ConfigError` or
    :class:`InputError` with the command's message."""
    kind, text, source, base = _config_source(config)
    return _tally._validate(text, source, base, kind, _override_items(overrides))


def plugins(paths: Sequence[str] = ()) -> list:
    """Every discovered plugin component, as ``tally plugins --json`` lists them: kind, name,
    aliases, plugin, version, file, doc, params (with defaults and docs), inputs, results."""
    return _json.loads(_tally._plugins_json([_os.fspath(p) for p in paths]))


def _launcher_world_size() -> int:
    """The world size the launcher's variables give (1 without a launcher): what the drop-ins
    (tally.torchmetrics, tally.coco) read to choose between a backend of one and ``auto``."""
    return int(_tally._launch_env()["world_size"])


def cli_path() -> str:
    """The ``tally`` command that came with this package."""
    here = _os.path.dirname(_os.path.abspath(__file__))
    return _os.path.join(here, "bin", "tally")


# dir(tally): the public API and the submodules, not the helpers imported above.
_SUBMODULES = ["torchmetrics", "functional", "mmengine"]


def __dir__() -> list:
    return sorted(__all__ + _SUBMODULES)
