#!/usr/bin/env python3
"""Reference data and expected values for the audio plugin (plugins/audio) and the wav reader
(plugins/readers/wav).

(a) Writes test signals to tests/data/audio/*.npy, deterministically (seeded): speech-like
    signals (a glottal sawtooth with vibrato and jitter through three formant resonators, vowel by
    vowel, under a syllable envelope, plus aspiration noise) at 8 kHz and 16 kHz; the estimates are
    the clean signals convolved with a decaying random room impulse response, rescaled, plus white
    noise at 0..20 dB SNR. Multi-speaker sets [N, S, T] have the estimates' speakers in a random
    order with cross-talk from the other speakers (what permutation invariant training untangles).
    Stored as float32 (to keep the files small); every reference is fed the same numbers as
    float64.
(b) Writes small WAV files for the wav reader's tests (tests/data/audio/wav/: PCM 16/24/32-bit,
    float32, mono and stereo, a truncated file, a file at another sample rate) with the float64
    values libsndfile gives (an integer PCM sample x of b bits reads as x / 2^(b-1)).
(c) Writes configs/examples/data/audio/{preds,target}/*.wav (16-bit PCM, 8 kHz) for
    configs/examples/audio.yaml.
(d) Writes tests/reference/expected_audio.json: per case the metric, its parameters, its inputs,
    the expected values and the exact reference call; "wav" holds the reader cases; "example" the
    expected results of the example config.

Run in the torch environment (torchmetrics 1.9.0, fast-bss-eval 0.1.4, pystoi 0.4.1 pinned by
scripts/setup-torch-venv.sh):   .venv-torch/bin/python tests/reference/audio.py
"""

import importlib.metadata
import json
import math
import platform
import struct
import warnings
from pathlib import Path

import numpy as np
import scipy
import scipy.io.wavfile
import scipy.signal
import torch
import torchmetrics
from torchmetrics.audio import (PermutationInvariantTraining, ScaleInvariantSignalDistortionRatio,
                                ScaleInvariantSignalNoiseRatio, SignalDistortionRatio)
from torchmetrics.functional.audio import (scale_invariant_signal_distortion_ratio,
                                           scale_invariant_signal_noise_ratio,
                                           signal_distortion_ratio)
from torchmetrics.functional.audio.stoi import short_time_objective_intelligibility

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "audio"
WAV = DATA / "wav"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "audio"
OUT = ROOT / "tests" / "reference" / "expected_audio.json"

VOWELS = [(730, 1090, 2440), (270, 2290, 3010), (530, 1840, 2480), (570, 840, 2410),
          (300, 870, 2240), (660, 1720, 2410), (490, 1350, 1690)]


def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(name, array):
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / name
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


def speech(rng, fs, n):
    """A speech-like signal of n samples at fs Hz (peak about 0.5)."""
    t = np.arange(n) / fs
    f0 = rng.uniform(95, 230) * (1 + 0.04 * np.sin(2 * np.pi * rng.uniform(3, 6) * t))
    f0 = f0 * (1 + 0.01 * rng.standard_normal(n).cumsum() / math.sqrt(n))
    phase = np.cumsum(2 * np.pi * f0 / fs)
    source = (np.mod(phase, 2 * np.pi) / np.pi - 1.0) + 0.05 * rng.standard_normal(n)
    out = np.zeros(n)
    bounds = np.linspace(0, n, int(rng.integers(2, 4)) + 1).astype(int)
    for a, b in zip(bounds[:-1], bounds[1:]):
        seg = source[a:b]
        for f, bw in zip(VOWELS[int(rng.integers(len(VOWELS)))], (80, 120, 160)):
            if f >= fs / 2:
                continue
            r = math.exp(-math.pi * bw / fs)
            seg = scipy.signal.lfilter([1 - r], [1, -2 * r * math.cos(2 * math.pi * f / fs), r * r],
                                       seg)
        env = np.sin(np.pi * np.arange(b - a) / (b - a)) ** 0.6
        out[a:b] = seg * env
    return 0.5 * out / np.max(np.abs(out))


def room(rng, fs, x):
    """x through a random decaying room response (RT about 0.1-0.25 s), same length."""
    taps = int(0.04 * fs)
    decay = rng.uniform(0.1, 0.25) * fs / 6.9
    ir = rng.standard_normal(taps) * np.exp(-np.arange(taps) / decay) * 0.06
    ir[0] = 1.0
    return scipy.signal.fftconvolve(x, ir)[: len(x)]


def estimate(rng, fs, clean, snr_db):
    y = room(rng, fs, clean) * rng.uniform(0.6, 1.4)
    noise = rng.standard_normal(len(y))
    noise *= np.sqrt(np.mean(y**2) / np.mean(noise**2) / 10 ** (snr_db / 10))
    return y + noise


def single_speaker(seed, n, fs, length):
    rng = np.random.default_rng(seed)
    target = np.stack([speech(rng, fs, length) for _ in range(n)])
    preds = np.stack([estimate(rng, fs, s, rng.uniform(0, 20)) for s in target])
    return preds.astype(np.float32), target.astype(np.float32)


def multi_speaker(seed, n, spk, fs, length):
    rng = np.random.default_rng(seed)
    target = np.stack([np.stack([speech(rng, fs, length) for _ in range(spk)]) for _ in range(n)])
    preds = np.empty_like(target)
    for i in range(n):
        order = rng.permutation(spk)
        for s in range(spk):
            own = target[i, order[s]]
            others = sum(target[i, k] for k in range(spk) if k != order[s])
            preds[i, s] = estimate(rng, fs, own + 0.25 * others, rng.uniform(3, 15))
    return preds.astype(np.float32), target.astype(np.float32)


def t64(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


# ---- metric cases -------------------------------------------------------------------------------

def modular(cls, preds, target, **kwargs):
    """The torchmetrics class with float64 states (set_dtype): update once, compute."""
    m = cls(**kwargs).set_dtype(torch.float64)
    m.update(t64(preds), t64(target))
    return float(m.compute())


def fmt_kwargs(kwargs):
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


def sdr_direct_correlations(preds, target, use_cg_iter=None, filter_length=512, zero_mean=False,
                            load_diag=None):
    """torchmetrics' signal_distortion_ratio with the correlations summed directly instead of by
    FFT (the same numbers to rounding): how far its conjugate-gradient result moves by rounding."""
    from fast_bss_eval.torch.cgd import toeplitz_conjugate_gradient
    p = np.asarray(preds, dtype=np.float64).reshape(-1, np.shape(preds)[-1])
    t = np.asarray(target, dtype=np.float64).reshape(-1, np.shape(target)[-1])
    vals = []
    for x, y in zip(p, t):
        if zero_mean:
            x, y = x - x.mean(), y - y.mean()
        y = y / max(np.linalg.norm(y), 1e-6)
        x = x / max(np.linalg.norm(x), 1e-6)
        n = len(y)
        r = np.array([np.dot(y[:n - k], y[k:]) for k in range(filter_length)])
        b = np.array([np.dot(y[:n - k], x[k:]) for k in range(filter_length)])
        if load_diag is not None:
            r[0] += load_diag
        sol = toeplitz_conjugate_gradient(torch.tensor(r), torch.tensor(b), n_iter=use_cg_iter)
        coh = float(torch.tensor(b) @ sol)
        vals.append(10 * math.log10(coh / (1 - coh)))
    return float(np.mean(vals))


def metric_cases(sets):
    cases = []

    def add(name, metric, cls, params, data, key, kwargs=None):
        kwargs = dict(params if kwargs is None else kwargs)
        preds, target, files = sets[data]
        value = modular(cls, preds, target, **kwargs)
        call = (f"torchmetrics.audio.{cls.__name__}({fmt_kwargs(kwargs)}).set_dtype(torch.float64)"
                f"; update(preds.double(), target.double()); compute()")
        case = {"name": name, "metric": metric, "params": params,
                "inputs": {"preds": files[0], "target": files[1]},
                "expected": {key: None if math.isnan(value) else value},
                "calls": {key: call}}
        if kwargs.get("use_cg_iter") is not None:
            alt = sdr_direct_correlations(preds, target, **kwargs)
            move = abs(alt - value) / abs(value)
            case["tolerance"] = max(1e-9, 10 * move)
            case["tolerance_why"] = (
                f"fast-bss-eval's conjugate gradient amplifies rounding: fed correlations summed "
                f"directly (not by FFT) the same call gives {alt!r}, {move:.3g} relative away; the "
                f"tolerance is 10 times that")
        cases.append(case)

    si_sdr = "scale_invariant_signal_distortion_ratio"
    si_snr = "scale_invariant_signal_noise_ratio"
    sdr = "signal_distortion_ratio"
    for data in ["speech8k", "speech16k", "speech_spk2", "single", "edge"]:
        for zm in (False, True):
            add(f"SISDR_{data}_zero_mean_{zm}", "ScaleInvariantSignalDistortionRatio",
                ScaleInvariantSignalDistortionRatio, {"zero_mean": zm}, data, si_sdr)
        add(f"SISNR_{data}", "ScaleInvariantSignalNoiseRatio", ScaleInvariantSignalNoiseRatio, {},
            data, si_snr)
    for data, params in [("sdr512", {}), ("sdr8k", {"filter_length": 64, "zero_mean": True}),
                         ("sdr16k", {"filter_length": 128}),
                         ("sdr16k", {"filter_length": 128, "load_diag": 1e-3}),
                         ("sdr16k", {"filter_length": 96, "use_cg_iter": 10}),
                         ("sdr8k", {"use_cg_iter": 5, "zero_mean": True}),
                         ("sdr_short", {"filter_length": 48}), ("sdr_short", {"filter_length": 256}),
                         ("sdr_spk2", {"filter_length": 64})]:
        name = "SDR_" + data + "".join(f"_{k}_{v}" for k, v in params.items())
        add(name.replace(".", "p").replace("-", "m"), "SignalDistortionRatio",
            SignalDistortionRatio, params, data, sdr)
    return cases


FUNCS = {
    "scale_invariant_signal_distortion_ratio": scale_invariant_signal_distortion_ratio,
    "scale_invariant_signal_noise_ratio": scale_invariant_signal_noise_ratio,
    "signal_distortion_ratio": signal_distortion_ratio,
}


def pit_cases(sets):
    cases = []
    key = "permutation_invariant_training"
    runs = [
        ("speech_spk2", "scale_invariant_signal_distortion_ratio", "speaker-wise", "max", {}),
        ("speech_spk2", "scale_invariant_signal_distortion_ratio", "permutation-wise", "max", {}),
        ("speech_spk2", "scale_invariant_signal_noise_ratio", "speaker-wise", "max", {}),
        ("speech_spk2", "scale_invariant_signal_distortion_ratio", "speaker-wise", "min",
         {"zero_mean": True}),
        ("speech_spk3", "scale_invariant_signal_distortion_ratio", "speaker-wise", "max", {}),
        ("speech_spk3", "scale_invariant_signal_noise_ratio", "permutation-wise", "max", {}),
        ("speech_spk3", "scale_invariant_signal_distortion_ratio", "speaker-wise", "min", {}),
        ("speech_spk4", "scale_invariant_signal_distortion_ratio", "speaker-wise", "max", {}),
        ("sdr_spk2", "signal_distortion_ratio", "speaker-wise", "max", {"filter_length": 64}),
        ("sdr_spk2", "signal_distortion_ratio", "permutation-wise", "max",
         {"filter_length": 32, "zero_mean": True}),
    ]
    for data, func, mode, ev, kwargs in runs:
        preds, target, files = sets[data]
        m = PermutationInvariantTraining(FUNCS[func], mode=mode, eval_func=ev,
                                         **kwargs).set_dtype(torch.float64)
        m.update(t64(preds), t64(target))
        value = float(m.compute())
        params = {"metric_func": func, "mode": mode, "eval_func": ev, **kwargs}
        extra = "".join(f", {k}={v!r}" for k, v in kwargs.items())
        call = (f"torchmetrics.audio.PermutationInvariantTraining(torchmetrics.functional.audio."
                f"{func}, mode={mode!r}, eval_func={ev!r}{extra}).set_dtype(torch.float64); "
                f"update(preds.double(), target.double()); compute()")
        name = f"PIT_{data}_{func.replace('_signal_', '_').replace('scale_invariant', 'si')}_" \
               f"{mode.replace('-', '_')}_{ev}" + "".join(f"_{k}_{v}" for k, v in kwargs.items())
        cases.append({"name": name, "metric": "PermutationInvariantTraining", "params": params,
                      "inputs": {"preds": files[0], "target": files[1]},
                      "expected": {key: value}, "calls": {key: call}})
    return cases


# ---- WAV files ----------------------------------------------------------------------------------

def write_wav_pcm(path, fs, frames, bits):
    """Integer frames [T, C] as PCM of `bits` bits (the wave module writes 24-bit too)."""
    import wave
    frames = np.asarray(frames, dtype=np.int64)
    if frames.ndim == 1:
        frames = frames[:, None]
    width = bits // 8
    raw = b"".join(int(v).to_bytes(width, "little", signed=True) for v in frames.reshape(-1))
    with wave.open(str(path), "wb") as w:
        w.setnchannels(frames.shape[1])
        w.setsampwidth(width)
        w.setframerate(fs)
        w.writeframes(raw)


def wav_cases():
    WAV.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(99)
    cases = []

    def expect(name, path, fs, values, note):
        # values [T, C] float64, as libsndfile reads them; the reader gives [T] or [C, T].
        v = values[:, 0] if values.shape[1] == 1 else values.T
        cases.append({"name": name, "file": rel(path), "sample_rate": fs,
                      "channels": int(values.shape[1]), "frames": int(values.shape[0]),
                      "values": save(f"wav_{name}_values.npy", np.ascontiguousarray(v)),
                      "note": note})

    mono = speech(rng, 8000, 240)
    stereo = np.stack([speech(rng, 8000, 160), speech(rng, 8000, 160)], axis=1)
    for bits in (16, 24, 32):
        scale = 2 ** (bits - 1)
        for label, x in (("mono", mono[:, None]), ("stereo", stereo)):
            ints = np.clip(np.round(x * scale), -scale, scale - 1).astype(np.int64)
            path = WAV / f"pcm{bits}_{label}.wav"
            write_wav_pcm(path, 8000, ints, bits)
            expect(f"pcm{bits}_{label}", path, 8000, ints / scale,
                   f"PCM {bits}-bit {label}: x / 2^{bits - 1}")
    for label, x in (("mono", mono[:, None]), ("stereo", stereo)):
        path = WAV / f"float_{label}.wav"
        f = x.astype(np.float32)
        scipy.io.wavfile.write(path, 8000, f[:, 0] if f.shape[1] == 1 else f)
        expect(f"float_{label}", path, 8000, f.astype(np.float64), f"IEEE float32 {label}")
    # A file at 16 kHz (a sample-rate mismatch beside the 8 kHz ones).
    path16 = WAV / "pcm16_16k.wav"
    write_wav_pcm(path16, 16000, np.round(mono[:200] * 32767).astype(np.int64)[:, None], 16)
    # A truncated file: the header promises 240 frames, the data chunk holds 150.
    whole = (WAV / "pcm16_mono.wav").read_bytes()
    (WAV / "bad_truncated.wav").write_bytes(whole[: 44 + 150 * 2])
    # Not a WAV file at all.
    (WAV / "bad_not_wav.wav").write_bytes(b"this is not a RIFF file, just text\n" * 4)
    # Folders for the reader: two fields with matching names (preds/target), one sample a file.
    for field, seed in (("preds", 5), ("target", 6)):
        d = WAV / "pair" / field
        d.mkdir(parents=True, exist_ok=True)
        r = np.random.default_rng(seed)
        for i, n in enumerate((160, 240, 200)):
            write_wav_pcm(d / f"utt{i}.wav", 8000,
                          np.round(speech(r, 8000, n) * 32767).astype(np.int64)[:, None], 16)
    return cases


# ---- example config data ------------------------------------------------------------------------

def stoi_as_batch(preds, target, fs):
    """short_time_objective_intelligibility of one signal passed as a [1, T] batch: for a 1-D
    signal torchmetrics wraps pystoi's too-short 1e-5 (a Python float) in a float32 tensor
    (9.99999974737875e-06); its batch path keeps float64, as tally does."""
    return short_time_objective_intelligibility(preds[None], target[None], fs)[0]


stoi_as_batch.__name__ = "short_time_objective_intelligibility"


def example():
    rng = np.random.default_rng(31)
    fs, names = 8000, [f"utt{i:02d}" for i in range(6)]
    preds, target = [], []
    for i, name in enumerate(names):
        n = int(rng.integers(3200, 4400))  # 0.4 .. 0.55 s
        clean = speech(rng, fs, n)
        est = estimate(rng, fs, clean, rng.uniform(2, 18))
        ci = np.round(np.clip(clean, -1, 1) * 32767).astype(np.int16)
        ei = np.round(np.clip(est / max(1.0, np.max(np.abs(est)) / 0.99), -1, 1) * 32767)
        ei = ei.astype(np.int16)
        for field, x in (("preds", ei), ("target", ci)):
            (EXAMPLE / field).mkdir(parents=True, exist_ok=True)
            scipy.io.wavfile.write(EXAMPLE / field / f"{name}.wav", fs, x)
        # What the wav reader gives: int16 / 2^15 as float64.
        preds.append(ei.astype(np.float64) / 32768)
        target.append(ci.astype(np.float64) / 32768)
    metrics = [("si_sdr", "ScaleInvariantSignalDistortionRatio", scale_invariant_signal_distortion_ratio,
                {}),
               ("si_snr", "ScaleInvariantSignalNoiseRatio", scale_invariant_signal_noise_ratio, {}),
               ("sdr", "SignalDistortionRatio", signal_distortion_ratio, {"filter_length": 128}),
               # pystoi 0.4.1 underneath; utt01 and utt03 keep under 30 frames once their silent
               # frames go: 1e-5 each, as pystoi returns.
               ("stoi", "ShortTimeObjectiveIntelligibility", stoi_as_batch, {"fs": 8000})]
    results, calls, entries = {}, {}, []
    for label, metric, fn, kwargs in metrics:
        key = fn.__name__
        vals = [float(fn(t64(p), t64(t), **kwargs)) for p, t in zip(preds, target)]
        results[label] = {key: float(torch.tensor(vals, dtype=torch.float64).mean())}
        calls[label] = (f"mean over the files of torchmetrics.functional.audio.{key}(preds, target"
                        f"{''.join(f', {k}={v!r}' for k, v in kwargs.items())}) (float64, each file "
                        f"as int16 / 32768: the signals differ in length)")
        entries.append({"label": label, "metric": metric, "params": kwargs})
    calls["stoi"] += "; each file passed as a [1, T] batch (stoi_as_batch)"
    return {"config": "configs/examples/audio.yaml", "samples": len(names), "results": results,
            "calls": calls, "metrics": entries,
            "files": {"preds": [rel(EXAMPLE / "preds" / f"{n}.wav") for n in names],
                      "target": [rel(EXAMPLE / "target" / f"{n}.wav") for n in names]}}


def main():
    warnings.simplefilter("ignore")  # torchmetrics' warnings about float64 and fast-bss-eval
    torch.set_num_threads(1)
    sets = {}

    def register(name, preds, target):
        sets[name] = (preds, target, (save(f"{name}_preds.npy", preds),
                                      save(f"{name}_target.npy", target)))

    register("speech8k", *single_speaker(1, 4, 8000, 2000))
    register("speech16k", *single_speaker(2, 2, 16000, 2400))
    register("speech_spk2", *multi_speaker(3, 3, 2, 8000, 800))
    register("speech_spk3", *multi_speaker(4, 2, 3, 8000, 600))
    register("speech_spk4", *multi_speaker(5, 2, 4, 8000, 400))
    p, t = single_speaker(6, 1, 8000, 1200)
    register("single", p, t)
    # Edge cases: an exact estimate, a sign-flipped one, a silent target, a constant pair, a
    # silent estimate.
    rng = np.random.default_rng(7)
    s = speech(rng, 8000, 300).astype(np.float32)
    edge_t = np.stack([s, s, np.zeros_like(s), np.full_like(s, 0.25), s])
    edge_p = np.stack([s, -s, s, np.full_like(s, 0.25), np.zeros_like(s)])
    register("edge", edge_p, edge_t)
    register("sdr8k", *single_speaker(8, 3, 8000, 1000))
    # The default filter_length 512 (a 512 x 512 system a signal): one signal keeps the sanitizer
    # build's test fast.
    register("sdr512", *single_speaker(12, 1, 8000, 1000))
    register("sdr16k", *single_speaker(9, 2, 16000, 1600))
    # Shorter than the default filter_length 512: with it, torch's circular correlation over
    # n_fft = 512 points fills the whole 512 x 512 system (a circulant matrix, singular at the
    # signal's spectral nulls): a value no two solvers agree on, so not a case. 256 lags fit.
    register("sdr_short", *single_speaker(10, 2, 8000, 200))
    register("sdr_spk2", *multi_speaker(11, 2, 2, 8000, 600))

    cases = metric_cases(sets) + pit_cases(sets)
    wav = wav_cases()
    doc = {
        "generator": "tests/reference/audio.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "scipy": scipy.__version__, "torch": torch.__version__,
                     "torchmetrics": torchmetrics.__version__,
                     "fast-bss-eval": importlib.metadata.version("fast-bss-eval"),
                     "pystoi": importlib.metadata.version("pystoi")},
        "notes": ["preds and target: float32 .npy files, [N, T] or [N, S, T]; every reference is "
                  "fed them as float64 (t.double()).",
                  "set_dtype(torch.float64): torchmetrics' running sums default to float32; in "
                  "float64 they keep the values' precision.",
                  "use_cg_iter: torchmetrics calls fast_bss_eval.torch.cgd."
                  "toeplitz_conjugate_gradient (fast-bss-eval installed)."],
        "cases": cases,
        "wav": wav,
        "example": example(),
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(cases)} metric cases, {len(wav)} wav cases -> {rel(OUT)}")


if __name__ == "__main__":
    main()
