#!/usr/bin/env bash
# Sets up everything on a fresh Debian 12 machine and runs the whole test suite: installs the
# dependencies (apt, scripts/install-deps.sh --test), checks the function-length rule
# (scripts/function-lengths.sh), configures and builds tally with warnings as errors under
# AddressSanitizer and UBSan (the ci preset) with the Python module, runs ctest (unit,
# integration, MPI on 1-7 ranks, emulated GPU kernels, the out-of-tree SDK plugin; any sanitizer
# report fails its test), then the Python tests over the same build (scripts/python-tests.sh: no
# second compile) and the docs site in strict mode (scripts/docs.sh). GPU tests skip without a GPU.
#
#   ./scripts/test.sh            everything (CI: .ci/run)
#   ./scripts/test.sh --quick    the quick tier for every change: the build, then the unit tests
#                                (ctest -L unit -LE sweep: the long value sweeps left out)
#   ./scripts/test.sh [--quick] CTEST ARGS...   (e.g. -R Accuracy)
#
# The optimised build: the release preset; ThreadSanitizer: scripts/tsan.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [[ ${1:-} == --quick ]]; then quick=1; shift; fi
bash scripts/install-deps.sh --test
# No function over 120 lines in engine/, backends/, plugins/ (lizard in .venv-lint).
bash scripts/function-lengths.sh
python=$(bash scripts/python-venv.sh)
cmake --preset ci -DTALLY_BUILD_PYTHON=ON -DPython_EXECUTABLE="$python"
cmake --build --preset ci
if ((quick)); then
  ctest --preset ci -j2 -L unit -LE sweep "$@"
  exit 0
fi
# -j3 on 2 cores: the tests that start ranks run first, one at a time beside two single-process
# tests (their COST and lock: tests/CMakeLists.txt), so their waits overlap the others' work.
ctest --preset ci -j3 "$@"
bash scripts/python-tests.sh
bash scripts/docs.sh build-ci/bin/tally
