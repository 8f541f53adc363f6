"""The README's Python loop runs as written: its first ```python block is run in a fresh
interpreter (this one), from an empty folder, and must exit 0 and print the Accuracy that NumPy
computes from the same data. The reference is NumPy, not tally: this test regenerates the
snippet's data (the same seed and calls, which the assertion below checks are still the
snippet's) and counts top-1 and top-3 hits itself."""

import ast
import pathlib
import re
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]


def readme_loop() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"^```python\n(.*?)^```$", text, re.S | re.M)
    assert m, "README.md has no ```python block"
    return m.group(1)


def numpy_accuracy() -> dict:
    """Top-1 and top-3 accuracy of the README loop's data, by NumPy: the same generator, seed and
    draws in the same order (ten batches of 64 samples, 5 classes)."""
    rng = np.random.default_rng(0)
    top1 = top3 = n = 0
    for _ in range(10):
        labels = rng.integers(0, 5, size=64)
        scores = rng.random((64, 5)) + 0.5 * np.eye(5)[labels]
        order = np.argsort(-scores, axis=1)  # random floats: no ties
        top1 += int(np.sum(order[:, 0] == labels))
        top3 += int(np.sum(np.any(order[:, :3] == labels[:, None], axis=1)))
        n += len(labels)
    return {"top1": top1 / n, "top3": top3 / n}


def test_readme_python_loop_runs_as_written(tmp_path):
    code = readme_loop()
    # The data this test recomputes is the snippet's: same seed, same draws.
    for line in ("rng = np.random.default_rng(0)", "for _ in range(10):",
                 "labels = rng.integers(0, 5, size=64)",
                 "scores = rng.random((64, 5)) + 0.5 * np.eye(5)[labels]"):
        assert line in code, f"the README loop changed: {line!r} is gone; update this test"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    printed = ast.literal_eval(out.stdout.strip().splitlines()[-1])
    expected = numpy_accuracy()
    assert printed["Accuracy"]["top1"] == expected["top1"]
    assert printed["Accuracy"]["top3"] == expected["top3"]
    # What the README says it prints.
    assert "{'Accuracy': {'top1': %r, 'top3': %r}}" % (expected["top1"], expected["top3"]) in (
        ROOT / "README.md").read_text(encoding="utf-8")
