#!/usr/bin/env python3
"""Reference data and expected values for the alpha-matting metrics of the restoration plugin
(SAD, MattingMSE, GradientError, ConnectivityError: mmeval's SumAbsoluteDifferences,
MattingMeanSquaredError, GradientError, ConnectivityError).

(a) Writes test mattes to tests/data/matting/*.npy, deterministically (numpy seed 20261127):
    ground-truth alpha mattes made from scikit-image's sample silhouettes and shapes (horse:
    public domain; coins, camera: CC0), their binary masks softened by a Gaussian blur
    (scipy.ndimage) and downscaled; trimaps as matting datasets make them (0 background, 255
    foreground, 128 in a band around the soft edge); predicted mattes as a matting model's
    errors: more blur, noise, a false blob and a hole, clipped to [0, 1] and then masked by the
    trimap (0 on background, 1 on foreground), as mmagic does before it calls these metrics.
    Alphas are stored as float32 (small files); the metrics and mmeval get them as float64.
    Sets: "dense" [N, H, W]; "ragged" (files *_r<i>.npy, one image a file, different sizes);
    "edges": a constant prediction, a trimap with no unknown pixel, alphas exactly at the
    thresholds k * step, two equal largest components (the first in raster order wins).
(b) Writes configs/examples/data/matting/*.npy for configs/examples/matting.yaml.
(c) Writes tests/reference/expected_matting.json: for every case the metric, its tally
    parameters, its inputs (a file: a dense field; a list of files: a ragged field), the
    expected values and the exact mmeval call.

Run in the reference environment:   .venv-ref/bin/python tests/reference/matting.py
"""

import json
import platform
from pathlib import Path

import cv2
import mmeval
import numpy as np
import scipy
from mmeval import ConnectivityError, GradientError, MattingMeanSquaredError, SumAbsoluteDifferences
from scipy import ndimage
from skimage import data as skdata
from skimage.transform import resize

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "matting"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "matting"
OUT = ROOT / "tests" / "reference" / "expected_matting.json"

rng = np.random.default_rng(20261127)


def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(folder, name, array):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


def silhouettes():
    """Binary foreground masks from scikit-image's sample images."""
    horse = ~skdata.horse()  # True on the horse
    coins = skdata.coins() > 110
    camera = skdata.camera() < 60  # the photographer's dark coat and tripod
    ys, xs = np.mgrid[0:300, 0:400]
    blobs = ((ys - 120) ** 2 / 70 ** 2 + (xs - 150) ** 2 / 90 ** 2 < 1) | \
            ((ys - 200) ** 2 + (xs - 300) ** 2 < 60 ** 2)
    return [horse, coins, camera, blobs]


def matte(mask, shape, soft):
    """A soft alpha matte of `shape` from a binary mask: blurred, downscaled, in [0, 1]."""
    a = ndimage.gaussian_filter(mask.astype(np.float64), soft)
    a = resize(a, shape, order=1, anti_aliasing=True)
    a = np.clip((a - 0.05) / 0.9, 0.0, 1.0)
    return a.astype(np.float32)


def trimap_of(alpha, band):
    """0 background, 255 foreground, 128 where the matte is soft, widened by `band` pixels."""
    soft = (alpha > 0.0) & (alpha < 1.0)
    unknown = ndimage.binary_dilation(soft, iterations=band)
    t = np.where(alpha >= 1.0, 255, 0).astype(np.uint8)
    t[unknown] = 128
    return t


def predict(alpha, trimap):
    """A matting model's output: blurred, noisy, a false blob and a hole; masked by the trimap."""
    h, w = alpha.shape
    p = ndimage.gaussian_filter(alpha.astype(np.float64), 1.2)
    p = p + rng.normal(0.0, 0.04, size=p.shape)
    y, x = rng.integers(0, h), rng.integers(0, w)
    ys, xs = np.mgrid[0:h, 0:w]
    p[(ys - y) ** 2 + (xs - x) ** 2 < (min(h, w) // 8) ** 2] += 0.5
    y, x = rng.integers(0, h), rng.integers(0, w)
    p[(ys - y) ** 2 + (xs - x) ** 2 < (min(h, w) // 10) ** 2] -= 0.6
    p = np.clip(p, 0.0, 1.0)
    p[trimap == 0] = 0.0
    p[trimap == 255] = 1.0
    return p.astype(np.float32)


def make_set(shapes, softs, bands):
    masks = silhouettes()
    gts, trimaps, preds = [], [], []
    for i, shape in enumerate(shapes):
        a = matte(masks[i % len(masks)], shape, softs[i % len(softs)])
        t = trimap_of(a, bands[i % len(bands)])
        gts.append(a)
        trimaps.append(t)
        preds.append(predict(a, t))
    return preds, gts, trimaps


def edge_set():
    """Hand-made mattes for the corner cases (each one row of the batch, 24 x 32)."""
    h, w = 24, 32
    preds, gts, trimaps = [], [], []
    # 1. a constant (all zero) prediction: GradientError's normalisation divides by nothing.
    g = np.zeros((h, w), np.float32)
    g[6:18, 8:24] = 1.0
    g[5, 8:24] = 0.5
    preds.append(np.zeros((h, w), np.float32))
    gts.append(g)
    trimaps.append(np.full((h, w), 128, np.uint8))
    # 2. no unknown pixel: MattingMSE gives 0, the others sum nothing.
    preds.append(np.clip(g + 0.25, 0, 1).astype(np.float32))
    gts.append(g)
    trimaps.append(np.where(g > 0.5, 255, 0).astype(np.uint8))
    # 3. alphas exactly at the thresholds k * 0.1 (float32 of them, compared in float64), and
    #    two equal 4-connected components (a tie the first in raster order wins).
    a = np.zeros((h, w), np.float64)
    a[2:8, 2:8] = 0.3
    a[2:8, 20:26] = 0.3
    a[14:20, 4:10] = 0.7
    a[14:20, 18:24] = 0.7
    a[10, :] = np.linspace(0, 1, w)
    preds.append(a.astype(np.float32))
    gts.append(np.clip(a + 0.05, 0, 1).astype(np.float32))
    trimaps.append(np.full((h, w), 128, np.uint8))
    # 4. everything foreground in both, with diagonal-only contacts (4- not 8-connected).
    d = np.zeros((h, w), np.float32)
    for k in range(min(h, w)):
        d[k, k] = 1.0
    d[0:4, 0:4] = 1.0
    preds.append(d)
    gts.append(np.flipud(d).copy())
    trimaps.append(np.full((h, w), 128, np.uint8))
    return preds, gts, trimaps


CLASSES = {"SAD": SumAbsoluteDifferences, "MattingMSE": MattingMeanSquaredError,
           "GradientError": GradientError, "ConnectivityError": ConnectivityError}
KEYS = {"SAD": "sad", "MattingMSE": "matting_mse", "GradientError": "gradient_error",
        "ConnectivityError": "connectivity_error"}


def reference(metric, params, preds, gts, trimaps):
    m = CLASSES[metric](**params)
    p64 = [x.astype(np.float64) for x in preds]
    g64 = [x.astype(np.float64) for x in gts]
    args = ", ".join(f"{k}={v!r}" for k, v in params.items())
    if metric == "SAD":
        value = m(p64, g64)[KEYS[metric]]
        call = f"mmeval.SumAbsoluteDifferences({args})(pred_alphas_f64, gt_alphas_f64)"
    else:
        value = m(p64, g64, list(trimaps))[KEYS[metric]]
        call = f"mmeval.{CLASSES[metric].__name__}({args})(pred_alphas_f64, gt_alphas_f64, trimaps)"
    return float(value), call


def main():
    cases = []
    inputs = {}

    preds, gts, trimaps = make_set([(48, 64)] * 6, softs=[2.0, 3.0, 1.5], bands=[2, 3])
    inputs["dense"] = ({"pred_alpha": save(DATA, "dense_pred.npy", np.stack(preds)),
                        "gt_alpha": save(DATA, "dense_gt.npy", np.stack(gts)),
                        "trimap": save(DATA, "dense_trimap.npy", np.stack(trimaps))},
                       preds, gts, trimaps)

    shapes = [(40, 56), (52, 44), (33, 71)]
    rp, rg, rt = make_set(shapes, softs=[2.5], bands=[2])
    inputs["ragged"] = ({"pred_alpha": [save(DATA, f"ragged_pred_r{i}.npy", x) for i, x in enumerate(rp)],
                         "gt_alpha": [save(DATA, f"ragged_gt_r{i}.npy", x) for i, x in enumerate(rg)],
                         "trimap": [save(DATA, f"ragged_trimap_r{i}.npy", x) for i, x in enumerate(rt)]},
                        rp, rg, rt)

    ep, eg, et = edge_set()
    inputs["edges"] = ({"pred_alpha": save(DATA, "edges_pred.npy", np.stack(ep)),
                        "gt_alpha": save(DATA, "edges_gt.npy", np.stack(eg)),
                        "trimap": save(DATA, "edges_trimap.npy", np.stack(et))},
                       ep, eg, et)

    plan = [
        ("SAD", {}, ["dense", "ragged", "edges"]),
        ("SAD", {"norm_const": 1}, ["dense"]),
        ("MattingMSE", {}, ["dense", "ragged", "edges"]),
        ("GradientError", {}, ["dense", "ragged", "edges"]),
        ("GradientError", {"sigma": 0.8, "norm_const": 1}, ["dense", "edges"]),
        ("GradientError", {"sigma": 2.5}, ["dense"]),
        ("ConnectivityError", {}, ["dense", "ragged", "edges"]),
        ("ConnectivityError", {"step": 0.05, "norm_const": 1}, ["dense", "edges"]),
        ("ConnectivityError", {"step": 0.3}, ["dense", "edges"]),
    ]
    for metric, params, sets in plan:
        for s in sets:
            files, p, g, t = inputs[s]
            value, call = reference(metric, params, p, g, t)
            fields = dict(files)
            if metric == "SAD":
                fields.pop("trimap")
            suffix = "_".join(f"{k}{v}" for k, v in params.items())
            cases.append({"name": f"{metric}_{s}" + (f"_{suffix}" if suffix else ""),
                          "metric": metric, "params": params, "inputs": fields,
                          "expected": {KEYS[metric]: value}, "calls": {KEYS[metric]: call},
                          "reference": "mmeval"})

    # The example config's data: 4 mattes of 64 x 80.
    xp, xg, xt = make_set([(64, 80)] * 4, softs=[2.5, 2.0], bands=[3])
    example_files = {"pred_alpha": save(EXAMPLE, "pred_alpha.npy", np.stack(xp)),
                     "gt_alpha": save(EXAMPLE, "gt_alpha.npy", np.stack(xg)),
                     "trimap": save(EXAMPLE, "trimap.npy", np.stack(xt))}
    example = {"config": "configs/examples/matting.yaml", "inputs": example_files,
               "samples": len(xp), "results": {}, "calls": {}}
    for metric in ["SAD", "MattingMSE", "GradientError", "ConnectivityError"]:
        value, call = reference(metric, {}, xp, xg, xt)
        example["results"][metric] = {KEYS[metric]: value}
        example["calls"][metric] = call

    doc = {
        "generator": "tests/reference/matting.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "mmeval": mmeval.__version__, "opencv": cv2.__version__,
                     "scipy": scipy.__version__},
        "notes": "Alphas stored as float32, given to mmeval as float64 (pred_alphas_f64 = "
                 "[a.astype(np.float64) for a in pred_alphas]); trimaps uint8.",
        "cases": cases,
        "example": example,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {len(cases)} cases to {rel(OUT)}")


if __name__ == "__main__":
    main()
