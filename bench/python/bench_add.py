"""Per-batch overhead and throughput of tally's Python add() against torchmetrics' and mmeval's
update() on the same tensors (issue 19's benchmark).

    python bench/python/bench_add.py [--device cpu|cuda] [--classes 10] [--threads 1] [--quick]

For each batch size: the median time of one add()/update() over many calls (after warm-up), the
samples per second, and each peer's time divided by tally's (above 1: tally is faster); then the
time of the final compute(). The metric is top-1 accuracy over `classes` classes with float32
scores and int64 labels: tally's Accuracy, torchmetrics' MulticlassAccuracy(average="micro")
(validate_args on, its default), mmeval's Accuracy (numpy/torch dispatch). CUDA timings
synchronize the device at the end of each timed loop. Prints a Markdown table.
"""

import argparse
import statistics
import time

import numpy as np


def timed(fn, batches, sync, reps):
    """Median seconds per call of fn(batch) over `reps` passes over `batches`."""
    per_call = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        for b in batches:
            fn(b)
        sync()
        per_call.append((time.perf_counter() - t0) / len(batches))
    return statistics.median(per_call)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=1, help="tally Accuracy's threads parameter")
    args = ap.parse_args()

    import tally

    try:
        import torch
    except ImportError:
        torch = None
    try:
        import torchmetrics
        from torchmetrics.classification import MulticlassAccuracy
    except ImportError:
        torchmetrics = None
    try:
        import mmeval
    except Exception:  # noqa: BLE001
        mmeval = None

    cuda = args.device.startswith("cuda")
    if cuda and (torch is None or not torch.cuda.is_available()):
        raise SystemExit("bench_add: --device cuda needs torch with a CUDA device")
    sync = (lambda: torch.cuda.synchronize()) if cuda else (lambda: None)
    k = args.classes
    sizes = [32, 4096, 262144] if not args.quick else [32, 4096]
    rng = np.random.default_rng(0)

    print(f"# Python add() per batch: {args.device}, {k} classes, top-1 accuracy, tally threads {args.threads}")
    print()
    ver = [f"tally {tally.__version__}"]
    if torch is not None:
        ver.append(f"torch {torch.__version__}")
    if torchmetrics is not None:
        ver.append(f"torchmetrics {torchmetrics.__version__}")
    if mmeval is not None:
        ver.append(f"mmeval {mmeval.__version__}")
    print(", ".join(ver))
    print()
    print("| batch | input | tally add | tally samples/s | torchmetrics update | ratio | mmeval add | ratio | results equal |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---|")
    for n in sizes:
        calls = max(4, min(2000, 2_000_000 // (n * k)))
        reps = 3 if args.quick else 5
        scores = rng.random((calls, n, k), dtype=np.float32)
        labels = rng.integers(0, k, size=(calls, n), dtype=np.int64)
        kinds = ["numpy"] if not cuda else []
        if torch is not None:
            kinds.append("torch")
        for kind in kinds:
            if kind == "numpy":
                batches = [(scores[i], labels[i]) for i in range(calls)]
            else:
                batches = [
                    (torch.from_numpy(scores[i]).to(args.device), torch.from_numpy(labels[i]).to(args.device))
                    for i in range(calls)
                ]
            ev = tally.Evaluator({"metrics": [{"type": "Accuracy", "topk": [1], "threads": args.threads}]})
            t_tally = timed(lambda b: ev.add(pred_scores=b[0], gt_labels=b[1]), batches, sync, reps)
            ev.reset()
            for b in batches:
                ev.add(pred_scores=b[0], gt_labels=b[1])
            top1 = ev.compute()["Accuracy"]["top1"]

            t_tm = ratio_tm = "-"
            equal = []
            if torchmetrics is not None and kind == "torch":
                m = MulticlassAccuracy(num_classes=k, average="micro").to(args.device)
                t = timed(lambda b: m.update(b[0], b[1]), batches, sync, reps)
                m.reset()
                for b in batches:
                    m.update(b[0], b[1])
                equal.append(abs(float(m.compute()) - top1) < 1e-6)
                t_tm, ratio_tm = f"{t * 1e6:.1f} us", f"{t / t_tally:.1f}x"
            t_mm = ratio_mm = "-"
            if mmeval is not None and (kind == "numpy" or not cuda):
                acc = mmeval.Accuracy(topk=1)
                t = timed(lambda b: acc.add(b[0], b[1]), batches, sync, 1 if n >= 262144 else reps)
                acc.reset()
                for b in batches:
                    acc.add(b[0], b[1])
                equal.append(abs(float(acc.compute()["top1"]) - top1) < 1e-6)
                acc.reset()
                t_mm, ratio_mm = f"{t * 1e6:.1f} us", f"{t / t_tally:.1f}x"
            print(
                f"| {n} | {kind} | {t_tally * 1e6:.1f} us | {n / t_tally:,.0f} | {t_tm} | {ratio_tm} | "
                f"{t_mm} | {ratio_mm} | {'yes' if all(equal) else 'NO'} |"
            )


if __name__ == "__main__":
    main()
