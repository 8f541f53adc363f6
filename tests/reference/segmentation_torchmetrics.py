#!/usr/bin/env python3
"""Reference data and expected values for the torchmetrics-named segmentation metrics of
plugins/segmentation: DiceScore, GeneralizedDiceScore and HausdorffDistance.

(a) Writes test data to tests/data/segmentation_torchmetrics/*.npy, deterministically, from two
    photographs bundled with scikit-image 0.26.0 (skimage.data.coins, 303x384, and
    skimage.data.camera, 512x512):
      target = the multi-Otsu classes of the photograph (coins: 3, camera: 4 classes);
      preds  = the same thresholds applied to a blurred, noisy, shifted copy (a segmenter's
               mistakes along the edges, speckles, missed small regions).
    Cut into tiles, so some tiles lack some classes:
      coins_index_*   uint8 [24, 32, 32] class ids (input_format index)
      coins_onehot_*  uint8 [8, 3, 32, 32] one-hot masks (input_format one-hot)
      camera_scores_* float32 [8, 4, 16, 16] per-class scores (argmax = the class) for preds,
                      uint8 one-hot for target
      camera_volume_* uint8 [4, 6, 16, 16] class ids: 3-D volumes of 6 neighbouring slices
      edge cases      a class absent from both maps of an image (Dice NaN), an all-background
                      image with include_background false, one class, a single image
(b) Writes configs/examples/data/segmentation_dice/{preds,target}.npy for
    configs/examples/segmentation_dice.yaml (coins, 40 tiles of 24x24, 3 classes).
(c) Writes tests/reference/expected_segmentation_torchmetrics.json: per case the metric, its
    parameters, inputs, the expected values (torchmetrics 1.9.0 with torch's default dtype
    float64), the exact call and the versions. DiceScore is updated with the whole set (its
    per-image values do not depend on batching); GeneralizedDiceScore with one image per update
    (its replacement of infinite class weights depends on the batch: see
    plugins/segmentation/generalized_dice_score.cpp), and each of its cases also records the
    value from a single update with every image ("whole_batch_value") for comparison.

HausdorffDistance (cases HausdorffDistance_*): tiles of the coins photograph (multi-Otsu classes,
as above) in which every class is in both maps (torchmetrics raises for a class missing from
both maps of an image): hd_square_* uint8 [12, 32, 32] class ids, hd_onehot_* uint8
[4, 3, 32, 32] one-hot masks, hd_wide_* uint8 [6, 24, 40] class ids (not square).
References.
  Square images: torchmetrics 1.9.0 torchmetrics.segmentation.HausdorffDistance(num_classes,
  include_background, distance_metric, spacing, directed, input_format), torch's default dtype
  float64, with its pytorch-engine distance_transform run in float64: torchmetrics writes the
  distances into a float32 tensor (zeros_like of x.float()), which fails under the float64
  default ("Index put requires the source and destination dtypes match") and rounds them to
  float32 otherwise, and casts chessboard/taxicab distances with .float(). The runner's
  distance_transform is torchmetrics' own code with float64 in those three places, nothing else.
  Every case is cross-checked with SciPy 1.16.3 scipy.spatial.distance.directed_hausdorff on the
  edge pixels torchmetrics uses (the mask XOR its binary erosion by the 4-neighbour cross, the
  border outside the image 0: scipy.ndimage.binary_erosion(mask, border_value=0)), coordinates
  scaled by spacing (euclidean cases).
  Images that are not square: torchmetrics 1.9.0 maps the distances of an H x W image back with
  the flat index i * H + j (where i * W + j is meant), so its values are wrong there; the
  expected values of the hd_wide cases are SciPy's directed_hausdorff on the edge pixels
  (euclidean), the mean over images and classes as torchmetrics averages.

torchmetrics runs in .venv-torch (a subprocess of this script). Run from the repository root:

    .venv-ref/bin/python tests/reference/segmentation_torchmetrics.py
"""

import json
import platform
import subprocess
from pathlib import Path

import numpy as np
import scipy
import skimage
from scipy import ndimage
from scipy.spatial.distance import directed_hausdorff
from skimage import data as skdata
from skimage.filters import threshold_multiotsu

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "segmentation_torchmetrics"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "segmentation_dice"
OUT = ROOT / "tests" / "reference" / "expected_segmentation_torchmetrics.json"
TORCH_PY = ROOT / ".venv-torch" / "bin" / "python"

KEYS = {"DiceScore": "dice_score", "GeneralizedDiceScore": "generalized_dice_score"}

TORCH_RUNNER = r"""
import json, sys, warnings
import numpy as np, torch, torchmetrics
from torchmetrics import segmentation
warnings.simplefilter("ignore")
torch.set_default_dtype(torch.float64)
# DiceScore's _safe_divide casts its int64 counts with .float() (float32, whatever the default
# dtype): run it in float64 instead, as tally computes.
import torchmetrics.functional.segmentation.dice as dice_module
_orig_safe_divide = dice_module._safe_divide
def _safe_divide_f64(num, denom, zero_division=0.0):
    return _orig_safe_divide(num if num.is_floating_point() else num.double(),
                             denom if denom.is_floating_point() else denom.double(), zero_division)
dice_module._safe_divide = _safe_divide_f64

def tensor(path):
    a = np.load(path)
    return torch.from_numpy(a.astype(np.float64) if a.dtype.kind == "f" else a.astype(np.int64))

def value(v):
    return [float(x) for x in v.tolist()] if v.ndim else float(v)

out = []
for j in json.load(sys.stdin):
    p, t = tensor(j["inputs"]["preds"]), tensor(j["inputs"]["target"])
    m = getattr(segmentation, j["metric"])(**j["params"])
    if j["per_image"]:
        for i in range(p.shape[0]):
            m.update(p[i:i + 1], t[i:i + 1])
    else:
        m.update(p, t)
    r = {"value": value(m.compute())}
    if j["per_image"]:
        w = getattr(segmentation, j["metric"])(**j["params"])
        w.update(p, t)
        r["whole"] = value(w.compute())
    out.append(r)
print(json.dumps({"version": torchmetrics.__version__, "torch": torch.__version__, "out": out}))
"""


def torchmetrics_run(jobs):
    r = subprocess.run([str(TORCH_PY), "-c", TORCH_RUNNER], input=json.dumps(jobs),
                       capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(r.stdout)


def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(folder, name, array):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


def segment(image, classes, seed):
    """(target, preds) class maps of a photograph: multi-Otsu classes of the image, and of a
    blurred, noisy, one-pixel-shifted copy with the same thresholds."""
    rng = np.random.default_rng(seed)
    thr = threshold_multiotsu(image, classes=classes)
    target = np.digitize(image, thr).astype(np.uint8)
    noisy = ndimage.gaussian_filter(image.astype(np.float64), 1.5)
    noisy = np.roll(noisy, (1, -1), axis=(0, 1)) + rng.normal(0, 12, image.shape)
    preds = np.digitize(noisy, thr).astype(np.uint8)
    return target, preds


def tiles(a, size, picks):
    h, w = a.shape[0] // size, a.shape[1] // size
    t = a[:h * size, :w * size].reshape(h, size, w, size).swapaxes(1, 2).reshape(-1, size, size)
    return t[picks]


def one_hot(ids, k):
    return np.moveaxis(np.eye(k, dtype=np.uint8)[ids], -1, 1)


def datasets():
    coins_t, coins_p = segment(skdata.coins(), 3, 20261130)
    cam_t, cam_p = segment(skdata.camera(), 4, 20261131)
    rng = np.random.default_rng(20261132)
    pick = np.sort(rng.choice(9 * 12, 24, replace=False))
    d = {"coins_index": dict(preds=tiles(coins_p, 32, pick), target=tiles(coins_t, 32, pick),
                             k=3, fmt="index")}
    pick8 = pick[:8]
    d["coins_onehot"] = dict(preds=one_hot(tiles(coins_p, 32, pick8), 3),
                             target=one_hot(tiles(coins_t, 32, pick8), 3), k=3, fmt="one-hot")
    cpick = np.sort(rng.choice(32 * 32, 8, replace=False))
    ct, cp = tiles(cam_t, 16, cpick), tiles(cam_p, 16, cpick)
    scores = rng.random((8, 4, 16, 16)).astype(np.float32) * 0.5
    for c in range(4):
        scores[:, c] += (cp == c) * np.float32(0.6)
    d["camera_scores"] = dict(preds=scores, target=one_hot(ct, 4), k=4, fmt="one-hot")
    # 3-D: 6 neighbouring 16x16 tiles of one column band stacked as slices.
    vol_t = np.stack([np.stack([cam_t[r * 16:(r + 1) * 16, (v * 7 + s) * 16:(v * 7 + s + 1) * 16]
                                for s in range(6)]) for v, r in enumerate([5, 12, 20, 27])])
    vol_p = np.stack([np.stack([cam_p[r * 16:(r + 1) * 16, (v * 7 + s) * 16:(v * 7 + s + 1) * 16]
                                for s in range(6)]) for v, r in enumerate([5, 12, 20, 27])])
    d["camera_volume"] = dict(preds=vol_p, target=vol_t, k=4, fmt="index")
    # Edge cases: image 0 lacks class 2 in both maps (Dice NaN for it), image 1 is all background
    # in both, image 2 has class 2 only in preds, image 3 is perfect.
    e_t = np.zeros((4, 8, 8), dtype=np.uint8)
    e_p = np.zeros((4, 8, 8), dtype=np.uint8)
    e_t[0, 2:6, 2:6] = 1
    e_p[0, 3:7, 2:6] = 1
    e_p[2, 0:3, 0:3] = 2
    e_t[2, 4:8, 4:8] = 1
    e_p[2, 5:8, 4:8] = 1
    e_t[3, :4] = 2
    e_p[3, :4] = 2
    d["edge"] = dict(preds=e_p, target=e_t, k=3, fmt="index")
    d["single"] = dict(preds=e_p[:1], target=e_t[:1], k=3, fmt="index")
    d["one_class"] = dict(preds=np.zeros((2, 4, 4), dtype=np.uint8),
                          target=np.zeros((2, 4, 4), dtype=np.uint8), k=1, fmt="index")
    return d


def dice_variants(name):
    if name == "coins_index":
        return [{"average": a, "include_background": b, "aggregation_level": g}
                for a in ["micro", "macro", "weighted", "none"] for b in [True, False]
                for g in ["samplewise", "global"]]
    if name in ("edge", "single"):
        return [{"average": a, "include_background": b}
                for a in ["micro", "macro", "weighted", "none"] for b in [True, False]]
    if name == "one_class":
        return [{"average": "macro"}, {"average": "none", "include_background": False}]
    return [{"average": a} for a in ["micro", "macro", "weighted", "none"]]


def gdice_variants(name):
    if name == "coins_index":
        return [{"weight_type": w, "per_class": pc, "include_background": b}
                for w in ["square", "simple", "linear"] for pc in [False, True]
                for b in [True, False]]
    if name in ("edge", "single"):
        return [{"weight_type": w, "per_class": pc, "include_background": False}
                for w in ["square", "linear"] for pc in [False, True]]
    return [{"weight_type": "square"}, {"weight_type": "simple", "per_class": True}]


def tag(params):
    return "_".join(f"{k}_{v}".replace("-", "") for k, v in params.items())


def clean(v):
    if isinstance(v, list):
        return [clean(x) for x in v]
    return None if np.isnan(v) else v


# ---- HausdorffDistance ---------------------------------------------------------------------------

HD_RUNNER = r"""
import json, sys, warnings
import numpy as np, torch, torchmetrics
import torchmetrics.functional.segmentation.utils as U
from torchmetrics import segmentation
warnings.simplefilter("ignore")
torch.set_default_dtype(torch.float64)

def distance_transform_f64(x, sampling=None, metric="euclidean", engine="pytorch"):
    # torchmetrics 1.9.0's pytorch engine, in float64 (see the script's docstring).
    if sampling is None:
        sampling = [1, 1]
    x = x.double()
    i0, j0 = torch.where(x == 0)
    i1, j1 = torch.where(x == 1)
    dis_row = (i1.view(-1, 1) - i0.view(1, -1)).abs()
    dis_col = (j1.view(-1, 1) - j0.view(1, -1)).abs()
    h, _ = x.shape
    if metric == "euclidean":
        dis = ((sampling[0] * dis_row) ** 2 + (sampling[1] * dis_col) ** 2).sqrt()
    if metric == "chessboard":
        dis = torch.max(sampling[0] * dis_row, sampling[1] * dis_col).double()
    if metric == "taxicab":
        dis = (sampling[0] * dis_row + sampling[1] * dis_col).double()
    mindis, _ = torch.min(dis, dim=1)
    z = torch.zeros_like(x).view(-1)
    z[i1 * h + j1] = mindis
    return z.view(x.shape)

U.distance_transform = distance_transform_f64

out = []
for j in json.load(sys.stdin):
    a, b = np.load(j["inputs"]["preds"]), np.load(j["inputs"]["target"])
    p = torch.from_numpy(a.astype(np.int64))
    t = torch.from_numpy(b.astype(np.int64))
    m = segmentation.HausdorffDistance(**j["params"])
    m.update(p, t)
    out.append(float(m.compute()))
print(json.dumps({"version": torchmetrics.__version__, "torch": torch.__version__, "out": out}))
"""


def hd_save(name, array):
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / name
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


def hd_tiles(a, h, w):
    nh, nw = a.shape[0] // h, a.shape[1] // w
    return a[:nh * h, :nw * w].reshape(nh, h, nw, w).swapaxes(1, 2).reshape(-1, h, w)


def complete(p, t, k):
    """Indices of tiles in which every class is in both maps."""
    return [i for i in range(len(p)) if all((p[i] == c).any() and (t[i] == c).any()
                                            for c in range(k))]


def edges(mask):
    return mask & ~ndimage.binary_erosion(mask, border_value=0)


def scipy_hd(preds, target, k, include_background, directed, spacing):
    """Mean over images and classes of the Hausdorff distance of the edge pixels (SciPy)."""
    vals = []
    first = 0 if include_background or k == 1 else 1
    s = np.array(spacing or [1.0, 1.0])
    for p, t in zip(preds, target):
        for c in range(first, k):
            ep = np.argwhere(edges(p == c)) * s
            et = np.argwhere(edges(t == c)) * s
            d = directed_hausdorff(ep, et)[0]
            vals.append(d if directed else max(d, directed_hausdorff(et, ep)[0]))
    return float(np.mean(vals)), len(vals)


def hausdorff_cases():
    """HausdorffDistance cases (see the module docstring); returns them with the versions."""
    t_full, p_full = segment(skdata.coins(), 3, 20261140)
    tp, pp = hd_tiles(t_full, 32, 32), hd_tiles(p_full, 32, 32)
    ok = complete(pp, tp, 3)
    rng = np.random.default_rng(20261141)
    pick = np.sort(rng.choice(ok, 12, replace=False))
    sq = {"preds": hd_save("hd_square_preds.npy", pp[pick]),
          "target": hd_save("hd_square_target.npy", tp[pick])}
    oh = {"preds": hd_save("hd_onehot_preds.npy", np.moveaxis(np.eye(3, dtype=np.uint8)[pp[pick[:4]]], -1, 1)),
          "target": hd_save("hd_onehot_target.npy", np.moveaxis(np.eye(3, dtype=np.uint8)[tp[pick[:4]]], -1, 1))}
    tw, pw = hd_tiles(t_full, 24, 40), hd_tiles(p_full, 24, 40)
    okw = complete(pw, tw, 3)
    pickw = np.sort(rng.choice(okw, 6, replace=False))
    wide = {"preds": hd_save("hd_wide_preds.npy", pw[pickw]),
            "target": hd_save("hd_wide_target.npy", tw[pickw])}
    arrays = {"sq": (pp[pick], tp[pick]), "oh": (pp[pick[:4]], tp[pick[:4]]),
              "wide": (pw[pickw], tw[pickw])}

    variants = [
        ("square_euclidean", "sq", sq, {}),
        ("square_euclidean_directed", "sq", sq, {"directed": True}),
        ("square_euclidean_background", "sq", sq, {"include_background": True}),
        ("square_euclidean_spacing", "sq", sq, {"spacing": [0.5, 1.25]}),
        ("square_chessboard", "sq", sq, {"distance_metric": "chessboard"}),
        ("square_chessboard_spacing", "sq", sq, {"distance_metric": "chessboard",
                                                 "spacing": [1.5, 0.75]}),
        ("square_taxicab", "sq", sq, {"distance_metric": "taxicab", "directed": True}),
        ("square_taxicab_spacing", "sq", sq, {"distance_metric": "taxicab", "spacing": [2.0, 3.0]}),
        ("onehot_euclidean", "oh", oh, {"input_format": "one-hot"}),
    ]
    cases, jobs = [], []
    for name, arr, files, extra in variants:
        params = {"num_classes": 3, "input_format": "index", **extra}
        cases.append({"name": f"HausdorffDistance_{name}", "metric": "HausdorffDistance",
                      "params": params, "inputs": files,
                      "call": "torchmetrics.segmentation.HausdorffDistance("
                              + ", ".join(f"{k}={v!r}" for k, v in params.items())
                              + ").update(preds, target); .compute() (distance_transform in "
                                "float64)",
                      "arr": arr})
        jobs.append({"params": params, "inputs": files})
    r = subprocess.run([str(TORCH_PY), "-c", HD_RUNNER], input=json.dumps(jobs),
                       capture_output=True, text=True, check=True, cwd=ROOT)
    res = json.loads(r.stdout)
    for c, v in zip(cases, res["out"]):
        c["expected"] = {"hausdorff_distance": v}
        prm = c["params"]
        p, t = arrays[c.pop("arr")]
        if prm.get("distance_metric", "euclidean") == "euclidean":
            x, _ = scipy_hd(p, t, 3, prm.get("include_background", False),
                            prm.get("directed", False), prm.get("spacing"))
            c["cross_check"] = {"value": x, "relative_difference": abs(x - v) / v,
                                "call": "mean over images and classes of "
                                        "scipy.spatial.distance.directed_hausdorff(edges_a, "
                                        "edges_b)[0] (max of both directions unless directed)"}
            assert c["cross_check"]["relative_difference"] < 1e-12, (c["name"], v, x)
    for directed in [False, True]:
        x, n = scipy_hd(*arrays["wide"], 3, False, directed, None)
        params = {"num_classes": 3, "input_format": "index", "directed": directed}
        cases.append({"name": f"HausdorffDistance_wide_euclidean{'_directed' if directed else ''}",
                      "metric": "HausdorffDistance", "params": params, "inputs": wide,
                      "call": "mean over the 6 images and classes 1, 2 of "
                              "scipy.spatial.distance.directed_hausdorff(edges_preds, "
                              "edges_target)[0]" + ("" if directed else
                                                    " and of the reverse direction, their max")
                              + " (torchmetrics 1.9.0 is wrong on images that are not square)",
                      "expected": {"hausdorff_distance": x}})
    return cases, res["version"], res["torch"]


def main():
    cases, jobs = [], []
    for name, dset in datasets().items():
        files = {"preds": save(DATA, f"{name}_preds.npy", dset["preds"]),
                 "target": save(DATA, f"{name}_target.npy", dset["target"])}
        for metric, variants in [("DiceScore", dice_variants(name)),
                                 ("GeneralizedDiceScore", gdice_variants(name))]:
            for v in variants:
                p = {"num_classes": dset["k"], **v, "input_format": dset["fmt"]}
                per_image = metric == "GeneralizedDiceScore"
                call = (("with torchmetrics.functional.segmentation.dice._safe_divide on float64 "
                         "counts: " if metric == "DiceScore" else "")
                        + f"torchmetrics.segmentation.{metric}("
                        + ", ".join(f"{k}={x!r}" for k, x in p.items()) + ")"
                        + (".update(preds[i:i+1], target[i:i+1]) for each image i"
                           if per_image else ".update(preds, target)") + "; .compute()")
                cases.append({"name": f"{metric}_{name}_{tag(v)}", "metric": metric,
                              "params": p, "inputs": files, "call": call})
                jobs.append({"metric": metric, "params": p, "inputs": files,
                             "per_image": per_image})

    # The example config's data: coins, 40 tiles of 24x24.
    ex_t, ex_p = segment(skdata.coins(), 3, 20261133)
    pick = np.sort(np.random.default_rng(20261134).choice(12 * 16, 40, replace=False))
    ex_files = {"preds": save(EXAMPLE, "preds.npy", tiles(ex_p, 24, pick)),
                "target": save(EXAMPLE, "target.npy", tiles(ex_t, 24, pick))}
    ex_metrics = [
        {"label": "dice_macro", "metric": "DiceScore",
         "params": {"num_classes": 3, "input_format": "index"}},
        {"label": "dice_per_class", "metric": "DiceScore",
         "params": {"num_classes": 3, "average": "none", "input_format": "index"}},
        {"label": "dice_fg_global", "metric": "DiceScore",
         "params": {"num_classes": 3, "include_background": False, "average": "micro",
                    "aggregation_level": "global", "input_format": "index"}},
        {"label": "generalized_dice", "metric": "GeneralizedDiceScore",
         "params": {"num_classes": 3, "input_format": "index"}},
    ]
    for m in ex_metrics:
        jobs.append({"metric": m["metric"], "params": m["params"], "inputs": ex_files,
                     "per_image": m["metric"] == "GeneralizedDiceScore"})

    res = torchmetrics_run(jobs)
    out = res["out"]
    hd_cases, _, _ = hausdorff_cases()
    for c, r in zip(cases, out):
        c["expected"] = {KEYS[c["metric"]]: clean(r["value"])}
        if "whole" in r:
            c["whole_batch_value"] = clean(r["whole"])
    ex_out = out[len(cases):]
    example = {
        "config": "configs/examples/segmentation_dice.yaml",
        "inputs": ex_files,
        "samples": len(pick),
        "results": {m["label"]: {KEYS[m["metric"]]: clean(r["value"])}
                    for m, r in zip(ex_metrics, ex_out)},
        "calls": {m["label"]: ("(_safe_divide on float64 counts) " if m["metric"] == "DiceScore"
                               else "") + f"torchmetrics.segmentation.{m['metric']}("
                              + ", ".join(f"{k}={x!r}" for k, x in m["params"].items()) + ")"
                              + (" updated one image at a time"
                                 if m["metric"] == "GeneralizedDiceScore" else "")
                  for m in ex_metrics},
        "metrics": ex_metrics,
    }
    doc = {
        "generator": "tests/reference/segmentation_torchmetrics.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "scipy": scipy.__version__, "scikit-image": skimage.__version__,
                     "torchmetrics": res["version"], "torch": res["torch"]},
        "notes": ["torchmetrics runs with torch.set_default_dtype(torch.float64); integer inputs "
                  "as int64 tensors, float inputs as float64.",
                  "null: NaN.",
                  "whole_batch_value: GeneralizedDiceScore updated once with every image; it "
                  "differs from the one-image-an-update value where a class is missing from an "
                  "image's target (torchmetrics' batch-dependent weight replacement)."],
        "cases": cases + hd_cases,
        "example": example,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {rel(OUT)}: {len(cases) + len(hd_cases)} cases")
    for c in cases + hd_cases:
        print(f"  {c['name']}: {c['expected']}"
              + (f" whole={c['whole_batch_value']}" if "whole_batch_value" in c else ""))
    print("example:", example["results"])


if __name__ == "__main__":
    main()
