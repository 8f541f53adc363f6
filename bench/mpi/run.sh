#!/usr/bin/env bash
# The sync benchmark in one command: tally's object all-gather, raw MPI_Allgatherv and mmeval's
# mpi4py backend on 2, 4 and 8 ranks, one Markdown table per world size (ratios from the same run),
# and a second one for counts: tally's reduce against raw MPI_Reduce and against gather + sum.
#
#   bench/mpi/run.sh [OUT_DIR] [--max BYTES] [--reps N]     (NPS="2 4 8" to choose world sizes)
#
# Needs the build (cmake --build build --target tally_bench_sync) and the reference venv with
# mpi4py (bash tests/reference/setup_venv.sh; .venv-ref/bin/pip install mpi4py).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-/tmp/tally-bench-sync}"; shift || true
max=$((256 << 20)); reps=5
while [ $# -gt 0 ]; do
  case "$1" in
    --max) max="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
py="${TALLY_VENV:-$root/.venv-ref}/bin/python"
cmake --build "$root/build" --target tally_bench_sync >/dev/null
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_ALLOW_RUN_AS_ROOT=1 \
  OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun_=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
for np in ${NPS:-2 4 8}; do
  "${mpirun_[@]}" -np "$np" "$root/build/bin/tally_bench_sync" --max "$max" --reps "$reps" \
    --json "$out/tally_np$np.json" >/dev/null
  "${mpirun_[@]}" -np "$np" "$py" "$root/bench/mpi/mmeval_sync.py" --max "$((max < (64 << 20) ? max : (64 << 20)))" \
    --reps "$reps" --json "$out/mmeval_np$np.json" >/dev/null
done
"$py" - "$out" ${NPS:-2 4 8} <<'PY'
import json, sys
out, nps = sys.argv[1], sys.argv[2:]
def size(b):
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n: return f"{b / n:g} {unit}"
    return f"{b} B"
for np_ in nps:
    t = json.load(open(f"{out}/tally_np{np_}.json"))
    m = json.load(open(f"{out}/mmeval_np{np_}.json"))
    mm = {r["bytes"]: r for r in m["rows"]}
    print(f"\n#### {np_} ranks (peak RSS per rank: tally {t['peak_rss_mib']:.0f} MiB, "
          f"mmeval {m['peak_rss_mib']:.0f} MiB)\n")
    print("| bytes per rank | raw Allgatherv GB/s | tally GB/s | tally / raw (time) | "
          "raw, fresh buffer / raw | raw Gatherv GB/s | tally gather GB/s | gather: tally / raw | "
          "mmeval bytes / tally | mmeval per-sample / tally |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in t["rows"]:
        b, w = r["bytes"], r["world"]
        gbs = lambda s: w * b / s / 1e9
        e = mm.get(b, {})
        mb = f"{e['mmeval_bytes_s'] / r['tally_s']:.1f}x" if e.get("mmeval_bytes_s") else "-"
        ms = f"{e['mmeval_per_sample_s'] / r['tally_s']:.0f}x" if e.get("mmeval_per_sample_s") else "-"
        print(f"| {size(b)} | {gbs(r['raw_s']):.2f} | {gbs(r['tally_s']):.2f} | "
              f"{r['tally_s'] / r['raw_s']:.2f} | {r['raw_fresh_s'] / r['raw_s']:.2f} | "
              f"{gbs(r['raw_gather_s']):.2f} | {gbs(r['tally_gather_s']):.2f} | "
              f"{r['tally_gather_s'] / r['raw_gather_s']:.2f} | {mb} | {ms} |")
    print(f"\n#### {np_} ranks: int64 counts summed to rank 0 (states of counts)\n")
    print("| bytes per rank | raw MPI_Reduce us | tally reduce us | tally / raw | "
          "gather_object + sum at rank 0 us | gather + sum / reduce |")
    print("|---|---|---|---|---|---|")
    for r in t["rows"]:
        print(f"| {size(r['bytes'])} | {r['raw_reduce_s'] * 1e6:.1f} | "
              f"{r['tally_reduce_s'] * 1e6:.1f} | {r['tally_reduce_s'] / r['raw_reduce_s']:.2f} | "
              f"{r['gather_sum_s'] * 1e6:.1f} | {r['gather_sum_s'] / r['tally_reduce_s']:.2f} |")
PY
