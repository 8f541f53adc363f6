#!/usr/bin/env bash
# The Python package's tests (pytest) over a CMake build tree's module: the build given by
# TALLY_BUILD (default build-ci, what scripts/test.sh builds with -DTALLY_BUILD_PYTHON=ON) holds
# build/python/tally (the Python sources, the nanobind module _tally, bin/ and the engine and
# plugins beside it), so the same C++ build serves the C++ suite and these tests: no second
# compile for a wheel. Every example config through Python against the CLI, NumPy inputs of every
# dtype read in place, errors, checkpoints, the adapters, 1-4 ranks under mpirun. A sanitized
# build (the ci preset) runs under AddressSanitizer too: libasan is preloaded into Python, leak
# checks off (the interpreter keeps what it allocates until exit). Where .venv-torch exists
# (scripts/setup-torch-venv.sh) the tests run again there with torch: torch inputs, torchrun on
# 1-4 ranks, and on a machine with a GPU the CUDA tests; without torch those skip with the reason.
#
#   bash scripts/python-tests.sh [PYTEST ARGS...]        (TALLY_BUILD=build to test another tree)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="$root/${TALLY_BUILD:-build-ci}"
bash scripts/python-venv.sh >/dev/null
if [[ ! -f "$build/python/tally/__init__.py" ]] || ! ls "$build"/python/tally/_tally*.so >/dev/null 2>&1; then
  echo "python-tests: $build has no Python module: configure it with -DTALLY_BUILD_PYTHON=ON" \
       "-DPython_EXECUTABLE=$root/.venv-py/bin/python and build it (scripts/test.sh does)" >&2
  exit 2
fi

env_for_build=(PYTHONPATH="$build/python")
if grep -q 'fsanitize=address' "$build/CMakeCache.txt"; then
  # libstdc++ preloaded too: ASan resolves the real __cxa_throw when it starts, and the
  # interpreter itself does not link libstdc++ (without it the first C++ exception aborts).
  env_for_build+=(LD_PRELOAD="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libstdc++.so.6)"
                  ASAN_OPTIONS="detect_leaks=0:abort_on_error=1"
                  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
fi

run_tests() {
  local py="$1"
  shift
  echo "python-tests: $(env "${env_for_build[@]}" "$py" -c 'import tally, sys; print(f"tally {tally.__version__} from {tally.__file__} on Python {sys.version.split()[0]}")')"
  # From another folder: the build's package is tested, not the sources in python/.
  (cd "$(mktemp -d)" && env "${env_for_build[@]}" "$py" -m pytest -q -rs -p no:cacheprovider "$root/python/tests" "$@")
}

run_tests "$root/.venv-py/bin/python" "$@"
if [[ -x "$root/.venv-torch/bin/python" ]]; then
  "$root/.venv-torch/bin/python" -m pip install -q numpy pytest pyyaml
  run_tests "$root/.venv-torch/bin/python" "$@"
else
  echo "python-tests: no .venv-torch (scripts/setup-torch-venv.sh): the torch, torchrun and CUDA tests were skipped"
fi
