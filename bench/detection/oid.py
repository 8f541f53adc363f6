"""Side-by-side Open Images mAP: mmeval 0.2.1's OIDMeanAP and tally's OIDMeanAP (`tally run`) on
the same synthetic Open-Images-like data, results checked equal, times and ratio printed.

    .venv-ref/bin/python bench/detection/oid.py --tally build/bin/tally [--images 5000]
        [--classes 500] [--gt 20] [--preds 100] [--nproc 1] [--out DIR] [--cpu 0]

Data (numpy seed 600): a class hierarchy of CLASSES classes in Open Images' JSON format (50
top-level classes, each with children, some with grandchildren, 5% of the classes under a
second parent) and its class-descriptions CSV; IMAGES images, each with about GT ground-truth
boxes (Poisson; 10% group-of, larger) of random classes, 0-3 image-level labels, and about PREDS
predictions: jittered ground truth (80%, 20% of those labelled with the box's parent class) and
random boxes of random classes; float32 boxes and scores, no tied scores.

Timed, each once, on one core (`taskset -c CPU` for both when --cpu is given):
  mmeval  OIDMeanAP(nproc=NPROC, class_relation_matrix=get_relation_matrix(...)) add() + compute
          on arrays already in memory (float64, as the jsonl reader reads the file);
  tally   the whole `tally run` process: start, loading the plugins and the hierarchy, reading
          the .jsonl file, add and compute, writing the results JSON.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def make_hierarchy(rng, n_classes):
    """Parents of each class (index lists) and the nested JSON."""
    parents = [[] for _ in range(n_classes)]
    n_top = min(50, n_classes)
    level1 = list(range(n_top))
    rest = list(range(n_top, n_classes))
    mid = rest[: len(rest) // 2]
    low = rest[len(rest) // 2:]
    for c in mid:
        parents[c].append(int(rng.choice(level1)))
    for c in low:
        parents[c].append(int(rng.choice(mid)) if mid else int(rng.choice(level1)))
    for c in rng.choice(rest, max(1, len(rest) // 20), replace=False) if rest else []:
        extra = int(rng.choice(level1))
        if extra not in parents[c] and extra != c:
            parents[c].append(extra)
    names = [f"/m/bench{c:05d}" for c in range(n_classes)]

    children = {}
    for k in range(n_classes):
        for p in parents[k]:
            children.setdefault(p, []).append(k)

    def node_fast(c):
        n = {"LabelName": names[c]}
        if c in children:
            n["Subcategory"] = [node_fast(k) for k in children[c]]
        return n

    root = {"LabelName": "/m/0bl9f",
            "Subcategory": [node_fast(c) for c in range(n_classes) if not parents[c]]}
    return parents, names, root


def make_data(rng, n_images, n_classes, n_gt, n_preds, parents):
    images = []
    total_preds = 0
    for _ in range(n_images):
        w, h = 1024.0, 768.0
        g = int(rng.poisson(n_gt))
        x = rng.uniform(0, w - 20, g)
        y = rng.uniform(0, h - 20, g)
        side = np.exp(rng.uniform(np.log(8), np.log(400), g))
        group = rng.random(g) < 0.1
        side = np.where(group, side * 2.0, side)
        bw, bh = side * rng.uniform(0.6, 1.4, g), side * rng.uniform(0.6, 1.4, g)
        gt = np.stack([x, y, x + bw, y + bh], axis=1).astype(np.float32)
        gl = rng.integers(0, n_classes, g)
        pb, pl = [], []
        for b, l, grp in zip(gt, gl, group):
            if grp:
                for _ in range(int(rng.integers(1, 5))):
                    sw, sh = rng.uniform(0.1, 0.4) * (b[2] - b[0]), rng.uniform(0.1, 0.4) * (
                        b[3] - b[1])
                    px, py = rng.uniform(b[0], b[2] - sw), rng.uniform(b[1], b[3] - sh)
                    pb.append([px, py, px + sw, py + sh])
                    pl.append(l)
            elif rng.random() < 0.8:
                pb.append(b + rng.normal(0, 0.07 * (b[2] - b[0]), 4))
                pl.append(parents[l][0] if parents[l] and rng.random() < 0.2 else l)
        nf = max(0, int(rng.poisson(n_preds)) - len(pb))
        fx, fy = rng.uniform(0, w - 20, nf), rng.uniform(0, h - 20, nf)
        fs = np.exp(rng.uniform(np.log(8), np.log(400), nf))
        for i in range(nf):
            pb.append([fx[i], fy[i], fx[i] + fs[i], fy[i] + fs[i] * rng.uniform(0.6, 1.4)])
        pl.extend(rng.integers(0, n_classes, nf).tolist())
        k = int(rng.integers(0, 4))
        images.append({"pred_bboxes": np.array(pb, dtype=np.float32).reshape(-1, 4),
                       "pred_labels": np.array(pl, dtype=np.int64),
                       "gt_bboxes": gt, "gt_labels": gl.astype(np.int64),
                       "gt_is_group_of": group.astype(np.int64),
                       "gt_image_level_labels": rng.choice(n_classes, k, replace=False)
                       .astype(np.int64)})
        total_preds += len(pl)
    # distinct float32 scores: a permutation of k / (total + 1)
    scores = ((rng.permutation(total_preds) + 1) / (total_preds + 1)).astype(np.float32)
    assert len(np.unique(scores)) == total_preds, "scores must not tie"
    at = 0
    for im in images:
        n = len(im["pred_labels"])
        im["pred_scores"] = scores[at:at + n]
        at += n
    return images


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tally", default="build/bin/tally")
    ap.add_argument("--images", type=int, default=5000)
    ap.add_argument("--classes", type=int, default=500)
    ap.add_argument("--gt", type=int, default=20)
    ap.add_argument("--preds", type=int, default=100)
    ap.add_argument("--nproc", type=int, default=1, help="mmeval's nproc (1: no Pool)")
    ap.add_argument("--cpu", type=int, default=None, help="taskset -c CPU for both")
    ap.add_argument("--out", default=None, help="folder for the data (default: a temp folder)")
    args = ap.parse_args()

    out = args.out or tempfile.mkdtemp(prefix="tally_oid_bench_")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(600)
    parents, names, root = make_hierarchy(rng, args.classes)
    hier, labels = os.path.join(out, "hierarchy.json"), os.path.join(out, "labels.csv")
    with open(hier, "w") as f:
        json.dump(root, f)
    with open(labels, "w") as f:
        for i, n in enumerate(names):
            f.write(f"{n},Class {i}\n")
    images = make_data(rng, args.images, args.classes, args.gt, args.preds, parents)
    data = os.path.join(out, "oid.jsonl")
    with open(data, "w") as f:
        for im in images:
            f.write(json.dumps({k: v.tolist() for k, v in im.items()}, separators=(",", ":"))
                    + "\n")
    n_gt = sum(len(im["gt_labels"]) for im in images)
    n_pred = sum(len(im["pred_labels"]) for im in images)
    n_group = sum(int(im["gt_is_group_of"].sum()) for im in images)
    print(f"data: {args.images} images, {args.classes} classes, {n_gt} boxes ({n_group} group-of),"
          f" {n_pred} predictions, {os.path.getsize(data) / 1e6:.1f} MB jsonl in {out}")

    config = os.path.join(out, "oid.yaml")
    with open(config, "w") as f:
        f.write(f"""data:
  type: jsonl
  path: oid.jsonl
  fields: {{pred_bboxes: pred_bboxes, pred_scores: pred_scores, pred_labels: pred_labels,
           gt_bboxes: gt_bboxes, gt_labels: gt_labels, gt_is_group_of: gt_is_group_of,
           gt_image_level_labels: gt_image_level_labels}}
metrics:
  - type: OIDMeanAP
    num_classes: {args.classes}
    hierarchy_file: hierarchy.json
    label_file: labels.csv
""")
    pin = ["taskset", "-c", str(args.cpu)] if args.cpu is not None else []
    results = os.path.join(out, "tally_results.json")
    cmd = pin + [os.path.abspath(args.tally), "run", "-q", config, "-o", results]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    t_tally = time.perf_counter() - t0
    with open(results) as f:
        got = json.load(f)["results"]["OIDMeanAP"]

    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    from mmeval import OIDMeanAP
    from mmeval.metrics.oid_map import get_relation_matrix
    # As the jsonl reader reads the lines: float64 boxes and scores.
    preds = [{"bboxes": im["pred_bboxes"].astype(np.float64),
              "scores": im["pred_scores"].astype(np.float64), "labels": im["pred_labels"]}
             for im in images]
    gts = [{"instances": [{"bbox": b, "bbox_label": int(l), "is_group_of": bool(g)}
                          for b, l, g in zip(im["gt_bboxes"].astype(np.float64).tolist(),
                                             im["gt_labels"], im["gt_is_group_of"])],
            "image_level_labels": im["gt_image_level_labels"]} for im in images]
    t0 = time.perf_counter()
    m = OIDMeanAP(num_classes=args.classes, nproc=args.nproc, dist_backend="non_dist",
                  class_relation_matrix=get_relation_matrix(hier, labels))
    m.add(preds, gts)
    want = {k: float(v) for k, v in m.compute().items()}
    t_mmeval = time.perf_counter() - t0

    equal = got == want
    print("command:", " ".join(cmd))
    print(f"tally  {got}")
    print(f"mmeval {want}")
    print(f"equal: {'yes (bit for bit)' if equal else 'NO'}")
    print(f"mmeval 0.2.1 OIDMeanAP (nproc={args.nproc}, add + compute): {t_mmeval:.2f} s")
    print(f"tally run (whole process):                        {t_tally:.2f} s")
    print(f"ratio mmeval / tally: {t_mmeval / t_tally:.1f}x")
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
