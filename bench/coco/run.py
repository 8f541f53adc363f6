"""Side-by-side COCO bbox evaluation benchmark: pycocotools, faster-coco-eval, hotcoco,
ultrafast-pycocotools and tally (its CLI, and tally.coco, its pycocotools API, where the build has
the Python package) on the same synthetic COCO-val-sized files, each from JSON loading
to the 12 stats in a cold process, timed and measured with /usr/bin/time -v (wall, CPU, peak RSS).

Single-core runs are pinned with `taskset -c 0` and every tool's thread pools set to 1 thread;
tally also runs with threads=2 on two cores (the metric's matching and accumulation, and the reader's
parsing of the next block while the current one is read). Every tool's 12 stats are compared with the
reference's (pycocotools where it ran, else tally) bit for bit.

    python bench/coco/run.py --data DIR --tally build/bin/tally [--repeat 3] [--pycocotools-10x]

Normally started through bench/coco/run.sh, which builds tally, installs the tools and makes the
data first.
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = ["pycocotools", "faster-coco-eval", "hotcoco", "ultrafast-pycocotools", "tally.coco"]
ONE_THREAD = {"OMP_NUM_THREADS": "1", "RAYON_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "OPENBLAS_NUM_THREADS": "1", "POLARS_MAX_THREADS": "1"}


def timed(cmd, cores, extra_env=None):
    env = {**os.environ, **ONE_THREAD, **(extra_env or {})}
    full = ["/usr/bin/time", "-v", "taskset", "-c", cores] + cmd
    p = subprocess.run(full, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    err = p.stderr

    def field(name):
        return re.search(re.escape(name) + r":\s*(.+)", err).group(1).strip()

    wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)")
    parts = [float(x) for x in wall.split(":")]
    secs = sum(v * 60 ** i for i, v in enumerate(reversed(parts)))
    cpu = float(field("User time (seconds)")) + float(field("System time (seconds)"))
    rss_mb = int(field("Maximum resident set size (kbytes)")) / 1024
    return p.stdout, secs, cpu, rss_mb


def run_tool(tool, gt, dets, tally, threads, out_json, cfg, iou_type="bbox"):
    if tool == "tally":
        cores = "0" if threads == 1 else ",".join(str(i) for i in range(threads))
        cmd = [tally, "run", cfg, "--set", f"metrics.0.threads={threads}", "--set",
               f"data.threads={threads}", "--output", out_json, "-q"]
        _, secs, cpu, rss = timed(cmd, cores)
        res = json.load(open(out_json))["results"]["COCODetection"]
        stats = list(res.values())
    else:
        # tally.coco: the Python package of the build whose CLI is --tally (build/python).
        env = {"PYTHONPATH": package_dir(tally)} if tool == "tally.coco" else None
        out, secs, cpu, rss = timed([sys.executable, os.path.join(HERE, "tools.py"), tool, gt,
                                     dets, iou_type], "0", env)
        stats = json.loads(out.strip().splitlines()[-1])
    return stats, secs, cpu, rss


def package_dir(tally):
    """build/python for the CLI build/bin/tally: the build's Python package (TALLY_BUILD_PYTHON)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(tally))), "python")


def version(tool):
    from importlib.metadata import version as v
    try:
        return v(tool)
    except Exception:  # noqa: BLE001
        return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--tally", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pycocotools-10x", action="store_true",
                    help="also run pycocotools on 5M detections (about 25 min, 20+ GB)")
    ap.add_argument("--sizes", nargs="+", default=["100", "1000"])
    ap.add_argument("--skip", nargs="*", default=[], choices=TOOLS,
                    help="tools not to run (faster-coco-eval needs more than 24 GB at "
                    "Objects365 size)")
    ap.add_argument("--iou-type", default="bbox", choices=["bbox", "segm"],
                    help="segm reads segm_{size}.json (bench/coco/gen.py --segm)")
    ap.add_argument("--out", default=None, help="markdown table file (default DATA/results.md)")
    a = ap.parse_args()
    gt = os.path.join(a.data, "gt.json")
    meta_path = os.path.join(a.data, "meta.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {"images": 5000}
    n_images = meta["images"]
    load0 = os.getloadavg()
    cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                      if l.startswith("model name")), platform.processor())
    lines = [f"Machine: {cpu_model}, {os.cpu_count()} cores; load average at start "
             f"{load0[0]:.2f}, {load0[1]:.2f}, {load0[2]:.2f}. Python {platform.python_version()}; "
             + ", ".join(f"{t} {version(t)}" for t in TOOLS) + ".", ""]
    for size in a.sizes:
        stem = "dets" if a.iou_type == "bbox" else "segm"
        dets = os.path.join(a.data, f"{stem}_{size}.json")
        n_det = int(size) * n_images
        cfg = os.path.join(a.data, f"tally_{stem}_{size}.yaml")
        with open(cfg, "w") as f:
            f.write(f"data: {{type: coco_json, annotations: {gt}, results: {dets}}}\n"
                    f"metrics: [{{type: COCODetection, metric: [{a.iou_type}]}}]\n")
        runs = []
        have_package = os.path.exists(os.path.join(package_dir(a.tally), "tally", "coco.py"))
        plan = [(t, 1) for t in TOOLS if t not in a.skip and (t != "tally.coco" or have_package)]
        plan += [("tally", 1), ("tally", 2)]
        for tool, threads in plan:
            if tool == "pycocotools" and size != "100" and not a.pycocotools_10x:
                continue
            # pycocotools, and faster-coco-eval on 5M detections, take minutes: run once.
            slow = tool == "pycocotools" or (tool == "faster-coco-eval" and size != "100")
            reps = 1 if slow else a.repeat
            best = None
            for _ in range(reps):
                r = run_tool(tool, gt, dets, a.tally, threads,
                             os.path.join(a.data, f"out_{size}_{threads}.json"), cfg, a.iou_type)
                best = r if best is None or r[1] < best[1] else (best[0], best[1], best[2],
                                                                 max(best[3], r[3]))
            name = tool if tool == "tally.coco" or not tool.startswith("tally") else \
                f"tally (threads={threads})"
            runs.append((name, threads, *best))
            print(f"{size}: {name}: {best[1]:.2f} s wall, {best[2]:.2f} s CPU, {best[3]:.0f} MB",
                  flush=True)
        ref_name, ref = next(((r[0], r[2]) for r in runs if r[0] == "pycocotools"),
                             (runs[-2][0], runs[-2][2]))
        py = next((r for r in runs if r[0] == "pycocotools"), None)
        lines += [f"#### {a.iou_type}: {n_det:,} detections ({size} per image), {n_images:,} images"
                  + (f", {meta['categories']} categories, {meta['gt_boxes']:,} ground-truth boxes"
                     if "categories" in meta else "") + f"; stats compared with {ref_name}", "",
                  "| tool | cores | wall s | CPU s | peak RSS MB | vs pycocotools (wall) | "
                  "12 stats |", "|---|---|---|---|---|---|---|"]
        for name, threads, stats, secs, cpu, rss in runs:
            same = all(x == y for x, y in zip(stats, ref)) and len(stats) == len(ref)
            diff = max(abs(x - y) for x, y in zip(stats, ref))
            speed = f"{py[3] / secs:.0f}x" if py else "-"
            lines.append(f"| {name} | {threads} | {secs:.2f} | {cpu:.2f} | {rss:.0f} | {speed} | "
                         + ("identical" if same else f"max abs diff {diff:.1e}") + " |")
        lines.append("")
    load1 = os.getloadavg()
    lines.append(f"Load average at the end: {load1[0]:.2f}, {load1[1]:.2f}, {load1[2]:.2f}.")
    text = "\n".join(lines) + "\n"
    out = a.out or os.path.join(a.data, "results.md")
    with open(out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
