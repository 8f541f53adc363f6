#!/usr/bin/env python3
"""Reference values for tally::stats (engine/stats, tests/unit/test_stats.cpp).

    .venv-ref/bin/python tests/reference/stats.py   # writes expected_stats.json

1. The generator: numpy.random.Philox (Philox4x64-10) blocks, and the resamples of
   engine/stats/tally/stats/random.hpp ported to NumPy (the stream of resample b is
   Philox(counter=2**256 - 1, key=[seed, b]).random_raw(), each 64-bit word split low half first;
   Lemire's multiply-and-reject for indices below n). The C++ resamples must equal these.
2. McNemar: statsmodels.stats.contingency_tables.mcnemar([[0, b], [c, 0]], exact=True).pvalue,
   mcnemar(..., exact=False, correction=True) and correction=False (.statistic, .pvalue); the
   mid-p value 2 * scipy.stats.binom.cdf(k, b + c, 0.5) - scipy.stats.binom.pmf(k, b + c, 0.5);
   and the exact value of the exact and mid-p tests from big-integer sums of binomial
   coefficients (Python ints), correctly rounded to double (int / int true division).
3. Bootstrap intervals given the same bootstrap distribution: the distribution is computed here
   from the ported resamples (weighted statistics, weights = multiplicities), then SciPy's own
   code gives the intervals: np.percentile (scipy.stats.bootstrap's 'percentile' method),
   scipy.stats._resampling._bca_interval + _percentile_along_axis ('BCa'), np.std(ddof=1)
   (standard_error).
4. scipy.stats.bootstrap(..., n_resamples=10000) with its own resamples, for a loose comparison
   (Monte Carlo agreement).
5. The paired bootstrap: the difference distribution of two runs' accuracies from the ported
   resamples, its percentile interval and the p-values of bootstrap.hpp's formula.
"""

import json
import math
import platform
from pathlib import Path

import numpy as np
import scipy
import scipy.stats
import statsmodels
from scipy.stats import _resampling
from statsmodels.stats.contingency_tables import mcnemar

U64 = (1 << 64) - 1


# ---- 1. the generator -------------------------------------------------------------------------
def stream_u32(seed, b, count):
    """The first `count` 32-bit draws of resample b (random.hpp's ResampleStream)."""
    key = np.array([seed, b], dtype=np.uint64)
    words = np.random.Philox(counter=(1 << 256) - 1, key=key).random_raw((count + 1) // 2)
    out = np.empty(2 * len(words), dtype=np.uint64)
    out[0::2] = words & np.uint64(0xFFFFFFFF)
    out[1::2] = words >> np.uint64(32)
    return out[:count]


def resample_indices(seed, b, n):
    """random.hpp's resample_indices: n indices below n, Lemire's method."""
    threshold = ((1 << 32) - n) % n
    need = n + 16
    while True:
        x = stream_u32(seed, b, need)
        m = x * np.uint64(n)
        accepted = m[(m & np.uint64(0xFFFFFFFF)) >= np.uint64(threshold)]
        if len(accepted) >= n:
            return (accepted[:n] >> np.uint64(32)).astype(np.int64)
        need *= 2


def resample_counts(seed, b, n):
    return np.bincount(resample_indices(seed, b, n), minlength=n)


def generator_cases():
    blocks = []
    for key in [[0, 0], [12345, 7], [U64, 1 << 63], [2026, 999]]:
        words = np.random.Philox(counter=(1 << 256) - 1,
                                 key=np.array(key, dtype=np.uint64)).random_raw(12)
        blocks.append({"key": [str(k) for k in key], "words": [str(int(w)) for w in words],
                       "call": f"np.random.Philox(counter=2**256-1, key={key}).random_raw(12)"})
    resamples = []
    for seed, b, n in [(0, 0, 1), (1, 0, 2), (7, 3, 10), (42, 5, 1000), (U64, 999, 7),
                       (123456789, 2**40, 3), (2026, 1, 100003)]:
        idx = resample_indices(seed, b, n)
        counts = np.bincount(idx, minlength=n)
        resamples.append({"seed": str(seed), "b": str(b), "n": n,
                          "indices_head": idx[:64].tolist(),
                          "counts_head": counts[:64].tolist(),
                          "counts_sum_sq": int((counts.astype(np.int64) ** 2).sum())})
    # A bound with half the 32-bit draws rejected: n = 2^31 + 1.
    n = (1 << 31) + 1
    x = stream_u32(99, 4, 200)
    m = x * np.uint64(n)
    acc = (m[(m & np.uint64(0xFFFFFFFF)) >= np.uint64(((1 << 32) - n) % n)] >> np.uint64(32))
    uniform = {"seed": "99", "b": "4", "n": n, "values": acc[:40].tolist(),
               "u32": stream_u32(99, 4, 16).tolist()}
    return blocks, resamples, uniform


# ---- 2. McNemar -------------------------------------------------------------------------------
def exact_tail(k, n):
    """sum_{i<=k} C(n, i) as a Python int, truncated once the terms are below 2^-100 of the sum
    (they decrease at least geometrically below n/2, so the omitted tail is far below 2^-80)."""
    t = ck = math.comb(n, k)
    s = t
    i = k
    while i > 0:
        t = t * i // (n - i + 1)
        s += t
        i -= 1
        if t == 0 or (t << 100) < s:
            break
    return s, ck


def mcnemar_cases():
    pairs = set()
    small = [0, 1, 2, 3, 5, 8, 13, 20, 50, 100]
    for b in small:
        for c in small:
            pairs.add((b, c))
    pairs |= {(1000, 1000), (999, 1001), (1000, 1200), (0, 1000), (0, 1070), (1, 1069),
              (0, 1074), (0, 1080), (3, 1100), (10, 5000), (100, 10000), (400, 600),
              (5000, 5100), (49000, 51000), (250000, 250000), (249999, 250001),
              (499000, 501000), (497000, 503000), (490000, 510000), (482000, 518000),
              (480000, 520000), (0, 1000000), (1, 999999), (500000, 500000),
              (499999, 500001), (300000, 700000), (12345, 67890)}
    cases = []
    for b, c in sorted(pairs):
        table = np.array([[0, b], [c, 0]])
        ex = mcnemar(table, exact=True)
        ch = mcnemar(table, exact=False, correction=True) if b + c > 0 else None
        ch0 = mcnemar(table, exact=False, correction=False) if b + c > 0 else None
        k, n = min(b, c), b + c
        midp = min(1.0, 2 * scipy.stats.binom.cdf(k, n, 0.5) - scipy.stats.binom.pmf(k, n, 0.5))
        if n == 0:
            exact_p, exact_mid = 1.0, 1.0
        else:
            s, ck = exact_tail(k, n)
            exact_p = min(1.0, (2 * s) / (1 << n)) if 2 * s < (1 << n) else 1.0
            exact_mid = min(1.0, (2 * s - ck) / (1 << n)) if 2 * s - ck < (1 << n) else 1.0
        cases.append({
            "b": b, "c": c,
            "exact_pvalue": float(ex.pvalue), "exact_statistic": float(ex.statistic),
            "chi2_statistic": None if ch is None else float(ch.statistic),
            "chi2_pvalue": None if ch is None else float(ch.pvalue),
            "chi2_nocorr_statistic": None if ch0 is None else float(ch0.statistic),
            "chi2_nocorr_pvalue": None if ch0 is None else float(ch0.pvalue),
            "midp_pvalue": float(midp),
            "exact_bigint_pvalue": exact_p, "midp_bigint_pvalue": exact_mid,
        })
    return cases


# ---- 3. intervals given the same distribution ----------------------------------------------
def wmean(x, w):
    return np.sum(w * x, axis=-1) / np.sum(w, axis=-1)


def wstd(x, w):
    m = wmean(x, w)[..., None]
    return np.sqrt(np.sum(w * (x - m) ** 2, axis=-1) / np.sum(w, axis=-1))


def interval_case(name, x, stats, B, seed, alpha):
    n = len(x)
    W = np.stack([resample_counts(seed, b, n) for b in range(B)]).astype(np.float64)
    fns = {"mean": (wmean, np.mean), "std": (wstd, np.std)}
    out = {"name": name, "data": x.tolist(), "statistics": stats, "B": B, "seed": str(seed),
           "alpha": alpha, "results": []}
    tail = alpha / 2
    for s in stats:
        weighted, plain = fns[s]
        theta_b = weighted(x, W)
        lo, hi = np.percentile(theta_b, [tail * 100, (1 - tail) * 100])
        a1, a2, a_hat = _resampling._bca_interval((x,), lambda v, axis: plain(v, axis=axis),
                                                  axis=-1, alpha=tail, theta_hat_b=theta_b,
                                                  batch=None)
        bca_lo = _resampling._percentile_along_axis(theta_b, a1 * 100)
        bca_hi = _resampling._percentile_along_axis(theta_b, a2 * 100)
        z0 = scipy.special.ndtri(_resampling._percentile_of_score(theta_b, plain(x), axis=-1))
        out["results"].append({
            "statistic": s, "estimate": float(plain(x)),
            "percentile": [float(lo), float(hi)], "bca": [float(bca_lo), float(bca_hi)],
            "acceleration": float(a_hat), "z0": float(z0),
            "standard_error": float(np.std(theta_b, ddof=1)),
            "distribution_head": theta_b[:5].tolist(),
            "call": ("theta_b from the ported resamples; np.percentile(theta_b, [a/2*100, "
                     "(1-a/2)*100]); scipy.stats._resampling._bca_interval((x,), np." + s +
                     ", axis=-1, alpha=a/2, theta_hat_b=theta_b, batch=None) then "
                     "_percentile_along_axis; np.std(theta_b, ddof=1)"),
        })
    return out


def scipy_bootstrap_case(x, method):
    res = scipy.stats.bootstrap((x,), np.mean, n_resamples=10000, method=method,
                                confidence_level=0.95, rng=np.random.default_rng(2026))
    return {"method": method, "low": float(res.confidence_interval.low),
            "high": float(res.confidence_interval.high),
            "standard_error": float(res.standard_error),
            "call": f"scipy.stats.bootstrap((x,), np.mean, n_resamples=10000, method='{method}', "
                    "confidence_level=0.95, rng=np.random.default_rng(2026))"}


# ---- 5. paired ----------------------------------------------------------------------------
def paired_case(seed, B, alpha):
    rng = np.random.default_rng(7)
    n = 300
    a = (rng.random(n) < 0.80).astype(np.float64)
    b = (rng.random(n) < 0.76).astype(np.float64)
    W = np.stack([resample_counts(seed, r, n) for r in range(B)]).astype(np.float64)
    d = wmean(b, W) - wmean(a, W)
    m = len(d)
    L = ((d < 0).sum() + (d <= 0).sum()) / (2 * m)
    U = ((d > 0).sum() + (d >= 0).sum()) / (2 * m)
    tail = alpha / 2
    lo, hi = np.percentile(d, [tail * 100, (1 - tail) * 100])
    return {"a": a.astype(int).tolist(), "b": b.astype(int).tolist(), "B": B, "seed": str(seed),
            "alpha": alpha, "difference": float(b.mean() - a.mean()),
            "percentile": [float(lo), float(hi)], "standard_error": float(np.std(d, ddof=1)),
            "p_increase": float(L), "p_decrease": float(U), "p_two_sided": float(min(1, 2 * min(L, U))),
            "call": "d = weighted mean(b) - weighted mean(a) over the ported resamples; "
                    "L = (#(d<0) + #(d<=0)) / 2B, U = (#(d>0) + #(d>=0)) / 2B, "
                    "p = min(1, 2 min(L, U)); np.percentile(d, [a/2*100, (1-a/2)*100])"}


def main():
    blocks, resamples, uniform = generator_cases()
    rng = np.random.default_rng(20261127)
    normal = rng.normal(3.0, 2.0, 40)
    expo = rng.exponential(1.5, 60)
    bern = (rng.random(50) < 0.85).astype(np.float64)
    expo100 = rng.exponential(2.0, 100)
    intervals = [
        interval_case("normal40", normal, ["mean", "std"], 999, 11, 0.05),
        interval_case("exponential60", expo, ["mean", "std"], 2000, 12, 0.05),
        interval_case("exponential60_alpha10", expo, ["mean", "std"], 1500, 13, 0.10),
        interval_case("bernoulli50", bern, ["mean"], 1000, 14, 0.05),
    ]
    out = {
        "generated_by": "tests/reference/stats.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "scipy": scipy.__version__, "statsmodels": statsmodels.__version__},
        "philox_blocks": blocks,
        "resamples": resamples,
        "uniform_below": uniform,
        "mcnemar": mcnemar_cases(),
        "mcnemar_calls": {
            "exact": "statsmodels.stats.contingency_tables.mcnemar([[0, b], [c, 0]], exact=True)",
            "chi2": "mcnemar([[0, b], [c, 0]], exact=False, correction=True)",
            "chi2_nocorr": "mcnemar([[0, b], [c, 0]], exact=False, correction=False)",
            "midp": "min(1, 2*scipy.stats.binom.cdf(k, b+c, .5) - scipy.stats.binom.pmf(k, b+c, .5))",
            "bigint": "sum of math.comb(b+c, i), i <= min(b, c), over 2**(b+c), Python ints",
        },
        "intervals": intervals,
        "scipy_bootstrap": {"data": expo100.tolist(),
                            "cases": [scipy_bootstrap_case(expo100, m)
                                      for m in ["percentile", "BCa"]]},
        "paired": paired_case(31, 2000, 0.05),
    }
    path = Path(__file__).with_name("expected_stats.json")
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
