#!/usr/bin/env python3
"""Reference data and expected values for the flow (EndPointError) and language (Perplexity)
plugins.

(a) Optical flow, tests/data/flow_language/flow_*.npy: frames cut from scikit-image's `camera`
    image (shipped with scikit-image), the second frame warped by a known smooth flow (the true
    flow), the predicted flow estimated by scikit-image's optical_flow_tvl1; the valid mask keeps
    the pixels whose flow stays inside the frame. One sample has no valid pixel, and the true
    flow is NaN at some invalid pixels.
(b) Language model, tests/data/flow_language/lm_*.npy and configs/examples/data/language_model/:
    a character-level bigram model (add-1/2 smoothing) fitted on the first 80 % of the text of
    scikit-learn's dataset descriptions (sklearn/datasets/descr/*.rst, BSD-3-Clause); its logits
    (log-probabilities) for held-out sequences of the remaining 20 %, the targets being the next
    characters; padding targets are -100.
(c) tests/reference/expected_flow_language.json: for every case the metric, its parameters, its
    input files, the values mmeval 0.2.1 returns and the exact call; "example", the expected
    results of configs/examples/language_model.yaml, and "examples", a list holding those of
    configs/examples/flow.yaml (mmeval on configs/examples/data/flow/, which
    tests/reference/make_example_data.py writes: run it first).

    .venv-ref/bin/python tests/reference/flow_language.py
"""

import json
import platform
from pathlib import Path

import mmeval
import numpy as np
import skimage
import sklearn
import sklearn.datasets.descr
from mmeval import EndPointError, Perplexity
from skimage.data import camera
from skimage.registration import optical_flow_tvl1
from skimage.transform import resize, warp

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "flow_language"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "language_model"
FLOW_EXAMPLE = ROOT / "configs" / "examples" / "data" / "flow"
OUT = ROOT / "tests" / "reference" / "expected_flow_language.json"


def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(folder, name, array):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.npy"
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


def as_float(v):
    f = float(np.asarray(v).reshape(-1)[0])
    return None if np.isnan(f) else f


# ---- (a) optical flow -------------------------------------------------------------------------

def flow_dataset(n=6, h=32, w=40):
    rng = np.random.default_rng(7)
    img = camera().astype(np.float64) / 255.0
    preds, gts, valids = [], [], []
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    for i in range(n):
        y0, x0 = rng.integers(0, 512 - 4 * h), rng.integers(0, 512 - 4 * w)
        frame0 = resize(img[y0:y0 + 4 * h, x0:x0 + 4 * w], (h, w), anti_aliasing=True)
        # A smooth flow: a translation, a small rotation about the centre and a sine ripple.
        tx, ty = rng.uniform(-3, 3, size=2)
        ang = np.deg2rad(rng.uniform(-6, 6))
        cx, cy = w / 2, h / 2
        u = tx + (np.cos(ang) - 1) * (xx - cx) - np.sin(ang) * (yy - cy) \
            + 0.8 * np.sin(yy / 5.0 + i)
        v = ty + np.sin(ang) * (xx - cx) + (np.cos(ang) - 1) * (yy - cy) \
            + 0.8 * np.cos(xx / 6.0 - i)
        # frame1(x + flow(x)) = frame0(x): frame1 = frame0 sampled at x - flow (approximately).
        frame1 = warp(frame0, np.array([yy - v, xx - u]), mode="edge")
        fv, fu = optical_flow_tvl1(frame0, frame1)
        preds.append(np.stack([fu, fv], -1))
        gts.append(np.stack([u, v], -1))
        inside = (xx + u >= 0) & (xx + u <= w - 1) & (yy + v >= 0) & (yy + v <= h - 1)
        valids.append(inside.astype(np.float64))
    pred, gt, valid = np.stack(preds), np.stack(gts), np.stack(valids)
    valid[3] = 0.0  # a sample with no valid pixel
    valid[1, :4] = 0.3  # below mmeval's 0.5: not valid
    gt_nan = gt.copy()
    gt_nan[1, :2, :, :] = np.nan  # NaN where the mask says invalid
    assert np.all(valid[1, :2] < 0.5)
    return pred, gt, gt_nan, valid


def epe_mmeval(pred, gt, valid, max_flow=None):
    """mmeval's EndPointError, with tally's rules where they differ (see end_point_error.cpp):
    samples with no valid pixel left out; max_flow folded into the valid mask."""
    metric = EndPointError()
    keep = []
    for i in range(pred.shape[0]):
        m = (valid[i] >= 0.5) if valid is not None else np.ones(pred.shape[1:3], bool)
        if max_flow is not None:
            m = m & (np.sqrt(np.sum(gt[i] ** 2, axis=-1)) < max_flow)
        if m.any():
            keep.append((i, m))
    if not keep:
        return None
    preds = [pred[i] for i, _ in keep]
    gts = [gt[i] for i, _ in keep]
    if valid is None and max_flow is None:
        metric.add(preds, gts)
    else:
        metric.add(preds, gts, [m.astype(np.float64) for _, m in keep])
    return as_float(metric.compute()["EPE"])


# ---- (b) language model -------------------------------------------------------------------------

ALPHABET = "abcdefghijklmnopqrstuvwxyz #.,()-':?"  # '#': a digit, '?': anything else


def encode(text):
    ids = []
    for ch in text.lower():
        if ch.isdigit():
            ch = "#"
        elif ch.isspace():
            ch = " "
        elif ch not in ALPHABET:
            ch = "?"
        ids.append(ALPHABET.index(ch))
    # Collapse runs of spaces (the .rst layout).
    out = []
    for t in ids:
        if not (out and t == 0 + ALPHABET.index(" ") and out[-1] == t):
            out.append(t)
    return np.array(out, dtype=np.int64)


def descr_text():
    folder = Path(sklearn.datasets.descr.__file__).parent
    files = sorted(folder.glob("*.rst"))
    return "\n".join(f.read_text(encoding="utf-8") for f in files), [f.name for f in files]


def bigram_logits(train, v, alpha=0.5):
    counts = np.full((v, v), alpha)
    np.add.at(counts, (train[:-1], train[1:]), 1.0)
    return np.log(counts / counts.sum(axis=1, keepdims=True))  # [prev, next]


def lm_sequences(ids, table, n, length, start, pad_last):
    """n held-out sequences of `length` targets from `start`: logits[t] = the model's scores for
    the character after ids[p + t], targets[t] = that character; the last `pad_last` targets of
    the last sequences are padding (-100)."""
    x = np.empty((n, length, table.shape[0]))
    y = np.empty((n, length), dtype=np.int64)
    for s in range(n):
        p = start + s * (length + 1)
        x[s] = table[ids[p:p + length]]
        y[s] = ids[p + 1:p + 1 + length]
    for s, k in enumerate(pad_last):
        if k:
            y[n - len(pad_last) + s, length - k:] = -100
    return x, y


def ppl_mmeval(logits, targets, ignore_labels=None):
    metric = Perplexity(ignore_labels=ignore_labels)
    metric.add(list(logits.astype(np.float64)), list(targets))
    return as_float(metric.compute()["perplexity"])


def main():
    cases = []

    def case(name, metric, params, inputs, expected, call, note=None):
        c = {"name": name, "metric": metric, "params": params, "inputs": inputs,
             "expected": expected, "call": call}
        if note:
            c["note"] = note
        cases.append(c)

    # ---- flow
    pred, gt, gt_nan, valid = flow_dataset()
    f = {
        "pred64": save(DATA, "flow_pred_f64", pred),
        "gtnan64": save(DATA, "flow_gt_nan_f64", gt_nan),
        "pred32": save(DATA, "flow_pred_f32", pred.astype(np.float32)),
        "gt32": save(DATA, "flow_gt_f32", gt.astype(np.float32)),
        "valid": save(DATA, "flow_valid_f64", valid),
        "valid_bool": save(DATA, "flow_valid_bool", valid >= 0.5),
        "none": save(DATA, "flow_valid_none", np.zeros_like(valid, dtype=np.float32)),
    }
    call = ("mmeval.EndPointError().add(list(pred_flow), list(gt_flow), list(valid_mask)); "
            ".compute()['EPE'] (NumPy arrays), over the samples with a valid pixel")
    mm_nan = EndPointError()
    mm_nan.add(list(pred), list(gt), list(valid))
    raw = as_float(mm_nan.compute()["EPE"])
    assert raw is None, raw  # mmeval: NaN, from the sample with no valid pixel
    note = ("sample 3 has no valid pixel: mmeval's own result over all samples is NaN (mean of an "
            "empty array, times 0); tally skips such a sample, so the expected value is mmeval's "
            "over the others")
    case("epe_f64", "EndPointError", {},
         {"pred_flow": f["pred64"], "gt_flow": f["gtnan64"], "valid_mask": f["valid"]},
         {"EPE": epe_mmeval(pred, gt_nan, valid)}, call, note)
    case("epe_f32", "EndPointError", {},
         {"pred_flow": f["pred32"], "gt_flow": f["gt32"], "valid_mask": f["valid"]},
         {"EPE": epe_mmeval(pred.astype(np.float32), gt.astype(np.float32), valid)}, call, note)
    case("epe_f32_bool_mask", "EndPointError", {},
         {"pred_flow": f["pred32"], "gt_flow": f["gt32"], "valid_mask": f["valid_bool"]},
         {"EPE": epe_mmeval(pred.astype(np.float32), gt.astype(np.float32), valid)},
         call + "; the bool mask is valid_mask >= 0.5", note)
    case("epe_f32_no_mask", "EndPointError", {},
         {"pred_flow": f["pred32"], "gt_flow": f["gt32"]},
         {"EPE": epe_mmeval(pred.astype(np.float32), gt.astype(np.float32), None)},
         "mmeval.EndPointError().add(list(pred_flow), list(gt_flow)); .compute()['EPE']")
    case("epe_f64_max_flow", "EndPointError", {"max_flow": 3.0},
         {"pred_flow": f["pred64"], "gt_flow": f["gtnan64"], "valid_mask": f["valid"]},
         {"EPE": epe_mmeval(pred, gt_nan, valid, max_flow=3.0)},
         call + ", valid_mask[i] = (valid_mask[i] >= 0.5) & (sqrt(sum(gt_flow[i] ** 2, -1)) < "
         "3.0) (max_flow, tally's extension)", note)
    case("epe_f32_max_flow", "EndPointError", {"max_flow": 3.0},
         {"pred_flow": f["pred32"], "gt_flow": f["gt32"], "valid_mask": f["valid"]},
         {"EPE": epe_mmeval(pred.astype(np.float32), gt.astype(np.float32), valid,
                            max_flow=3.0)},
         call + ", valid_mask[i] as for epe_f64_max_flow, in float32", note)
    case("epe_none_valid", "EndPointError", {},
         {"pred_flow": f["pred32"], "gt_flow": f["gt32"], "valid_mask": f["none"]},
         {"EPE": None}, call + "; no valid pixel at all: mmeval's 0/0, NaN (null)")

    # ---- language model
    text, files = descr_text()
    ids = encode(text)
    v = len(ALPHABET)
    split = int(0.8 * len(ids))
    table = bigram_logits(ids[:split], v)
    x, y = lm_sequences(ids, table, 16, 40, split, pad_last=[0, 7, 40])
    lf = {"x64": save(DATA, "lm_logits_f64", x), "x32": save(DATA, "lm_logits_f32",
                                                              x.astype(np.float32)),
          "y": save(DATA, "lm_targets_i64", y)}
    yc = y.copy()
    yc[yc == -100] = 0
    y_clean = save(DATA, "lm_targets_clean_i32", yc.astype(np.int32))
    pcall = ("mmeval.Perplexity({args}).add(list(pred_logits), list(gt_tokens)); "
             ".compute()['perplexity'] (NumPy arrays{cast})")
    case("ppl_ignore_pad", "Perplexity", {"ignore_labels": -100},
         {"pred_logits": lf["x64"], "gt_tokens": lf["y"]},
         {"perplexity": ppl_mmeval(x, y, -100)}, pcall.format(args="ignore_labels=-100",
                                                                 cast=""))
    case("ppl_no_ignore", "Perplexity", {},
         {"pred_logits": lf["x64"], "gt_tokens": y_clean},
         {"perplexity": ppl_mmeval(x, yc)}, pcall.format(args="", cast=""))
    case("ppl_ignore_several", "Perplexity", {"ignore_labels": [-100, 26, 4]},
         {"pred_logits": lf["x64"], "gt_tokens": lf["y"]},
         {"perplexity": ppl_mmeval(x, y, [-100, 26, 4])},
         pcall.format(args="ignore_labels=[-100, 26, 4]", cast=""))
    case("ppl_f32", "Perplexity", {"ignore_labels": [-100]},
         {"pred_logits": lf["x32"], "gt_tokens": lf["y"]},
         {"perplexity": ppl_mmeval(x.astype(np.float32), y, [-100])},
         pcall.format(args="ignore_labels=[-100]", cast="; the float32 logits cast to float64: "
                      "mmeval itself computes float32 logits in float32"))
    all_ignored = np.full_like(y, -100)
    case("ppl_all_ignored", "Perplexity", {"ignore_labels": -100},
         {"pred_logits": lf["x64"], "gt_tokens": save(DATA, "lm_targets_all_ignored", all_ignored)},
         {"perplexity": ppl_mmeval(x, all_ignored, -100)},
         pcall.format(args="ignore_labels=-100", cast="") + ": no token counts, mmeval's 0")

    # The example of configs/examples/language_model.yaml: 24 held-out sequences of 64 targets
    # after the test ones, float32 logits, the last sequence padded.
    ex_start = split + 16 * 41
    ex_x, ex_y = lm_sequences(ids, table, 24, 64, ex_start, pad_last=[23])
    assert ex_start + 24 * 65 < len(ids)
    ex_files = {"pred_logits": save(EXAMPLE, "logits", ex_x.astype(np.float32)),
                "gt_tokens": save(EXAMPLE, "targets", ex_y)}
    example = {"inputs": ex_files, "samples": 24, "metrics": [
        {"label": "Perplexity", "metric": "Perplexity", "params": {"ignore_labels": -100},
         "expected": {"perplexity": ppl_mmeval(ex_x.astype(np.float32), ex_y, -100)},
         "call": pcall.format(args="ignore_labels=-100", cast="; logits cast to float64")}]}
    # Uniform logits give perplexity V: the bigram model must do much better.
    assert example["metrics"][0]["expected"]["perplexity"] < 0.6 * v

    # What tests/integration/test_examples.cpp compares `tally run` with: results by label.
    example["config"] = "configs/examples/language_model.yaml"
    example["results"] = {m["label"]: m["expected"] for m in example["metrics"]}

    # The example of configs/examples/flow.yaml: mmeval on the files tally reads (written by
    # make_example_data.py), every sample having valid pixels (so no deviation from mmeval).
    flow_files = {"pred_flow": FLOW_EXAMPLE / "pred_flow.npy",
                  "gt_flow": FLOW_EXAMPLE / "gt_flow.npy",
                  "valid_mask": FLOW_EXAMPLE / "valid.npy"}
    missing = [rel(p) for p in flow_files.values() if not p.exists()]
    if missing:
        raise SystemExit(f"missing {', '.join(missing)}: run tests/reference/make_example_data.py")
    fx = {k: np.load(p, allow_pickle=False) for k, p in flow_files.items()}
    assert all(m.any() for m in fx["valid_mask"]), "every flow field must keep valid pixels"
    epe = EndPointError()
    epe.add(list(fx["pred_flow"]), list(fx["gt_flow"]), list(fx["valid_mask"]))
    flow_example = {
        "inputs": {k: rel(p) for k, p in flow_files.items()},
        "samples": int(fx["pred_flow"].shape[0]),
        "metrics": [{"label": "EndPointError", "metric": "EndPointError", "params": {},
                     "expected": {"EPE": as_float(epe.compute()["EPE"])},
                     "call": "mmeval.EndPointError().add(list(pred_flow), list(gt_flow), "
                             "list(valid_mask)); .compute()['EPE'] (the float32 flows and the "
                             "bool mask as loaded from the .npy files)"}],
        "config": "configs/examples/flow.yaml"}
    flow_example["results"] = {m["label"]: m["expected"] for m in flow_example["metrics"]}

    doc = {
        "generator": "tests/reference/flow_language.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "mmeval": mmeval.__version__, "scikit-image": skimage.__version__,
                     "scikit-learn": sklearn.__version__},
        "notes": [
            "Each case's expected values are what its call returned (mmeval 0.2.1) on the "
            "case's input files; null is NaN.",
            f"Language model: alphabet {ALPHABET!r} (index = token id), bigram add-0.5 model "
            f"fitted on the first {split} of {len(ids)} characters of {', '.join(files)}.",
        ],
        "cases": cases,
        "example": example,
        "examples": [flow_example],
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {rel(OUT)}: {len(cases)} cases")


if __name__ == "__main__":
    main()
