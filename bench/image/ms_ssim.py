#!/usr/bin/env python3
"""MultiScaleStructuralSimilarityIndexMeasure on 4K images: tally against torchmetrics (CPU, one
thread), on one core, on the same data; prints the times, the ratio and checks that the values
agree (1e-9 relative: both compute in float64).

Data (seeded): --n image pairs of 3 x H x W for each of --sizes (default 4K UHD 2160x3840 and
720p 720x1280; [N, C, H, W] float32 in [0, 1]): a
smooth random field (sums of random plane waves) with fine texture as the target, and the target
with gaussian noise (sigma 0.02), a 3-tap blur and a small gain as preds.

    taskset -c 0 .venv-ref/bin/python bench/image/ms_ssim.py [--tally build-image-rel/bin/tally]
        [--n 2]

tally: `tally run` on a generated config (npy reader, nondist backend), its whole wall time
(process start, reading the 4K float32 files, the metric, writing the results), the best of 3.
torchmetrics (run in .venv-torch, torch.set_num_threads(1), under taskset -c 0):
MultiScaleStructuralSimilarityIndexMeasure(data_range=1.0).set_dtype(torch.float64), one update per
image pair on float64 tensors (converting the float32 arrays is not timed), compute(); best of 2.
scikit-image has no multi-scale SSIM, so there is no third column. At 4K torchmetrics cannot run on
a machine with less than about 40 GB of free memory (torch's CPU conv2d unfolds the 11x11 window:
it asks for 40,144,896,000 bytes for one pair); the script then reports its error, and the 720p
run is the side-by-side comparison.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = "1"

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TORCH_PY = ROOT / ".venv-torch" / "bin" / "python"
C = 3


def make_data(n, H, W, seed=20261127):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    target = np.empty((n, C, H, W), np.float32)
    preds = np.empty_like(target)
    for i in range(n):
        for c in range(C):
            f = np.zeros((H, W), np.float32)
            for _ in range(6):
                kx, ky = rng.uniform(-0.02, 0.02, 2)
                f += np.float32(rng.uniform(0.2, 1.0)) * np.sin(
                    np.float32(kx) * xx + np.float32(ky) * yy + np.float32(rng.uniform(0, 6.3)))
            f += rng.normal(0, 0.15, (H, W)).astype(np.float32)  # texture
            f = (f - f.min()) / (f.max() - f.min())
            target[i, c] = f
            g = 0.25 * np.roll(f, 1, 1) + 0.5 * f + 0.25 * np.roll(f, -1, 1)  # horizontal blur
            g = 0.97 * g + rng.normal(0, 0.02, (H, W)).astype(np.float32)
            preds[i, c] = np.clip(g, 0, 1)
    return preds, target


def run_tally(tally, folder, repeat=3):
    config = folder / "bench.yaml"
    lines = ["data:", "  type: npy", "  batch_size: 1", "  fields:",
             f"    preds: {folder / 'preds.npy'}", f"    target: {folder / 'target.npy'}",
             "metrics:", "  - type: MultiScaleStructuralSimilarityIndexMeasure",
             "    data_range: 1.0"]
    config.write_text("\n".join(lines) + "\n")
    out = folder / "results.json"
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(["taskset", "-c", "0", tally, "run", str(config), "--output", str(out)],
                       check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t0)
    r = json.loads(out.read_text())["results"]
    return best, r["MultiScaleStructuralSimilarityIndexMeasure"][
        "multiscale_structural_similarity_index_measure"]


TORCH_CODE = r"""
import json, sys, time
import numpy as np, torch
from torchmetrics.image import MultiScaleStructuralSimilarityIndexMeasure as M
torch.set_num_threads(1)
folder = sys.argv[1]
p = torch.from_numpy(np.load(folder + "/preds.npy").astype(np.float64))
t = torch.from_numpy(np.load(folder + "/target.npy").astype(np.float64))
best, v = float("inf"), None
for _ in range(2):
    t0 = time.perf_counter()
    m = M(data_range=1.0).set_dtype(torch.float64)
    for i in range(p.shape[0]):
        m.update(p[i:i + 1], t[i:i + 1])
    v = float(m.compute())
    best = min(best, time.perf_counter() - t0)
print(json.dumps([best, v]))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tally", default=str(ROOT / "build-image-rel" / "bin" / "tally"))
    ap.add_argument("--n", type=int, default=2)
    ap.add_argument("--sizes", default="2160x3840,720x1280",
                    help="image sizes HxW to run, comma-separated")
    args = ap.parse_args()
    print(f"load average: {os.getloadavg()}; cpu affinity: {sorted(os.sched_getaffinity(0))}")
    ok = True
    for size in args.sizes.split(","):
        h, w = (int(v) for v in size.split("x"))
        ok &= bench(args, h, w)
    print(f"\nload average after: {os.getloadavg()}")
    sys.exit(0 if ok else 1)


def bench(args, H, W):
    preds, target = make_data(args.n, H, W)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        np.save(folder / "preds.npy", preds)
        np.save(folder / "target.npy", target)
        del preds, target
        t_tally, v_tally = run_tally(args.tally, folder)
        run = subprocess.run(["taskset", "-c", "0", str(TORCH_PY), "-c", TORCH_CODE, str(folder)],
                             capture_output=True, text=True)
    print(f"\nMS-SSIM, {args.n} pairs of {C}x{H}x{W}: tally {t_tally:.2f} s "
          f"({t_tally / args.n:.2f} s a pair, whole `tally run`), value {v_tally!r}")
    if run.returncode != 0:
        # torch's CPU conv2d unfolds the 11x11 window (im2col): 121 copies of the 5 stacked
        # float64 images, about 40 GB for one 4K pair.
        last = [ln for ln in run.stderr.strip().splitlines() if ln.strip()][-1:]
        print(f"  torchmetrics: failed ({last[0][:300] if last else run.returncode})")
        return True
    t_torch, v_torch = json.loads(run.stdout)
    rel = abs(v_torch - v_tally) / abs(v_torch)
    ok = rel <= 1e-9
    print(f"  torchmetrics: {t_torch:.2f} s, tally is {t_torch / t_tally:.1f}x faster; value "
          f"{v_torch!r}, relative difference {rel:.2g} ({'ok' if ok else 'DIFFERS'})")
    return ok


if __name__ == "__main__":
    main()
