#!/usr/bin/env python3
"""Reference data and expected values for the image-quality plugin (plugins/image).

(a) Writes test data to tests/data/image/*.npy, deterministically (numpy seed 20261127), from
    scikit-image 0.26's bundled images (skimage.data), downscaled with
    skimage.transform.resize(anti_aliasing=True); targets are the clean images in [0, 1], preds
    realistic degradations of them:
      rgb     [4, 3, 48, 48] float32: astronaut, coffee, chelsea, rocket; preds: gaussian noise
              (sigma 0.03), gaussian blur (sigma 1), JPEG-like quantisation (8x8 block DCT,
              coefficients rounded to multiples of 0.08), a colour shift (gains 1.06 / 0.97 / 0.92,
              offset +0.02)
      gray    [2, 1, 96, 96] float32: camera, moon (grey); preds: blur + noise, quantisation to
              32 levels + noise
      bands   [3, 6, 24, 24] float64: 6-band "multispectral" images from astronaut, coffee,
              chelsea (R, G, B, two band mixtures and a smooth near-infrared-like band); preds
              with per-band noise, blur and gain errors
      const   [1, 3, 48, 48] float32: every pixel 0.5 (constant, zero-variance images)
      rgb1_target [1, 3, 48, 48] float32: the first rgb target (astronaut), against const
      ramp    [1, 1, 16, 16] float32: a small example image (the documented examples)
    The .npy files are written by the reference venv (scikit-image): this script runs itself there
    with --data first.
(b) Writes configs/examples/data/image/{preds,target}.npy for configs/examples/image.yaml: the rgb
    set at 48x48 (the same images, another seed for the degradations).
(c) Writes tests/reference/expected_image.json: for every case the metric, its parameters, its
    inputs, the expected value from torchmetrics 1.9.0 (float64 tensors, states in float64 with
    .set_dtype(torch.float64)) and the exact call; "example" holds the results of the example
    config; "doc_examples" the documented examples' values.

Run:  .venv-torch/bin/python tests/reference/image.py   (it calls .venv-ref/bin/python for (a), (b))
"""

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "image"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "image"
OUT = ROOT / "tests" / "reference" / "expected_image.json"


def rel(path):
    return str(Path(path).relative_to(ROOT))


# ---- (a), (b): data, in the reference venv ------------------------------------------------------

def make_data():
    import skimage
    from scipy.fft import dctn, idctn
    from scipy.ndimage import gaussian_filter
    from skimage import data as sd
    from skimage.transform import resize

    rng = np.random.default_rng(20261127)

    def small(img, size):
        img = skimage.img_as_float64(img)
        out = resize(img, size, anti_aliasing=True)
        return np.clip(out, 0.0, 1.0)

    def chw(img):
        return np.ascontiguousarray(np.transpose(img, (2, 0, 1)))

    def blur(img, sigma):  # per channel of a [C, H, W] image
        return np.stack([gaussian_filter(c, sigma, mode="reflect") for c in img])

    def jpeg_like(img, step):  # 8x8 block DCT, coefficients quantised
        out = np.empty_like(img)
        for ch in range(img.shape[0]):
            for r in range(0, img.shape[1], 8):
                for c in range(0, img.shape[2], 8):
                    block = img[ch, r:r + 8, c:c + 8]
                    q = np.round(dctn(block, norm="ortho") / step) * step
                    out[ch, r:r + 8, c:c + 8] = idctn(q, norm="ortho")
        return np.clip(out, 0.0, 1.0)

    def degrade_rgb(target, rng):
        p = np.empty_like(target)
        p[0] = np.clip(target[0] + rng.normal(0, 0.03, target[0].shape), 0, 1)
        p[1] = blur(target[1], 1.0)
        p[2] = jpeg_like(target[2], 0.08)
        gains = np.array([1.06, 0.97, 0.92])[:, None, None]
        p[3] = np.clip(target[3] * gains + 0.02, 0, 1)
        return p

    names = ["astronaut", "coffee", "chelsea", "rocket"]
    rgb_t = np.stack([chw(small(getattr(sd, n)(), (48, 48))) for n in names])
    rgb_p = degrade_rgb(rgb_t, rng)

    gray_t = np.stack([small(sd.camera(), (96, 96))[None], small(sd.moon(), (96, 96))[None]])
    gray_p = np.empty_like(gray_t)
    gray_p[0] = np.clip(blur(gray_t[0], 1.2) + rng.normal(0, 0.02, gray_t[0].shape), 0, 1)
    gray_p[1] = np.clip(np.round(gray_t[1] * 31) / 31 + rng.normal(0, 0.01, gray_t[1].shape), 0, 1)

    def bands_of(img):  # [3, H, W] -> [6, H, W]
        r, g, b = img
        nir = gaussian_filter(0.7 * r + 0.3 * g, 2.0, mode="reflect")
        return np.stack([b, g, r, 0.5 * (r + g), 0.6 * g + 0.4 * b, nir])

    bands_t = np.stack([bands_of(chw(small(getattr(sd, n)(), (24, 24)))) for n in names[:3]])
    bands_p = np.empty_like(bands_t)
    bands_p[0] = bands_t[0] + rng.normal(0, 0.02, bands_t[0].shape)
    bands_p[1] = blur(bands_t[1], 0.8)
    bands_p[2] = bands_t[2] * rng.uniform(0.9, 1.1, (6, 1, 1))

    const = np.full((1, 3, 48, 48), 0.5)
    ramp = (np.arange(256).reshape(1, 1, 16, 16) % 23) / 22.0

    out = {
        "rgb_preds": rgb_p.astype(np.float32), "rgb_target": rgb_t.astype(np.float32),
        "gray_preds": gray_p.astype(np.float32), "gray_target": gray_t.astype(np.float32),
        "bands_preds": bands_p, "bands_target": bands_t,
        "const": const.astype(np.float32), "ramp": ramp.astype(np.float32),
        "rgb1_target": rgb_t[:1].astype(np.float32),
    }
    DATA.mkdir(parents=True, exist_ok=True)
    for k, v in out.items():
        np.save(DATA / f"{k}.npy", np.ascontiguousarray(v), allow_pickle=False)
    # The example: the same images, other degradations (another seed).
    ex_t = rgb_t.astype(np.float32)
    ex_p = degrade_rgb(rgb_t, np.random.default_rng(20261128)).astype(np.float32)
    EXAMPLE.mkdir(parents=True, exist_ok=True)
    np.save(EXAMPLE / "preds.npy", ex_p, allow_pickle=False)
    np.save(EXAMPLE / "target.npy", ex_t, allow_pickle=False)
    print(json.dumps({"scikit-image": skimage.__version__, "numpy": np.__version__,
                      "scipy": __import__("scipy").__version__}))


if __name__ == "__main__" and "--data" in sys.argv:
    make_data()
    sys.exit(0)

# ---- (c): expected values, in the torch venv -----------------------------------------------------

import torch  # noqa: E402
import torchmetrics  # noqa: E402
from torchmetrics import image as tmi  # noqa: E402
from torchmetrics.functional.image import d_lambda as d_lambda_mod  # noqa: E402
from torchmetrics.functional.image import scc as scc_mod  # noqa: E402

KEYS = {
    "MultiScaleStructuralSimilarityIndexMeasure": "multiscale_structural_similarity_index_measure",
    "UniversalImageQualityIndex": "universal_image_quality_index",
    "SpectralAngleMapper": "spectral_angle_mapper",
    "ErrorRelativeGlobalDimensionlessSynthesis": "error_relative_global_dimensionless_synthesis",
    "RelativeAverageSpectralError": "relative_average_spectral_error",
    "SpatialCorrelationCoefficient": "spatial_correlation_coefficient",
    "SpectralDistortionIndex": "spectral_distortion_index",
    "TotalVariation": "total_variation",
    "VisualInformationFidelity": "visual_information_fidelity",
}


def load(name):
    return np.load(DATA / f"{name}.npy")


def files(name):
    return rel(DATA / f"{name}.npy")


# torchmetrics computes SpatialCorrelationCoefficient in float32 (its _scc_update casts preds and
# target with .to(torch.float32)) and SpectralDistortionIndex's band-pair matrices m1, m2 in
# float32 (torch.zeros without a dtype). The float64 reference is the same code with those casts
# made float64 (below); tests/reference/expected_image.json records both values where they differ.
_scc_update_orig = scc_mod._scc_update


def _scc_update_f64(preds, target, hp_filter, window_size):
    _, _, hp = _scc_update_orig(preds, target, hp_filter, window_size)  # its checks
    if preds.ndim == 3:
        preds, target = preds.unsqueeze(1), target.unsqueeze(1)
    return preds.to(torch.float64), target.to(torch.float64), hp.to(torch.float64)


_zeros_orig = torch.zeros


def _zeros_f64(*args, **kwargs):
    kwargs.setdefault("dtype", torch.float64)
    return _zeros_orig(*args, **kwargs)


class Float64Patches:
    """Makes SCC and D_lambda compute in float64 (see above) while active."""

    def __init__(self, metric):
        self.metric = metric

    def __enter__(self):
        if self.metric == "SpatialCorrelationCoefficient":
            scc_mod._scc_update = _scc_update_f64
            tmi.scc._scc_update = _scc_update_f64
        if self.metric == "SpectralDistortionIndex":
            d_lambda_mod.torch.zeros = _zeros_f64

    def __exit__(self, *exc):
        scc_mod._scc_update = _scc_update_orig
        tmi.scc._scc_update = _scc_update_orig
        d_lambda_mod.torch.zeros = _zeros_orig


def tm_kwargs(metric, params):
    """tally's parameters as the torchmetrics class's arguments."""
    kw = dict(params)
    if metric == "MultiScaleStructuralSimilarityIndexMeasure":
        if "betas" in kw:
            kw["betas"] = tuple(float(b) for b in kw["betas"])
        if isinstance(kw.get("data_range"), list):
            kw["data_range"] = tuple(kw["data_range"])
        for k in ("kernel_size", "sigma"):
            if isinstance(kw.get(k), list):
                kw[k] = tuple(kw[k])
    if metric == "UniversalImageQualityIndex":
        for k in ("kernel_size", "sigma"):
            if k in kw:
                kw[k] = tuple(kw[k]) if isinstance(kw[k], list) else (kw[k], kw[k])
    if metric == "SpatialCorrelationCoefficient" and "hp_filter" in kw:
        f = np.asarray(kw.pop("hp_filter"), dtype=np.float64)
        k = int(round(np.sqrt(f.size)))
        kw["high_pass_filter"] = torch.tensor(f.reshape(k, k))
    if metric == "SpatialCorrelationCoefficient" and "window_size" in kw:
        kw["window_size"] = kw["window_size"]
    return kw


def reference(metric, params, preds, target, per_image, f64_patch=True):
    """The torchmetrics class on float64 tensors, one update per image or one for all."""
    cls = getattr(tmi, metric)
    kw = tm_kwargs(metric, params)
    m = cls(**kw).set_dtype(torch.float64)
    p = torch.from_numpy(np.asarray(preds, dtype=np.float64))
    t = None if target is None else torch.from_numpy(np.asarray(target, dtype=np.float64))
    chunks = [(i, i + 1) for i in range(p.shape[0])] if per_image else [(0, p.shape[0])]
    ctx = Float64Patches(metric) if f64_patch else Float64Patches("")
    with ctx:
        for b, e in chunks:
            if t is None:
                m.update(p[b:e])
            else:
                m.update(p[b:e], t[b:e])
        v = m.compute()
    v = v.detach().to(torch.float64)
    out = [float(x) for x in v.reshape(-1)] if v.ndim > 0 else float(v)
    args = ", ".join(f"{k}={v!r}" if not isinstance(v, torch.Tensor) else f"{k}=tensor({v.tolist()})"
                     for k, v in kw.items())
    feed = ("update(preds[i:i+1], target[i:i+1]) for each image i" if per_image
            else "update(preds, target)") if t is not None else "update(img)"
    call = (f"torchmetrics.image.{metric}({args}).set_dtype(torch.float64); {feed} with float64 "
            f"tensors; compute()")
    if f64_patch and metric in ("SpatialCorrelationCoefficient", "SpectralDistortionIndex"):
        call += " -- with torchmetrics' float32 casts made float64 (Float64Patches)"
    return out, call


CASES = []


def case(name, metric, params, preds, target=None, per_image=False, note=None):
    p = load(preds)
    t = None if target is None else load(target)
    value, call = reference(metric, params, p, t, per_image)
    inputs = {"img": files(preds)} if target is None else {"preds": files(preds),
                                                           "target": files(target)}
    c = {"name": name, "metric": metric, "params": params, "inputs": inputs,
         "expected": {KEYS[metric]: value}, "calls": {KEYS[metric]: call}}
    if metric in ("SpatialCorrelationCoefficient", "SpectralDistortionIndex"):
        v32, _ = reference(metric, params, p, t, per_image, f64_patch=False)
        c["torchmetrics_float32_value"] = v32
    if note:
        c["note"] = note
    CASES.append(c)


MS = "MultiScaleStructuralSimilarityIndexMeasure"


def cases():
    # MS-SSIM: default sigma / betas (5 scales) on 96x96 grey images; kernel_size 3 only lowers
    # torchmetrics' size check (the Gaussian window's size follows sigma).
    case("ms_ssim_gray_default_betas", MS, {"kernel_size": 3, "data_range": 1.0},
         "gray_preds", "gray_target")
    case("ms_ssim_gray_range_per_image", MS, {"kernel_size": 3}, "gray_preds", "gray_target",
         per_image=True, note="data_range None: torchmetrics takes it per update; one image each")
    case("ms_ssim_rgb_3_scales_none", MS, {"betas": [0.3, 0.3, 0.4], "data_range": 1.0,
                                           "reduction": "none"}, "rgb_preds", "rgb_target")
    case("ms_ssim_rgb_uniform_clamp_simple_sum", MS,
         {"betas": [0.2, 0.3, 0.5], "gaussian_kernel": False, "kernel_size": 5,
          "data_range": [0.1, 0.9], "normalize": "simple", "reduction": "sum"},
         "rgb_preds", "rgb_target")
    case("ms_ssim_rgb_anisotropic_no_normalize", MS,
         {"betas": [0.5, 0.5], "sigma": [1.0, 2.0], "k1": 0.02, "k2": 0.05,
          "data_range": 1.0, "normalize": None}, "rgb_preds", "rgb_target")
    case("ms_ssim_rgb_range_per_image", MS, {"betas": [0.3, 0.3, 0.4]}, "rgb_preds",
         "rgb_target", per_image=True)
    case("ms_ssim_identical", MS, {"betas": [0.3, 0.3, 0.4], "data_range": 1.0}, "rgb_target",
         "rgb_target")
    case("ms_ssim_constant", MS, {"betas": [0.3, 0.3, 0.4], "data_range": 1.0}, "const", "const",
         note="both constant and data_range given: every term is 1")
    case("ms_ssim_constant_preds", MS, {"betas": [0.3, 0.3, 0.4]}, "const", "rgb1_target",
         per_image=True, note="zero-variance preds; data_range None: from the target")
    # UQI
    U = "UniversalImageQualityIndex"
    case("uqi_rgb_default", U, {}, "rgb_preds", "rgb_target")
    case("uqi_rgb_sum_k7", U, {"kernel_size": [7, 7], "sigma": [1.0, 2.0], "reduction": "sum"},
         "rgb_preds", "rgb_target")
    case("uqi_bands", U, {"kernel_size": [5, 5]}, "bands_preds", "bands_target")
    case("uqi_identical", U, {}, "rgb_target", "rgb_target")
    # SAM
    S = "SpectralAngleMapper"
    case("sam_rgb", S, {}, "rgb_preds", "rgb_target",
         note="NaN: black pixels (a zero vector in preds and target) give 0/0, as in torchmetrics")
    case("sam_bands", S, {}, "bands_preds", "bands_target")
    case("sam_bands_sum", S, {"reduction": "sum"}, "bands_preds", "bands_target")
    case("sam_identical", S, {}, "bands_target", "bands_target")
    # ERGAS
    E = "ErrorRelativeGlobalDimensionlessSynthesis"
    case("ergas_rgb", E, {}, "rgb_preds", "rgb_target")
    case("ergas_bands_ratio2_sum", E, {"ratio": 2, "reduction": "sum"}, "bands_preds",
         "bands_target")
    case("ergas_rgb_none", E, {"reduction": "none"}, "rgb_preds", "rgb_target")
    case("ergas_identical", E, {}, "rgb_target", "rgb_target")
    # RASE
    R = "RelativeAverageSpectralError"
    case("rase_rgb", R, {}, "rgb_preds", "rgb_target")
    case("rase_bands_w5", R, {"window_size": 5}, "bands_preds", "bands_target")
    case("rase_gray_w3", R, {"window_size": 3}, "gray_preds", "gray_target")
    # TV
    T = "TotalVariation"
    case("tv_rgb_sum", T, {}, "rgb_preds")
    case("tv_rgb_mean", T, {"reduction": "mean"}, "rgb_target")
    case("tv_bands_none", T, {"reduction": "none"}, "bands_preds")
    case("tv_constant", T, {}, "const")
    # SCC
    C = "SpatialCorrelationCoefficient"
    case("scc_rgb", C, {}, "rgb_preds", "rgb_target")
    case("scc_gray_w5", C, {"window_size": 5}, "gray_preds", "gray_target")
    case("scc_bands_custom_filter", C, {"hp_filter": [0, -1, 0, -1, 4, -1, 0, -1, 0],
                                        "window_size": 4}, "bands_preds", "bands_target")
    case("scc_identical", C, {}, "bands_target", "bands_target")
    # D_lambda
    D = "SpectralDistortionIndex"
    case("d_lambda_bands", D, {}, "bands_preds", "bands_target")
    case("d_lambda_rgb_p2", D, {"p": 2}, "rgb_preds", "rgb_target")
    case("d_lambda_identical", D, {}, "bands_target", "bands_target")
    # VIF
    V = "VisualInformationFidelity"
    case("vif_gray_default_noise", V, {}, "gray_preds", "gray_target",
         note="sigma_n_sq 2 (torchmetrics' default, meant for 0..255 images) on [0, 1] data")
    case("vif_rgb_noise_scaled", V, {"sigma_n_sq": 2.0 / 255**2}, "rgb_preds", "rgb_target",
         note="sigma_n_sq 2 on the 0..255 scale, for images in [0, 1]")
    case("vif_gray_none", V, {"reduction": "none", "sigma_n_sq": 2.0 / 255**2}, "gray_preds",
         "gray_target")
    case("vif_identical", V, {"sigma_n_sq": 2.0 / 255**2}, "gray_target", "gray_target")


# The documented examples (each metric's `// Example:` line), on step images that
# tests/unit/test_doc_examples.cpp writes as {"shape", "fill": v, "zero_prefix": k}: every element v
# but the first k (in C order), which are 0.
def step(shape, fill, zero_prefix):
    x = np.full(shape, float(fill))
    x.reshape(-1)[:zero_prefix] = 0.0
    return x


# UQI's flat windows are rounding noise over eps (in torch as in tally), so its examples (and
# D_lambda's) use images with texture everywhere: element k (C order) = ((a k + b) % 11) / 10,
# written out in the table as "data".
def pattern(shape, a, b):
    k = np.arange(int(np.prod(shape)))
    return (((a * k + b) % 11) / 10.0).reshape(shape)


def bands(shape, ab):  # band c: pattern(a_c, b_c) over the band's own element index
    return np.stack([pattern([1, 1] + shape[2:], a, b)[0, 0] for a, b in ab])[None]


def make(spec):
    if spec[0] == "pattern":
        return pattern(*spec[1:])
    if spec[0] == "bands":
        return bands(*spec[1:])
    return step(*spec)


DOC_EXAMPLES = [
    ("ms_ssim", MS, {"betas": [0.5, 0.5], "sigma": 0.5, "kernel_size": 3, "data_range": 1.0},
     ([1, 1, 16, 16], 0.75, 100), ([1, 1, 16, 16], 1, 128)),
    ("uqi", "UniversalImageQualityIndex", {"kernel_size": 3, "sigma": 1.0},
     ("pattern", [1, 1, 6, 6], 3, 2), ("pattern", [1, 1, 6, 6], 3, 1)),
    ("sam", "SpectralAngleMapper", {}, ([1, 3, 16, 16], 0.5, 100), ([1, 3, 16, 16], 1, 0)),
    ("ergas", "ErrorRelativeGlobalDimensionlessSynthesis", {}, ([1, 1, 16, 16], 0.75, 100),
     ([1, 1, 16, 16], 1, 0)),
    ("rase", "RelativeAverageSpectralError", {}, ([1, 1, 16, 16], 0.75, 100),
     ([1, 1, 16, 16], 1, 0)),
    ("tv", "TotalVariation", {}, ([1, 1, 16, 16], 1, 128), None),
    ("scc", "SpatialCorrelationCoefficient", {}, ([1, 1, 16, 16], 0.75, 100),
     ([1, 1, 16, 16], 1, 128)),
    ("d_lambda", "SpectralDistortionIndex", {}, ("bands", [1, 3, 11, 11], [[3, 1], [5, 4], [3, 1]]),
     ("pattern", [1, 3, 11, 11], 3, 1)),
    ("vif", "VisualInformationFidelity", {}, ([1, 1, 41, 41], 0.75, 900),
     ([1, 1, 41, 41], 1, 800)),
]


def doc_examples():
    out = {}
    for label, metric, params, p, t in DOC_EXAMPLES:
        kw = dict(params)
        if metric == "UniversalImageQualityIndex":
            kw = {"kernel_size": [kw["kernel_size"]] * 2, "sigma": [kw["sigma"]] * 2}
        pv, tv = make(p), None if t is None else make(t)
        v, call = reference(metric, kw, pv, tv, False)
        out[label] = {"metric": metric, "params": params, "preds": p, "target": t, "value": v,
                      "call": call}
        if p[0] in ("pattern", "bands"):
            out[label]["data"] = {"preds": pv.tolist(), "target": tv.tolist()}
    return out


def example():
    p = np.load(EXAMPLE / "preds.npy")
    t = np.load(EXAMPLE / "target.npy")
    metrics = [
        ("ms_ssim", MS, {"betas": [0.3, 0.3, 0.4], "data_range": 1.0}),
        ("uqi", "UniversalImageQualityIndex", {}),
        ("ergas", "ErrorRelativeGlobalDimensionlessSynthesis", {}),
        ("rase", "RelativeAverageSpectralError", {}),
        ("scc", "SpatialCorrelationCoefficient", {}),
        ("vif", "VisualInformationFidelity", {"sigma_n_sq": 2.0 / 255**2}),
    ]
    ex = {"config": "configs/examples/image.yaml",
          "inputs": {"preds": rel(EXAMPLE / "preds.npy"), "target": rel(EXAMPLE / "target.npy")},
          "samples": int(p.shape[0]), "results": {}, "calls": {}, "metrics": []}
    for label, metric, params in metrics:
        v, call = reference(metric, params, p, t, False)
        ex["results"][label] = {KEYS[metric]: v}
        ex["calls"][label] = call
        ex["metrics"].append({"label": label, "metric": metric, "params": params})
    return ex


def nan_to_null(x):
    """NaN as null, as the test harness reads it (JSON has no NaN)."""
    if isinstance(x, float) and x != x:
        return None
    if isinstance(x, dict):
        return {k: nan_to_null(v) for k, v in x.items()}
    if isinstance(x, list):
        return [nan_to_null(v) for v in x]
    return x


def main():
    vref = ROOT / ".venv-ref" / "bin" / "python"
    got = subprocess.run([str(vref), __file__, "--data"], check=True, capture_output=True,
                         text=True)
    data_versions = json.loads(got.stdout.strip().splitlines()[-1])
    torch.set_default_dtype(torch.float32)
    cases()
    doc = {
        "generator": "tests/reference/image.py",
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "torchmetrics": torchmetrics.__version__, "numpy": np.__version__,
                     "data (.venv-ref)": data_versions},
        "notes": [
            "preds / target: the files of 'inputs'; torchmetrics gets them as float64 tensors.",
            "States in float64: .set_dtype(torch.float64) (torchmetrics' float states default to "
            "float32).",
            "MultiScaleStructuralSimilarityIndexMeasure with data_range None: one update per "
            "image (torchmetrics takes the range over each update batch, tally per image).",
        ],
        "cases": CASES,
        "doc_examples": doc_examples(),
        "example": example(),
    }
    OUT.write_text(json.dumps(nan_to_null(doc), indent=1, allow_nan=False) + "\n")
    print(f"{len(CASES)} cases -> {rel(OUT)}")


if __name__ == "__main__":
    main()
