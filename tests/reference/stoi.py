#!/usr/bin/env python3
"""Reference data and expected values for ShortTimeObjectiveIntelligibility (plugins/audio/stoi.cpp).

(a) Writes test signals to tests/data/audio/stoi_*.npy, deterministically (seeded): speech-like
    utterances (tests/reference/audio.py's speech(): a glottal source through formant resonators
    under syllable envelopes) separated by silences (exact zeros, or a -80 dB noise floor), at
    8, 10, 16 and 44.1 kHz; the estimates are the clean signals through a random room response
    plus white noise at -5..20 dB SNR (audio.py's estimate()). Stored as float32 (small files),
    fed to every reference as float64.
(b) Writes tests/reference/expected_stoi.json: per case the metric, its parameters, its inputs,
    the expected value and the exact reference call.

Each expected value is torchmetrics 1.9.0's
    ShortTimeObjectiveIntelligibility(fs, extended).set_dtype(torch.float64)
    update(preds.double(), target.double()); compute()
which calls pystoi 0.4.1's stoi(target_i, preds_i, fs, extended) per signal and averages. The
script also calls pystoi.stoi directly on every signal (the mean of those is recorded as
"pystoi_mean"; it equals the torchmetrics value to rounding of the mean).

extended=True: pystoi's row_col_normalize adds EPS * np.random.standard_normal(...) (EPS = 2^-52)
before each of its two normalisations: the result depends on numpy's global random state. The
script seeds it (np.random.seed(0)) before each update, and records per case how far the value
moves (a) with the noise replaced by zeros ("noise_free": what tally computes, deterministic) and
(b) across seeds 1..5 ("seed_spread", relative): both far below 1e-9 on these signals.

Run in the torch environment (torchmetrics 1.9.0, pystoi 0.4.1):
    .venv-torch/bin/python tests/reference/stoi.py
"""

import importlib.metadata
import json
import math
import platform
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import scipy
import torch
import torchmetrics
from pystoi import stoi as pystoi_stoi
from torchmetrics.audio import ShortTimeObjectiveIntelligibility

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audio import estimate, speech  # noqa: E402  (the same speech-like generator)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "audio"
OUT = ROOT / "tests" / "reference" / "expected_stoi.json"
KEY = "short_time_objective_intelligibility"


def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(name, array):
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / name
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


def utterance(rng, fs, seconds, floor):
    """Speech bursts separated by silences (exact zeros, or white noise `floor` below the peak),
    `seconds` long in all."""
    n = int(round(seconds * fs))
    out = np.zeros(n)
    pos = int(rng.uniform(0.05, 0.12) * fs)
    while pos < n - int(0.1 * fs):
        length = min(int(rng.uniform(0.2, 0.4) * fs), n - pos)
        out[pos:pos + length] = speech(rng, fs, length) * rng.uniform(0.5, 1.0)
        pos += length + int(rng.uniform(0.06, 0.15) * fs)
    if floor is not None:
        out += rng.standard_normal(n) * 0.5 * 10 ** (floor / 20)
    return out


def signal_set(seed, fs, seconds, snrs, floor=None):
    rng = np.random.default_rng(seed)
    target = np.stack([utterance(rng, fs, seconds, floor) for _ in snrs])
    preds = np.stack([estimate(rng, fs, t, snr) for t, snr in zip(target, snrs)])
    return preds.astype(np.float32), target.astype(np.float32)


@contextmanager
def noise_free():
    """pystoi's row_col_normalize without its EPS * standard_normal dither."""
    saved = np.random.standard_normal
    np.random.standard_normal = lambda size=None: np.zeros(size)
    try:
        yield
    finally:
        np.random.standard_normal = saved


def t64(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


def torchmetrics_value(preds, target, fs, extended, seed=0):
    np.random.seed(seed)
    m = ShortTimeObjectiveIntelligibility(fs, extended).set_dtype(torch.float64)
    m.update(t64(preds), t64(target))
    return float(m.compute())


def pystoi_mean(preds, target, fs, extended):
    p = np.asarray(preds, dtype=np.float64).reshape(-1, np.shape(preds)[-1])
    t = np.asarray(target, dtype=np.float64).reshape(-1, np.shape(target)[-1])
    np.random.seed(0)
    return float(np.mean([pystoi_stoi(y, x, fs, extended) for x, y in zip(p, t)]))


def main():
    warnings.simplefilter("ignore")  # torchmetrics' float64 warning, pystoi's "Returning 1e-5"
    torch.set_num_threads(1)
    sets = {}

    def register(name, fs, preds, target):
        sets[name] = (fs, preds, target, (save(f"stoi_{name}_preds.npy", preds),
                                          save(f"stoi_{name}_target.npy", target)))

    register("speech8k", 8000, *signal_set(101, 8000, 0.8, [-5, 0, 5, 20]))
    register("speech10k", 10000, *signal_set(102, 10000, 0.7, [2, 10, 15], floor=-80))
    register("speech16k", 16000, *signal_set(103, 16000, 0.7, [-2, 12]))
    register("speech44k", 44100, *signal_set(104, 44100, 0.9, [6]))
    p, t = signal_set(105, 8000, 0.6, [0, 5, 10, 15], floor=-80)
    register("speech8k_spk2", 8000, p.reshape(2, 2, -1), t.reshape(2, 2, -1))
    # Too short: 0.25 s at 8 kHz is 2500 samples at 10 kHz, 18 frames (< 30): pystoi returns 1e-5.
    register("short8k", 8000, *signal_set(106, 8000, 0.25, [5, 10]))
    # Long enough, but one signal's speech is a single 0.1 s burst in exact silence: after the
    # silent frames go, under 30 frames are left (1e-5 for it), the others are scored.
    p, t = signal_set(107, 8000, 0.7, [3, 6, 9])
    burst = np.zeros(t.shape[1], dtype=np.float32)
    rng = np.random.default_rng(108)
    burst[2000:2800] = (speech(rng, 8000, 800) * 0.8).astype(np.float32)
    t[1] = burst
    p[1] = (estimate(rng, 8000, burst.astype(np.float64), 10)).astype(np.float32)
    register("burst8k", 8000, p, t)
    # A silent target (exact zeros): every frame kept, all bands zero; STOI 0 (extended: noise).
    p, t = signal_set(109, 10000, 0.9, [5, 5])
    t[1] = 0
    register("silent_target10k", 10000, p, t)

    runs = [("speech8k", False), ("speech8k", True), ("speech10k", False), ("speech10k", True),
            ("speech16k", False), ("speech16k", True), ("speech44k", False), ("speech44k", True),
            ("speech8k_spk2", False), ("speech8k_spk2", True), ("short8k", False),
            ("short8k", True), ("burst8k", False), ("burst8k", True),
            ("silent_target10k", False)]
    cases = []
    for data, extended in runs:
        fs, preds, target, files = sets[data]
        value = torchmetrics_value(preds, target, fs, extended)
        direct = pystoi_mean(preds, target, fs, extended)
        case = {"name": f"STOI_{data}_extended_{extended}",
                "metric": "ShortTimeObjectiveIntelligibility",
                "params": {"fs": fs, "extended": extended},
                "inputs": {"preds": files[0], "target": files[1]},
                "expected": {KEY: value},
                "calls": {KEY: f"np.random.seed(0); torchmetrics.audio."
                               f"ShortTimeObjectiveIntelligibility(fs={fs}, extended={extended})"
                               f".set_dtype(torch.float64); update(preds.double(), "
                               f"target.double()); compute()"},
                "pystoi_mean": direct,
                "pystoi_call": f"mean over signals of pystoi.stoi(target_i, preds_i, {fs}, "
                               f"{extended}) (float64)"}
        per_signal = [pystoi_stoi(y, x, fs, extended) for x, y in
                      zip(np.asarray(preds, np.float64).reshape(-1, preds.shape[-1]),
                          np.asarray(target, np.float64).reshape(-1, target.shape[-1]))]
        case["pystoi_per_signal"] = [float(v) for v in per_signal]
        assert abs(direct - value) <= 1e-15 * max(1.0, abs(value)), (data, direct, value)
        if extended:
            with noise_free():
                nf = torchmetrics_value(preds, target, fs, extended)
            seeds = [torchmetrics_value(preds, target, fs, extended, s) for s in range(1, 6)]
            case["noise_free"] = nf
            case["noise_free_rel_diff"] = abs(nf - value) / abs(value)
            case["seed_spread"] = (max(seeds + [value]) - min(seeds + [value])) / abs(value)
        cases.append(case)
        print(f"{case['name']:40s} {value:.17g}"
              + (f"  noise-free {case['noise_free_rel_diff']:.2g} seeds {case['seed_spread']:.2g}"
                 if extended else ""))

    # The documented example (plugins/audio/stoi.cpp's `// Example:`, the doc-examples table):
    # two gated tones as target, plus an ungated third as preds, [1, 8000] float64 at 8 kHz.
    i = np.arange(8000)

    def tone(amp, cycles, gate):
        v = amp * np.sin(2 * np.pi * cycles * i)
        return v * ((i // gate) % 2 == 0) if gate else v

    doc_t = tone(0.5, 0.0375, 800) + tone(0.25, 0.1, 800)
    doc_p = doc_t + tone(0.1, 0.2, 0)
    doc_files = (save("stoi_doc_preds.npy", doc_p[None]), save("stoi_doc_target.npy", doc_t[None]))
    np.random.seed(0)
    doc_example = {"inputs": {"preds": doc_files[0], "target": doc_files[1]}, "fs": 8000,
                   "expected": {"false": float(pystoi_stoi(doc_t, doc_p, 8000)),
                                "true": float(pystoi_stoi(doc_t, doc_p, 8000, extended=True))},
                   "call": "np.random.seed(0); pystoi.stoi(target[0], preds[0], 8000, extended)"}
    print("doc example", doc_example["expected"])

    doc = {
        "generator": "tests/reference/stoi.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "scipy": scipy.__version__, "torch": torch.__version__,
                     "torchmetrics": torchmetrics.__version__,
                     "pystoi": importlib.metadata.version("pystoi")},
        "notes": ["preds and target: float32 .npy files, [N, T] or [N, S, T], fed to every "
                  "reference as float64 (t.double()).",
                  "set_dtype(torch.float64): torchmetrics' running sum defaults to float32.",
                  "extended=True: pystoi dithers with EPS * np.random.standard_normal; seeded "
                  "with np.random.seed(0) before each update; noise_free is the value with the "
                  "dither zeroed (tally's), seed_spread the relative range over seeds 0..5."],
        "cases": cases,
        "doc_example": doc_example,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(cases)} cases -> {rel(OUT)}")


if __name__ == "__main__":
    main()
