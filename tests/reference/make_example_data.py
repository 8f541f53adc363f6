#!/usr/bin/env python3
"""Data for configs/examples/classification.yaml, from a public dataset scikit-learn ships, and
the synthetic optical-flow data of configs/examples/flow.yaml.

scikit-learn's load_digits (the UCI "Optical Recognition of Handwritten Digits" test set:
1797 8x8 images, 10 classes; shipped in scikit-learn, BSD-3-Clause): a LogisticRegression fitted
on the first 900 samples predicts the remaining 897. Writes to configs/examples/data/:

    preds.npy   float32 [897, 10]  predict_proba of samples 900..1796
    labels.npy  int64   [897]      their true digits

Optical flow (synthetic, numpy.random.default_rng(2025)), to configs/examples/data/flow/:

    pred_flow.npy   float32 [24, 32, 48, 2]  estimated flow (u, v), pixels
    gt_flow.npy     float32 [24, 32, 48, 2]  true flow
    valid.npy       bool    [24, 32, 48]     pixels with a valid true flow

Candidates for the regression gate's example (docs/ci/gate.yaml), to configs/examples/data/gate/:
noise.npy and regressed.npy, float32 [897, 10] (make_gate_example says how they are made).

Deterministic: a fixed split, no shuffling, and lbfgs (a deterministic solver); a seeded
generator for the flow. The arguments name the data to write, digits and/or flow (default: both;
a refit of the digits' model here gave probabilities up to 2e-3 away from the committed
preds.npy, the same predicted digits: give `flow` to leave them as they are). Then run
classification.py and flow_language.py to refresh the expected values (section "example" of
tests/reference/expected_classification.json, the flow entry of "examples" in
tests/reference/expected_flow_language.json):

    .venv-ref/bin/python tests/reference/make_example_data.py [digits] [flow] [gate]
    .venv-ref/bin/python tests/reference/classification.py
    .venv-ref/bin/python tests/reference/flow_language.py
"""

import sys
from pathlib import Path

import numpy as np
import sklearn
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "configs" / "examples" / "data"
N_TRAIN = 900
MAX_ITER = 5000
FLOW_N, FLOW_H, FLOW_W = 24, 32, 48


def make_digits_example():
    digits = load_digits()
    x, y = digits.data, digits.target
    assert x.shape == (1797, 64)
    model = LogisticRegression(max_iter=MAX_ITER)
    model.fit(x[:N_TRAIN], y[:N_TRAIN])
    proba = model.predict_proba(x[N_TRAIN:]).astype(np.float32)
    labels = y[N_TRAIN:].astype(np.int64)
    assert proba.shape == (897, 10) and labels.shape == (897,)

    OUT.mkdir(parents=True, exist_ok=True)
    np.save(OUT / "preds.npy", np.ascontiguousarray(proba), allow_pickle=False)
    np.save(OUT / "labels.npy", labels, allow_pickle=False)
    acc = float(np.mean(proba.argmax(1) == labels))
    print(f"wrote {OUT.relative_to(ROOT)}/preds.npy {proba.dtype}{list(proba.shape)} and "
          f"labels.npy {labels.dtype}{list(labels.shape)}; top-1 accuracy {acc:.4f} "
          f"(scikit-learn {sklearn.__version__}, numpy {np.__version__})")


def make_flow_example():
    """24 synthetic flow fields of 32x48 pixels. True flow: a translation (up to 6 pixels), a
    rotation (up to 5 degrees) and a zoom (up to 5 %) about a random centre, plus a smooth ripple
    (amplitude up to 1 pixel). Estimated flow: the truth plus a constant bias (sigma 0.3 pixel),
    pixel noise (sigma 0.25) and, in two thirds of the fields, a 6x8-pixel blob off by up to 5
    pixels (an error at a motion boundary). Valid: the pixels whose true flow stays inside the
    frame, less an occluded 5x7 to 10x14-pixel rectangle; every field keeps valid pixels."""
    rng = np.random.default_rng(2025)
    n, h, w = FLOW_N, FLOW_H, FLOW_W
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    gt = np.empty((n, h, w, 2))
    pred = np.empty((n, h, w, 2))
    valid = np.empty((n, h, w), dtype=bool)
    for i in range(n):
        tx, ty = rng.uniform(-6, 6, size=2)
        ang = np.deg2rad(rng.uniform(-5, 5))
        zoom = 1.0 + rng.uniform(-0.05, 0.05)
        cx, cy = rng.uniform(0.3 * w, 0.7 * w), rng.uniform(0.3 * h, 0.7 * h)
        amp, phase = rng.uniform(0, 1), rng.uniform(0, 2 * np.pi, size=2)
        dx, dy = xx - cx, yy - cy
        u = tx + (zoom * np.cos(ang) - 1) * dx - zoom * np.sin(ang) * dy \
            + amp * np.sin(yy / 5.0 + phase[0])
        v = ty + zoom * np.sin(ang) * dx + (zoom * np.cos(ang) - 1) * dy \
            + amp * np.cos(xx / 7.0 + phase[1])
        gt[i] = np.stack([u, v], -1)
        pred[i] = gt[i] + rng.normal(0, 0.3, size=2) + rng.normal(0, 0.25, size=(h, w, 2))
        if i % 3:
            y0, x0 = rng.integers(0, h - 6), rng.integers(0, w - 8)
            pred[i, y0:y0 + 6, x0:x0 + 8] += rng.uniform(-5, 5, size=2)
        inside = (xx + u >= 0) & (xx + u <= w - 1) & (yy + v >= 0) & (yy + v <= h - 1)
        oh, ow = rng.integers(5, 11), rng.integers(7, 15)
        y0, x0 = rng.integers(0, h - oh), rng.integers(0, w - ow)
        inside[y0:y0 + oh, x0:x0 + ow] = False
        valid[i] = inside
        assert inside.any()
    folder = OUT / "flow"
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "pred_flow.npy", pred.astype(np.float32), allow_pickle=False)
    np.save(folder / "gt_flow.npy", gt.astype(np.float32), allow_pickle=False)
    np.save(folder / "valid.npy", valid, allow_pickle=False)
    print(f"wrote {folder.relative_to(ROOT)}/pred_flow.npy, gt_flow.npy float32{[n, h, w, 2]} "
          f"and valid.npy bool{[n, h, w]}: {valid.mean():.1%} of the pixels valid")


def make_gate_example():
    """Two candidate models for the regression gate of docs/ci/gate.yaml (README, "Regression
    checks in CI"), predicting the same 897 samples as preds.npy (the baseline):

        gate/noise.npy      the same LogisticRegression refitted on the first 800 of the 900
                            training samples: a retrain, no real change (accuracy -0.1 point)
        gate/regressed.npy  the baseline's model, the test images' 17 grey levels coarsened to
                            steps of 6 before predicting (a preprocessing bug: -2.1 points)

    The gate's verdicts (McNemar's exact test against preds.npy) come from tally; this prints
    statsmodels' for the record."""
    from statsmodels.stats.contingency_tables import mcnemar

    digits = load_digits()
    x, y = digits.data, digits.target
    labels = y[N_TRAIN:]
    base = np.load(OUT / "preds.npy").argmax(1) == labels
    retrained = LogisticRegression(max_iter=MAX_ITER).fit(x[:800], y[:800])
    model = LogisticRegression(max_iter=MAX_ITER).fit(x[:N_TRAIN], y[:N_TRAIN])
    folder = OUT / "gate"
    folder.mkdir(parents=True, exist_ok=True)
    for name, proba in (("noise", retrained.predict_proba(x[N_TRAIN:])),
                        ("regressed", model.predict_proba(np.floor(x[N_TRAIN:] / 6) * 6))):
        proba = np.ascontiguousarray(proba.astype(np.float32))
        np.save(folder / f"{name}.npy", proba, allow_pickle=False)
        right = proba.argmax(1) == labels
        worse, better = int((base & ~right).sum()), int((~base & right).sum())
        p = mcnemar([[0, worse], [better, 0]], exact=True).pvalue
        print(f"wrote {folder.relative_to(ROOT)}/{name}.npy: top-1 accuracy {right.mean():.4f} "
              f"(baseline {base.mean():.4f}), {worse} worse, {better} better, McNemar exact "
              f"p = {p:.4g} (statsmodels mcnemar(exact=True))")


def main(argv):
    makers = {"digits": make_digits_example, "flow": make_flow_example,
              "gate": make_gate_example}
    unknown = [a for a in argv if a not in makers]
    if unknown:
        raise SystemExit(f"unknown data {', '.join(unknown)}: give digits, flow and/or gate")
    for name in argv or list(makers):
        makers[name]()


if __name__ == "__main__":
    main(sys.argv[1:])
