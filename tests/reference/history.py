#!/usr/bin/env python3
"""Expected values for tally's history trends and slow-drift flag (engine/reports/history.cpp,
tests/unit/test_history.cpp).

(a) "kendall": Mann-Kendall cases, x = run positions (no ties), y = values: each case's
    scipy.stats.kendalltau(x, y) (method='auto', variant='b', two-sided: statistic and pvalue,
    and which method 'auto' picks) and scipy.stats.theilslopes(y, x) (slope, intercept). Cases
    cover the exact null distribution (no ties, n <= 33; n > 33 with one discordant pair), the
    normal approximation with and without ties, gaps in x, and a constant series (NaN).
(b) "scenarios": series of a key over history runs and the current run (null: the run lacks the
    key), the direction, the tolerance and the window, with the expected window statistics
    (kendalltau and theilslopes over the window's points with a value, x = position in the window)
    and whether the key drifts (trend the bad way, p < alpha, change from the window's first value
    to the current one worse than the tolerance). The script also checks what the scenario is
    meant to show: the slow drift's every single step (and the last run against the one before)
    stays within the 0.3 % tolerance, noise has p >= alpha.

Run:   .venv-ref/bin/python tests/reference/history.py   (SciPy 1.16.3, NumPy: tests/reference/
requirements.txt). Writes tests/reference/expected_history.json.
"""

import json
import math
import platform
from pathlib import Path

import numpy as np
import scipy
from scipy import stats

OUT = Path(__file__).with_name("expected_history.json")
ALPHA = 0.05


def num(v):
    v = float(v)
    return None if math.isnan(v) else v


def kendall_case(name, x, y):
    x = [float(v) for v in x]
    y = [float(v) for v in y]
    res = stats.kendalltau(x, y)
    n = len(x)
    ties = len(set(y)) != len(y)
    tot = n * (n - 1) // 2
    dis = sum(1 for i in range(n) for j in range(i + 1, n) if (y[j] - y[i]) * (x[j] - x[i]) < 0)
    method = "exact" if not ties and (n <= 33 or min(dis, tot - dis) <= 1) else "asymptotic"
    ts = stats.theilslopes(y, x)
    return {
        "name": name,
        "x": x,
        "y": y,
        "tau": num(res.statistic),
        "p_value": num(res.pvalue),
        "method": method,
        "slope": num(ts.slope),
        "intercept": num(ts.intercept),
        "call": "scipy.stats.kendalltau(x, y); scipy.stats.theilslopes(y, x)",
    }


def kendall_cases():
    rng = np.random.default_rng(20261127)
    cases = []
    cases.append(kendall_case("monotone falling n=11 (exact, c=0)", range(11),
                              [0.9 - 0.001 * i for i in range(11)]))
    cases.append(kendall_case("random n=11 no ties (exact)", range(11), rng.normal(0.9, 0.01, 11)))
    cases.append(kendall_case("random n=4 no ties (exact)", range(4), [0.3, 0.1, 0.4, 0.2]))
    # 5 discordant pairs of 10: 4c == n(n-1) (the two-sided p-value is 1).
    cases.append(kendall_case("n=5 tau=0 (exact, 4c = n(n-1))", range(5), [3, 1, 5, 4, 2]))
    cases.append(kendall_case("random n=25 no ties (exact)", range(25), rng.normal(0, 1, 25)))
    drift33 = np.arange(33) * 0.01 + rng.normal(0, 0.05, 33)
    cases.append(kendall_case("trend n=33 no ties (exact, largest n)", range(33), drift33))
    cases.append(kendall_case("random n=40 no ties (asymptotic)", range(40), rng.normal(0, 1, 40)))
    y = list(range(40))
    y[10], y[11] = y[11], y[10]
    cases.append(kendall_case("n=40 one swap (exact, c=1)", range(40), y))
    cases.append(kendall_case("ties n=11 (asymptotic, tie correction)", range(11),
                              [0.90, 0.91, 0.90, 0.92, 0.93, 0.92, 0.92, 0.94, 0.95, 0.94, 0.96]))
    cases.append(kendall_case("ties n=8 falling (asymptotic)", range(8),
                              [5, 5, 4, 4, 4, 3, 2, 2]))
    cases.append(kendall_case("ties n=60 (asymptotic)", range(60),
                              np.round(rng.normal(0, 1, 60) + np.arange(60) * 0.02, 1)))
    cases.append(kendall_case("gaps in x n=7 (exact)", [0, 1, 3, 4, 6, 8, 10],
                              [0.5, 0.49, 0.495, 0.48, 0.47, 0.475, 0.46]))
    cases.append(kendall_case("constant (NaN)", range(6), [0.5] * 6))
    return cases


def window_stats(values, window, better, rtol, atol):
    """What history.cpp computes for one key (the reference definition, spelled out)."""
    n_runs = len(values)
    begin = n_runs - window - 1 if n_runs > window + 1 else 0
    xs = [float(r - begin) for r in range(begin, n_runs) if values[r] is not None]
    ys = [float(values[r]) for r in range(begin, n_runs) if values[r] is not None]
    out = {"window_begin": begin, "points": len(ys), "x": xs, "y": ys}
    if values[-1] is None or len(ys) < 4:
        out.update(tested=False, drift=False)
        return out
    res = stats.kendalltau(xs, ys)
    ts = stats.theilslopes(ys, xs)
    first, current = ys[0], ys[-1]
    change = current - first
    tol = atol + rtol * abs(first)
    out.update(tau=num(res.statistic), p_value=num(res.pvalue), slope=num(ts.slope),
               intercept=num(ts.intercept), first=first, current=current, change=change,
               tolerance=tol, tested=not math.isnan(res.statistic))
    if better == "neither" or math.isnan(res.statistic):
        out["drift"] = False
        return out
    sign = -1.0 if better == "higher" else 1.0
    out["drift"] = bool(sign * res.statistic > 0 and res.pvalue < ALPHA and sign * change > tol)
    return out


def scenario(name, values, better, rtol=0.003, atol=0.0, window=10, expect=None, note=""):
    st = window_stats(values, window, better, rtol, atol)
    if expect is not None:
        assert st["drift"] == expect, (name, st)
    return {"name": name, "values": values, "better": better, "rtol": rtol, "atol": atol,
            "window": window, "alpha": ALPHA, "note": note, "expected": st,
            "call": "scipy.stats.kendalltau(x, y); scipy.stats.theilslopes(y, x) over the "
                    "window's points with a value"}


def within(a, b, rtol):
    return abs(a - b) <= rtol * abs(b)


def scenarios():
    rng = np.random.default_rng(7)
    out = []
    # A slow drift: 0.1 % a run over 10 history runs and the current one, a little noise.
    drift = [0.9 * (1 - 0.001 * i) + float(rng.normal(0, 0.0001)) for i in range(11)]
    for i in range(1, 11):  # no single step trips a 0.3 % tolerance
        assert within(drift[i], drift[i - 1], 0.003), (i, drift[i], drift[i - 1])
    assert not within(drift[10], drift[0], 0.003)
    out.append(scenario("slow drift down, higher is better", drift, "higher", expect=True,
                        note="0.1 % a run; every step within the 0.3 % tolerance"))
    # The same drift with the default tolerance (zero): flagged too.
    out.append(scenario("slow drift, zero tolerance", drift, "higher", rtol=0.0, expect=True))
    # Noise: no trend.
    noise = [0.9 + float(v) for v in rng.normal(0, 0.002, 11)]
    st = window_stats(noise, 10, "higher", 0.003, 0)
    assert st["p_value"] >= ALPHA, st
    out.append(scenario("noise, no trend", noise, "higher", expect=False))
    # Improvement: the same slope the good way.
    improving = [0.9 * (1 + 0.001 * i) + float(rng.normal(0, 0.0001)) for i in range(11)]
    out.append(scenario("slow improvement, higher is better", improving, "higher", expect=False))
    # Lower is better: a loss creeping up is a drift; the same numbers falling are not.
    loss = [0.25 * (1 + 0.001 * i) + float(rng.normal(0, 0.00003)) for i in range(11)]
    out.append(scenario("loss creeping up, lower is better", loss, "lower", expect=True))
    out.append(scenario("loss falling, lower is better", loss[::-1], "lower", expect=False))
    # No direction: never flagged.
    out.append(scenario("no direction", drift, "neither", expect=False))
    # A trend the bad way but within the tolerance (1 % tolerance, 1 % change over the window).
    out.append(scenario("drift within a 2 % tolerance", drift, "higher", rtol=0.02, expect=False))
    # Gaps: the key missing from three history runs (x: positions in the window).
    gaps = list(drift)
    for i in (2, 5, 6):
        gaps[i] = None
    out.append(scenario("slow drift with gaps", gaps, "higher", expect=True))
    # A long history: 15 runs where the early ones were low (overall the key rose), then a slow
    # drift down over the last 10 and the current one: the window sees the drift.
    long = [0.80, 0.82, 0.84, 0.86, 0.88] + drift[:10] + [drift[10]]
    out.append(scenario("window of 10 over 15 runs", long, "higher", expect=True))
    # Too few runs: 2 history runs and the current one.
    out.append(scenario("too few runs", drift[-3:], "higher", expect=False))
    # The key missing from the current run.
    out.append(scenario("not in the current run", drift[:10] + [None], "higher", expect=False))
    return out


def main():
    doc = {
        "generator": "tests/reference/history.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "scipy": scipy.__version__},
        "kendall": kendall_cases(),
        "scenarios": scenarios(),
    }
    OUT.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    print(f"wrote {OUT} ({len(doc['kendall'])} kendall cases, {len(doc['scenarios'])} scenarios)")


if __name__ == "__main__":
    main()
