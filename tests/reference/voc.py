"""Reference values for the detection plugin's VOCMeanAP and ProposalRecall
(tests/unit/test_detection_voc.cpp), from mmeval 0.2.1.

Writes tests/data/detection/voc_data.json (40 images: float32 xyxy boxes, float32 scores without
ties, labels in [0, 5) with class 4 never in the ground truth, ignored boxes) and
tests/reference/expected_voc.json (each case: the mmeval call and its result).

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
           "cases": cases}
    with open(os.path.join(ROOT, "tests", "reference", "expected_voc.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    for c in cases:
        print(c["name"], c["expected"])


if __name__ == "__main__":
    main()
