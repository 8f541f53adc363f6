#!/usr/bin/env python3
"""Side-by-side accumulation benchmarks: tally against the tools users would otherwise run.

Writes each workload once as .npy files, times the reference tools on those arrays in this
process (NumPy, mmeval 0.2.1, scikit-learn, scikit-image, torchmetrics on CPU), runs
build/bin/tally_bench_metrics
(Google Benchmark, the real plugins through the registry) on the same files, checks that the
values agree, and prints a Markdown table of throughputs and ratios (tally / reference).

    python3 -m venv .venv-bench && .venv-bench/bin/pip install -r bench/requirements.txt
    cmake --preset default -DTALLY_BUILD_BENCH=ON && cmake --build build
    .venv-bench/bin/python bench/side_by_side.py [--scale 1.0] [--only NAME,...] [--out DIR]

Timings are single-threaded (tally is single-threaded per rank here; OMP/BLAS threads of the
references and torch's intra-op threads are pinned to 1) and the median of --repeat runs.
torchmetrics runs on CPU tensors made from the same arrays (torch.from_numpy, no copy), one
update() with the whole data and compute(): its best case.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def torch1():
    """torch with one intra-op thread, imported on first use (torchmetrics rows only)."""
    import torch
    torch.set_num_threads(1)
    return torch


def tm(metric, *args):
    """torchmetrics: one update() with the whole data, then compute(), as a float."""
    metric.update(*args)
    return float(metric.compute())


def timed(fn, repeat):
    """Median wall time of fn() over `repeat` runs, and its last value."""
    times, value = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), value


def blocky_labels(rng, n, h, w, classes, block=32):
    """Label maps made of runs of one class, as segmentation maps are: a coarse random map
    upsampled by nearest neighbour, with ~5% of the pixels of the prediction changed."""
    coarse = rng.integers(0, classes, size=(n, h // block, w // block), dtype=np.uint8)
    gt = np.repeat(np.repeat(coarse, block, axis=1), block, axis=2)
    pred = gt.copy()
    flip = rng.random(gt.shape) < 0.05
    pred[flip] = rng.integers(0, classes, size=int(flip.sum()), dtype=np.uint8)
    return pred, gt


# ---- workloads ------------------------------------------------------------------------------------


def case_accuracy(out, scale, rng):
    n, c = int(200_000 * scale), 1000
    scores = rng.random((n, c), dtype=np.float32)
    labels = rng.integers(0, c, size=n, dtype=np.int64)
    np.save(out / "acc_scores.npy", scores)
    np.save(out / "acc_labels.npy", labels)

    def numpy_top5():
        top = np.argpartition(-scores, 5, axis=1)[:, :5]
        return float((top == labels[:, None]).any(axis=1).mean())

    def mmeval_top5():
        from mmeval import Accuracy
        return float(Accuracy(topk=(5,))(scores, labels)["top5"])

    def numpy_top1():
        return float((scores.argmax(axis=1) == labels).mean())

    def tm_topk(k):
        def run():
            torch = torch1()
            from torchmetrics.classification import MulticlassAccuracy
            return tm(MulticlassAccuracy(num_classes=c, top_k=k, average="micro"),
                      torch.from_numpy(scores), torch.from_numpy(labels))
        return run

    fields = {"pred_scores": "acc_scores.npy", "gt_labels": "acc_labels.npy"}
    return [
        dict(name="accuracy_top1", metric="Accuracy", params={"topk": [1]}, fields=fields,
             units=n, unit="samples", value=["top1"],
             refs={"NumPy argmax": numpy_top1, "torchmetrics MulticlassAccuracy": tm_topk(1)}),
        dict(name="accuracy_top5", metric="Accuracy", params={"topk": [5]}, fields=fields,
             units=n, unit="samples", value=["top5"],
             refs={"NumPy argpartition": numpy_top5, "mmeval Accuracy": mmeval_top5,
                   "torchmetrics MulticlassAccuracy": tm_topk(5)}),
    ]


def case_single_label(out, scale, rng):
    n, c = int(200_000 * scale), 1000
    scores = np.load(out / "acc_scores.npy", mmap_mode="r") if (out / "acc_scores.npy").exists() \
        else rng.random((n, c), dtype=np.float32)
    labels = np.load(out / "acc_labels.npy")

    def sklearn_prf():
        from sklearn.metrics import precision_recall_fscore_support
        p, _, _, _ = precision_recall_fscore_support(labels, np.asarray(scores).argmax(axis=1),
                                                     labels=range(c), average="macro",
                                                     zero_division=0)
        return float(p)

    def tm_precision():
        torch = torch1()
        from torchmetrics.classification import MulticlassPrecision
        return tm(MulticlassPrecision(num_classes=c, average="macro"),
                  torch.from_numpy(np.asarray(scores)), torch.from_numpy(labels))

    fields = {"pred_scores": "acc_scores.npy", "gt_labels": "acc_labels.npy"}
    return [dict(name="single_label_macro", metric="SingleLabelMetric",
                 params={"average": "macro", "num_classes": c}, fields=fields, units=n,
                 unit="samples", value=["precision"],
                 refs={"scikit-learn argmax + precision_recall_fscore_support": sklearn_prf,
                       "torchmetrics MulticlassPrecision": tm_precision})]


def case_mean_iou(out, scale, rng):
    cases = []
    n = max(1, int(20 * scale))
    for classes in (19, 150):
        pred, gt = blocky_labels(rng, n, 1024, 2048, classes)
        np.save(out / f"seg{classes}_pred.npy", pred)
        np.save(out / f"seg{classes}_gt.npy", gt)

        def numpy_hist(pred=pred, gt=gt, k=classes):
            # mmeval's expression, on int64 so that K * label cannot wrap (it does on uint8).
            m = np.bincount(k * gt.astype(np.int64).ravel() + pred.ravel(), minlength=k * k)
            hist = m.reshape(k, k)
            iou = np.diag(hist) / (hist.sum(0) + hist.sum(1) - np.diag(hist))
            return float(np.nanmean(iou))

        def mmeval_miou(pred=pred, gt=gt, k=classes):
            from mmeval import MeanIoU
            return MeanIoU(num_classes=k)(list(pred.astype(np.int64)),
                                          list(gt.astype(np.int64)))["mIoU"]

        def tm_jaccard(pred=pred, gt=gt, k=classes):
            torch = torch1()
            from torchmetrics.classification import MulticlassJaccardIndex
            return tm(MulticlassJaccardIndex(num_classes=k, average="macro"),
                      torch.from_numpy(pred), torch.from_numpy(gt))

        cases.append(dict(
            name=f"mean_iou_{classes}", metric="MeanIoU", params={"num_classes": classes},
            fields={"pred_sem_seg": f"seg{classes}_pred.npy", "gt_sem_seg": f"seg{classes}_gt.npy"},
            batch_size=1, units=n * 1024 * 2048, unit="pixels", value=["mIoU"],
            refs={"NumPy bincount": numpy_hist, "mmeval MeanIoU": mmeval_miou,
                  "torchmetrics MulticlassJaccardIndex": tm_jaccard}))
    return cases


def case_ranking(out, scale, rng):
    n = int(10_000_000 * scale)
    labels = rng.random(n) < 0.3
    # Scores rounded to 1e-4: many ties, which both implementations must handle identically.
    scores = np.round(rng.random(n) * 0.6 + labels * 0.4, 4)
    np.save(out / "rank_scores.npy", scores)
    np.save(out / "rank_labels.npy", labels.astype(np.int64))

    def sk_auc():
        from sklearn.metrics import roc_auc_score
        return float(roc_auc_score(labels, scores))

    def sk_ap():
        from sklearn.metrics import average_precision_score
        return float(average_precision_score(labels, scores))

    def tm_binary(name):
        def run():
            torch = torch1()
            import torchmetrics.classification as tmc
            return tm(getattr(tmc, name)(), torch.from_numpy(scores),
                      torch.from_numpy(labels.astype(np.int64)))
        return run

    fields = {"pred_scores": "rank_scores.npy", "gt_labels": "rank_labels.npy"}
    return [
        dict(name="roc_auc", metric="ROCAUC", params={}, fields=fields, units=n, unit="samples",
             value=["AUC"], refs={"scikit-learn roc_auc_score": sk_auc,
                                      "torchmetrics BinaryAUROC": tm_binary("BinaryAUROC")}),
        dict(name="average_precision", metric="AveragePrecision", params={}, fields=fields,
             units=n, unit="samples", value=["mAP"],
             refs={"scikit-learn average_precision_score": sk_ap,
                   "torchmetrics BinaryAveragePrecision": tm_binary("BinaryAveragePrecision")}),
    ]


def case_restoration(out, scale, rng):
    n = max(1, int(4 * scale))
    h, w = 2160, 3840
    gt = rng.integers(0, 256, size=(n, h, w, 3), dtype=np.uint8)
    # A smooth image is what restoration metrics see; noise on top as the "restored" output.
    gt = (np.cumsum(gt.astype(np.float64) - 127.5, axis=2) / 64 + 128).clip(0, 255).astype(np.uint8)
    pred = (gt + rng.normal(0, 5, gt.shape)).clip(0, 255).round().astype(np.uint8)
    np.save(out / "img_pred.npy", pred)
    np.save(out / "img_gt.npy", gt)

    def mmeval_psnr():
        from mmeval import PSNR
        return PSNR(input_order="HWC")(list(pred), list(gt))["psnr"]

    def mmeval_ssim():
        from mmeval import StructuralSimilarity
        return StructuralSimilarity(input_order="HWC")(list(pred), list(gt))["ssim"]

    def skimage_ssim():
        from skimage.metrics import structural_similarity
        return float(np.mean([structural_similarity(p, g, gaussian_weights=True, sigma=1.5,
                                                    use_sample_covariance=False, data_range=255,
                                                    channel_axis=-1) for p, g in zip(pred, gt)]))

    def tm_psnr():
        torch = torch1()
        from torchmetrics.image import PeakSignalNoiseRatio
        # dim: one PSNR per image, then their mean (mmeval's and tally's definition).
        return tm(PeakSignalNoiseRatio(data_range=255.0, dim=(1, 2, 3)),
                  torch.from_numpy(pred).double(), torch.from_numpy(gt).double())

    def tm_ssim():
        torch = torch1()
        from torchmetrics.image import StructuralSimilarityIndexMeasure
        # One image an update: the whole 4K batch at once asks torch for 160 GB.
        m = StructuralSimilarityIndexMeasure(data_range=255.0)
        for p, g in zip(pred, gt):
            m.update(torch.from_numpy(p).permute(2, 0, 1)[None].double(),
                     torch.from_numpy(g).permute(2, 0, 1)[None].double())
        return float(m.compute())

    fields = {"pred_img": "img_pred.npy", "gt_img": "img_gt.npy"}
    return [
        dict(name="psnr_4k", metric="PSNR", params={}, fields=fields, batch_size=1,
             units=n * h * w, unit="pixels", value=["psnr"],
             refs={"mmeval PSNR": mmeval_psnr, "torchmetrics PeakSignalNoiseRatio": tm_psnr}),
        dict(name="ssim_4k", metric="SSIM", params={}, fields=fields, batch_size=1,
             units=n * h * w, unit="pixels", value=["ssim"],
             refs={"mmeval SSIM": mmeval_ssim, "scikit-image structural_similarity": skimage_ssim,
                   "torchmetrics StructuralSimilarityIndexMeasure": tm_ssim}),
    ]


WORKLOADS = [case_accuracy, case_single_label, case_mean_iou, case_ranking, case_restoration]


def rate(units, seconds, unit):
    v = units / seconds
    for p in ("", "k", "M", "G"):
        if v < 1000:
            return f"{v:.3g} {p}{unit}/s"
        v /= 1000
    return f"{v:.3g} T{unit}/s"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="workload size factor")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bench", default=str(ROOT / "build/bin/tally_bench_metrics"))
    ap.add_argument("--out", default="", help="data folder (default: a temporary one)")
    args = ap.parse_args()

    only = set(filter(None, args.only.split(",")))
    out = Path(args.out or tempfile.mkdtemp(prefix="tally-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261122)
    cases = []
    for make in WORKLOADS:
        cases += [c for c in make(out, args.scale, rng) if not only or c["name"] in only]

    manifest = [{k: v for k, v in c.items() if k != "refs"} for c in cases]
    (out / "cases.json").write_text(json.dumps(manifest, indent=1))
    res = subprocess.run([args.bench, "--data", str(out), "--benchmark_format=json"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"tally_bench_metrics failed ({res.returncode}):\n{res.stderr}")
    bench = {b["name"].split("/min_time")[0]: b for b in json.loads(res.stdout)["benchmarks"]}

    print(f"# data in {out}; {os.cpu_count()} CPUs; one thread per tool\n")
    print("| case | tally | memcpy of the input | reference | reference time | tally speed-up |"
          " values |")
    print("|---|---|---|---|---|---|---|")
    for c in cases:
        t = bench[f"tally/{c['name']}"]
        m = bench[f"memcpy/{c['name']}"]
        t_s, m_s = t["real_time"] / 1e3, m["real_time"] / 1e3
        u = "px" if c["unit"] == "pixels" else "samples"
        for ref_name, fn in c["refs"].items():
            try:
                r_s, r_v = timed(fn, args.repeat)
            except (RuntimeError, MemoryError) as e:  # torch's allocator, for one
                print(f"| {c['name']} | {rate(c['units'], t_s, u)} ({t_s * 1e3:.1f} ms) "
                      f"| {rate(c['units'], m_s, u)} | {ref_name} | does not run: "
                      f"{str(e).splitlines()[0][:160]} | - | - |")
                continue
            diff = abs(r_v - t["value"]) / max(abs(r_v), 1e-300)
            same = "equal" if diff == 0 else f"rel. diff {diff:.1e}"
            print(f"| {c['name']} | {rate(c['units'], t_s, u)} ({t_s * 1e3:.1f} ms) "
                  f"| {rate(c['units'], m_s, u)} | {ref_name} | {r_s * 1e3:.1f} ms "
                  f"| {r_s / t_s:.1f}x | {same} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
