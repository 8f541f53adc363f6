#!/usr/bin/env bash
# Sets up everything on a fresh Debian 12 machine and runs the whole test suite: installs the
# dependencies (apt), configures and builds tally with warnings as errors under AddressSanitizer
# and UBSan (the ci preset), and runs ctest (unit, integration, MPI on 1-7 ranks, emulated GPU
# kernels, the out-of-tree SDK plugin); any sanitizer report fails its test; then builds the
# Python package into a venv (pip) and runs its tests (scripts/python-tests.sh), after first
# checking the function-length rule (scripts/function-lengths.sh). GPU tests skip without a GPU.
# The optimised build: the release preset; ThreadSanitizer: scripts/tsan.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# No function over 120 lines in engine/, backends/, plugins/ (lizard in .venv-lint).
bash scripts/function-lengths.sh
cmake --preset ci
cmake --build --preset ci
ctest --preset ci -j2 "$@"
# The Python package, built by pip into a venv, and its pytest suite.
bash scripts/python-tests.sh
