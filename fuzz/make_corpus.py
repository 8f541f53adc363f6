#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/{npy,config,jsonl,coco_json,png}/ (deterministic).

Small valid inputs, taken from tests/data and configs/examples or made here with NumPy and
Pillow, each prefixed with the mode bytes its target reads (fuzz/fuzz_entry_points.hpp).
fuzz/corpus/state_payload/ comes from the fuzz build: build-fuzz/bin/make_state_seeds.

Run with the reference environment: .venv-ref/bin/python fuzz/make_corpus.py
"""
import io
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"


def reset(name):
    d = CORPUS / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    return d


def npy_bytes(arr, version=None):
    buf = io.BytesIO()
    if version is None:
        np.save(buf, arr)
    else:
        np.lib.format.write_array(buf, arr, version=version)
    return buf.getvalue()


def npz_bytes(compressed, **arrays):
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def write(d, name, data):
    (d / name).write_bytes(data)


def npy_corpus():
    d = reset("npy")
    # mode: bit 0 npz, bits 1-2 world, bits 3-4 rank, bits 5-6 batch - 1, bit 7 second field
    taken = [
        "tests/data/keypoints/a_f64_mask.npy",
        "tests/data/keypoints/a_f32_head_size.npy",
        "tests/data/segmentation/c_gt_u8.npy",
        "tests/data/segmentation/e_shapes.npy",
        "tests/data/restoration/ragged_gt_r2.npy",
    ]
    for i, rel in enumerate(taken):
        write(d, "tests_" + Path(rel).stem, bytes([0x20 * (i % 4) | 0x02 * (i % 3)]) + (ROOT / rel).read_bytes())
    rng = np.random.default_rng(0)
    made = {
        "f32_2d": rng.standard_normal((5, 3)).astype("<f4"),
        "f64_1d": rng.standard_normal(7),
        "i64_labels": rng.integers(0, 10, 6).astype("<i8"),
        "i32_3d": rng.integers(-5, 5, (2, 2, 3)).astype("<i4"),
        "u16": rng.integers(0, 60000, (4, 2)).astype("<u2"),
        "i16": rng.integers(-300, 300, 4).astype("<i2"),
        "u32": rng.integers(0, 2**32 - 1, 3, dtype=np.uint64).astype("<u4"),
        "i8": rng.integers(-100, 100, 5).astype("i1"),
        "bool": rng.integers(0, 2, (4, 3)).astype(bool),
        "empty": np.zeros((0, 4), "<f4"),
        "zero_row": np.zeros((3, 0), "<i8"),
    }
    for i, (name, arr) in enumerate(made.items()):
        write(d, "npy_" + name, bytes([0x02 * (i % 3) | 0x08 * (i % 2) | 0x20 * (i % 4) | 0x80 * (i % 2)]) + npy_bytes(arr))
    write(d, "npy_v2", bytes([0x40]) + npy_bytes(made["f32_2d"], version=(2, 0)))
    write(d, "npy_v3", bytes([0x00]) + npy_bytes(made["i64_labels"], version=(3, 0)))
    # hand-made: an unaligned header (the reader copies) and a Python 2 era shape (3L, 2L)
    header = b"{'descr': '<f8', 'fortran_order': False, 'shape': (3L, 2L), }"
    header += b" " * ((16 - (10 + len(header) + 1) % 16) % 16) + b"\n"
    write(d, "npy_py2_shape", b"\x00" + b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header
          + np.arange(6, dtype="<f8").tobytes())
    header = b"{'descr': '<i4', 'fortran_order': False, 'shape': (2,)}\n"
    write(d, "npy_unaligned", b"\x00" + b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header
          + np.array([7, -7], "<i4").tobytes())
    # .npz: members x and y
    x = made["f32_2d"]
    y = rng.integers(0, 3, 5).astype("<i8")
    write(d, "npz_stored", bytes([0x01]) + npz_bytes(False, x=x, y=y))
    write(d, "npz_deflated", bytes([0x81 | 0x20]) + npz_bytes(True, x=x, y=y))
    write(d, "npz_sharded", bytes([0x01 | 0x04 | 0x08 | 0x80]) + npz_bytes(True, x=made["bool"], y=made["u16"]))
    # a zip whose member is named x (no .npy suffix)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("x", npy_bytes(made["i8"]))
    write(d, "npz_bare_name", bytes([0x01]) + buf.getvalue())
    for f in ["tests/data/classification_extra/npz/stored.npz", "tests/data/classification_extra/npz/deflated.npz"]:
        data = (ROOT / f).read_bytes()
        if len(data) < 8192:
            write(d, "tests_" + Path(f).stem, bytes([0x01]) + data)


def config_corpus():
    d = reset("config")
    for f in sorted((ROOT / "configs" / "examples").glob("*.yaml")):
        write(d, "example_" + f.stem, f.read_bytes())
    write(d, "example_classification_set", (ROOT / "configs/examples/classification.yaml").read_bytes()
          + b"\0metrics.0.topk=[1,5]\0data.batch_size=16\0metrics.1.average=micro\0backend.type=nondist")
    write(d, "minimal", b"metrics: [{type: Accuracy}]\n")
    write(d, "set_only", b"\0metrics.0.type=Accuracy\0metrics.0.topk=[1, 2]\0output.json=r.json")
    write(d, "design", b"""backend:
  type: mpi
  timeout: 30
data:
  type: npy
  batch_size: 4096
  fields:
    pred_scores: preds.npy
    gt_labels: labels.npy
metrics:
  - type: Accuracy
    topk: [1, 3]
    thrs: [0.0, 0.5]
  - type: SingleLabelMetric
    name: prf_macro
    average: macro
    inputs: {pred_scores: logits}
output:
  json: results.json
  junit: junit.xml
  markdown: report.md
  html: report.html
regression:
  baseline: baseline.json
  rtol: 1.0e-9
  atol: 0
  tolerances: {Accuracy.top1: {atol: 0.01}}
""")
    write(d, "anchors", b"""defaults: &d {type: MeanIoU, num_classes: 5}
metrics:
  - *d
  - <<: *d
    name: second
  - {type: ConfusionMatrix, num_classes: &n 3}
data: {type: png_masks, fields: {pred_sem_seg: p, gt_sem_seg: g}, batch_size: *n}
""")
    write(d, "scalars", b"""metrics:
  - type: PSNR
    crop_border: 0x10
    convert_to: 'Y'
  - type: SSIM
    crop_border: +4
  - type: COCODetection
    metric: [bbox, segm, proposal]
    iou_thrs: [.5, 0.75, 1e-1, .inf]
    proposal_nums: [1, 10, 100]
    classwise: True
    cat_ids: [1, 2]
    classes: ["a", 'b']
  - {type: BLEU, n_gram: 4, smooth: ~}
data: {type: coco_json, annotations: a.json, results: r.json, masks: auto, threads: 2}
""")
    write(d, "jsonl_text", b"""data:
  type: jsonl
  path: t.jsonl
  fields: {pred: hypothesis, refs: references, score: meta.score}
metrics:
  - type: WordAccuracy
    mode: [exact, ignore_case]
  - type: ROUGE
""" + b"\0data.fields.gt=reference\0metrics.1.rouge_keys=[rouge1]")


def jsonl_corpus():
    d = reset("jsonl")

    def head(rel, n):
        return b"".join((ROOT / rel).read_bytes().splitlines(keepends=True)[:n])

    # mode: bit 0 fields line, bits 1-3 batch - 1, bits 4-5 world, bits 6-7 rank
    write(d, "ocr", bytes([0x02]) + head("tests/data/text/ocr.jsonl", 4))
    write(d, "asr", bytes([0x10 | 0x40]) + head("tests/data/text/asr.jsonl", 3))
    write(d, "mt_zh", bytes([0x00]) + head("tests/data/text/mt_zh.jsonl", 2))
    write(d, "translations_fields", bytes([0x01 | 0x04]) + b"pred=hypothesis;refs=references;ocr_pred=ocr.pred;gt=reference\n"
          + head("configs/examples/data/text/translations.jsonl", 3))
    write(d, "numeric", bytes([0x02 | 0x20]) + b"""{"id": 1, "score": 0.5, "ok": true, "kp": [[1, 2], [3, 4]], "v": [1, 2, 3], "meta": {"w": 2}}
{"id": 2, "score": 1, "ok": false, "kp": [[5, 6], [7, 8]], "v": [4.5, 5, 6], "meta": {"w": 3.5}}
{"id": 3, "score": -2e3, "ok": true, "kp": [[0, 0], [1, 1]], "v": [7, 8, 9], "meta": {"w": 1}}
""")
    write(d, "ragged", bytes([0x01]) + b"a=x;b=n.y;c=t\n" + b"""{"x": [1, 2], "n": {"y": [[1.5]]}, "t": ["a", "b"]}
{"x": [3], "n": {"y": [[2], [3]]}, "t": []}\r
{"x": [], "n": {"y": [[4, 5]]}, "t": ["\\u00e9", "z"]}

""")
    write(d, "bom_text", bytes([0x00]) + "\ufeff".encode() + '{"pred": "caf\u00e9", "gt": "cafe"}\n{"pred": "x", "gt": "y"}'.encode())


def coco_corpus():
    d = reset("coco_json")
    gt = json.loads((ROOT / "tests/data/detection/coco_gt.json").read_text())
    bbox = json.loads((ROOT / "tests/data/detection/coco_bbox.json").read_text())
    segm = json.loads((ROOT / "tests/data/detection/coco_segm.json").read_text())
    # mode byte: bits 0-1 masks, 2-3 batch - 1, 4-6 block_bytes, 7 threads; shard byte: 0-1 world, 2-3 rank

    def subset(image_ids, results, max_anns=4, max_res=4):
        images = [im for im in gt["images"] if im["id"] in image_ids]
        anns = [a for a in gt["annotations"] if a["image_id"] in image_ids][:max_anns]
        cats = sorted({a["category_id"] for a in anns})
        categories = [c for c in gt["categories"] if c["id"] in cats]
        res = [r for r in results if int(r["image_id"]) in image_ids][:max_res]
        for r in res:  # the subset keeps the results of kept categories only
            r["category_id"] = int(r["category_id"])
        return ({"images": images, "annotations": anns, "categories": categories}, res)

    ids = [im["id"] for im in gt["images"]]
    a, r = subset({ids[0]}, bbox)
    write(d, "bbox_one_image", bytes([0x02, 0x00]) + json.dumps(a).encode() + b"\0" + json.dumps(r).encode())
    a, r = subset({ids[1], ids[2]}, bbox, 6, 6)
    write(d, "bbox_blocks", bytes([0x02 | 0x10 | 0x80, 0x01]) + json.dumps(a).encode() + b"\0" + json.dumps(r).encode())
    rle_ann = next(x for x in gt["annotations"] if isinstance(x["segmentation"], dict))
    a, r = subset({rle_ann["image_id"]}, segm, 3, 2)
    if rle_ann not in a["annotations"]:
        a["annotations"].append(rle_ann)
        a["categories"] = [c for c in gt["categories"] if c["id"] in {x["category_id"] for x in a["annotations"]}]
    for x in r:  # coco_segm.json stores everything as strings (a pycocotools quirk test): make it proper
        x["image_id"] = int(x["image_id"])
        x["score"] = float(x["score"])
        if isinstance(x["segmentation"], str):
            import ast
            x["segmentation"] = ast.literal_eval(x["segmentation"])
    write(d, "segm_rle", bytes([0x01 | 0x04, 0x00]) + json.dumps(a).encode() + b"\0" + json.dumps(r).encode())
    # hand-written: polygons, uncompressed RLE, crowd, a category without annotations
    a = {
        "images": [{"id": 1, "height": 8, "width": 10}, {"id": 2, "height": 6, "width": 6}],
        "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 4, 3], "area": 12, "iscrowd": 0,
             "segmentation": [[1, 1, 5, 1, 5, 4, 1, 4]]},
            {"id": 2, "image_id": 1, "category_id": 2, "bbox": [0, 0, 2, 2], "area": 4, "iscrowd": 1,
             "segmentation": {"size": [8, 10], "counts": [0, 2, 6, 2, 70]}},
            {"id": 3, "image_id": 2, "category_id": 1, "bbox": [2, 2, 3, 3], "area": 9,
             "segmentation": [[2, 2, 5, 2, 5, 5], [2, 2, 3, 3, 2, 4]]},
        ],
    }
    r = [
        {"image_id": 1, "category_id": 1, "bbox": [1, 1, 4, 3.5], "score": 0.9},
        {"image_id": 1, "category_id": 2, "bbox": [0, 0, 2, 2], "score": 0.4},
        {"image_id": 2, "category_id": 1, "bbox": [2.5, 2, 3, 3], "score": 0.7},
    ]
    write(d, "hand_bbox", bytes([0x00, 0x00]) + json.dumps(a).encode() + b"\0" + json.dumps(r).encode())
    r = [
        {"image_id": 1, "category_id": 1, "segmentation": [[1, 1, 5, 1, 5, 4, 1, 4]], "score": 0.9},
        {"image_id": 2, "category_id": 1, "segmentation": {"size": [6, 6], "counts": "52000"}, "score": 0.7},
        {"image_id": 1, "category_id": 2, "segmentation": {"size": [8, 10], "counts": [0, 2, 6, 2, 70]}, "score": 0.2},
    ]
    write(d, "hand_segm", bytes([0x01 | 0x20 | 0x80, 0x05]) + json.dumps(a).encode() + b"\0" + json.dumps(r).encode())
    write(d, "no_results", bytes([0x02, 0x00]) + json.dumps(a).encode())


def png_corpus():
    d = reset("png")
    rng = np.random.default_rng(1)

    def png(img, **kw):
        buf = io.BytesIO()
        img.save(buf, format="PNG", **kw)
        return buf.getvalue()

    gray = rng.integers(0, 5, (5, 7)).astype(np.uint8)
    # mode: bit 0 images (else png_masks), bit 1 keep CRCs
    write(d, "mask_gray8", b"\x00" + png(Image.fromarray(gray, "L")))
    write(d, "mask_gray16", b"\x00" + png(Image.fromarray(rng.integers(0, 60000, (3, 4)).astype("<u2"))))
    pal = Image.fromarray(gray, "L").convert("P")
    pal.putpalette([i for c in range(256) for i in (c, 255 - c, c // 2)])
    write(d, "mask_palette", b"\x00" + png(pal))
    write(d, "mask_gray1", b"\x00" + png(Image.fromarray((gray > 2).astype(np.uint8) * 255, "L").convert("1")))
    write(d, "mask_palette4", b"\x02" + png(pal, bits=4))
    rgb = rng.integers(0, 256, (4, 5, 3)).astype(np.uint8)
    write(d, "image_rgb", b"\x01" + png(Image.fromarray(rgb, "RGB")))
    rgba = rng.integers(0, 256, (3, 3, 4)).astype(np.uint8)
    write(d, "image_rgba", b"\x01" + png(Image.fromarray(rgba, "RGBA")))
    write(d, "image_la", b"\x01" + png(Image.fromarray(rgba[..., :2].copy(), "LA")))
    trns = pal.copy()
    trns.info["transparency"] = 0
    write(d, "image_palette_trns", b"\x01" + png(trns, transparency=0))
    write(d, "image_palette", b"\x03" + png(pal))
    for f in sorted((ROOT / "configs/examples/data/segmentation/gt").glob("*.png"))[:2]:
        write(d, "example_" + f.stem, b"\x00" + f.read_bytes())


if __name__ == "__main__":
    npy_corpus()
    config_corpus()
    jsonl_corpus()
    coco_corpus()
    png_corpus()
    for t in ["npy", "config", "jsonl", "coco_json", "png"]:
        files = list((CORPUS / t).iterdir())
        print(f"{t}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")
