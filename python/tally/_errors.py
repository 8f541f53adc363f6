"""tally's exceptions: each carries the engine's one-line message (what, where, what was
expected) and the exit code the ``tally`` command would give."""

import builtins


class TallyError(Exception):
    """Any error tally reports. Where it happened, as far as the engine knew (None where it did
    not): ``metric`` (the metric's label), ``field`` (a batch field, a parameter or a config
    key), ``file`` (a file, or a place in the config such as ``eval.yaml:7:5``), ``rank`` (the
    rank it is about), ``backend`` (set when this rank's own transport failed) and ``owner``
    (the component the message starts with, ``"metric 'top5' (Accuracy)"``)."""

    exit_code = 1
    metric = None
    field = None
    file = None
    rank = None
    backend = None
    owner = None


class ConfigError(TallyError, ValueError):
    """The config, its overrides or the plugins it names are wrong (the command's exit code 2)."""

    exit_code = 2


class InputError(TallyError, ValueError):
    """The data is wrong: a field missing, a shape or dtype unexpected, a value out of range
    (exit code 2)."""

    exit_code = 2


class RuntimeError(TallyError, builtins.RuntimeError):
    """The evaluation failed while it ran, on this rank or another (exit code 1)."""

    exit_code = 1


class RegressionError(TallyError):
    """A metric regressed against the config's baseline, or with ``regression.fail_on_drift`` a
    key drifted over the history (exit code 3). The message is the line ``tally run`` prints
    ("regression against 'baseline.json': 1 key regressed: ..."); ``results`` holds the results
    computed, ``comparison`` the comparison table (with each key's paired test)."""

    exit_code = 3

    def __init__(self, message: str, results: dict, comparison: str = "") -> None:
        super().__init__(message)
        self.results = results
        self.comparison = comparison
