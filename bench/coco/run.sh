#!/usr/bin/env bash
# One command for the COCO benchmark: builds tally's CLI and the detection plugins, installs the
# other tools in the venv if they are missing, generates the synthetic data (once), and runs
# bench/coco/run.py. Usage:
#   bench/coco/run.sh [DATA_DIR] [run.py options, e.g. --repeat 5 --pycocotools-10x]
# DATA_DIR defaults to /tmp/tally-bench-coco (about 500 MB); PYTHON to .venv-ref/bin/python;
# BUILD_DIR to build; with TALLY_BUILD_LOCK set, the build runs under `flock $TALLY_BUILD_LOCK`
# (a build tree shared by several jobs).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DATA="${1:-/tmp/tally-bench-coco}"
[[ $# -gt 0 ]] && shift
PY="${PYTHON:-$ROOT/.venv-ref/bin/python}"
BUILD="${BUILD_DIR:-$ROOT/build}"
LOCK=()
[[ -n "${TALLY_BUILD_LOCK:-}" ]] && LOCK=(flock "$TALLY_BUILD_LOCK")
"${LOCK[@]}" cmake --build "$BUILD" --target tally_cli tally_plugin_detection tally_plugin_coco_json tally_plugin_nondist
if ! "$PY" -c "import pycocotools, faster_coco_eval, hotcoco, ultrafast_pycocotools" 2>/dev/null; then
  "$PY" -m pip install -r "$ROOT/bench/coco/requirements.txt"
fi
if [[ ! -f "$DATA/dets_1000.json" ]]; then
  "$PY" "$ROOT/bench/coco/gen.py" "$DATA"
fi
exec "$PY" "$ROOT/bench/coco/run.py" --data "$DATA" --tally "$BUILD/bin/tally" "$@"
