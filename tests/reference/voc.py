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
           "example": example_section()}
    with open(os.path.join(ROOT, "tests", "reference", "expected_voc.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    for c in cases:
        print(c["name"], c["expected"])
    print("example", out["example"]["results"])


if __name__ == "__main__":
    main()
