"""Side-by-side COCO keypoint (OKS) evaluation: pycocotools, hotcoco and tally on the same
synthetic person_keypoints-style files, each from JSON loading to the 10 stats in a cold process
(/usr/bin/time -v: wall, CPU, peak RSS; one core, `taskset -c 0`).

    python bench/coco/keypoints.py --out DIR --tally build/bin/tally [--images 5000]

Data (numpy seed 2027): IMAGES images, about 7 people per image (17 keypoints each, 60% visible,
20% occluded, 20% unlabelled; 8% with no labelled keypoint), 1% crowds; results as mmpose writes
them (keypoints and score, no box): jittered ground truth and 3 false people per image.
"""
import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np

K = 17


def make(out, n_images):
    rng = np.random.default_rng(2027)
    images, anns, res = [], [], []
    ann_id = 1
    for i in range(n_images):
        img_id = 1 + i
        w, h = 640, 480
        images.append({"id": img_id, "width": w, "height": h})
        n = int(rng.poisson(7))
        for _ in range(n):
            side = float(np.exp(rng.uniform(np.log(20), np.log(300))))
            bw, bh = min(side * 0.6, w - 2), min(side * 1.4, h - 2)
            x, y = rng.uniform(0, w - bw), rng.uniform(0, h - bh)
            crowd = rng.random() < 0.01
            none = rng.random() < 0.08 or crowd
            v = rng.choice([0, 1, 2], K, p=[0.2, 0.2, 0.6]) * (0 if none else 1)
            xs, ys = x + rng.uniform(0, bw, K), y + rng.uniform(0, bh, K)
            kps = []
            for j in range(K):
                kps += [0, 0, 0] if v[j] == 0 else [round(float(xs[j]), 2),
                                                     round(float(ys[j]), 2), int(v[j])]
            area = round(bw * bh * 0.6, 2)
            anns.append({"id": ann_id, "image_id": img_id, "category_id": 1, "iscrowd": int(crowd),
                         "bbox": [round(x, 2), round(y, 2), round(bw, 2), round(bh, 2)],
                         "area": area, "keypoints": kps, "num_keypoints": int((v > 0).sum())})
            ann_id += 1
            if rng.random() < 0.9:
                s = 0.05 * np.sqrt(area)
                px, py = xs + rng.normal(0, s, K), ys + rng.normal(0, s, K)
                res.append({"image_id": img_id, "category_id": 1, "score": round(float(
                    rng.uniform(0.2, 1.0)), 3), "keypoints": [round(float(c), 2) for j in range(K)
                                                              for c in (px[j], py[j], 1.0)]})
        for _ in range(3):
            side = float(rng.uniform(20, 200))
            x, y = rng.uniform(0, w - side), rng.uniform(0, h - side)
            res.append({"image_id": img_id, "category_id": 1, "score": round(float(
                rng.uniform(0.0, 0.6)), 3), "keypoints": [
                round(float(c), 2) for _ in range(K)
                for c in (x + rng.uniform(0, side), y + rng.uniform(0, side), 1.0)]})
    cats = [{"id": 1, "name": "person", "keypoints": [f"k{j}" for j in range(K)],
             "skeleton": []}]
    gt_path, res_path = os.path.join(out, "kp_gt.json"), os.path.join(out, "kp_res.json")
    json.dump({"images": images, "annotations": anns, "categories": cats}, open(gt_path, "w"))
    json.dump(res, open(res_path, "w"))
    return gt_path, res_path, len(anns), len(res)


TOOL = r'''
import sys, json, contextlib, io
tool, gt, res = sys.argv[1:4]
with contextlib.redirect_stdout(io.StringIO()):
    if tool == "pycocotools":
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval
    else:
        from hotcoco import COCO, COCOeval
    g = COCO(gt)
    e = COCOeval(g, g.loadRes(res), "keypoints")
    e.evaluate(); e.accumulate(); e.summarize()
print(json.dumps([float(v) for v in e.stats]))
'''


def timed(cmd):
    p = subprocess.run(["/usr/bin/time", "-v", "taskset", "-c", "0"] + cmd, capture_output=True,
                       text=True, env={**os.environ, "RAYON_NUM_THREADS": "1"})
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    f = lambda n: re.search(re.escape(n) + r":\s*(.+)", p.stderr).group(1).strip()
    wall = sum(float(x) * 60 ** i for i, x in enumerate(reversed(f(
        "Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":"))))
    return p.stdout, wall, int(f("Maximum resident set size (kbytes)")) / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tally", required=True)
    ap.add_argument("--images", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    gt, res, n_gt, n_res = make(a.out, a.images)
    cfg = os.path.join(a.out, "kp.yaml")
    open(cfg, "w").write(f"data: {{type: coco_json, annotations: {gt}, results: {res}}}\n"
                         "metrics: [{type: COCODetection, metric: [keypoints]}]\n")
    tool_py = os.path.join(a.out, "tool.py")
    open(tool_py, "w").write(TOOL)
    print(f"{a.images} images, {n_gt} people, {n_res} results")
    rows, ref = [], None
    for tool in ["pycocotools", "hotcoco", "tally"]:
        best = None
        for _ in range(a.repeat):
            if tool == "tally":
                out_json = os.path.join(a.out, "tally.json")
                _, wall, rss = timed([a.tally, "run", cfg, "-q", "--output", out_json])
                stats = list(json.load(open(out_json))["results"]["COCODetection"].values())
            else:
                out, wall, rss = timed([sys.executable, tool_py, tool, gt, res])
                stats = json.loads(out.strip().splitlines()[-1])
            if best is None or wall < best[1]:
                best = (stats, wall, rss)
        if ref is None:
            ref = best[0]
        diff = max(abs(x - y) for x, y in zip(best[0], ref))
        rows.append((tool, best[1], best[2], "reference" if tool == "pycocotools" else
                     ("identical" if diff == 0 else f"max abs diff {diff:.1e}")))
        print(rows[-1], flush=True)
    print("| tool | wall s | peak RSS MB | 10 stats |\n|---|---|---|---|")
    for tool, wall, rss, same in rows:
        print(f"| {tool} | {wall:.2f} | {rss:.0f} | {same} |")


if __name__ == "__main__":
    main()
