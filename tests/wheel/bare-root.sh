#!/usr/bin/env bash
# The self-contained wheel (scripts/build-wheel.sh) in a bare Debian 12 root: Python and venv
# from Debian, no -dev package, no compiler. Installs the wheel into a fresh venv there, times
# the install, then runs the example config with the wheel's `tally` and a Python loop
# (tests/wheel/loop.py) with its module, and checks both against the source build: the same
# numbers, bit for bit. Also checks that the mpi backend, whose Open MPI is not in the root,
# fails in one line naming libmpi, and that `tally plugins` says so.
#
#   tests/wheel/bare-root.sh [WHEEL]      (as root; the newest dist/tally-*manylinux*.whl)
#
# The root is made once with mmdebstrap from the host's Debian sources into build-wheel/bare-root
# (TALLY_BARE_ROOT). numpy, the wheel's one dependency, comes from a wheelhouse downloaded from
# PyPI on the host, so the timed install reads no network. The source build compared with is
# build-ci (TALLY_BUILD: a folder under the repository or an absolute path). Exit 77 (skipped) when there is no wheel or no mmdebstrap.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
wheel="${1:-$(ls -t "$root"/dist/tally-*manylinux*.whl 2>/dev/null | head -1 || true)}"
if [[ -z "$wheel" || ! -f "$wheel" ]]; then
  echo "bare-root: SKIPPED: no wheel in dist/ (scripts/build-wheel.sh makes it)"
  exit 77
fi
if ! command -v mmdebstrap >/dev/null || ((EUID != 0)); then
  echo "bare-root: SKIPPED: needs root and mmdebstrap (apt-get install mmdebstrap)"
  exit 77
fi
bare="${TALLY_BARE_ROOT:-$root/build-wheel/bare-root}"
build="${TALLY_BUILD:-build-ci}"
[[ $build == /* ]] || build="$root/$build"
host_out="$(mktemp -d)"
trap 'rm -rf "$host_out"' EXIT

. "$root/tests/support/debian_root.sh"
if [[ ! -x "$bare/usr/bin/python3" ]]; then
  echo "bare-root: making a bare Debian 12 root in $bare (mmdebstrap: python3, python3-venv)"
  make_debian_root "$bare" python3,python3-venv
fi
no_build_tools "$bare" bare-root
dev=$(in_root "$bare" dpkg-query -W -f '${Package}\n' | grep -c -- '-dev$' || true)
echo "bare-root: $(in_root "$bare" dpkg-query -W -f '${Package}\n' | wc -l) Debian packages, $dev -dev;" \
     "$(in_root "$bare" python3 --version)"
((dev == 0)) || { echo "bare-root: FAILED: the root has -dev packages"; exit 1; }

# What the root gets: the wheel, numpy's wheel, the example and the loop.
t="$bare/tmp/tally-wheel-test"
rm -rf "$t" "$bare/opt/tally-venv"
mkdir -p "$t/wheelhouse" "$t/example"
cp "$wheel" "$t/"
cp -r "$root/configs/examples/classification.yaml" "$root/configs/examples/data" "$t/example/"
cp "$root/tests/wheel/loop.py" "$t/"
pyver=$(in_root "$bare" python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
python3 -m pip download -q --only-binary=:all: --python-version "$pyver" \
  --platform manylinux2014_x86_64 -d "$t/wheelhouse" numpy
in_root "$bare" python3 -m venv /opt/tally-venv

start=$(date +%s%N)
in_root "$bare" /opt/tally-venv/bin/pip install --no-index --find-links /tmp/tally-wheel-test/wheelhouse \
  "/tmp/tally-wheel-test/$(basename "$wheel")"
ms=$((($(date +%s%N) - start) / 1000000))
took="$((ms / 1000)).$(printf %03d $((ms % 1000)))"
echo "bare-root: pip install $(basename "$wheel") ($(du -h "$wheel" | cut -f1), with numpy) took ${took} s"

in_root "$bare" /opt/tally-venv/bin/tally run /tmp/tally-wheel-test/example/classification.yaml \
  --output /tmp/tally-wheel-test/cli.json --html /tmp/tally-wheel-test/report.html
# The HTML report draws its charts with the Chart.js the wheel carries (no Debian package here).
if ! grep -q ' \* Chart.js v[0-9]' "$t/report.html"; then
  echo "bare-root: FAILED: the HTML report has no Chart.js"
  exit 1
fi
echo "bare-root: the HTML report inlines Chart.js ($(wc -c < "$t/report.html") bytes)"
in_root "$bare" /opt/tally-venv/bin/python /tmp/tally-wheel-test/loop.py /tmp/tally-wheel-test/example/data \
  > "$host_out/loop-wheel.json"

# The same from the source build (under ASan when it is the ci build: python-tests.sh's set-up).
asan_env=()
if grep -q 'fsanitize=address' "$build/CMakeCache.txt"; then
  asan_env=(LD_PRELOAD="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libstdc++.so.6)"
            ASAN_OPTIONS=detect_leaks=0)
fi
env "${asan_env[@]}" "$build/bin/tally" run "$root/configs/examples/classification.yaml" \
  --output "$host_out/cli-source.json" --quiet
env "${asan_env[@]}" PYTHONPATH="$build/python" "$root/.venv-py/bin/python" \
  "$root/tests/wheel/loop.py" "$root/configs/examples/data" > "$host_out/loop-source.json"
python3 - "$t/cli.json" "$host_out/cli-source.json" "$host_out/loop-wheel.json" \
  "$host_out/loop-source.json" <<'EOF'
import json, sys
wheel_cli, source_cli, wheel_loop, source_loop = (json.load(open(p)) for p in sys.argv[1:])
ok = True
for what, a, b in [("the example config (tally run)", wheel_cli["results"], source_cli["results"]),
                   ("the Python loop", wheel_loop, source_loop)]:
    same = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    print(f"bare-root: {what}: {'identical to' if same else 'DIFFERENT from'} the source build")
    ok = ok and same
# The loop's example metrics are the config's, fed in batches from Python: the same numbers.
same = json.dumps(wheel_loop["example"], sort_keys=True) == json.dumps(wheel_cli["results"], sort_keys=True)
print(f"bare-root: the loop over the example data: {'identical to' if same else 'DIFFERENT from'} tally run")
sys.exit(0 if ok and same else 1)
EOF

# The mpi backend needs the machine's Open MPI: absent here, one line naming it, exit 2.
set +e
mpi_err=$(in_root "$bare" /opt/tally-venv/bin/tally run /tmp/tally-wheel-test/example/classification.yaml \
  --set backend.type=mpi --quiet 2>&1 >/dev/null)
mpi_rc=$?
set -e
echo "bare-root: backend mpi: exit $mpi_rc: $mpi_err"
if [[ $mpi_rc -ne 2 || $(wc -l <<<"$mpi_err") -ne 1 || $mpi_err != *libmpi.so* ]]; then
  echo "bare-root: FAILED: expected exit 2 and one line naming libmpi"
  exit 1
fi
in_root "$bare" /opt/tally-venv/bin/tally plugins | grep '^not loaded' | sed 's/^/bare-root: tally plugins: /'
echo "bare-root: PASSED"
