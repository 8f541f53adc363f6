"""Reference values for the detection plugin's VOCMeanAP and ProposalRecall
(tests/unit/test_detection_voc.cpp), from mmeval 0.2.1.

Writes tests/data/detection/voc_data.json (40 images: float32 xyxy boxes, float32 scores without
ties, labels in [0, 5) with class 4 never in the ground truth, ignored boxes) and
tests/reference/expected_voc.json (each case: the mmeval call and its result).

Also writes configs/examples/data/detection/boxes_val2014_40.jsonl, the data of
configs/examples/detection_voc.yaml: the 40 COCO val2014 images of configs/examples/detection.yaml
as VOCMeanAP and ProposalRecall take them (the coco_json reader cannot feed them: its boxes are
COCO's x, y, w, h and its labels COCO category ids), and its expected values, section "example"
of expected_voc.json (mmeval fed the numbers of the .jsonl file, one image per line).

Run: .venv-ref/bin/python tests/reference/voc.py
"""
import importlib.metadata
import json
import os
import sys

import numpy as np
from mmeval import ProposalRecall, VOCMeanAP

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "detection")
EXAMPLE = os.path.join(ROOT, "configs", "examples", "data", "detection")
EXAMPLE_JSONL = os.path.join(EXAMPLE, "boxes_val2014_40.jsonl")


def boxes(rng, n, w, h, small=False):
    x = rng.uniform(0, w - 10, n)
    y = rng.uniform(0, h - 10, n)
    side = rng.choice([8.0, 24.0, 60.0, 140.0], n) if not small else rng.uniform(4, 40, n)
    bw = side * rng.uniform(0.6, 1.4, n)
    bh = side * rng.uniform(0.6, 1.4, n)
    return np.stack([x, y, x + bw, y + bh], axis=1).astype(np.float32)


def make_data():
    rng = np.random.default_rng(5)
    images = []
    for i in range(40):
        w, h = 400.0, 300.0
        g = int(rng.integers(0, 9)) if i % 13 != 6 else 0
        gt = boxes(rng, g, w, h)
        gl = rng.integers(0, 4, g)
        k = int(rng.integers(0, 3))
        ign = boxes(rng, k, w, h)
        il = rng.integers(0, 4, k)
        # predictions: jittered ground truth (some to the ignored boxes), plus random ones
        preds, labels = [], []
        for b, l in list(zip(gt, gl)) + list(zip(ign, il)):
            if rng.random() < 0.8:
                jit = rng.normal(0, 0.06 * (b[2] - b[0]), 4)
                preds.append(b + jit.astype(np.float32))
                labels.append(l if rng.random() > 0.1 else rng.integers(0, 5))
        nf = int(rng.integers(0, 6)) if i % 11 != 3 else 40
        if nf:
            preds.extend(boxes(rng, nf, w, h))
            labels.extend(rng.integers(0, 5, nf))
        pb = np.array(preds, dtype=np.float32).reshape(-1, 4)
        pl = np.array(labels, dtype=np.int64)
        ps = rng.random(len(pl)).astype(np.float32)
        images.append({"pred_bboxes": pb, "pred_scores": ps, "pred_labels": pl,
                       "gt_bboxes": gt, "gt_labels": gl.astype(np.int64),
                       "gt_bboxes_ignore": ign, "gt_labels_ignore": il.astype(np.int64)})
    return images


def mm_inputs(images):
    preds = [{"bboxes": im["pred_bboxes"], "scores": im["pred_scores"],
              "labels": im["pred_labels"]} for im in images]
    gts = [{"bboxes": im["gt_bboxes"], "labels": im["gt_labels"],
            "bboxes_ignore": im["gt_bboxes_ignore"], "labels_ignore": im["gt_labels_ignore"]}
           for im in images]
    return preds, gts


def write_example_jsonl():
    """One JSON line per image of instances_val2014_40.json, in ascending image id (the
    coco_json reader's order): COCO's boxes [x, y, w, h] as [x, y, x + w, y + h] (float64, as
    pycocotools' loadRes computes x2, y2), labels = the index of the category in the categories
    sorted by id (0..79), the detections in the results file's order with their scores. Crowd
    regions are left out (a line cannot hold an empty [0, 4] list of ignored boxes, and only 4 of
    the 40 images have one): every image has ground truth and detections."""
    with open(os.path.join(EXAMPLE, "instances_val2014_40.json")) as f:
        gt = json.load(f)
    with open(os.path.join(EXAMPLE, "results_val2014_40.json")) as f:
        res = json.load(f)
    cat_index = {c["id"]: i for i, c in enumerate(sorted(gt["categories"], key=lambda c: c["id"]))}

    def xyxy(b):
        x, y, w, h = (float(v) for v in b)
        return [x, y, x + w, y + h]

    lines, crowd = [], 0
    for img in sorted(gt["images"], key=lambda im: im["id"]):
        anns = [a for a in gt["annotations"] if a["image_id"] == img["id"]]
        crowd += sum(1 for a in anns if a.get("iscrowd", 0))
        anns = [a for a in anns if not a.get("iscrowd", 0)]
        dets = [r for r in res if r["image_id"] == img["id"]]
        assert anns and dets, img["id"]
        lines.append({"image_id": img["id"],
                      "gt_bboxes": [xyxy(a["bbox"]) for a in anns],
                      "gt_labels": [cat_index[a["category_id"]] for a in anns],
                      "pred_bboxes": [xyxy(r["bbox"]) for r in dets],
                      "pred_scores": [float(r["score"]) for r in dets],
                      "pred_labels": [cat_index[r["category_id"]] for r in dets]})
    with open(EXAMPLE_JSONL, "w") as f:
        for line in lines:
            f.write(json.dumps(line, separators=(",", ":")) + "\n")
    return len(gt["categories"]), crowd


def example_section():
    """mmeval on configs/examples/detection_voc.yaml's data, read back from the .jsonl file."""
    num_classes, crowd = write_example_jsonl()
    with open(EXAMPLE_JSONL) as f:
        lines = [json.loads(line) for line in f]
    preds = [{"bboxes": np.array(x["pred_bboxes"], dtype=np.float64).reshape(-1, 4),
              "scores": np.array(x["pred_scores"], dtype=np.float64),
              "labels": np.array(x["pred_labels"], dtype=np.int64)} for x in lines]
    gts = [{"bboxes": np.array(x["gt_bboxes"], dtype=np.float64).reshape(-1, 4),
            "labels": np.array(x["gt_labels"], dtype=np.int64),
            "bboxes_ignore": np.zeros((0, 4)), "labels_ignore": np.zeros(0, dtype=np.int64)}
           for x in lines]
    voc_kw = {"num_classes": num_classes, "iou_thrs": [0.5, 0.75],
              "scale_ranges": [(0, 32), (32, 96), (96, None)]}
    voc_call = f"mmeval.VOCMeanAP(nproc=1, **{voc_kw!r})(predictions, groundtruths)"
    # A copy: mmeval appends the full range (None, None) to the list it is given.
    voc = VOCMeanAP(nproc=1, dist_backend="non_dist",
                    **dict(voc_kw, scale_ranges=list(voc_kw["scale_ranges"])))
    rec_kw = {"proposal_nums": (1, 10, 100)}
    rec = ProposalRecall(nproc=1, print_results=False, dist_backend="non_dist", **rec_kw)
    metrics = [
        {"label": "VOCMeanAP", "metric": "VOCMeanAP",
         "params": {"num_classes": num_classes, "iou_thrs": [0.5, 0.75],
                    "scale_ranges": [[0, 32], [32, 96], [96, None]]},
         "call": voc_call,
         "expected": {k: float(v) for k, v in voc(preds, gts).items()}},
        {"label": "ProposalRecall", "metric": "ProposalRecall",
         "params": {"proposal_nums": [1, 10, 100]},
         "call": f"mmeval.ProposalRecall(nproc=1, **{rec_kw!r})(predictions, groundtruths)",
         "expected": {k: float(v) for k, v in rec(preds, gts).items()}},
    ]
    return {"config": "configs/examples/detection_voc.yaml",
            "data": os.path.relpath(EXAMPLE_JSONL, ROOT),
            "inputs": "predictions[i] = {bboxes: pred_bboxes, scores: pred_scores, labels: "
                      "pred_labels}, groundtruths[i] = {bboxes: gt_bboxes, labels: gt_labels, "
                      "bboxes_ignore: zeros((0, 4)), labels_ignore: zeros(0)} of line i "
                      "(float64 boxes and scores, int64 labels, as the jsonl reader reads them)",
            "note": f"{crowd} crowd regions of the COCO ground truth are left out",
            "samples": len(lines), "metrics": metrics,
            "results": {m["label"]: m["expected"] for m in metrics}}


def users_section():
    """Box data as users have it (issue 16), as .jsonl files for the jsonl reader:
      voc_users_same_count.jsonl  every image has 3 detections and 2 ground-truth boxes (a detector
                                  capped at N boxes: the reader makes every field dense), ground
                                  truth in integer pixels as VOC annotation files hold them;
      voc_users_empty_int.jsonl   images with no detections or no ground truth (`[]`, the first
                                  line among them), integer boxes on some lines, ignored boxes.
    mmeval is fed each line's numbers as numpy reads them (np.array(v): int64 for a line of
    integers, float64 otherwise), an empty list as zeros((0, 4)) boxes / zeros(0) labels: the
    shape mmeval needs (np.array([]) is 1-D and mmeval indexes it as [n, 4]). Every result is
    checked to equal mmeval's on the same data converted to float64."""
    rng = np.random.default_rng(16)

    def box(w=200, h=150, integer=False):
        x, y = rng.uniform(0, w - 40), rng.uniform(0, h - 40)
        bw, bh = rng.uniform(6, 130), rng.uniform(6, 130)
        b = [x, y, x + bw, y + bh]
        return [int(round(v)) for v in b] if integer else [round(float(v), 2) for v in b]

    def jitter(b, integer=False):
        out = [v + rng.normal(0, 3) for v in b]
        return [int(round(v)) for v in out] if integer else [round(float(v), 2) for v in out]

    def image(n_gt, n_extra, int_gt, int_pred, n_ign=0):
        gt = [box(integer=int_gt) for _ in range(n_gt)]
        gl = [int(rng.integers(0, 3)) for _ in gt]
        preds = [jitter(b, int_pred) for b in gt if rng.random() < 0.8]
        labels = [l for b, l in zip(gt, gl)][:len(preds)]
        preds += [box(integer=int_pred) for _ in range(n_extra)]
        labels += [int(rng.integers(0, 3)) for _ in range(n_extra)]
        scores = [round(float(v), 6) for v in rng.uniform(0.01, 0.99, len(preds))]
        ign = [box(integer=True) for _ in range(n_ign)]
        return {"pred_bboxes": preds, "pred_scores": scores, "pred_labels": labels,
                "gt_bboxes": gt, "gt_labels": gl, "gt_bboxes_ignore": ign,
                "gt_labels_ignore": [int(rng.integers(0, 3)) for _ in ign]}

    same = []
    for i in range(21):
        while True:
            im = image(2, 0, True, False)
            n = len(im["pred_bboxes"])
            if n <= 3:
                break
        im["pred_bboxes"] += [box() for _ in range(3 - n)]
        im["pred_labels"] += [int(rng.integers(0, 3)) for _ in range(3 - n)]
        im["pred_scores"] = [round(float(v), 6) for v in rng.uniform(0.01, 0.99, 3)]
        for k in ("gt_bboxes_ignore", "gt_labels_ignore"):
            del im[k]
        same.append(im)
    mixed = []
    for i in range(23):
        kind = i % 6
        if i == 0:
            im = image(2, 0, False, False)
            im.update(pred_bboxes=[], pred_scores=[], pred_labels=[])  # first line: no detections
        elif kind == 1:
            im = image(0, int(rng.integers(1, 4)), False, False)  # no ground truth
        elif kind == 2:
            im = image(0, 0, False, False)  # nothing at all
        elif kind == 3:
            im = image(int(rng.integers(1, 5)), int(rng.integers(0, 3)), True, True, 1)
        else:
            im = image(int(rng.integers(1, 5)), int(rng.integers(0, 4)), kind == 4, False,
                       int(rng.integers(0, 2)))
        mixed.append(im)
    for images in (same, mixed):  # tied scores sort in an order mmeval leaves unspecified
        scores = [v for im in images for v in im["pred_scores"]]
        assert len(set(scores)) == len(scores), "scores must not tie"
    out = {}
    for name, lines, fields in (
            ("same_count", same, ["pred_bboxes", "pred_scores", "pred_labels", "gt_bboxes",
                                  "gt_labels"]),
            ("empty_int", mixed, ["pred_bboxes", "pred_scores", "pred_labels", "gt_bboxes",
                                  "gt_labels", "gt_bboxes_ignore", "gt_labels_ignore"])):
        path = os.path.join(DATA, f"voc_users_{name}.jsonl")
        with open(path, "w") as f:
            for line in lines:
                f.write(json.dumps({k: line[k] for k in fields}, separators=(",", ":")) + "\n")
        with open(path) as f:
            lines = [json.loads(line) for line in f]

        def arr(v, dtype=None, cols=None):
            a = np.array(v, dtype=dtype) if v else np.zeros(0, dtype=dtype or np.float64)
            return a.reshape(-1, cols) if cols else a

        def inputs(as_float):
            d = np.float64 if as_float else None
            preds = [{"bboxes": arr(x["pred_bboxes"], d, 4), "scores": arr(x["pred_scores"], d),
                      "labels": arr(x["pred_labels"], np.int64)} for x in lines]
            gts = [{"bboxes": arr(x["gt_bboxes"], d, 4), "labels": arr(x["gt_labels"], np.int64),
                    "bboxes_ignore": arr(x.get("gt_bboxes_ignore", []), d, 4),
                    "labels_ignore": arr(x.get("gt_labels_ignore", []), np.int64)} for x in lines]
            return preds, gts

        voc_kw = {"num_classes": 3, "iou_thrs": [0.5, 0.75],
                  "scale_ranges": [(0, 32), (32, 96), (96, None)]}
        rec_kw = {"proposal_nums": (1, 3, 10)}
        results = {}
        for as_float in (False, True):
            preds, gts = inputs(as_float)
            voc = VOCMeanAP(nproc=1, dist_backend="non_dist",
                            **dict(voc_kw, scale_ranges=list(voc_kw["scale_ranges"])))
            rec = ProposalRecall(nproc=1, print_results=False, dist_backend="non_dist", **rec_kw)
            results[as_float] = {
                "VOCMeanAP": {k: float(v) for k, v in voc(preds, gts).items()},
                "ProposalRecall": {k: float(v) for k, v in rec(preds, gts).items()}}
        assert json.dumps(results[False]) == json.dumps(results[True]), (name, results)
        out[name] = {
            "data": os.path.relpath(path, ROOT),
            "metrics": [
                {"label": "VOCMeanAP", "metric": "VOCMeanAP",
                 "params": {"num_classes": 3, "iou_thrs": [0.5, 0.75],
                            "scale_ranges": [[0, 32], [32, 96], [96, None]]},
                 "call": f"mmeval.VOCMeanAP(nproc=1, **{voc_kw!r})(predictions, groundtruths)",
                 "expected": results[False]["VOCMeanAP"]},
                {"label": "ProposalRecall", "metric": "ProposalRecall",
                 "params": {"proposal_nums": [1, 3, 10]},
                 "call": f"mmeval.ProposalRecall(nproc=1, **{rec_kw!r})(predictions, "
                         "groundtruths)",
                 "expected": results[False]["ProposalRecall"]}]}
    out["inputs"] = ("predictions[i] = {bboxes, scores, labels}, groundtruths[i] = {bboxes, "
                     "labels, bboxes_ignore, labels_ignore} of line i: np.array(v) as numpy "
                     "reads the line (int64 for integers), [] as zeros((0, 4)) / zeros(0); the "
                     "same values with every box as float64 give the same results")
    return out


def main():
    os.makedirs(DATA, exist_ok=True)
    images = make_data()
    all_scores = np.concatenate([im["pred_scores"] for im in images])
    assert len(np.unique(all_scores)) == len(all_scores), "scores must not tie"
    with open(os.path.join(DATA, "voc_data.json"), "w") as f:
        json.dump([{k: v.tolist() for k, v in im.items()} for im in images], f,
                  separators=(",", ":"))
    preds, gts = mm_inputs(images)
    cases = []

    def voc(name, params, **kw):
        m = VOCMeanAP(nproc=1, dist_backend="non_dist", **kw)
        res = {k: float(v) for k, v in m(preds, gts).items()}
        cases.append({"name": name, "metric": "VOCMeanAP", "params": params,
                      "call": f"mmeval.VOCMeanAP(nproc=1, **{kw!r})(predictions, groundtruths)",
                      "expected": res})

    voc("voc_area", {"num_classes": 5}, num_classes=5)
    voc("voc_11points_scales", {"num_classes": 5, "eval_mode": "11points",
                                "iou_thrs": [0.5, 0.75],
                                "scale_ranges": [[0, 32], [32, 96], [96, None]]},
        num_classes=5, eval_mode="11points", iou_thrs=[0.5, 0.75],
        scale_ranges=[(0, 32), (32, 96), (96, None)])
    voc("voc_legacy_keep", {"num_classes": 5, "use_legacy_coordinate": True,
                            "drop_class_ap": False, "iou_thrs": [0.3, 0.55, 0.7]},
        num_classes=5, use_legacy_coordinate=True, drop_class_ap=False,
        iou_thrs=[0.3, 0.55, 0.7])
    # use_legacy_coordinate with scale ranges: mmeval adds the + 1 to the areas where it counts
    # the ground truth, not in _calculate_image_tpfp's filters (the ranges' edges sit on
    # areas that the + 1 moves across: 8-pixel and 24-pixel boxes).
    voc("voc_legacy_scales", {"num_classes": 5, "use_legacy_coordinate": True,
                              "scale_ranges": [[0, 8.5], [8.5, 24.5], [24.5, None]]},
        num_classes=5, use_legacy_coordinate=True,
        scale_ranges=[(0, 8.5), (8.5, 24.5), (24.5, None)])

    def recall(name, params, **kw):
        m = ProposalRecall(nproc=1, print_results=False, dist_backend="non_dist", **kw)
        res = {k: float(v) for k, v in m(preds, gts).items()}
        cases.append({"name": name, "metric": "ProposalRecall", "params": params,
                      "call": f"mmeval.ProposalRecall(nproc=1, **{kw!r})(predictions, "
                      "groundtruths)", "expected": res})

    recall("recall_default", {})
    recall("recall_nums_thrs", {"proposal_nums": [1, 5, 20], "iou_thrs": [0.5, 0.7]},
           proposal_nums=(1, 5, 20), iou_thrs=[0.5, 0.7])
    recall("recall_legacy", {"proposal_nums": [3, 30], "use_legacy_coordinate": True},
           proposal_nums=(3, 30), use_legacy_coordinate=True)

    out = {"generated_by": "tests/reference/voc.py",
           "versions": {"mmeval": importlib.metadata.version("mmeval"),
                        "numpy": np.__version__, "python": sys.version.split()[0]},
           "data": "tests/data/detection/voc_data.json",
           "inputs": "predictions[i] = {bboxes, scores, labels}, groundtruths[i] = {bboxes, "
                     "labels, bboxes_ignore, labels_ignore} of image i (float32 boxes, int64 "
                     "labels)",
           "cases": cases,
           "example": example_section(),
           "users": users_section()}
    with open(os.path.join(ROOT, "tests", "reference", "expected_voc.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    for c in cases:
        print(c["name"], c["expected"])
    print("example", out["example"]["results"])
    for name in ("same_count", "empty_int"):
        print("users", name, [m["expected"] for m in out["users"][name]["metrics"]])


if __name__ == "__main__":
    main()
