#!/usr/bin/env python3
"""Reference data and expected values for AVAMeanAP (plugins/detection/ava_map.cpp).

(a) Writes AVA-style files, deterministically (numpy seed 20261127), to tests/data/ava/:
      label_map.pbtxt     8 actions with ids 1..14 (gaps), AVA's .pbtxt layout
      gt.csv              ground truth: 3 videos, timestamps 902-925, 1 to 4 people a frame,
                          each with 1 to 3 actions (the same box repeated, as AVA does), rows of
                          actions outside the label map (dropped), a person_id column (the sort key)
      exclude.csv         3 frames left out (one has predictions)
      doc_gt.csv, doc_label_map.pbtxt   the one-box frame of the documented example
      preds_custom.jsonl  the same with labels 0..7 only (for custom_classes of 8 actions)
      preds.jsonl         one line a frame's predictions: video_id, timestamp, pred_bboxes
                          [n, 4] (x1, y1, x2, y2, normalised), pred_scores [n], pred_labels [n]
                          (mmeval's outputs index: action = label + 1), from a detector's errors:
                          jittered people, missed and extra people, scores for every output
                          action (10 of them; 2 outside the label map), an invalid box (x2 < x1),
                          frames without ground truth, an excluded frame, a frame split over two
                          lines, coordinates at 3-decimal ties (0.0625: how "{:.3f}" rounds);
                          every action's scores are distinct after rounding to 3 decimals (mmeval
                          orders equal scores by numpy's unstable argsort)
    and the same kind of data for configs/examples/detection_ava.yaml in
    configs/examples/data/ava/.
(b) Writes tests/reference/expected_ava.json: per case the parameters, the expected results and
    the exact mmeval call (predictions as mmeval's list of {video_id, timestamp, outputs}).

Run in the reference environment:   .venv-ref/bin/python tests/reference/ava.py
"""

import json
import logging
import platform
from pathlib import Path

import mmeval
import numpy as np
from mmeval import AVAMeanAP

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "ava"
EXAMPLE = ROOT / "configs" / "examples" / "data" / "ava"
OUT = ROOT / "tests" / "reference" / "expected_ava.json"

ACTIONS = {1: "bend/bow (at the waist)", 3: "crouch/kneel", 4: "dance", 6: "get up",
           8: "lie/sleep", 9: "martial art", 11: "sit", 14: "walk"}
NUM_OUTPUTS = 14  # the model's output labels 0..13 -> actions 1..14 (2, 5, 7, 10, 12, 13 unlisted)


def rel(path):
    return str(Path(path).relative_to(ROOT))


class Generator:
    def __init__(self, seed, videos, timestamps):
        self.rng = np.random.default_rng(seed)
        self.videos = videos
        self.timestamps = timestamps
        # Distinct scores per output label after rounding: shuffled 1..999 thousandths.
        self.pools = {l: list(self.rng.permutation(np.arange(1, 1000))) for l in range(NUM_OUTPUTS)}

    def score(self, label, base):
        pool = self.pools[label]
        # The pool value nearest to base * 1000 (so scores follow the detector's confidence).
        want = int(np.clip(round(base * 1000), 1, 999))
        k = min(range(len(pool)), key=lambda i: abs(pool[i] - want))
        v = pool.pop(k)
        return v / 1000 + float(self.rng.uniform(-0.00049, 0.00049))

    def box(self):
        x1, y1 = self.rng.uniform(0, 0.7, 2)
        w, h = self.rng.uniform(0.1, 0.3), self.rng.uniform(0.3, 0.6)
        return [float(x1), float(y1), float(min(x1 + w, 1)), float(min(y1 + h, 1))]

    def make(self):
        gt_rows, frames = [], []
        for v in self.videos:
            for t in self.timestamps:
                people = []
                for pid in range(int(self.rng.integers(1, 5))):
                    b = self.box()
                    acts = list(self.rng.choice(list(ACTIONS) + [2, 5], size=int(self.rng.integers(1, 4)),
                                                replace=False))
                    people.append((pid, b, acts))
                    for a in acts:
                        gt_rows.append([v, f"{t:04d}"] + [f"{c:.3f}" for c in b] + [str(a), str(pid)])
                frames.append((v, t, people))
        # Ground truth rows in a shuffled order within each frame (the person_id sort matters).
        preds = []
        for v, t, people in frames:
            boxes, scores, labels = [], [], []
            for pid, b, acts in people:
                if self.rng.random() < 0.1:
                    continue  # a missed person
                jb = [float(np.clip(c + self.rng.normal(0, 0.02), 0, 1)) for c in b]
                for l in range(NUM_OUTPUTS):
                    if self.rng.random() < 0.5 and (l + 1) not in acts:
                        continue
                    base = 0.75 if (l + 1) in acts else 0.25
                    boxes.append(jb)
                    scores.append(self.score(l, float(np.clip(self.rng.normal(base, 0.2), 0, 1))))
                    labels.append(l)
            if self.rng.random() < 0.3:  # a false person
                fb = self.box()
                for l in self.rng.choice(NUM_OUTPUTS, size=3, replace=False):
                    boxes.append(fb)
                    scores.append(self.score(int(l), float(self.rng.uniform(0.05, 0.6))))
                    labels.append(int(l))
            preds.append({"video_id": v, "timestamp": t, "pred_bboxes": boxes,
                          "pred_scores": scores, "pred_labels": labels})
        return gt_rows, preds


def write_label_map(path):
    with open(path, "w") as f:
        for i, name in ACTIONS.items():
            f.write(f'item {{\n  name: "{name}"\n  id: {i}\n}}\n')


def to_mmeval(preds, num_outputs):
    """tally's lines -> mmeval's predictions: outputs[label] = [[x1, y1, x2, y2, score], ...]."""
    out = []
    for p in preds:
        outputs = [np.zeros((0, 5)) for _ in range(num_outputs)]
        for b, s, l in zip(p["pred_bboxes"], p["pred_scores"], p["pred_labels"]):
            outputs[l] = np.vstack([outputs[l], np.asarray(b + [s])[None]])
        out.append({"video_id": p["video_id"], "timestamp": p["timestamp"], "outputs": outputs})
    return out


def write_lines(path, preds):
    with open(path, "w") as f:
        for p in preds:
            f.write(json.dumps(p) + "\n")
    return rel(path)


def evaluate(preds, params):
    m = AVAMeanAP(verbose=True, **params)
    m.logger.setLevel(logging.ERROR)
    outputs = len(params["custom_classes"]) if "custom_classes" in params else NUM_OUTPUTS
    return {"mAP@0.5IOU": float(m(to_mmeval(preds, outputs))["mAP@0.5IOU"])}


def main():
    DATA.mkdir(parents=True, exist_ok=True)
    gen = Generator(20261127, ["-5KQ66BBWC4", "1j20qq1JyX4", "9Y_l9NsnYE0"], range(902, 926))
    gt_rows, preds = gen.make()
    # Ground-truth rows: shuffled within each frame, a row of an unlisted action, and an
    # 8-column order that puts person 3 before person 0 (sorted by descending person_id).
    rng = np.random.default_rng(7)
    rng.shuffle(gt_rows)
    gt_rows.sort(key=lambda r: (r[0], r[1]))  # frames together, people shuffled inside
    with open(DATA / "gt.csv", "w") as f:
        for r in gt_rows:
            f.write(",".join(r) + "\n")
    write_label_map(DATA / "label_map.pbtxt")
    with open(DATA / "exclude.csv", "w") as f:
        f.write("-5KQ66BBWC4,0905\n1j20qq1JyX4,0910\n9Y_l9NsnYE0,0999\n")
    # Frames without ground truth, a split frame, an invalid box, 3-decimal ties.
    preds.append({"video_id": "zzzzzzzzzzz", "timestamp": 903, "pred_bboxes": [[0.1, 0.1, 0.4, 0.8]],
                  "pred_scores": [gen.score(0, 0.9)], "pred_labels": [0]})
    preds.append({"video_id": "9Y_l9NsnYE0", "timestamp": 999, "pred_bboxes": [[0.1, 0.1, 0.4, 0.8]],
                  "pred_scores": [gen.score(0, 0.95)], "pred_labels": [0]})
    half = preds[5]
    k = len(half["pred_scores"]) // 2
    preds[5] = {**half, "pred_bboxes": half["pred_bboxes"][:k], "pred_scores": half["pred_scores"][:k],
                "pred_labels": half["pred_labels"][:k]}
    preds.insert(40, {**half, "pred_bboxes": half["pred_bboxes"][k:], "pred_scores": half["pred_scores"][k:],
                      "pred_labels": half["pred_labels"][k:]})
    preds[8]["pred_bboxes"][0] = [0.5, 0.2, 0.3, 0.6]  # x2 < x1: dropped
    preds[9]["pred_bboxes"][0] = [0.0625, 0.1875, 0.3125, 0.5625]  # exact 3-decimal ties
    preds.append({"video_id": "-5KQ66BBWC4", "timestamp": 904, "pred_bboxes": [], "pred_scores": [],
                  "pred_labels": []})
    data_file = write_lines(DATA / "preds.jsonl", preds)
    # The documented example (ava_map.cpp, tests/unit/test_doc_examples.cpp): one frame, one box.
    (DATA / "doc_gt.csv").write_text("vid,0902,0.1,0.2,0.5,0.9,1,0\n")
    (DATA / "doc_label_map.pbtxt").write_text('item {\n  name: "a"\n  id: 1\n}\n')
    doc_value = evaluate([{"video_id": "vid", "timestamp": 902, "pred_bboxes": [[0.1, 0.2, 0.5, 0.9]],
                           "pred_scores": [0.9], "pred_labels": [0]}],
                         {"ann_file": str(DATA / "doc_gt.csv"),
                          "label_file": str(DATA / "doc_label_map.pbtxt")})
    assert doc_value == {"mAP@0.5IOU": 1.0}, doc_value
    files = {"ann_file": rel(DATA / "gt.csv"), "label_file": rel(DATA / "label_map.pbtxt"),
             "exclude_file": rel(DATA / "exclude.csv")}
    plan = [
        ("default", {"ann_file": files["ann_file"], "label_file": files["label_file"],
                     "exclude_file": files["exclude_file"]}),
        ("no_exclusions", {"ann_file": files["ann_file"], "label_file": files["label_file"]}),
        # custom_classes maps output label l to action custom_classes[l] (8 labels here: the
        # predictions of labels 0..7, so that each action's scores stay distinct).
        ("custom_classes", {**files, "custom_classes": [4, 1, 8, 9, 11, 14, 3, 6]}),
    ]
    custom_preds = [{**p, "pred_bboxes": [b for b, l in zip(p["pred_bboxes"], p["pred_labels"]) if l < 8],
                     "pred_scores": [x for x, l in zip(p["pred_scores"], p["pred_labels"]) if l < 8],
                     "pred_labels": [l for l in p["pred_labels"] if l < 8]} for p in preds]
    custom_file = write_lines(DATA / "preds_custom.jsonl", custom_preds)
    cases = []
    for name, params in plan:
        abs_params = {k: str(ROOT / v) if k.endswith("_file") else v for k, v in params.items()}
        frames = custom_preds if "custom_classes" in params else preds
        expected = evaluate(frames, abs_params)
        args = ", ".join(f"{k}={v!r}" for k, v in params.items())
        cases.append({"name": name, "metric": "AVAMeanAP", "params": params,
                      "data": custom_file if frames is custom_preds else data_file,
                      "expected": expected,
                      "call": f"mmeval.AVAMeanAP({args}, verbose=True)(predictions) (paths from "
                              "the repository root; predictions: each line as {video_id, "
                              "timestamp, outputs: per label an array of [x1, y1, x2, y2, score]})"})

    EXAMPLE.mkdir(parents=True, exist_ok=True)
    egen = Generator(20261128, ["kMy-6RtoOVU", "oD_wxyTHJ2I"], range(1000, 1012))
    erows, epreds = egen.make()
    with open(EXAMPLE / "gt.csv", "w") as f:
        for r in erows:
            f.write(",".join(r) + "\n")
    write_label_map(EXAMPLE / "label_map.pbtxt")
    example_data = write_lines(EXAMPLE / "preds.jsonl", epreds)
    eparams = {"ann_file": str(EXAMPLE / "gt.csv"), "label_file": str(EXAMPLE / "label_map.pbtxt")}
    example = {"config": "configs/examples/detection_ava.yaml", "data": example_data,
               "results": {"AVAMeanAP": evaluate(epreds, eparams)}}
    doc = {"generator": "tests/reference/ava.py",
           "versions": {"python": platform.python_version(), "numpy": np.__version__,
                        "mmeval": mmeval.__version__},
           "cases": cases, "example": example}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    for c in cases:
        print(c["name"], c["expected"])
    print("example", example["results"])


if __name__ == "__main__":
    main()
