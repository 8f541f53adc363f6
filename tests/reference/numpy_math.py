#!/usr/bin/env python3
"""Reference values for tally/sdk/numpy_math.hpp (tests/unit/test_numpy_math.cpp): NumPy's sum, mean
and nanmean of float64 and float32 arrays whose pairwise summation differs from a plain loop.

    .venv-ref/bin/python tests/reference/numpy_math.py   # writes expected_numpy_math.json

The data is a_i = ((i * 7919) % 1000 - 500) * 1.37 + 1 / (i + 1) in float64 (only correctly
rounded operations, so C++ makes the same doubles), and a_i cast to float32; for nanmean every
7th value is NaN.
"""

import json
import platform
from pathlib import Path

import numpy as np


def data(n):
    i = np.arange(n, dtype=np.float64)
    return ((i * 7919) % 1000 - 500) * 1.37 + 1.0 / (i + 1)


def main():
    cases = []
    for n in [0, 1, 7, 8, 9, 16, 127, 128, 129, 1000, 100003]:
        a = data(n)
        f = a.astype(np.float32)
        with np.errstate(all="ignore"):
            import warnings

            warnings.simplefilter("ignore")
            cases.append({
                "n": n,
                "sum_f64": float(np.sum(a)),
                "mean_f64": None if n == 0 else float(np.mean(a)),
                "sum_f32": float(np.sum(f)),
                "mean_f32": None if n == 0 else float(np.mean(f)),
                "loop_f64": float(sum(a.tolist(), 0.0)),
            })
    b = data(1000)
    b[::7] = np.nan
    out = {
        "generated_by": "tests/reference/numpy_math.py",
        "versions": {"numpy": np.__version__, "python": platform.python_version()},
        "calls": "np.sum(a), np.mean(a) for float64 a and a.astype(np.float32); "
                 "np.nanmean(b) with b[::7] = nan",
        "cases": cases,
        "nanmean_1000_every_7th_nan": float(np.nanmean(b)),
    }
    path = Path(__file__).with_name("expected_numpy_math.json")
    path.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
