#!/usr/bin/env bash
# Builds tally with its CUDA parts (Release, in build-bench-gpu) and runs the GPU benchmarks,
# printing Markdown tables on stdout:
#   1. all_gather_object over the nccl backend, 1 KiB to 1 GiB per rank: on one GPU, then under
#      mpirun with one rank per GPU when the machine has several;
#   2. the device-side confusion matrix of uint8 1024x2048 label maps (19 and 150 classes) against
#      a device-to-device cudaMemcpy of the same bytes.
#
# Usage: bench/gpu/run.sh [--quick] [--no-build]
#   --quick     shorter timings, all-gather up to 64 MiB
#   --no-build  use the tally_gpu_bench already in the build folder (tests/gpu/device_check.sh:
#               a bundle built elsewhere)
# Environment: TALLY_BENCH_BUILD (build folder), JOBS (build parallelism), NP (ranks for the
# multi-GPU all-gather; default: the number of GPUs), CMAKE_CUDA_ARCHITECTURES (default 80-real;90),
# ALLGATHER_MAX (largest all-gather, bytes per rank), SECONDS_PER_POINT (timing per measurement).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${TALLY_BENCH_BUILD:-$root/build-bench-gpu}
seconds=0.5
max=$((1 << 30))
do_build=1
for arg in "$@"; do
  case "$arg" in
    --quick) seconds=0.1; max=$((64 << 20)) ;;
    --no-build) do_build= ;;
    *) echo "run.sh: unknown option $arg (expected --quick, --no-build)" >&2; exit 2 ;;
  esac
done
seconds=${SECONDS_PER_POINT:-$seconds}
max=${ALLGATHER_MAX:-$max}

if [[ -n "$do_build" ]]; then
  cmake_args=(-S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTALLY_BUILD_TESTS=OFF
              -DCMAKE_PROJECT_tally_INCLUDE="$root/bench/gpu/integrate.cmake")
  if [[ -n "${CMAKE_CUDA_ARCHITECTURES:-}" ]]; then
    cmake_args+=(-DCMAKE_CUDA_ARCHITECTURES="$CMAKE_CUDA_ARCHITECTURES")
  fi
  cmake "${cmake_args[@]}" >&2
  cmake --build "$build" -j"${JOBS:-$(nproc)}" --target tally_gpu_bench tally_all_plugins >&2
fi

bench="$build/bin/tally_gpu_bench"
[[ -x "$bench" ]] || { echo "run.sh: $bench was not built (CUDA toolkit or NCCL missing? see the cmake output)" >&2; exit 1; }
gpus=$("$bench" devices)
if [[ "$gpus" -lt 1 ]]; then
  echo "run.sh: no CUDA device visible; nothing to measure" >&2
  exit 1
fi

echo "# tally GPU benchmarks"
echo
echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1), $gpus GPU(s)"
echo

# A world of one: the staging copies and the NCCL call on one GPU.
env -u OMPI_COMM_WORLD_SIZE -u RANK -u WORLD_SIZE "$bench" allgather --max "$max" --seconds "$seconds"

np=${NP:-$gpus}
if [[ "$np" -gt 1 ]]; then
  mpirun --allow-run-as-root -np "$np" -x LD_LIBRARY_PATH "$bench" allgather --max "$max" --seconds "$seconds"
fi

"$bench" confusion --classes 19,150 --images 1,16 --seconds "$seconds" --sweep
