#!/usr/bin/env bash
# Sets up everything on a fresh Debian 12 machine and runs the whole test suite: installs the
# dependencies (apt), configures and builds tally with warnings as errors, and runs ctest (unit,
# integration, MPI on 1-7 ranks, and the out-of-tree SDK plugin). GPU tests skip without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset ci
cmake --build --preset ci
ctest --preset ci -j2 "$@"
