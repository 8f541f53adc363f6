"""COCO-val-sized synthetic detection data for bench/coco/run.py (deterministic, numpy seed 2024).

gt.json: 5,000 images (640x480 .. 640x640), about 37k boxes over 80 COCO category ids (log-uniform
sizes: small, medium and large objects), 1% crowd, a 4-point polygon per box; dets_{n}.json: n
detections per image (jittered ground truth, wrong categories, random boxes), scores with 3
decimals (many ties), boxes with 2 decimals, listed image by image.

    python bench/coco/gen.py OUT_DIR [--dets 100 1000] [--segm]

--segm: also segm_{n}.json, the same detections as RLE masks (16-point ellipses in their boxes).

--objects365: Objects365-val-sized instead (80,000 images, 365 categories, about 15 boxes per
image, 1.2 M in all; dets_15.json: 15 detections per image, 1.2 M); `meta.json` records the
counts for run.py.
"""
import argparse
import json
import os

import numpy as np

COCO_CATS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
             25, 27, 28, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49,
             50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74,
             75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90]
CATS = COCO_CATS
N_IMAGES = 5000
GT_PER_IMAGE = 7.3


def images_and_gt(rng):
    images, anns, per_image = [], [], []
    ann_id = 1
    for i in range(N_IMAGES):
        img_id = 100000 + 37 * i
        w, h = 640, int(rng.choice([480, 427, 512, 640]))
        images.append({"id": img_id, "width": w, "height": h, "file_name": f"{img_id:012d}.jpg"})
        n = int(rng.poisson(GT_PER_IMAGE))
        side = np.exp(rng.uniform(np.log(6), np.log(400), n))
        bw = np.minimum(side * rng.uniform(0.6, 1.5, n), w - 1)
        bh = np.minimum(side * rng.uniform(0.6, 1.5, n), h - 1)
        x = rng.uniform(0, w - bw)
        y = rng.uniform(0, h - bh)
        cats = rng.choice(CATS, n)
        crowd = rng.random(n) < 0.01
        boxes = []
        for j in range(n):
            b = [round(float(x[j]), 2), round(float(y[j]), 2), round(float(bw[j]), 2),
                 round(float(bh[j]), 2)]
            x1, y1, x2, y2 = b[0], b[1], b[0] + b[2], b[1] + b[3]
            anns.append({"id": ann_id, "image_id": img_id, "category_id": int(cats[j]),
                         "bbox": b, "area": round(b[2] * b[3] * 0.8, 3),
                         "iscrowd": int(crowd[j]),
                         "segmentation": [[x1, y1, x2, y1, x2, y2, x1, y2]]})
            ann_id += 1
            boxes.append((b, int(cats[j])))
        per_image.append((img_id, w, h, boxes))
    cats = [{"id": c, "name": f"class_{c}", "supercategory": "thing"} for c in CATS]
    return {"info": {"description": "tally bench/coco synthetic"}, "images": images,
            "annotations": anns, "categories": cats}, per_image


def write_dets(path, per_image, n_dets, seed):
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        f.write("[")
        first = True
        for img_id, w, h, boxes in per_image:
            rows = []
            for b, c in boxes:
                if rng.random() < 0.7 and len(rows) < n_dets:
                    s = max(b[2], b[3])
                    j = rng.normal(0, 0.05 * s, 4)
                    bb = [b[0] + j[0], b[1] + j[1], max(b[2] + j[2], 1.0), max(b[3] + j[3], 1.0)]
                    cat = c if rng.random() < 0.9 else int(rng.choice(CATS))
                    rows.append((cat, bb, float(rng.uniform(0.3, 1.0))))
            k = n_dets - len(rows)
            side = np.exp(rng.uniform(np.log(4), np.log(300), k))
            bw = np.minimum(side * rng.uniform(0.5, 1.6, k), w - 1)
            bh = np.minimum(side * rng.uniform(0.5, 1.6, k), h - 1)
            x = rng.uniform(0, w - bw)
            y = rng.uniform(0, h - bh)
            cats = rng.choice(CATS, k)
            scores = rng.uniform(0.0, 0.9, k)
            for j in range(k):
                rows.append((int(cats[j]), [x[j], y[j], bw[j], bh[j]], float(scores[j])))
            parts = []
            for cat, bb, sc in rows:
                parts.append('{"image_id":%d,"category_id":%d,"bbox":[%.2f,%.2f,%.2f,%.2f],'
                             '"score":%.3f}' % (img_id, cat, bb[0], bb[1], bb[2], bb[3], sc))
            if parts:
                f.write(("" if first else ",") + ",".join(parts))
                first = False
        f.write("]")


def write_segm(path, dets_path, per_image):
    """The detections of dets_path with a mask each ("segmentation": compressed RLE, as models
    write them): a 16-point ellipse inscribed in the detection's box, rasterised by pycocotools at
    the image's size. The ground truth's masks are its 4-point polygons (the boxes)."""
    from pycocotools import mask as mask_utils
    size = {img_id: (h, w) for img_id, w, h, _ in per_image}
    with open(dets_path) as f:
        dets = json.load(f)
    t = np.linspace(0, 2 * np.pi, 16, endpoint=False)
    with open(path, "w") as f:
        f.write("[")
        for i, d in enumerate(dets):
            h, w = size[d["image_id"]]
            x, y, bw, bh = d["bbox"]
            cx, cy = x + bw / 2, y + bh / 2
            poly = np.stack([cx + bw / 2 * np.cos(t), cy + bh / 2 * np.sin(t)], 1).ravel()
            rle = mask_utils.merge(mask_utils.frPyObjects([poly.tolist()], h, w))
            f.write(("," if i else "") + '{"image_id":%d,"category_id":%d,"segmentation":'
                    '{"size":[%d,%d],"counts":%s},"score":%.3f}'
                    % (d["image_id"], d["category_id"], h, w, json.dumps(rle["counts"].decode()),
                       d["score"]))
        f.write("]")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--dets", type=int, nargs="+", default=None)
    ap.add_argument("--segm", action="store_true",
                    help="also segm_{n}.json: the detections as masks (RLE), for --iou-type segm")
    ap.add_argument("--objects365", action="store_true",
                    help="80,000 images, 365 categories, ~15 boxes and 15 detections per image")
    a = ap.parse_args()
    global N_IMAGES, GT_PER_IMAGE, CATS
    if a.objects365:
        N_IMAGES, GT_PER_IMAGE, CATS = 80000, 15.0, list(range(1, 366))
    dets = a.dets or ([15] if a.objects365 else [100, 1000])
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(2024)
    gt, per_image = images_and_gt(rng)
    with open(os.path.join(a.out, "gt.json"), "w") as f:
        json.dump(gt, f, separators=(",", ":"))
    print(f"gt.json: {len(gt['images'])} images, {len(gt['annotations'])} boxes")
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump({"images": N_IMAGES, "categories": len(CATS),
                   "gt_boxes": len(gt["annotations"])}, f)
    for n in dets:
        path = os.path.join(a.out, f"dets_{n}.json")
        write_dets(path, per_image, n, seed=n)
        print(f"dets_{n}.json: {n * N_IMAGES} detections, {os.path.getsize(path) / 1e6:.0f} MB")
        if a.segm:
            spath = os.path.join(a.out, f"segm_{n}.json")
            write_segm(spath, path, per_image)
            print(f"segm_{n}.json: their masks, {os.path.getsize(spath) / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
