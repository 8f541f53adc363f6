#!/usr/bin/env bash
# Runs the GPU tests and the GPU benchmarks on a machine with a CUDA device from a bundle built
# elsewhere (tests/gpu/make_bundle.sh): for a GPU machine that has the CUDA driver but none of
# Debian's libraries tally links (yaml-cpp, fmt, Boost, Open MPI, ...), and no network.
#
#   bash tests/gpu/device_check.sh BUNDLE.tar.gz [OUTDIR]
#
# The bundle holds the build's binaries, plugins and libraries under the build folder's path
# relative to the repository, and every non-system library they need under .gpu-rt/lib. The tests
# were compiled with absolute paths to the repository they were built in (TALLY_SOURCE_DIR, ...):
# when this checkout sits elsewhere, that path is made a link to it. libnccl.so.2 is the
# machine's own (CUDA toolkit or the nvidia-nccl wheel), found by its name.
set -uo pipefail
bundle=${1:?usage: device_check.sh BUNDLE.tar.gz [OUTDIR]}
out=${2:-${OUT:-/tmp/tally-gpu-out}}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
mkdir -p "$out"

tar -xzf "$bundle"
built_in=$(cat .gpu-rt/source_dir)
build=$(cat .gpu-rt/build_dir)
if [[ "$built_in" != "$root" && ! -e "$built_in" ]]; then
  mkdir -p "$(dirname "$built_in")"
  ln -s "$root" "$built_in"
fi

nccl=$(find /usr/local/cuda*/lib64 /usr/lib /opt /usr/local/lib -name 'libnccl.so.2*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH="$root/.gpu-rt/lib${nccl:+:$(dirname "$nccl")}:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
{
  echo "== machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "libnccl: ${nccl:-none found}"
  uname -r
} 2>&1 | tee "$out/machine.txt"

status=0
# The C++ GPU tests, the benchmarks and memcheck; ONLY_PYTEST=1 skips them (the Python tests
# alone).
native_checks() {
  for t in test_nccl_bootstrap test_gpu_kernels test_gpu_metrics test_nccl_backend; do
    exe="$build/bin/$t"
    [[ -x "$exe" ]] || { echo "== $t: not in the bundle"; status=1; continue; }
    start=$SECONDS
    timeout 150 "$exe" --gtest_color=no >"$out/$t.log" 2>&1
    rc=$?
    echo "== $t: exit $rc in $((SECONDS - start)) s: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$out/$t.log" | tr '\n' ' ')"
    grep -E '^\[  FAILED  \]' "$out/$t.log" | sort -u | head -20
    ((rc == 0)) || status=1
  done

  # The benchmarks: bench/gpu/run.sh on the bundle's build (ALLGATHER_MAX, SECONDS_PER_POINT).
  TALLY_BENCH_BUILD="$root/$build" bash "$root/bench/gpu/run.sh" --no-build >"$out/bench.md" 2>&1 ||
    status=1
  cat "$out/bench.md"

  # The kernels under compute-sanitizer's memcheck: out-of-bounds and misaligned accesses.
  if command -v compute-sanitizer >/dev/null && [[ -x "$build/bin/test_gpu_kernels" ]]; then
    timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$build/bin/test_gpu_kernels" \
      --gtest_color=no >"$out/memcheck.log" 2>&1
    echo "== memcheck test_gpu_kernels: exit $? $(grep -E 'ERROR SUMMARY' "$out/memcheck.log" | tail -1)"
  fi
}
[[ -n "${ONLY_PYTEST:-}" ]] || native_checks

# The Python package's tests and its add() benchmark, with the machine's python3 (torch, CUDA).
if [[ -d "$build/python/tally" ]] && python3 -c "import torch" 2>/dev/null; then
  export PYTHONPATH="$root/$build/python${PYTHONPATH:+:$PYTHONPATH}"
  (cd "$out" && timeout 240 python3 -m pytest -q -rs -p no:cacheprovider "$root/python/tests") \
    >"$out/pytest.log" 2>&1
  rc=$?
  echo "== pytest python/tests: exit $rc: $(tail -1 "$out/pytest.log")"
  grep -E "^(FAILED|ERROR)" "$out/pytest.log" | head -20
  ((rc == 0)) || status=1
  [[ -n "${ONLY_PYTEST:-}" ]] && exit $status
  timeout 120 python3 "$root/bench/python/bench_add.py" --device cuda >"$out/bench_python_cuda.md" 2>&1
  timeout 120 python3 "$root/bench/python/bench_add.py" --device cpu --threads "${BENCH_THREADS:-1}" \
    >"$out/bench_python_cpu.md" 2>&1
  cat "$out/bench_python_cuda.md" "$out/bench_python_cpu.md"
fi
exit $status
