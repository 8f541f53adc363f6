#!/usr/bin/env python3
"""Reference data and expected values for NIQE (plugins/restoration/niqe.cpp).

(a) Writes test images to tests/data/niqe/*.npy, deterministically: crops of scikit-image's
    sample images (astronaut: public domain, NASA; chelsea, coffee: CC0), a JPEG-compressed copy
    (pillow, quality 15), and synthetic textures (smooth gradients, sinusoidal texture, sharp
    edges, noise from a fixed seed, a flat region covering whole 96x96 blocks). Sizes are not
    multiples of 96; colour HWC and CHW, gray [H, W], uint8, float32 and a video [N, T, H, W, C].
(b) Writes tests/reference/expected_niqe.json: for every case tally's metric, its parameters, its
    inputs (a file: a dense field; a list of files: a ragged field, one file a sample), the
    expected value, the exact call that produced it (mmeval 0.2.1's
    NaturalImageQualityEvaluator; input_order given explicitly: mmeval's default is CHW, tally's
    HWC), and mmeval's value for each sample alone ("per_sample": compute_niqe of the sample, or
    the mean over a video's frames, as mmeval's add() computes it).

Run in the reference environment:   .venv-ref/bin/python tests/reference/niqe.py

One-channel images: mmeval's gray conversion (OpenCV) fails on them; tally takes such an image as
the gray image itself, which is mmeval's computation with convert_to None, called here by setting
the attribute after construction (metric.convert_to = None).

OpenCV's float32 RGB2GRAY runs through Intel IPP in the opencv-python wheels; its float32 rounding
depends on the code path IPP picks for the CPU (recorded below), and a one-ulp change can flip a
pixel's rounding to an integer. tally reproduces the AVX2 path.
"""

import io
import json
import platform
import subprocess
import warnings
from pathlib import Path

import cv2
import mmeval
import numpy as np
import PIL
import scipy
import skimage
from mmeval import NaturalImageQualityEvaluator
from PIL import Image
from skimage import data as skdata

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "niqe"
OUT = ROOT / "tests" / "reference" / "expected_niqe.json"


def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(name, array):
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / name
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


def jpeg(img, quality):
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=quality)
    return np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))


def texture(h, w, seed, flat=None):
    """A synthetic RGB image (float64, 0..255): a smooth gradient, a sinusoidal texture, a few
    sharp-edged rectangles and mild noise; `flat` = (r0, r1, c0, c1, value) makes that region
    one constant colour (its blocks' MSCN coefficients vanish)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    base = 60 + 120 * (x / w) * (0.5 + 0.5 * y / h)
    tex = 25 * np.sin(x / 3.1 + rng.uniform(0, 6)) * np.cos(y / 4.7 + rng.uniform(0, 6))
    img = np.stack([base + tex, base * 0.8 + 0.5 * tex + 20, 200 - base * 0.6 + tex], axis=2)
    for _ in range(6):
        r0, c0 = rng.integers(0, h - 20), rng.integers(0, w - 20)
        r1, c1 = r0 + rng.integers(10, 60), c0 + rng.integers(10, 80)
        img[r0:r1, c0:c1] = rng.uniform(0, 255, size=3)
    img += rng.normal(0, 4, size=img.shape)
    if flat is not None:
        r0, r1, c0, c1, v = flat
        img[r0:r1, c0:c1] = v
    return np.clip(img, 0, 255)


def ipp_tail_image():
    v = np.arange(256, dtype=np.float32) / np.float32(255)
    r, g, b = np.meshgrid(v, v, v, indexing="ij")
    k = [np.float32(0.299), np.float32(0.587), np.float32(0.114)]

    def fma(x, y, z):
        return (x.astype(np.float64) * np.float64(y) + z.astype(np.float64)).astype(np.float32)

    lanes_a = fma(b, k[2], fma(r, k[0], g * k[1])) * np.float32(255)
    lanes_b = fma(b, k[2], fma(g, k[1], r * k[0])) * np.float32(255)
    differ = np.argwhere(np.rint(lanes_a) != np.rint(lanes_b)).astype(np.uint8)
    img = skdata.astronaut()[200:400, 300:400].copy()
    rng = np.random.default_rng(5)
    for col in (95, 96):
        img[:, col] = differ[rng.choice(len(differ), size=200, replace=False)]
    return img


def make_data():
    astro = skdata.astronaut()[40:40 + 200, 150:150 + 301]
    cat = skdata.chelsea()[20:20 + 193, 100:100 + 260]
    coffee = skdata.coffee()[60:60 + 230, 150:150 + 290]
    files = {
        "natural": [save("astronaut.npy", astro), save("chelsea.npy", cat),
                    save("coffee.npy", coffee)],
        "jpeg": save("coffee_jpeg15.npy", jpeg(coffee, 15)[None]),
    }
    synth = np.stack([np.round(texture(200, 213, 1)),
                      np.round(texture(200, 213, 2, flat=(0, 120, 0, 110, (90, 140, 30))))])
    synth = synth.astype(np.uint8)
    files["synth_hwc"] = save("synth_u8.npy", synth)
    files["synth_chw"] = save("synth_u8_chw.npy", synth.transpose(0, 3, 1, 2))
    # float32 one-channel images with fractional values, as a ragged field of 2 sizes.
    g1 = texture(193, 290, 3)[..., 0].astype(np.float32)
    g2 = (texture(250, 199, 4)[..., 1] * 0.9 + 7.25).astype(np.float32)
    files["gray_f32"] = [save("gray_f32_r0.npy", g1), save("gray_f32_r1.npy", g2)]
    # IPP's row tails: a 200x100 crop of the astronaut whose columns 95 and 96 hold colours that
    # OpenCV's float32 RGB2GRAY (through IPP) rounds to another integer in column 96 (the first
    # lane of the 4-pixel block after the 8-pixel blocks of a 100-pixel row) than in column 95;
    # with crop_border 2 both columns are in the blocks NIQE reads.
    files["ipp_tail"] = save("ipp_tail.npy", ipp_tail_image()[None])
    # A video of 2 frames (shifted crops of the astronaut).
    full = skdata.astronaut()
    video = np.stack([full[100 + 6 * t:100 + 6 * t + 192, 60 + 4 * t:60 + 4 * t + 196]
                      for t in range(2)])[None]
    files["video"] = save("video_u8.npy", video)
    return files


def load(f):
    return np.load(ROOT / f)


def samples(inputs):
    """The samples of an inputs entry: a list of files (one a sample) or one dense file."""
    if isinstance(inputs, list):
        return [load(f) for f in inputs]
    return list(load(inputs))


def niqe_call(params):
    p = {"crop_border": params.get("crop_border", 0),
         "input_order": params.get("input_order", "HWC"),
         "convert_to": params.get("convert_to", "gray"),
         "channel_order": params.get("channel_order", "rgb")}
    call = ("mmeval.NaturalImageQualityEvaluator(" +
            ", ".join(f"{k}={v!r}" for k, v in p.items()) + ")")
    return p, call


def run(params, images, as_is=False):
    p, call = niqe_call(params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = NaturalImageQualityEvaluator(**p)
        if as_is:
            m.convert_to = None  # one-channel images: reorder_and_crop without a conversion
        value = m(images)["niqe"]
        per = []
        for img in images:
            m.reset()
            m.add([img])
            per.append(float(m._results[0]))
    if as_is:
        call = f"m = {call}; m.convert_to = None; m(list(pred))['niqe']"
    else:
        call += "(list(pred))['niqe']"
    return float(value), per, call


def cpu_flags():
    try:
        text = Path("/proc/cpuinfo").read_text()
        flags = next(line for line in text.splitlines() if line.startswith("flags")).split()
        return [f for f in ("avx2", "fma", "avx512f") if f in flags]
    except (OSError, StopIteration):
        return []


def main():
    files = make_data()
    cases = []

    def case(name, params, inputs, as_is=False):
        images = samples(inputs)
        value, per, call = run(params, images, as_is)
        cases.append({"name": name, "metric": "NIQE", "params": params,
                      "inputs": {"pred_img": inputs}, "expected": {"niqe": value},
                      "per_sample": per, "calls": {"niqe": call}, "reference": "mmeval"})

    case("natural_gray", {}, files["natural"])
    case("natural_y_bgr_crop", {"convert_to": "y", "channel_order": "bgr", "crop_border": 7},
         files["natural"])
    case("natural_gray_bgr_crop", {"channel_order": "bgr", "crop_border": 3}, files["natural"])
    case("jpeg_gray", {}, files["jpeg"])
    case("synthetic_hwc_gray", {}, files["synth_hwc"])
    case("synthetic_chw_y_crop", {"input_order": "CHW", "convert_to": "y", "crop_border": 2},
         files["synth_chw"])
    case("synthetic_chw_gray", {"input_order": "CHW"}, files["synth_chw"])
    case("gray_float32_as_is", {"crop_border": 1}, files["gray_f32"], as_is=True)
    case("ipp_tail_gray_crop", {"crop_border": 2}, files["ipp_tail"])
    case("ipp_tail_gray_bgr_crop", {"crop_border": 2, "channel_order": "bgr"}, files["ipp_tail"])
    case("video_gray", {}, files["video"])

    out = {
        "generator": "tests/reference/niqe.py",
        "versions": {"python": platform.python_version(), "mmeval": mmeval.__version__,
                     "numpy": np.__version__, "scipy": scipy.__version__,
                     "opencv-python": cv2.__version__, "scikit-image": skimage.__version__,
                     "pillow": PIL.__version__, "cpu_flags": cpu_flags()},
        "notes": "pred: the samples of inputs.pred_img (a list of files: one a sample; a file: "
                 "a dense [N, ...] batch). per_sample: mmeval's value of each sample alone.",
        "doc_example": "niqe.cpp's doc example is case jpeg_gray (tests/data/niqe/coffee_jpeg15.npy)",
        "cases": cases,
    }
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    for c in cases:
        print(c["name"], c["expected"]["niqe"], c["per_sample"])


if __name__ == "__main__":
    main()
