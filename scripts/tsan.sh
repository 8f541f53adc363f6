#!/usr/bin/env bash
# ThreadSanitizer over tally's threaded code: the MPI watchdog (test_watchdog), the object
# algorithms over a world of threads (test_dist_backend), COCODetection's threaded matching and the
# coco_json reader's threaded parsing (test_detection_coco, and the detection example run with 1,
# 2 and 3 threads through the CLI), MeanIoU's `threads` (test_segmentation_metrics). Builds only those tests and what they load (the tsan preset:
# no MPI, no CUDA, which are not instrumented), then runs them; exit 0 when TSan reports nothing.
#
#   bash scripts/tsan.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset tsan >/dev/null
cmake --build --preset tsan
ctest --preset tsan -j2 "$@"
