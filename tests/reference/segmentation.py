#!/usr/bin/env python3
"""Reference data and expected values for the segmentation plugin (MeanIoU).

(a) Writes small label-map datasets to tests/data/segmentation/*.npy, deterministically (fixed
    seeds): blobby maps as segmentation masks are, ignored pixels (whose predictions hold
    out-of-range values, which must not matter), a class absent from the ground truth (NaN
    accuracy and recall), a class never predicted (NaN precision), several integer dtypes, other
    ignore_index values, reduce_zero_label, a ragged dataset of varying sizes (stored flat, with a
    shapes file), more than 256 classes, and all pixels ignored (every value NaN).
(b) Writes the example data configs/examples/data/segmentation/{gt,pred}/*.png from
    scikit-image's sample photographs (see configs/examples/data/README.md).
(c) Writes tests/reference/expected_segmentation.json: for every case the parameters, the input
    files, the values computed with mmeval 0.2.1's MeanIoU and the exact call; NaN is written as
    null. The section "example" holds the expected results of configs/examples/segmentation.yaml.

Run in the reference environment (tests/reference/requirements.txt):

    .venv-ref/bin/python tests/reference/segmentation.py

Notes on the calls:
  - The label maps are cast to int64 before mmeval sees them: mmeval computes
    `num_classes * label + prediction` in the maps' own dtype, which wraps around for uint8 and
    uint16 maps under NumPy 2's promotion rules (a bug of the reference, not a definition).
  - reduce_zero_label is not an mmeval option. It is MMSegmentation's transform of the ground
    truth (mmseg 0.x mmseg.core.evaluation.metrics.intersect_and_union; mmseg 1.x
    LoadAnnotations), applied here in NumPy exactly as mmseg writes it, before mmeval.
"""

import json
import platform
import warnings
from pathlib import Path

import mmeval
import numpy as np
import PIL
import skimage
from mmeval.metrics import MeanIoU
from PIL import Image
from skimage import data as skdata
from skimage.color import rgb2gray
from skimage.filters import gaussian, threshold_multiotsu
from skimage.segmentation import find_boundaries
from skimage.transform import downscale_local_mean

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "segmentation"
OUT = ROOT / "tests" / "reference" / "expected_segmentation.json"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "segmentation"

# mmeval divides 0 by 0 for classes without pixels, on purpose (NaN, then nanmean).
warnings.filterwarnings("ignore", category=RuntimeWarning)


def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(name, array):
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / name
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


def blobs(rng, n, h, w, classes, cell):
    """n label maps of blocks of `cell` pixels with random classes, lightly smoothed edges."""
    gh, gw = -(-h // cell), -(-w // cell)
    coarse = rng.choice(np.asarray(classes), size=(n, gh, gw))
    maps = np.repeat(np.repeat(coarse, cell, axis=1), cell, axis=2)[:, :h, :w]
    # Shift every other row of blocks by a few pixels so boundaries are not all on the grid.
    for i in range(n):
        for r in range(0, h, 2 * cell):
            maps[i, r:r + cell] = np.roll(maps[i, r:r + cell], rng.integers(0, cell), axis=1)
    return maps


def corrupt(rng, gt, frac, classes):
    """A prediction: the ground truth with a fraction of pixels replaced by random classes."""
    pred = gt.copy()
    flip = rng.random(gt.shape) < frac
    pred[flip] = rng.choice(np.asarray(classes), size=int(flip.sum()))
    return pred


# ---- (a) datasets ------------------------------------------------------------------------------

def dataset_a():
    """N=13, 24x32, K=6. gt classes 0..4 (class 5 never in the ground truth) and 255 (ignored,
    about 6 %); predictions never say 4, sometimes say 5, and hold 200 or 255 on ignored pixels."""
    rng = np.random.default_rng(601)
    gt = blobs(rng, 13, 24, 32, [0, 1, 2, 3, 4], 6)
    pred = corrupt(rng, gt, 0.25, [0, 1, 2, 3, 5])
    pred[pred == 4] = np.where(rng.random(int((pred == 4).sum())) < 0.5, 1, 3)
    ign = rng.random(gt.shape) < 0.06
    gt[ign] = 255
    pred[ign] = np.where(rng.random(int(ign.sum())) < 0.5, 200, 255)
    assert not np.any(gt == 5) and not np.any(pred == 4) and np.any(pred == 5)
    return pred.astype(np.uint8), gt.astype(np.uint8)


def dataset_b():
    """N=8, 11x9, K=3, ignore_index -1: int64 ground truth with -1 pixels, int32 predictions."""
    rng = np.random.default_rng(602)
    gt = blobs(rng, 8, 11, 9, [0, 1, 2], 3)
    pred = corrupt(rng, gt, 0.3, [0, 1, 2])
    ign = rng.random(gt.shape) < 0.1
    gt[ign] = -1
    pred[ign] = -7  # never counted
    return pred.astype(np.int32), gt.astype(np.int64)


def dataset_c():
    """N=7, 16x16, K=5, ignore_index 0: class 0 is 'unlabelled'."""
    rng = np.random.default_rng(603)
    gt = blobs(rng, 7, 16, 16, [0, 1, 2, 3, 4], 4)
    pred = corrupt(rng, gt, 0.2, [1, 2, 3, 4])
    return pred.astype(np.uint8), gt.astype(np.uint8)


def dataset_d():
    """N=10, 20x20, reduce_zero_label with K=7: gt 0 (ignored), 1..7 (classes 0..6), 255."""
    rng = np.random.default_rng(604)
    gt = blobs(rng, 10, 20, 20, [0, 1, 2, 3, 4, 5, 6, 7], 5)
    gt[rng.random(gt.shape) < 0.05] = 255
    pred = np.clip(corrupt(rng, np.where((gt == 0) | (gt == 255), 1, gt), 0.2,
                           [1, 2, 3, 4, 5, 6, 7]) - 1, 0, 6)
    return pred.astype(np.uint8), gt.astype(np.uint8)


def dataset_e():
    """N=9 maps of different sizes (ragged), K=5: uint8 ground truth with 255, int64 predictions."""
    rng = np.random.default_rng(605)
    preds, gts = [], []
    for _ in range(9):
        h, w = int(rng.integers(3, 40)), int(rng.integers(3, 40))
        gt = blobs(rng, 1, h, w, [0, 1, 2, 3, 4], 4)[0]
        pred = corrupt(rng, gt, 0.3, [0, 1, 2, 3, 4])
        gt[rng.random(gt.shape) < 0.05] = 255
        preds.append(pred.astype(np.int64))
        gts.append(gt.astype(np.uint8))
    return preds, gts


def dataset_f():
    """N=8, 16x16, K=300 (more than 256 classes): uint16 ground truth, int32 predictions."""
    rng = np.random.default_rng(606)
    gt = blobs(rng, 8, 16, 16, list(range(0, 300, 7)), 4)
    pred = corrupt(rng, gt, 0.3, list(range(300)))
    gt[rng.random(gt.shape) < 0.05] = 255  # 255 < 300, but it is ignore_index
    return pred.astype(np.int32), gt.astype(np.uint16)


def dataset_g():
    """N=3, 4x5: every ground-truth pixel is 255, so every value is NaN (0/0)."""
    rng = np.random.default_rng(607)
    return rng.integers(0, 4, size=(3, 4, 5)).astype(np.uint8), np.full((3, 4, 5), 255, np.uint8)


# ---- (b) the example data ----------------------------------------------------------------------

EXAMPLE_K = 5

# (name, scikit-image loader, downscale factor, how the ground truth is stored)
EXAMPLE_IMAGES = [
    ("astronaut", skdata.astronaut, 4, "L"),
    ("camera", skdata.camera, 4, "L"),
    ("chelsea", skdata.chelsea, 2, "L"),
    ("coffee", skdata.coffee, 3, "I;16"),
    ("coins", skdata.coins, 2, "L"),
    ("immunohistochemistry", skdata.immunohistochemistry, 4, "L"),
    ("clock", skdata.clock, 2, "L"),
    ("rocket", skdata.rocket, 4, "L"),
]

# A VOC-like palette for the prediction PNGs (colour i for class i, 255 white).
PALETTE = [0, 0, 0, 128, 0, 0, 0, 128, 0, 128, 128, 0, 0, 0, 128] + [0, 0, 0] * 250 + [255] * 3


def example_maps(load, factor):
    img = load()
    gray = rgb2gray(img) if img.ndim == 3 else img.astype(np.float64) / 255.0
    gray = downscale_local_mean(gray, (factor, factor))
    # Ground truth: 5 intensity classes of the smoothed photo (multi-Otsu), their boundaries
    # ignored as VOC ignores object boundaries.
    smooth = gaussian(gray, sigma=2)
    gt = np.digitize(smooth, threshold_multiotsu(smooth, classes=EXAMPLE_K)).astype(np.uint8)
    gt[find_boundaries(gt, mode="inner")] = 255
    # Prediction: another segmentation, of the barely smoothed photo with the raw image's
    # thresholds: noisier, and shifted where the thresholds differ.
    rough = gaussian(gray, sigma=0.7)
    pred = np.digitize(rough, threshold_multiotsu(gray, classes=EXAMPLE_K)).astype(np.uint8)
    return pred, gt


def write_example():
    (EXAMPLE / "gt").mkdir(parents=True, exist_ok=True)
    (EXAMPLE / "pred").mkdir(parents=True, exist_ok=True)
    for old in list((EXAMPLE / "gt").glob("*.png")) + list((EXAMPLE / "pred").glob("*.png")):
        old.unlink()
    for i, (name, load, factor, gt_mode) in enumerate(EXAMPLE_IMAGES):
        pred, gt = example_maps(load, factor)
        if gt_mode == "I;16":
            Image.fromarray(gt.astype(np.uint16)).save(EXAMPLE / "gt" / f"{name}.png")
        else:
            Image.fromarray(gt, mode="L").save(EXAMPLE / "gt" / f"{name}.png")
        p = Image.fromarray(pred, mode="P")
        p.putpalette(PALETTE)
        # Two of the predictions as 4-bit palette PNGs (as PNG optimisers store few-colour maps).
        p.save(EXAMPLE / "pred" / f"{name}.png", **({"bits": 4} if i % 4 == 1 else {}))


def read_example():
    """The example maps as the png_masks reader serves them: sorted names, palette indices."""
    names = sorted(p.name for p in (EXAMPLE / "gt").glob("*.png"))
    assert names == sorted(p.name for p in (EXAMPLE / "pred").glob("*.png"))
    preds = [np.array(Image.open(EXAMPLE / "pred" / n)) for n in names]
    gts = [np.array(Image.open(EXAMPLE / "gt" / n)) for n in names]
    for n, p, g in zip(names, preds, gts):
        assert p.shape == g.shape and p.ndim == 2, n
    return names, preds, gts


# ---- (c) expected values -----------------------------------------------------------------------

def reduce_zero_label(gt):
    """MMSegmentation's reduce_zero_label, as written in mmseg (on the int64 copy)."""
    gt = gt.copy()
    gt[gt == 0] = 255
    gt = gt - 1
    gt[gt == 254] = 255
    return gt


def mmeval_mean_iou(preds, gts, params):
    kwargs = {k: v for k, v in params.items() if k != "reduce_zero_label"}
    metric = MeanIoU(**kwargs)
    preds = [np.asarray(p).astype(np.int64) for p in preds]
    gts = [np.asarray(g).astype(np.int64) for g in gts]
    if params.get("reduce_zero_label"):
        gts = [reduce_zero_label(g) for g in gts]
    metric.add(preds, gts)
    return metric.compute()


def call_text(params):
    kwargs = ", ".join(f"{k}={v!r}" for k, v in params.items() if k != "reduce_zero_label")
    pre = ("gts = [mmseg reduce_zero_label(g) for g in gts]; "
           if params.get("reduce_zero_label") else "")
    return (pre + f"m = mmeval.metrics.MeanIoU({kwargs}); "
            "m.add([p.astype(np.int64) for p in preds], [g.astype(np.int64) for g in gts]); "
            "m.compute()")


def to_json_value(v):
    if isinstance(v, dict):
        return {k: to_json_value(x) for k, x in v.items()}
    if isinstance(v, np.ndarray):
        return [to_json_value(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [to_json_value(x) for x in v]
    if isinstance(v, (np.integer, int)) and not isinstance(v, bool):
        return float(v)
    x = float(v)
    return None if np.isnan(x) else x


def case(name, params, inputs, preds, gts):
    return {
        "name": name,
        "metric": "MeanIoU",
        "params": params,
        "inputs": inputs,
        "expected": to_json_value(mmeval_mean_iou(preds, gts, params)),
        "call": call_text(params),
    }


def main():
    cases = []

    # mmeval's docstring example, inline.
    doc_pred = np.asarray([[[0, 2, 1], [1, 3, 2]]])
    doc_gt = np.asarray([[[0, 1, 1], [2, 3, 2]]])
    cases.append(case("docstring", {"num_classes": 4},
                      {"pred_sem_seg": {"inline": doc_pred.tolist(), "dtype": "i64"},
                       "gt_sem_seg": {"inline": doc_gt.tolist(), "dtype": "i64"}},
                      doc_pred, doc_gt))

    pa, ga = dataset_a()
    a_files = {
        "u8": (save("a_pred_u8.npy", pa), save("a_gt_u8.npy", ga)),
        "i64": (save("a_pred_i64.npy", pa.astype(np.int64)), save("a_gt_i64.npy", ga.astype(np.int64))),
        "mixed": (save("a_pred_i32.npy", pa.astype(np.int32)), save("a_gt_u16.npy", ga.astype(np.uint16))),
    }
    for tag, (pf, gf) in a_files.items():
        cases.append(case(f"a_{tag}_default", {"num_classes": 6},
                          {"pred_sem_seg": pf, "gt_sem_seg": gf}, pa, ga))
    a_in = {"pred_sem_seg": a_files["u8"][0], "gt_sem_seg": a_files["u8"][1]}
    for name, params in [
        ("a_classwise", {"num_classes": 6, "classwise_results": True}),
        ("a_nan_to_num_0", {"num_classes": 6, "nan_to_num": 0, "classwise_results": True}),
        ("a_nan_to_num_minus1", {"num_classes": 6, "nan_to_num": -1}),
        ("a_beta_2", {"num_classes": 6, "beta": 2, "classwise_results": True}),
        ("a_beta_0_5", {"num_classes": 6, "beta": 0.5}),
        ("a_all_options", {"num_classes": 6, "ignore_index": 255, "nan_to_num": 1, "beta": 3,
                           "classwise_results": True}),
        ("a_more_classes", {"num_classes": 9, "classwise_results": True}),
    ]:
        cases.append(case(name, params, a_in, pa, ga))

    pb, gb = dataset_b()
    cases.append(case("b_ignore_minus1", {"num_classes": 3, "ignore_index": -1, "classwise_results": True},
                      {"pred_sem_seg": save("b_pred_i32.npy", pb), "gt_sem_seg": save("b_gt_i64.npy", gb)},
                      pb, gb))

    pc, gc = dataset_c()
    cases.append(case("c_ignore_0", {"num_classes": 5, "ignore_index": 0, "classwise_results": True},
                      {"pred_sem_seg": save("c_pred_u8.npy", pc), "gt_sem_seg": save("c_gt_u8.npy", gc)},
                      pc, gc))

    pd, gd = dataset_d()
    d_in = {"pred_sem_seg": save("d_pred_u8.npy", pd), "gt_sem_seg": save("d_gt_u8.npy", gd)}
    cases.append(case("d_reduce_zero_label", {"num_classes": 7, "reduce_zero_label": True,
                                              "classwise_results": True}, d_in, pd, gd))

    pe, ge = dataset_e()
    e_in = {
        "pred_sem_seg": {"flat": save("e_pred_flat_i64.npy", np.concatenate([p.ravel() for p in pe])),
                         "shapes": save("e_shapes.npy", np.asarray([p.shape for p in pe], np.int64))},
        "gt_sem_seg": {"flat": save("e_gt_flat_u8.npy", np.concatenate([g.ravel() for g in ge])),
                       "shapes": save("e_shapes.npy", np.asarray([g.shape for g in ge], np.int64))},
    }
    cases.append(case("e_ragged", {"num_classes": 5, "classwise_results": True}, e_in, pe, ge))
    cases.append(case("e_ragged_beta_nan", {"num_classes": 7, "beta": 0.25, "nan_to_num": 0}, e_in, pe, ge))

    pf_, gf_ = dataset_f()
    cases.append(case("f_300_classes", {"num_classes": 300, "classwise_results": True},
                      {"pred_sem_seg": save("f_pred_i32.npy", pf_), "gt_sem_seg": save("f_gt_u16.npy", gf_)},
                      pf_, gf_))
    cases.append(case("f_300_classes_nan_to_num", {"num_classes": 300, "nan_to_num": 0},
                      {"pred_sem_seg": rel(DATA / "f_pred_i32.npy"), "gt_sem_seg": rel(DATA / "f_gt_u16.npy")},
                      pf_, gf_))

    pg, gg = dataset_g()
    cases.append(case("g_all_ignored", {"num_classes": 4, "classwise_results": True},
                      {"pred_sem_seg": save("g_pred_u8.npy", pg), "gt_sem_seg": save("g_gt_u8.npy", gg)},
                      pg, gg))

    write_example()
    names, preds, gts = read_example()
    example_metrics = [
        {"label": "MeanIoU", "params": {"num_classes": EXAMPLE_K}},
        {"label": "miou_classwise", "params": {"num_classes": EXAMPLE_K, "classwise_results": True,
                                               "beta": 2}},
    ]
    example = {
        "config": "configs/examples/segmentation.yaml",
        "pred_dir": rel(EXAMPLE / "pred"),
        "gt_dir": rel(EXAMPLE / "gt"),
        "files": names,
        "shapes": [list(g.shape) for g in gts],
        "pixels": int(sum(g.size for g in gts)),
        "metrics": [dict(m, metric="MeanIoU", call=call_text(m["params"])) for m in example_metrics],
        "results": {m["label"]: to_json_value(mmeval_mean_iou(preds, gts, m["params"]))
                    for m in example_metrics},
        "read_with": "numpy.array(PIL.Image.open(path)) (palette PNGs: the indices), sorted names",
    }

    out = {
        "generator": rel(Path(__file__)),
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "mmeval": mmeval.__version__, "scikit-image": skimage.__version__,
                     "pillow": PIL.__version__},
        "notes": [
            "preds/gts: the per-sample label maps of the case's inputs, in dataset order "
            "(a dense [N, H, W] file: its N maps; ragged: 'flat' cut by 'shapes').",
            "Values are fractions in [0, 1], as mmeval returns them; null is NaN (a 0/0 class).",
            "reduce_zero_label is mmseg's transform of the ground truth: g[g == 0] = 255; "
            "g = g - 1; g[g == 254] = 255 (mmseg 0.x intersect_and_union), then mmeval.",
        ],
        "cases": cases,
        "example": example,
    }
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {rel(OUT)}: {len(cases)} cases; example {len(names)} maps, {example['pixels']} pixels")


if __name__ == "__main__":
    main()
