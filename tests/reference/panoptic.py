#!/usr/bin/env python3
"""Reference data and expected values for the panoptic plugin (PanopticQuality,
ModifiedPanopticQuality) and the coco_panoptic reader.

(a) Writes, deterministically (numpy seed 20261203), a small synthetic COCO-panoptic dataset to
    configs/examples/data/panoptic/ (see configs/examples/data/README.md):
      panoptic_synthetic.json                 ground truth: images, annotations (segments_info
                                              with id, category_id, iscrowd, area, bbox) and
                                              categories (isthing), annotations not in id order
      panoptic_synthetic/*.png                ground-truth id maps, id = R + 256 G + 256^2 B
      panoptic_synthetic_predictions.json     predictions as panopticapi / detectron2 write them
                                              ({annotations: [{image_id, file_name,
                                              segments_info: [{id, category_id}]}]})
      panoptic_synthetic_predictions/*.png    predicted id maps
    40 images of 64x80, 48x80 or 64x64 pixels: things 1, 3, 5 and stuffs 7, 9, 12; void pixels
    (id 0) in both maps; crowd things (iscrowd 1); predicted segments of the unknown category 99;
    stuff predicted as several segments of one category; segments mostly over void; an image
    with no ground truth, one with no prediction, one with neither.
(b) Writes tests/reference/expected_panoptic.json: for each case the parameters of tally's metric,
    the exact torchmetrics call and its values (the cases "docstring*" on torchmetrics'
    docstring examples, given inline; the others on the data above); section "example" holds the
    results of configs/examples/panoptic.yaml.

The maps torchmetrics gets are what the coco_panoptic reader gives tally: per pixel (category_id,
segment id), void (id 0) as (-1, 0). torchmetrics has no void input: -1 is in neither things nor
stuffs, so torchmetrics maps it to its void colour; in predictions that needs
allow_unknown_preds_category=True, which every call below passes (tally's void_category -1 allows
void predictions without it, see the case "strict_unknown"). Crowd (case names "*crowd_void"): the
maps with every pixel of an iscrowd segment made void (-1, 0) before torchmetrics sees them.

The things/stuff breakdown (pq_things, pq_stuff, ...; panopticapi's "Things" and "Stuff" rows) is
torchmetrics' own per-class pq, sq, rq (_panoptic_quality_compute on the metric's accumulated
iou_sum, true_positives, false_positives, false_negatives) averaged with torch.mean over the
classes of the group whose denominator tp + 0.5 fp + 0.5 fn is > 0: the classes compute()
averages, restricted to the group.

Run: .venv-torch/bin/python tests/reference/panoptic.py  (the venv of scripts/setup-torch-venv.sh with
torchmetrics 1.9.0 and pillow installed: torch 2.15.0, numpy 2.4.6, pillow 13.0.0 wrote the files)
"""
import json
import os
import platform

import numpy as np
import PIL
import torch
import torchmetrics
from PIL import Image
from torchmetrics.detection import ModifiedPanopticQuality, PanopticQuality
from torchmetrics.functional.detection._panoptic_quality_common import _panoptic_quality_compute

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "configs", "examples", "data", "panoptic")
OUT = os.path.join(ROOT, "tests", "reference", "expected_panoptic.json")
GT_JSON = os.path.join(DATA, "panoptic_synthetic.json")
GT_DIR = os.path.join(DATA, "panoptic_synthetic")
PRED_JSON = os.path.join(DATA, "panoptic_synthetic_predictions.json")
PRED_DIR = os.path.join(DATA, "panoptic_synthetic_predictions")

THINGS = [1, 3, 5]
STUFFS = [7, 9, 12]
UNKNOWN = 99
CATEGORIES = [  # deliberately not in id order
    {"id": 3, "name": "car", "supercategory": "vehicle", "isthing": 1, "color": [0, 0, 142]},
    {"id": 12, "name": "road", "supercategory": "ground", "isthing": 0, "color": [128, 64, 128]},
    {"id": 1, "name": "person", "supercategory": "person", "isthing": 1, "color": [220, 20, 60]},
    {"id": 7, "name": "sky", "supercategory": "sky", "isthing": 0, "color": [70, 130, 180]},
    {"id": 5, "name": "dog", "supercategory": "animal", "isthing": 1, "color": [255, 0, 255]},
    {"id": 9, "name": "grass", "supercategory": "plant", "isthing": 0, "color": [107, 142, 35]},
]
SIZES = [(64, 80), (48, 80), (64, 64)]
# torchmetrics 1.9's docstring examples: (preds, target).
DOC_PQ = (
    [[[[6, 0], [0, 0], [6, 0], [6, 0]], [[0, 0], [0, 0], [6, 0], [0, 1]],
      [[0, 0], [0, 0], [6, 0], [0, 1]], [[0, 0], [7, 0], [6, 0], [1, 0]],
      [[0, 0], [7, 0], [7, 0], [7, 0]]]],
    [[[[6, 0], [0, 1], [6, 0], [0, 1]], [[0, 1], [0, 1], [6, 0], [0, 1]],
      [[0, 1], [0, 1], [6, 0], [1, 0]], [[0, 1], [7, 0], [1, 0], [1, 0]],
      [[0, 1], [7, 0], [7, 0], [7, 0]]]])
DOC_MODIFIED = ([[[0, 0], [0, 1], [6, 0], [7, 0], [0, 2], [1, 0]]],
                [[[0, 1], [0, 0], [6, 0], [7, 0], [6, 0], [255, 0]]])
N_IMAGES = 40
NO_GT, NO_PRED, NEITHER, ONLY_UNKNOWN = 5, 11, 17, 23


def rel(p):
    return os.path.relpath(p, ROOT)


class Canvas:
    """An id map being painted: segments get fresh random 24-bit ids, later paint covers earlier."""

    def __init__(self, rng, h, w):
        self.rng, self.h, self.w = rng, h, w
        self.ids = np.zeros((h, w), np.int64)
        self.segs = {}  # id -> (category_id, iscrowd)

    def new_id(self):
        while True:
            i = int(self.rng.integers(1, 1 << 24))
            if i not in self.segs:
                return i

    def paint(self, mask, cat, crowd=0, seg_id=None):
        seg_id = self.new_id() if seg_id is None else seg_id
        self.segs[seg_id] = (cat, crowd)
        self.ids[mask] = seg_id
        return seg_id

    def void(self, mask):
        self.ids[mask] = 0

    def segments(self):
        """segments_info of the ids still visible (painted-over ones are dropped), PNG order."""
        out = []
        for seg_id, (cat, crowd) in self.segs.items():
            m = self.ids == seg_id
            area = int(m.sum())
            if area == 0:
                continue
            ys, xs = np.nonzero(m)
            bbox = [int(xs.min()), int(ys.min()), int(xs.max() - xs.min() + 1),
                    int(ys.max() - ys.min() + 1)]
            out.append({"id": seg_id, "category_id": cat, "iscrowd": crowd, "area": area,
                        "bbox": bbox})
        return out

    def png(self):
        rgb = np.stack([self.ids % 256, self.ids // 256 % 256, self.ids // 65536], -1)
        return Image.fromarray(rgb.astype(np.uint8), "RGB")


def rect(h, w, y0, x0, y1, x1):
    m = np.zeros((h, w), bool)
    m[max(0, y0):max(0, min(h, y1)), max(0, x0):max(0, min(w, x1))] = True
    return m


def ellipse(h, w, cy, cx, ry, rx):
    yy, xx = np.mgrid[0:h, 0:w]
    return ((yy - cy) / max(ry, 0.5)) ** 2 + ((xx - cx) / max(rx, 0.5)) ** 2 <= 1.0


def make_image(rng, i, h, w):
    gt, pred = Canvas(rng, h, w), Canvas(rng, h, w)
    # Stuff: a sky band on top, grass and/or road below; the prediction moves the boundaries.
    horizon = int(rng.integers(h // 4, h // 2))
    split = int(rng.integers(w // 4, 3 * w // 4))
    ground = [(9, rect(h, w, horizon, 0, h, split)), (12, rect(h, w, horizon, split, h, w))]
    if rng.random() < 0.3:
        ground = [(int(rng.choice([9, 12])), rect(h, w, horizon, 0, h, w))]
    if rng.random() < 0.85:
        gt.paint(rect(h, w, 0, 0, horizon, w), 7)
    for cat, m in ground:
        gt.paint(m, cat)
    ph = horizon + int(rng.integers(-4, 5))
    ps = split + int(rng.integers(-6, 7))
    if rng.random() < 0.9:
        pred.paint(rect(h, w, 0, 0, ph, w), 7)
    if len(ground) == 2:
        left = 9 if rng.random() < 0.85 else 12
        if rng.random() < 0.25:  # one stuff category predicted as two segments
            pred.paint(rect(h, w, ph, 0, h, ps // 2), left)
            pred.paint(rect(h, w, ph, ps // 2, h, ps), left)
        else:
            pred.paint(rect(h, w, ph, 0, h, ps), left)
        pred.paint(rect(h, w, ph, ps, h, w), 12)
    else:
        cat = ground[0][0] if rng.random() < 0.8 else 21 - ground[0][0]
        pred.paint(rect(h, w, ph, 0, h, w), cat)

    # Things: ellipses and boxes, some crowds; the prediction shifts and rescales them, misses
    # some, gets some categories wrong (or unknown), and adds false positives.
    for _ in range(int(rng.integers(0, 7))):
        cat = int(rng.choice(THINGS))
        crowd = int(rng.random() < 0.12)
        cy, cx = int(rng.integers(4, h - 4)), int(rng.integers(4, w - 4))
        ry, rx = int(rng.integers(3, 14)), int(rng.integers(3, 16))
        box = rng.random() < 0.4
        shape = (rect(h, w, cy - ry, cx - rx, cy + ry, cx + rx) if box
                 else ellipse(h, w, cy, cx, ry, rx))
        gt.paint(shape, cat, crowd)
        if rng.random() < 0.82:
            dy, dx = (int(v) for v in rng.integers(-3, 4, 2) * rng.choice([1, 1, 2]))
            sy, sx = rng.uniform(0.7, 1.3, 2)
            pry, prx = max(1, int(ry * sy)), max(1, int(rx * sx))
            pshape = (rect(h, w, cy + dy - pry, cx + dx - prx, cy + dy + pry, cx + dx + prx) if box
                      else ellipse(h, w, cy + dy, cx + dx, pry, prx))
            r = rng.random()
            pcat = cat if r < 0.8 else (UNKNOWN if r < 0.86 else int(rng.choice(THINGS)))
            if crowd and rng.random() < 0.5:  # a crowd predicted as several instances
                half = pshape & (np.mgrid[0:h, 0:w][1] < cx + dx)
                pred.paint(half, pcat)
                pred.paint(pshape & ~half, pcat)
            else:
                pred.paint(pshape, pcat)
    for _ in range(int(rng.integers(0, 3))):
        cy, cx = int(rng.integers(0, h)), int(rng.integers(0, w))
        pred.paint(ellipse(h, w, cy, cx, int(rng.integers(2, 8)), int(rng.integers(2, 8))),
                   int(rng.choice(THINGS + [UNKNOWN])))

    # Void: a boundary row between sky and ground, blobs, and now and then a large area; the
    # prediction leaves some pixels unlabelled too.
    if rng.random() < 0.6:
        gt.void(rect(h, w, horizon, 0, horizon + 1, w))
    for _ in range(int(rng.integers(0, 3))):
        gt.void(ellipse(h, w, int(rng.integers(0, h)), int(rng.integers(0, w)),
                        int(rng.integers(1, 6)), int(rng.integers(1, 6))))
    if rng.random() < 0.15:
        big = rect(h, w, int(rng.integers(0, h // 2)), int(rng.integers(0, w // 2)), h, w // 2 + 20)
        gt.void(big)
        if rng.random() < 0.5:  # a predicted thing mostly over ground-truth void
            pred.paint(big & ellipse(h, w, h - 10, w // 2, 8, 8), int(rng.choice(THINGS)))
    for _ in range(int(rng.integers(0, 3))):
        pred.void(ellipse(h, w, int(rng.integers(0, h)), int(rng.integers(0, w)),
                          int(rng.integers(1, 7)), int(rng.integers(1, 7))))

    if i in (NO_GT, NEITHER):
        gt.void(np.ones((h, w), bool))
    if i in (NO_PRED, NEITHER):
        pred.void(np.ones((h, w), bool))
    if i == ONLY_UNKNOWN:
        pred.void(np.ones((h, w), bool))
        pred.paint(rect(h, w, 0, 0, h, w // 2), UNKNOWN)
    return gt, pred


def write_data():
    rng = np.random.default_rng(20261203)
    os.makedirs(GT_DIR, exist_ok=True)
    os.makedirs(PRED_DIR, exist_ok=True)
    for d in (GT_DIR, PRED_DIR):
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
    images, gt_anns, pred_anns = [], [], []
    for i in range(N_IMAGES):
        image_id = 9000 - 37 * i if i % 2 else 1000 + 13 * i  # ids not in list order
        h, w = SIZES[int(rng.integers(0, len(SIZES)))]
        gt, pred = make_image(rng, i, h, w)
        name = f"{image_id:012d}.png"
        gt.png().save(os.path.join(GT_DIR, name), optimize=True)
        pred.png().save(os.path.join(PRED_DIR, name), optimize=True)
        images.append({"id": image_id, "file_name": f"{image_id:012d}.jpg", "height": h,
                       "width": w})
        gt_anns.append({"image_id": image_id, "file_name": name, "segments_info": gt.segments()})
        pred_anns.append({"image_id": image_id, "file_name": name,
                          "segments_info": [{"id": s["id"], "category_id": s["category_id"]}
                                            for s in pred.segments()]})
    order = rng.permutation(N_IMAGES)
    gt_json = {"info": {"description": "tally synthetic COCO-panoptic data (tests/reference/panoptic.py)"},
               "images": images, "annotations": [gt_anns[k] for k in order],
               "categories": CATEGORIES}
    with open(GT_JSON, "w") as f:
        json.dump(gt_json, f, separators=(",", ":"))
    with open(PRED_JSON, "w") as f:
        json.dump({"annotations": [pred_anns[k] for k in order[::-1]]}, f, separators=(",", ":"))


def read_maps(json_path, png_dir):
    """image id -> ([H, W, 2] int64 (category_id, segment id), void = (-1, 0); crowd mask)."""
    with open(json_path) as f:
        anns = json.load(f)["annotations"]
    out = {}
    for a in anns:
        rgb = np.array(Image.open(os.path.join(png_dir, a["file_name"])), dtype=np.int64)
        ids = rgb[..., 0] + 256 * rgb[..., 1] + 65536 * rgb[..., 2]
        m = np.zeros(ids.shape + (2,), np.int64)
        m[..., 0] = -1
        crowd = np.zeros(ids.shape, bool)
        for s in a["segments_info"]:
            sel = ids == s["id"]
            m[sel, 0] = s["category_id"]
            m[sel, 1] = s["id"]
            crowd |= sel & bool(s.get("iscrowd", 0))
        out[a["image_id"]] = (m, crowd)
    return out


def samples_of(gts, preds, crowd_void):
    """(pred, target) per image in ascending id order; crowd points void with crowd_void."""
    out = []
    for image_id in sorted(gts):
        g, crowd = gts[image_id]
        if crowd_void:
            g = g.copy()
            g[crowd] = (-1, 0)
        out.append((preds[image_id][0], g))
    return out


def run_torchmetrics(cls, kwargs, samples, things):
    m = cls(**kwargs)
    for p, g in samples:
        m.update(torch.from_numpy(p)[None], torch.from_numpy(g)[None])
    value = m.compute()
    pq, sq, rq, _, _, _ = _panoptic_quality_compute(m.iou_sum, m.true_positives,
                                                   m.false_positives, m.false_negatives)
    den = m.true_positives + 0.5 * m.false_positives + 0.5 * m.false_negatives
    is_thing = torch.arange(len(den)) < len(set(things))
    groups = {}
    for group, sel in (("things", is_thing), ("stuff", ~is_thing)):
        keep = (den > 0) & sel
        groups[group] = {"pq": torch.mean(pq[keep]).item(), "sq": torch.mean(sq[keep]).item(),
                         "rq": torch.mean(rq[keep]).item()}
    return value, groups, (pq, sq, rq)


def num(x):
    x = float(x)
    return None if x != x else x


def case_results(kind, params, gts=None, preds=None, samples=None, allow_unknown=True):
    things = params.get("things", THINGS)
    stuffs = params.get("stuffs", STUFFS)
    crowd_void = params.get("crowd") == "void"
    sq_rq = params.get("return_sq_and_rq", False)
    per_class = params.get("return_per_class", False)
    if samples is None:
        samples = samples_of(gts, preds, crowd_void)
    kw = {"things": set(things), "stuffs": set(stuffs),
          "allow_unknown_preds_category": allow_unknown}
    if kind == "ModifiedPanopticQuality":
        value, groups, _ = run_torchmetrics(ModifiedPanopticQuality, kw, samples, things)
        call = (f"ModifiedPanopticQuality(things={set(things)}, stuffs={set(stuffs)}, "
                f"allow_unknown_preds_category={allow_unknown})")
        if crowd_void:
            call += "; ground truth with the pixels of iscrowd segments made void (-1, 0)"
        call += ("; pq_things, pq_stuff: torch.mean of _panoptic_quality_compute's pq over the "
                 "group's classes whose tp + 0.5 fp + 0.5 fn > 0")
        return call, {"pq": num(value), "pq_things": num(groups["things"]["pq"]),
                      "pq_stuff": num(groups["stuff"]["pq"])}
    # The averages from a call without return_per_class, the per-class values from one with it.
    avg, groups, _ = run_torchmetrics(PanopticQuality, dict(kw, return_sq_and_rq=sq_rq), samples,
                                      things)
    call = (f"PanopticQuality(things={set(things)}, stuffs={set(stuffs)}, "
            f"allow_unknown_preds_category={allow_unknown}, return_sq_and_rq={sq_rq})")
    out = {}
    if sq_rq:
        out.update(pq=num(avg[0]), sq=num(avg[1]), rq=num(avg[2]))
    else:
        out["pq"] = num(avg)
    for group in ("things", "stuff"):
        out[f"pq_{group}"] = num(groups[group]["pq"])
        if sq_rq:
            out[f"sq_{group}"] = num(groups[group]["sq"])
            out[f"rq_{group}"] = num(groups[group]["rq"])
    if per_class:
        pc, _, _ = run_torchmetrics(PanopticQuality,
                                    dict(kw, return_sq_and_rq=sq_rq, return_per_class=True),
                                    samples, things)
        call += (f"; PanopticQuality(..., return_sq_and_rq={sq_rq}, return_per_class=True) "
                 "for the per-class values")
        out["classes"] = sorted(things) + sorted(stuffs)
        if sq_rq:  # [C, 3]
            out["pq_per_class"] = [num(v) for v in pc[:, 0]]
            out["sq_per_class"] = [num(v) for v in pc[:, 1]]
            out["rq_per_class"] = [num(v) for v in pc[:, 2]]
        else:  # [1, C]
            out["pq_per_class"] = [num(v) for v in pc[0]]
    if crowd_void:
        call += "; ground truth with the pixels of iscrowd segments made void (-1, 0)"
    call += ("; pq_things ... from _panoptic_quality_compute(iou_sum, true_positives, "
             "false_positives, false_negatives): torch.mean over the group's classes whose "
             "tp + 0.5 fp + 0.5 fn > 0")
    return call, out


def main():
    write_data()
    gts = read_maps(GT_JSON, GT_DIR)
    preds = read_maps(PRED_JSON, PRED_DIR)
    assert sorted(gts) == sorted(preds)

    specs = [
        ("pq", "PanopticQuality", {"allow_unknown_preds_category": True}),
        ("pq_sq_rq", "PanopticQuality",
         {"allow_unknown_preds_category": True, "return_sq_and_rq": True}),
        ("per_class", "PanopticQuality",
         {"allow_unknown_preds_category": True, "return_per_class": True}),
        ("per_class_sq_rq", "PanopticQuality",
         {"allow_unknown_preds_category": True, "return_sq_and_rq": True,
          "return_per_class": True}),
        ("crowd_void", "PanopticQuality",
         {"allow_unknown_preds_category": True, "return_sq_and_rq": True, "crowd": "void"}),
        # Fewer classes: 5 (things) and 12 (stuff) become unknown, i.e. void in the ground truth.
        ("subset", "PanopticQuality",
         {"things": [3, 1], "stuffs": [9, 7], "allow_unknown_preds_category": True,
          "return_sq_and_rq": True, "return_per_class": True}),
        # 99 as a stuff: no unknown category left, so allow_unknown_preds_category can be false
        # (void predictions are allowed by tally's void_category -1; torchmetrics needs True).
        ("strict_unknown", "PanopticQuality",
         {"things": THINGS, "stuffs": STUFFS + [UNKNOWN], "allow_unknown_preds_category": False,
          "return_sq_and_rq": True, "return_per_class": True}),
        ("things_only", "PanopticQuality",
         {"things": THINGS, "stuffs": [], "allow_unknown_preds_category": True,
          "return_sq_and_rq": True}),
        ("modified", "ModifiedPanopticQuality", {"allow_unknown_preds_category": True}),
        ("modified_crowd_void", "ModifiedPanopticQuality",
         {"allow_unknown_preds_category": True, "crowd": "void"}),
    ]
    cases = []
    # torchmetrics' docstring examples, inline ([1, 5, 4, 2] and [1, 6, 2]: points, not pixels).
    for name, kind, params, (p, g) in [
        ("docstring", "PanopticQuality", {"things": [0, 1], "stuffs": [6, 7]}, DOC_PQ),
        ("docstring_sq_rq_per_class", "PanopticQuality",
         {"things": [0, 1], "stuffs": [6, 7], "return_sq_and_rq": True,
          "return_per_class": True}, DOC_PQ),
        ("docstring_modified", "ModifiedPanopticQuality", {"things": [0, 1], "stuffs": [6, 7]},
         DOC_MODIFIED),
    ]:
        call, expected = case_results(kind, params, samples=[(np.asarray(p)[0], np.asarray(g)[0])],
                                      allow_unknown=False)
        cases.append({"name": name, "metric": kind, "call": call, "params": params,
                      "inputs": {"pred_panoptic": {"inline": p}, "gt_panoptic": {"inline": g}},
                      "expected": expected})
    for name, kind, params in specs:
        call, expected = case_results(kind, params, gts, preds)
        cases.append({"name": name, "metric": kind, "call": call, "params": params,
                      "expected": expected})

    example_metrics = [
        ("PanopticQuality", "PanopticQuality",
         {"allow_unknown_preds_category": True, "return_sq_and_rq": True,
          "return_per_class": True}),
        ("pq_crowd_void", "PanopticQuality",
         {"allow_unknown_preds_category": True, "return_sq_and_rq": True, "crowd": "void"}),
        ("ModifiedPanopticQuality", "ModifiedPanopticQuality",
         {"allow_unknown_preds_category": True}),
    ]
    example = {"config": "configs/examples/panoptic.yaml", "call": {}, "results": {},
               "samples": N_IMAGES}
    for label, kind, params in example_metrics:
        call, expected = case_results(kind, params, gts, preds)
        example["call"][label] = call
        example["results"][label] = expected

    # torch.sum and torch.mean of 1-D float32 and float64 tensors (plugins/panoptic/
    # torch_reduce.hpp reproduces them): values of mixed magnitudes, so that the order of the
    # additions shows in the last bits.
    rng = np.random.default_rng(7)
    reductions = []
    for dtype in ("float32", "float64"):
        for n in (0, 1, 3, 5, 8, 9, 13, 16, 17, 33, 64, 100, 300):
            x = (rng.random(n) * rng.choice([1.0, 1e3, 1e-3], n)).astype(dtype)
            t = torch.from_numpy(x)
            reductions.append({"dtype": dtype, "values": [float(v) for v in x],
                               "sum": num(t.sum()), "mean": num(t.mean())})

    out = {
        "generated_by": rel(__file__),
        "versions": {"torchmetrics": torchmetrics.__version__, "torch": torch.__version__,
                     "numpy": np.__version__, "pillow": PIL.__version__,
                     "python": platform.python_version(),
                     "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()},
        "data": {"annotations": rel(GT_JSON), "annotation_dir": rel(GT_DIR),
                 "predictions": rel(PRED_JSON), "prediction_dir": rel(PRED_DIR)},
        "categories": {"things": THINGS, "stuffs": STUFFS, "unknown_predicted": [UNKNOWN]},
        "notes": [
            "Maps: per pixel (category_id, segment id), void (PNG id 0) as (-1, 0), read with "
            "PIL: numpy.array(Image.open(png)); id = R + 256 G + 256^2 B.",
            "Each image is one update() call (batch of 1), images in ascending id order.",
            "null is NaN (a mean over no class).",
        ],
        "cases": cases,
        "example": example,
        "torch_reductions": reductions,
    }
    with open(OUT, "w") as f:
        f.write(json.dumps(out, indent=1) + "\n")
    size = sum(os.path.getsize(os.path.join(d, f)) for d in (GT_DIR, PRED_DIR)
               for f in os.listdir(d)) + os.path.getsize(GT_JSON) + os.path.getsize(PRED_JSON)
    print(f"wrote {rel(OUT)}: {len(cases)} cases; data {size} bytes")
    for c in cases:
        print(c["name"], {k: v for k, v in c["expected"].items() if not isinstance(v, list)})


if __name__ == "__main__":
    main()
