#!/usr/bin/env python3
"""Reference data and expected values for the image-restoration plugin (plugins/restoration).

(a) Writes test images to tests/data/restoration/*.npy, deterministically: crops of
    scikit-image's sample images (astronaut: public domain, NASA; coffee, chelsea, camera: CC0)
    as ground truth, and degraded copies as predictions: Gaussian noise (fixed seed), Gaussian
    blur (pillow) and JPEG compression (pillow, quality 25). Layouts: dense HWC and CHW colour
    batches, grey [N, H, W], uint16, float32 and float64 images, ragged samples of different
    sizes (files *_r<i>.npy), videos [N, T, H, W, C] (shifted crops), and masks.
(b) Writes configs/examples/data/restoration/{pred,gt}/*.png for
    configs/examples/restoration.yaml (4 RGB images, 96x128).
(c) Writes tests/reference/expected_restoration.json: for every case the metric, its tally
    parameters, its inputs (a file: a dense field; a list of files: a ragged field, one file a
    sample), the expected values and the exact call that produced each: mmeval 0.2.1's metric
    classes, and for SSIM also scikit-image 0.26's structural_similarity.

Run in the reference environment:   .venv-ref/bin/python tests/reference/restoration.py

mmeval's classes are called with input_order given explicitly (their default is CHW, tally's is
HWC). Float32 images for MAE/MSE: mmeval computes them in float32 arithmetic, tally in float64,
so their expected values are mmeval's on the same numbers as float64 (recorded in the call).
"""

import io
import json
import platform
import warnings
from pathlib import Path

import cv2
import mmeval
import numpy as np
import PIL
import skimage
from mmeval import (MeanAbsoluteError, MeanSquaredError, PeakSignalNoiseRatio, SignalNoiseRatio,
                    StructuralSimilarity)
from PIL import Image, ImageFilter
from skimage import data as skdata
from skimage.metrics import structural_similarity

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "restoration"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "restoration"
OUT = ROOT / "tests" / "reference" / "expected_restoration.json"

CLASSES = {"PSNR": PeakSignalNoiseRatio, "SNR": SignalNoiseRatio, "SSIM": StructuralSimilarity,
           "MAE": MeanAbsoluteError, "MSE": MeanSquaredError}
KEYS = {"PSNR": "psnr", "SNR": "snr", "SSIM": "ssim", "MAE": "mae", "MSE": "mse"}


def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(name, array):
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / name
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


# ---- degradations ------------------------------------------------------------------------------

def noise(img, sigma, seed):
    rng = np.random.default_rng(seed)
    return np.clip(np.rint(img.astype(np.float64) + rng.normal(0, sigma, img.shape)), 0,
                   255).astype(np.uint8)


def blur(img, radius):
    return np.asarray(Image.fromarray(img).filter(ImageFilter.GaussianBlur(radius)))


def jpeg(img, quality):
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=quality)
    return np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert(
        "L" if img.ndim == 2 else "RGB"))


def degrade(img, k):
    return [lambda x: noise(x, 8.0, 100 + k), lambda x: blur(x, 1.2),
            lambda x: jpeg(x, 25)][k % 3](img)


def color_crops(h, w):
    ast, cof, che = skdata.astronaut(), skdata.coffee(), skdata.chelsea()
    return [ast[40:40 + h, 180:180 + w], ast[300:300 + h, 20:20 + w], cof[100:100 + h, 200:200 + w],
            cof[250:250 + h, 350:350 + w], che[60:60 + h, 120:120 + w], che[150:150 + h, 300:300 + w]]


# ---- (a) data ----------------------------------------------------------------------------------

def make_data():
    f = {}
    gt = np.stack(color_crops(32, 40))
    pred = np.stack([degrade(g, k) for k, g in enumerate(gt)])
    f["color"] = (save("color_pred.npy", pred), save("color_gt.npy", gt))
    f["color_chw"] = (save("color_pred_chw.npy", pred.transpose(0, 3, 1, 2)),
                      save("color_gt_chw.npy", gt.transpose(0, 3, 1, 2)))
    f["color_u16"] = (save("color_pred_u16.npy", pred.astype(np.uint16) * 257),
                      save("color_gt_u16.npy", gt.astype(np.uint16) * 257))
    # Float predictions: a blur computed in float (not rounded), on the 0..255 scale.
    fl = np.stack([cv2.GaussianBlur(g.astype(np.float64), (5, 5), 1.1) for g in gt])
    f["color_f64"] = (save("color_pred_f64.npy", fl), save("color_gt_f64.npy", gt.astype(np.float64)))
    f["color_f32"] = (save("color_pred_f32.npy", fl.astype(np.float32)),
                      save("color_gt_f32.npy", gt.astype(np.float32)))
    cam = skdata.camera()
    ggt = np.stack([cam[r:r + 40, c:c + 56] for r, c in [(60, 200), (250, 120), (400, 300), (100, 40), (330, 420)]])
    gpred = np.stack([degrade(g, k) for k, g in enumerate(ggt)])
    f["gray"] = (save("gray_pred.npy", gpred), save("gray_gt.npy", ggt))
    # Ragged: different sizes, one grey [H, W] sample among colour ones.
    rg = [color_crops(40, 52)[0], color_crops(33, 47)[2], cam[10:66, 300:330],
          color_crops(56, 30)[4], color_crops(29, 61)[1]]
    rp = [degrade(g, k + 1) for k, g in enumerate(rg)]
    f["ragged"] = ([save(f"ragged_pred_r{i}.npy", p) for i, p in enumerate(rp)],
                   [save(f"ragged_gt_r{i}.npy", g) for i, g in enumerate(rg)])
    # Videos: 3 videos of 4 frames, each frame a crop shifted 3 pixels further right and down.
    ast = skdata.astronaut()
    vg = np.stack([np.stack([ast[y0 + 3 * t:y0 + 3 * t + 32, x0 + 3 * t:x0 + 3 * t + 40]
                             for t in range(4)]) for y0, x0 in [(30, 200), (200, 100), (380, 300)]])
    vp = np.stack([np.stack([degrade(fr, v + t) for t, fr in enumerate(vid)]) for v, vid in enumerate(vg)])
    f["video"] = (save("video_pred.npy", vp), save("video_gt.npy", vg))
    # Masks: a [H, W, 1] 0/1 mask (pixels brighter than the image's median grey), the same as
    # bool, a full-shape float weight map, and per-frame video masks.
    lum = gt.mean(axis=3, keepdims=True)
    m1 = (lum > np.median(lum, axis=(1, 2, 3), keepdims=True)).astype(np.uint8)
    f["mask_u8"] = save("mask_hw1_u8.npy", m1)
    f["mask_bool"] = save("mask_hw1_bool.npy", m1.astype(bool))
    f["mask_full"] = save("mask_full_f64.npy", (gt / 255.0) ** 2)
    vl = vg.mean(axis=4, keepdims=True)
    f["mask_video"] = save("mask_video_u8.npy", (vl > 100).astype(np.uint8))
    return f


def load(files):
    if isinstance(files, list):
        return [np.load(ROOT / p) for p in files]
    return np.load(ROOT / files)


# ---- (c) cases ---------------------------------------------------------------------------------

def mmeval_case(cases, name, metric, params, data, mask=None, f32_as_f64=False, files=None):
    pf, gf = files[data]
    pred, gt = load(pf), load(gf)
    kwargs = {}
    if metric in ("PSNR", "SNR", "SSIM"):
        kwargs = {"crop_border": params.get("crop_border", 0),
                  "input_order": params.get("input_order", "HWC"),
                  "convert_to": params.get("convert_to"),
                  "channel_order": params.get("channel_order", "rgb")}
    m = CLASSES[metric](**kwargs)
    p_in, g_in = list(pred), list(gt)
    if f32_as_f64:
        p_in = [x.astype(np.float64) for x in p_in]
        g_in = [x.astype(np.float64) for x in g_in]
    args = [p_in, g_in]
    inputs = {"pred_img": pf, "gt_img": gf}
    if mask is not None:
        args.append(list(load(files[mask])))
        inputs["mask"] = files[mask]
    value = m(*args)[KEYS[metric]]
    cls = CLASSES[metric].__name__
    call = (f"mmeval.{cls}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
            f"(list(pred){'.astype(float64)' if f32_as_f64 else ''}, "
            f"list(gt){'.astype(float64)' if f32_as_f64 else ''}"
            f"{', list(mask)' if mask is not None else ''})['{KEYS[metric]}']")
    cases.append({"name": name, "metric": metric, "params": params, "inputs": inputs,
                  "expected": {KEYS[metric]: float(value)}, "calls": {KEYS[metric]: call},
                  "reference": "mmeval"})


def skimage_case(cases, name, params, data, files):
    pf, gf = files[data]
    pred, gt = load(pf), load(gf)
    crop = params.get("crop_border", 0)
    vals = []
    for p, g in zip(pred, gt):
        if crop:
            p, g = p[crop:-crop, crop:-crop], g[crop:-crop, crop:-crop]
        vals.append(structural_similarity(p, g, gaussian_weights=True, sigma=1.5,
                                          use_sample_covariance=False, data_range=255,
                                          channel_axis=-1 if p.ndim == 3 else None))
    cropped = "[c:-c, c:-c] " if crop else ""
    call = ("mean over samples i of skimage.metrics.structural_similarity(pred[i]" + cropped +
            ", gt[i]" + cropped + ", gaussian_weights=True, sigma=1.5, use_sample_covariance=False, "
            f"data_range=255, channel_axis={-1 if pred[0].ndim == 3 else None})")
    cases.append({"name": name, "metric": "SSIM", "params": params,
                  "inputs": {"pred_img": pf, "gt_img": gf},
                  "expected": {"ssim": float(np.mean(vals))}, "calls": {"ssim": call},
                  "reference": "scikit-image"})


def make_example():
    gts = [skdata.astronaut()[20:116, 170:298], skdata.coffee()[90:186, 180:308],
           skdata.chelsea()[50:146, 110:238], skdata.astronaut()[280:376, 10:138]]
    names = ["astronaut_face.png", "coffee.png", "chelsea.png", "astronaut_flag.png"]
    preds = [noise(gts[0], 6.0, 7), blur(gts[1], 1.0), jpeg(gts[2], 30), jpeg(blur(gts[3], 0.8), 50)]
    for sub, imgs in (("gt", gts), ("pred", preds)):
        (EXAMPLE / sub).mkdir(parents=True, exist_ok=True)
        for n, img in zip(names, imgs):
            Image.fromarray(np.ascontiguousarray(img)).save(EXAMPLE / sub / n, optimize=True)
    # The reader returns the files sorted by name: the expected values follow that order.
    order = sorted(range(len(names)), key=lambda i: names[i])
    P = [np.asarray(Image.open(EXAMPLE / "pred" / names[i])) for i in order]
    G = [np.asarray(Image.open(EXAMPLE / "gt" / names[i])) for i in order]
    results, calls, metrics = {}, {}, []
    for label, metric, params in [("PSNR", "PSNR", {}), ("psnr_y", "PSNR", {"crop_border": 4, "convert_to": "Y"}),
                                  ("SSIM", "SSIM", {}), ("SNR", "SNR", {}), ("MAE", "MAE", {}),
                                  ("MSE", "MSE", {})]:
        kwargs = {}
        if metric in ("PSNR", "SNR", "SSIM"):
            kwargs = {"crop_border": params.get("crop_border", 0), "input_order": "HWC",
                      "convert_to": params.get("convert_to")}
        results[label] = {KEYS[metric]: float(CLASSES[metric](**kwargs)(P, G)[KEYS[metric]])}
        calls[label] = f"mmeval.{CLASSES[metric].__name__}(**{kwargs!r})(pred_pngs, gt_pngs)"
        metrics.append({"label": label, "metric": metric, "params": params})
    return {"config": "configs/examples/restoration.yaml",
            "files": [names[i] for i in order],
            "inputs": {"pred_img": [rel(EXAMPLE / "pred" / names[i]) for i in order],
                       "gt_img": [rel(EXAMPLE / "gt" / names[i]) for i in order]},
            "samples": len(names), "metrics": metrics, "results": results, "calls": calls}


def main():
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    files = make_data()
    cases = []
    for metric in ("PSNR", "SNR", "SSIM"):
        mmeval_case(cases, f"{metric}_color", metric, {}, "color", files=files)
        mmeval_case(cases, f"{metric}_color_crop4", metric, {"crop_border": 4}, "color", files=files)
        mmeval_case(cases, f"{metric}_color_y", metric, {"convert_to": "Y"}, "color", files=files)
        mmeval_case(cases, f"{metric}_color_y_bgr_crop2", metric,
                    {"convert_to": "Y", "channel_order": "bgr", "crop_border": 2}, "color", files=files)
        mmeval_case(cases, f"{metric}_color_chw", metric, {"input_order": "CHW"}, "color_chw", files=files)
        mmeval_case(cases, f"{metric}_color_chw_y", metric, {"input_order": "CHW", "convert_to": "Y"},
                    "color_chw", files=files)
        mmeval_case(cases, f"{metric}_gray", metric, {}, "gray", files=files)
        mmeval_case(cases, f"{metric}_gray_crop3", metric, {"crop_border": 3}, "gray", files=files)
        mmeval_case(cases, f"{metric}_u16", metric, {}, "color_u16", files=files)
        mmeval_case(cases, f"{metric}_u16_y", metric, {"convert_to": "Y"}, "color_u16", files=files)
        mmeval_case(cases, f"{metric}_f32", metric, {}, "color_f32", files=files)
        mmeval_case(cases, f"{metric}_f64", metric, {}, "color_f64", files=files)
        mmeval_case(cases, f"{metric}_f64_y", metric, {"convert_to": "Y"}, "color_f64", files=files)
        mmeval_case(cases, f"{metric}_ragged", metric, {}, "ragged", files=files)
        mmeval_case(cases, f"{metric}_ragged_crop2", metric, {"crop_border": 2}, "ragged", files=files)
        mmeval_case(cases, f"{metric}_video", metric, {}, "video", files=files)
        mmeval_case(cases, f"{metric}_video_y_crop1", metric, {"convert_to": "Y", "crop_border": 1},
                    "video", files=files)
    skimage_case(cases, "SSIM_skimage_color", {}, "color", files)
    skimage_case(cases, "SSIM_skimage_color_crop4", {"crop_border": 4}, "color", files)
    skimage_case(cases, "SSIM_skimage_gray", {}, "gray", files)
    skimage_case(cases, "SSIM_skimage_u16", {}, "color_u16", files)
    skimage_case(cases, "SSIM_skimage_ragged", {}, "ragged", files)
    for metric in ("MAE", "MSE"):
        mmeval_case(cases, f"{metric}_color", metric, {}, "color", files=files)
        mmeval_case(cases, f"{metric}_gray", metric, {}, "gray", files=files)
        mmeval_case(cases, f"{metric}_u16", metric, {}, "color_u16", files=files)
        mmeval_case(cases, f"{metric}_f64", metric, {}, "color_f64", files=files)
        mmeval_case(cases, f"{metric}_f32", metric, {}, "color_f32", f32_as_f64=True, files=files)
        mmeval_case(cases, f"{metric}_ragged", metric, {}, "ragged", files=files)
        mmeval_case(cases, f"{metric}_video", metric, {}, "video", files=files)
        mmeval_case(cases, f"{metric}_mask_hw1", metric, {}, "color", mask="mask_u8", files=files)
        mmeval_case(cases, f"{metric}_mask_bool", metric, {}, "color", mask="mask_bool", files=files)
        mmeval_case(cases, f"{metric}_mask_full", metric, {}, "color", mask="mask_full", files=files)
        mmeval_case(cases, f"{metric}_mask_video", metric, {}, "video", mask="mask_video", files=files)

    # The two SSIM references agree: checked here on the same images.
    for data in ("color", "gray"):
        a = next(c for c in cases if c["name"] == f"SSIM_{data}")["expected"]["ssim"]
        b = next(c for c in cases if c["name"] == f"SSIM_skimage_{data}")["expected"]["ssim"]
        assert abs(a - b) <= 1e-12 * abs(b), (data, a, b)

    doc = {
        "generator": "tests/reference/restoration.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "mmeval": mmeval.__version__, "scikit-image": skimage.__version__,
                     "opencv-python": cv2.__version__, "pillow": PIL.__version__},
        "notes": ["pred, gt, mask: the files of the case's inputs (a list: one sample a file).",
                  "mmeval's classes are given input_order explicitly; tally's default is HWC."],
        "cases": cases,
        "example": make_example(),
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(cases)} cases -> {rel(OUT)}")


if __name__ == "__main__":
    main()
