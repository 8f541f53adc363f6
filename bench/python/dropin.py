"""tally.torchmetrics' drop-in classes against torchmetrics' own, same tensors, same run.

    python bench/python/dropin.py [--device cpu|cuda] [--batches 100] [--quick]

For each class and batch size: the median time of one update(), of one forward() (the batch
value and the accumulation), and the end-to-end time of making the metric, `batches` updates and
compute(); each
torchmetrics time divided by tally's (above 1: tally is faster); and whether the final values
agree to float32 rounding (rtol 1e-4). torchmetrics with its defaults (validate_args on).
Prints a Markdown table. Run with PYTHONPATH set to a release build's python folder.
"""

import argparse
import statistics
import time


def timed(fn, batches, sync, reps):
    per_call = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        for b in batches:
            fn(*b)
        sync()
        per_call.append((time.perf_counter() - t0) / len(batches))
    return statistics.median(per_call)


def cases(torch, device, n):
    g = torch.Generator().manual_seed(0)

    def mc():
        return (torch.softmax(torch.randn(n, 10, generator=g), 1).to(device),
                torch.randint(0, 10, (n,), generator=g).to(device))

    def binary():
        return torch.rand(n, generator=g).to(device), torch.randint(0, 2, (n,), generator=g).to(device)

    def reg():
        return torch.randn(n, generator=g).to(device), torch.randn(n, generator=g).to(device)

    def retrieval():
        return (torch.rand(n, generator=g).to(device), torch.randint(0, 2, (n,), generator=g).to(device),
                torch.randint(0, max(n // 20, 1), (n,), generator=g).to(device))

    return [
        ("MulticlassAccuracy", dict(num_classes=10), mc),
        ("MulticlassF1Score", dict(num_classes=10), mc),
        ("BinaryAUROC", {}, binary),
        ("MeanSquaredError", {}, reg),
        ("PearsonCorrCoef", {}, reg),
        ("RetrievalMAP", {}, retrieval),
    ]


def make(mod, name, kw):
    import importlib

    for sub in ("classification", "regression", "retrieval"):
        m = importlib.import_module(f"{mod}.{sub}") if mod == "torchmetrics" else None
        if m is not None and hasattr(m, name):
            return getattr(m, name)(**kw)
    return getattr(importlib.import_module(mod), name)(**kw)


def close(a, b):
    import numpy as np

    return bool(np.allclose(np.asarray(a.cpu(), dtype=float), np.asarray(b.cpu(), dtype=float),
                            rtol=1e-4, atol=1e-6))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batches", type=int, default=100)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    import torch
    import torchmetrics

    import tally

    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    reps = 3 if args.quick else 7
    print(f"tally {tally.__version__}, torch {torch.__version__}, torchmetrics "
          f"{torchmetrics.__version__}, device {args.device}\n")
    print("| class | batch | tally update | torchmetrics update | ratio | tally forward | "
          "torchmetrics forward | ratio | end to end tally | torchmetrics | ratio | equal |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for n in (32, 4096):
        for name, kw, gen in cases(torch, args.device, n):
            batches = [gen() for _ in range(args.batches)]
            row = [name, str(n)]
            ours, theirs = make("tally.torchmetrics", name, kw), make("torchmetrics", name, kw)
            for what in ("update", "forward"):
                t_ours = timed(getattr(ours, what), batches[:20], sync, reps)
                t_theirs = timed(getattr(theirs, what), batches[:20], sync, reps)
                row += [f"{t_ours * 1e6:.1f} us", f"{t_theirs * 1e6:.1f} us", f"{t_theirs / t_ours:.1f}x"]
            ends, values = [], []
            for mod in ("tally.torchmetrics", "torchmetrics"):
                sync()
                t0 = time.perf_counter()
                m = make(mod, name, kw)
                for b in batches:
                    m.update(*b)
                values.append(m.compute())
                sync()
                ends.append(time.perf_counter() - t0)
            row += [f"{ends[0] * 1e3:.1f} ms", f"{ends[1] * 1e3:.1f} ms", f"{ends[1] / ends[0]:.1f}x",
                    "yes" if close(*values) else "NO"]
            print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
