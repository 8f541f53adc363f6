#!/usr/bin/env python3
"""Reference data and expected values for the keypoints plugin (plugins/keypoints).

(a) Writes small synthetic pose datasets (fixed seeds) to tests/data/keypoints/*.npy: visible and
    invisible keypoints, a keypoint never visible, zero and negative normalisers, float64,
    float32 and mixed-precision coordinates, 2-D and 3-D coordinates.
(b) Writes configs/examples/data/keypoints/*.npy, the data of configs/examples/keypoints.yaml
    (synthetic too: no pose data set ships with the reference environment; see the README there).
(c) Writes tests/reference/expected_keypoints.json: for every case the metric, its parameters,
    its input files, the values mmeval 0.2.1 returns and the exact call that produced them.

Every value comes from mmeval itself, fed the same arrays one instance at a time, as mmeval's
add() takes them: predictions[i] = {'coords': pred[i:i+1]}, groundtruths[i] = {'coords':
gt[i:i+1], 'mask': mask[i:i+1], '<size field>': size[i:i+1], ...}.

    .venv-ref/bin/python tests/reference/keypoints.py
"""

import json
import logging
import platform
from pathlib import Path

import mmeval
import numpy as np
from mmeval import (JhmdbPCKAccuracy, KeypointAUC, KeypointEndPointError, KeypointNME,
                    MpiiPCKAccuracy, PCKAccuracy)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "keypoints"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "keypoints"
OUT = ROOT / "tests" / "reference" / "expected_keypoints.json"

logging.getLogger().setLevel(logging.WARNING)


def rel(path):
    return str(Path(path).relative_to(ROOT))


def save(folder, name, array):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.npy"
    np.save(path, np.ascontiguousarray(array), allow_pickle=False)
    return rel(path)


def to_json_value(v):
    """mmeval's values are numpy scalars, 0-d arrays, Python ints (0 when nothing is valid) or
    numpy.ma.masked; tally returns floats, NaN for masked."""
    if v is np.ma.masked:
        return None
    f = float(v)
    return None if np.isnan(f) else f


def run_mmeval(metric, arrays, size_fields):
    """Feeds mmeval's metric one instance at a time and returns its results."""
    n = arrays["pred_coords"].shape[0]
    preds = [{"coords": arrays["pred_coords"][i:i + 1]} for i in range(n)]
    gts = []
    for i in range(n):
        g = {"coords": arrays["gt_coords"][i:i + 1], "mask": arrays["mask"][i:i + 1]}
        for f in size_fields:
            g[f] = arrays[f][i:i + 1]
        gts.append(g)
    out = metric(preds, gts)
    return {k: to_json_value(v) for k, v in out.items()}


# ---- (a) datasets -----------------------------------------------------------------------------

def pose_dataset(seed, n, k, d=2, never_visible=None):
    """gt uniform in a 256-pixel image, pred = gt + Gaussian noise of a per-instance scale
    (1 to 40 pixels) with a few gross errors; about 80 % of keypoints visible."""
    rng = np.random.default_rng(seed)
    gt = rng.uniform(0, 256, size=(n, k, d))
    scale = rng.uniform(1, 40, size=(n, 1, 1))
    pred = gt + rng.normal(0, 1, size=(n, k, d)) * scale
    gross = rng.random((n, k)) < 0.05
    pred[gross] += rng.uniform(-120, 120, size=(int(gross.sum()), d))
    mask = rng.random((n, k)) < 0.8
    if never_visible is not None:
        mask[:, never_visible] = False
    sizes = {
        "bbox_size": rng.uniform(60, 220, size=(n, d)),
        "head_size": rng.uniform(15, 45, size=(n, d)),
        "torso_size": rng.uniform(40, 110, size=(n, d)),
    }
    # Zero normalisers mask an instance out; negative ones become 1e6 (mmeval's calc_distances).
    sizes["bbox_size"][3, 0] = 0.0
    sizes["bbox_size"][7] = [-50.0] + [100.0] * (d - 1)
    sizes["head_size"][5] = 0.0
    sizes["torso_size"][9, d - 1] = 0.0
    sizes["torso_size"][2, 0] = -1.0
    return {"pred_coords": pred, "gt_coords": gt, "mask": mask, **sizes}


def cast(arrays, coord_dtype, size_dtype, pred_dtype=None):
    out = dict(arrays)
    out["pred_coords"] = arrays["pred_coords"].astype(pred_dtype or coord_dtype)
    out["gt_coords"] = arrays["gt_coords"].astype(coord_dtype)
    for f in ("bbox_size", "head_size", "torso_size", "box_size"):
        if f in arrays:
            out[f] = arrays[f].astype(size_dtype)
    return out


def face_dataset(seed, n, k, dtype):
    """Face landmarks: gt around a face of 60..160 pixels, pred with 1..6 pixel noise; box_size
    [N, 1] (one zero box); one instance whose two eye corners (36, 45) coincide."""
    rng = np.random.default_rng(seed)
    centre = rng.uniform(80, 180, size=(n, 1, 2))
    size = rng.uniform(60, 160, size=(n, 1, 1))
    gt = centre + rng.uniform(-0.5, 0.5, size=(n, k, 2)) * size
    pred = gt + rng.normal(0, 1, size=(n, k, 2)) * rng.uniform(1, 6, size=(n, 1, 1))
    mask = rng.random((n, k)) < 0.9
    if k > 45:
        gt[4, 45] = gt[4, 36]
    box = size[:, :, 0].copy()
    box[2, 0] = 0.0
    return {"pred_coords": pred.astype(dtype), "gt_coords": gt.astype(dtype), "mask": mask,
            "box_size": box.astype(dtype)}


def save_dataset(prefix, arrays):
    return {f: save(DATA, f"{prefix}_{f}", a) for f, a in arrays.items()}


# ---- (b) example data -------------------------------------------------------------------------

# A 16-keypoint stick figure (MPII order: 0 r-ankle, 1 r-knee, 2 r-hip, 3 l-hip, 4 l-knee,
# 5 l-ankle, 6 pelvis, 7 thorax, 8 neck, 9 head top, 10 r-wrist, 11 r-elbow, 12 r-shoulder,
# 13 l-shoulder, 14 l-elbow, 15 l-wrist), in units of the person's height, y down.
TEMPLATE = np.array([
    [-0.10, 0.98], [-0.09, 0.75], [-0.08, 0.52], [0.08, 0.52], [0.09, 0.75], [0.10, 0.98],
    [0.00, 0.52], [0.00, 0.25], [0.00, 0.18], [0.00, 0.02], [-0.22, 0.50], [-0.20, 0.36],
    [-0.14, 0.22], [0.14, 0.22], [0.20, 0.36], [0.22, 0.50]])


def example_dataset():
    """300 people: the template scaled to 80..300 pixels, rotated by up to 20 degrees, limbs
    jittered, placed in a 640x480 image; a model's predictions = truth + noise that grows for
    the wrists and ankles, with 4 % gross errors; 10 % of keypoints invisible."""
    rng = np.random.default_rng(2024)
    n, k = 300, 16
    height = rng.uniform(80, 300, size=n)
    angle = np.deg2rad(rng.uniform(-20, 20, size=n))
    rot = np.stack([np.stack([np.cos(angle), -np.sin(angle)], -1),
                    np.stack([np.sin(angle), np.cos(angle)], -1)], -2)  # [n, 2, 2]
    shape = TEMPLATE[None] + rng.normal(0, 0.03, size=(n, k, 2))
    gt = np.einsum("nij,nkj->nki", rot, shape) * height[:, None, None]
    gt += rng.uniform([100, 60], [540, 420], size=(n, 1, 2))
    hard = np.isin(np.arange(k), [0, 5, 10, 15])
    noise = rng.normal(0, 1, size=(n, k, 2)) * (0.02 + 0.03 * hard)[None, :, None]
    pred = gt + noise * height[:, None, None]
    gross = rng.random((n, k)) < 0.04
    pred[gross] += rng.uniform(-0.3, 0.3, size=(int(gross.sum()), 2)) * height[:, None].repeat(
        k, 1)[gross][:, None]
    mask = rng.random((n, k)) >= 0.10
    bbox = gt.max(axis=1) - gt.min(axis=1)
    head = np.linalg.norm(gt[:, 9] - gt[:, 8], axis=1, keepdims=True).repeat(2, 1) * 1.6
    torso = np.linalg.norm(gt[:, 12] - gt[:, 3], axis=1, keepdims=True).repeat(2, 1)
    return {"pred_coords": pred.astype(np.float32), "gt_coords": gt.astype(np.float32),
            "mask": mask, "bbox_size": bbox.astype(np.float32),
            "head_size": head.astype(np.float32), "torso_size": torso.astype(np.float32)}


MPII_KEYPOINTS = ["right_ankle", "right_knee", "right_hip", "left_hip", "left_knee", "left_ankle",
                  "pelvis", "thorax", "upper_neck", "head_top", "right_wrist", "right_elbow",
                  "right_shoulder", "left_shoulder", "left_elbow", "left_wrist"]

EXAMPLE_METRICS = [
    # label, tally type, tally params, mmeval metric, size fields
    ("PCKAccuracy", "PCKAccuracy", {"thr": 0.2, "norm_item": ["bbox", "torso"]},
     lambda: PCKAccuracy(thr=0.2, norm_item=["bbox", "torso"]), ["bbox_size", "torso_size"]),
    ("MpiiPCKAccuracy", "MpiiPCKAccuracy", {}, lambda: MpiiPCKAccuracy(), ["head_size"]),
    ("KeypointAUC", "KeypointAUC", {"norm_factor": 30.0, "num_thrs": 20},
     lambda: KeypointAUC(norm_factor=30, num_thrs=20), []),
    ("KeypointEndPointError", "KeypointEndPointError", {}, lambda: KeypointEndPointError(), []),
    # JHMDB's summary indexes keypoints 2..14 in JHMDB's order; on these MPII-ordered keypoints
    # the group names (Head = keypoint 2, ...) do not name the joints, PCK@0.2 / Mean do.
    ("JhmdbPCKAccuracy", "JhmdbPCKAccuracy", {"thr": 0.2, "norm_item": ["bbox", "torso"]},
     lambda: JhmdbPCKAccuracy(thr=0.2, norm_item=["bbox", "torso"]),
     ["bbox_size", "torso_size"]),
    # NME normalised by the right-shoulder-to-left-hip distance (keypoints 12 and 3: the torso
    # diagonal, torso_size's definition); mmeval needs dataset_meta to accept the indices.
    ("KeypointNME", "KeypointNME", {"norm_mode": "keypoint_distance", "keypoint_indices": [12, 3]},
     lambda: KeypointNME(norm_mode="keypoint_distance", keypoint_indices=[12, 3],
                         dataset_meta={"dataset_name": "mpii",
                                       "keypoint_id2name": dict(enumerate(MPII_KEYPOINTS))}),
     []),
]


# ---- (c) cases --------------------------------------------------------------------------------

def call_text(ctor, size_fields):
    sizes = "".join(f", '{f}': {f}[i:i+1]" for f in size_fields)
    return (f"mmeval.{ctor}(predictions, groundtruths) with predictions[i] = {{'coords': "
            f"pred_coords[i:i+1]}}, groundtruths[i] = {{'coords': gt_coords[i:i+1], 'mask': "
            f"mask[i:i+1]{sizes}}}")


def main():
    cases = []

    def case(name, metric, params, files, arrays, ctor_text, make, size_fields, note=None):
        expected = run_mmeval(make(), arrays, size_fields)
        c = {"name": name, "metric": metric, "params": params, "inputs": files,
             "expected": expected, "call": call_text(ctor_text, size_fields)}
        if note:
            c["note"] = note
        cases.append(c)

    # Dataset A: 40 instances of 17 keypoints, keypoint 4 never visible.
    a64 = pose_dataset(17, 40, 17, never_visible=4)
    a32 = cast(a64, np.float32, np.float32)
    amix = cast(a64, np.float64, np.float32, pred_dtype=np.float32)
    files = {"f64": save_dataset("a_f64", a64), "f32": save_dataset("a_f32", a32),
             "mix": save_dataset("a_mix", amix)}
    arrays = {"f64": a64, "f32": a32, "mix": amix}
    all_sizes = ["bbox_size", "head_size", "torso_size"]
    for v in ("f64", "f32", "mix"):
        case(f"pck_all_items_{v}", "PCKAccuracy", {"thr": 0.2, "norm_item": ["torso", "bbox",
                                                                             "head"]},
             files[v], arrays[v], "PCKAccuracy(thr=0.2, norm_item=['torso', 'bbox', 'head'])",
             lambda: PCKAccuracy(thr=0.2, norm_item=["torso", "bbox", "head"]), all_sizes)
        case(f"pck_default_{v}", "PCKAccuracy", {}, files[v], arrays[v], "PCKAccuracy()",
             lambda: PCKAccuracy(), ["bbox_size"])
        case(f"auc_default_{v}", "KeypointAUC", {}, files[v], arrays[v], "KeypointAUC()",
             lambda: KeypointAUC(), [])
        case(f"epe_{v}", "KeypointEndPointError", {}, files[v], arrays[v],
             "KeypointEndPointError()", lambda: KeypointEndPointError(), [])
    case("pck_thr_0.05", "PCKAccuracy", {"thr": 0.05, "norm_item": "head"}, files["f64"], a64,
         "PCKAccuracy(thr=0.05, norm_item='head')",
         lambda: PCKAccuracy(thr=0.05, norm_item="head"), ["head_size"])
    case("auc_20_4", "KeypointAUC", {"norm_factor": 20.0, "num_thrs": 4}, files["f32"], a32,
         "KeypointAUC(norm_factor=20, num_thrs=4)",
         lambda: KeypointAUC(norm_factor=20, num_thrs=4), [])
    case("auc_negative_norm", "KeypointAUC", {"norm_factor": -5.0, "num_thrs": 7}, files["f64"],
         a64, "KeypointAUC(norm_factor=-5.0, num_thrs=7)",
         lambda: KeypointAUC(norm_factor=-5.0, num_thrs=7), [],
         note="a negative normaliser becomes 1e6: every visible keypoint is within every thr > 0")
    # norm_factor 0 is refused by tally: mmeval masks everything at the first threshold and,
    # its calc_distances having replaced the 0 by 1e6 in place, nothing at the others.
    assert KeypointAUC(norm_factor=0.0, num_thrs=5)(
        [{"coords": a64["pred_coords"]}], [{"coords": a64["gt_coords"],
                                            "mask": a64["mask"]}])["AUC@5"] == 0.8

    # Everything invisible: PCK 0 (mmeval's int 0), EPE 0.
    none = dict(a64)
    none["mask"] = np.zeros_like(a64["mask"])
    none_files = dict(files["f64"])
    none_files["mask"] = save(DATA, "none_visible_mask", none["mask"])
    case("pck_none_visible", "PCKAccuracy", {"norm_item": ["bbox", "head"]}, none_files, none,
         "PCKAccuracy(norm_item=['bbox', 'head'])",
         lambda: PCKAccuracy(norm_item=["bbox", "head"]), ["bbox_size", "head_size"],
         note="no valid keypoint: mmeval returns the Python int 0, tally 0.0")
    case("epe_none_visible", "KeypointEndPointError", {}, none_files, none,
         "KeypointEndPointError()", lambda: KeypointEndPointError(), [])

    # 3-D coordinates (EPE and PCK take any D).
    b = pose_dataset(33, 25, 10, d=3)
    bf = save_dataset("b3d_f64", b)
    case("epe_3d", "KeypointEndPointError", {}, bf, b, "KeypointEndPointError()",
         lambda: KeypointEndPointError(), [])
    case("pck_3d", "PCKAccuracy", {"thr": 0.1}, bf, b, "PCKAccuracy(thr=0.1)",
         lambda: PCKAccuracy(thr=0.1), ["bbox_size"])

    # A larger float32 set for the pairwise float32 sum (more than 128 and 8192 distances).
    big = cast(pose_dataset(99, 700, 17), np.float32, np.float32)
    bigf = save_dataset("big_f32", big)
    case("epe_big_f32", "KeypointEndPointError", {}, bigf, big, "KeypointEndPointError()",
         lambda: KeypointEndPointError(), [])

    # MPII: 16 keypoints; keypoint 7 (thorax, left out of PCKh) never visible, 11 never either.
    m64 = pose_dataset(16, 30, 16, never_visible=11)
    m64["mask"][:, 7] = False
    # A zero head size: masked out at thr, but not at 0.1 (mmeval's in-place 1e6, see
    # plugins/keypoints/mpii_pck_accuracy.cpp).
    m64["head_size"][12] = [0.0, 25.0]
    m32 = cast(m64, np.float32, np.float32)
    mf = {"f64": save_dataset("mpii_f64", m64), "f32": save_dataset("mpii_f32", m32)}
    for v, arr in (("f64", m64), ("f32", m32)):
        case(f"mpii_default_{v}", "MpiiPCKAccuracy", {}, mf[v], arr, "MpiiPCKAccuracy()",
             lambda: MpiiPCKAccuracy(), ["head_size"])
        case(f"mpii_all_items_{v}", "MpiiPCKAccuracy",
             {"thr": 0.3, "norm_item": ["bbox", "head", "torso"]}, mf[v], arr,
             "MpiiPCKAccuracy(thr=0.3, norm_item=['bbox', 'head', 'torso'])",
             lambda: MpiiPCKAccuracy(thr=0.3, norm_item=["bbox", "head", "torso"]), all_sizes)
    case("mpii_bbox_only", "MpiiPCKAccuracy", {"norm_item": "bbox"}, mf["f64"], m64,
         "MpiiPCKAccuracy(norm_item='bbox')", lambda: MpiiPCKAccuracy(norm_item="bbox"),
         ["bbox_size"])

    # JHMDB: 15 keypoints, keypoint 2 (head) never visible (acc -1 averaged in, as mmeval).
    j64 = pose_dataset(15, 30, 15, never_visible=2)
    jf = save_dataset("jhmdb_f64", j64)
    case("jhmdb_default", "JhmdbPCKAccuracy", {}, jf, j64, "JhmdbPCKAccuracy()",
         lambda: JhmdbPCKAccuracy(), ["bbox_size"])
    case("jhmdb_all_items", "JhmdbPCKAccuracy", {"thr": 0.2, "norm_item": ["torso", "head",
                                                                            "bbox"]},
         jf, j64, "JhmdbPCKAccuracy(thr=0.2, norm_item=['torso', 'head', 'bbox'])",
         lambda: JhmdbPCKAccuracy(thr=0.2, norm_item=["torso", "head", "bbox"]), all_sizes)

    # NME.
    aflw = face_dataset(19, 30, 19, np.float64)
    af = save_dataset("aflw_f64", aflw)
    case("nme_norm_item", "KeypointNME", {"norm_mode": "use_norm_item", "norm_item": "box_size"},
         af, aflw, "KeypointNME(norm_mode='use_norm_item', norm_item='box_size')",
         lambda: KeypointNME(norm_mode="use_norm_item", norm_item="box_size"), ["box_size"])
    aflw32 = face_dataset(20, 30, 19, np.float32)
    af32 = save_dataset("aflw_f32", aflw32)
    case("nme_norm_item_f32", "KeypointNME",
         {"norm_mode": "use_norm_item", "norm_item": "box_size"}, af32, aflw32,
         "KeypointNME(norm_mode='use_norm_item', norm_item='box_size')",
         lambda: KeypointNME(norm_mode="use_norm_item", norm_item="box_size"), ["box_size"])
    for v, dt in (("f64", np.float64), ("f32", np.float32)):
        face = face_dataset(68, 40, 68, dt)
        ff = save_dataset(f"face68_{v}", face)
        ff.pop("box_size")
        case(f"nme_300w_{v}", "KeypointNME",
             {"norm_mode": "keypoint_distance", "dataset_name": "300w"}, ff, face,
             "KeypointNME(norm_mode='keypoint_distance', dataset_meta={'dataset_name': '300w'})",
             lambda: KeypointNME(norm_mode="keypoint_distance",
                                 dataset_meta={"dataset_name": "300w"}), [])
        case(f"nme_indices_{v}", "KeypointNME",
             {"norm_mode": "keypoint_distance", "keypoint_indices": [8, 30]}, ff, face,
             "KeypointNME(norm_mode='keypoint_distance', keypoint_indices=[8, 30], "
             "dataset_meta={'dataset_name': 'face68', 'keypoint_id2name': {i: str(i) for i in "
             "range(68)}})",
             lambda: KeypointNME(norm_mode="keypoint_distance", keypoint_indices=[8, 30],
                                 dataset_meta={"dataset_name": "face68",
                                               "keypoint_id2name": {i: str(i)
                                                                    for i in range(68)}}), [])

    # The example of configs/examples/keypoints.yaml.
    ex = example_dataset()
    ex_files = {f: save(EXAMPLE, f, a) for f, a in ex.items()}
    example = {"inputs": ex_files, "samples": int(ex["pred_coords"].shape[0]), "metrics": []}
    for label, metric, params, make, sizes in EXAMPLE_METRICS:
        example["metrics"].append({"label": label, "metric": metric, "params": params,
                                   "expected": run_mmeval(make(), ex, sizes)})

    # What tests/integration/test_examples.cpp compares `tally run` with: results by label.
    example["config"] = "configs/examples/keypoints.yaml"
    example["results"] = {m["label"]: m["expected"] for m in example["metrics"]}

    doc = {
        "generator": "tests/reference/keypoints.py",
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "mmeval": mmeval.__version__},
        "notes": [
            "Each case's expected values are what `call` returned (mmeval 0.2.1); the arrays "
            "are the case's input files. Values mmeval returns as numpy.float32 are written as "
            "their exact float64; a Python int 0 (no valid keypoint) as 0.0; numpy.ma.masked "
            "as null.",
            "MpiiPCKAccuracy's Head ... PCKh@0.1 are percent, as mmeval reports them."],
        "cases": cases,
        "example": example,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {rel(OUT)}: {len(cases)} cases")


if __name__ == "__main__":
    main()
