#!/usr/bin/env bash
# Timings of per-sample records, bootstrap intervals and tally compare's paired tests
# (docs/significance.md, bench/RESULTS.md): 1 M classification samples and a COCO val-sized
# detection set. Usage: bash bench/significance/run.sh [TALLY] [DATA_DIR]
#   TALLY     a release build's tally (default build/bin/tally: cmake --preset default)
#   DATA_DIR  where make_data.py writes (default /tmp/tally-significance)
# Prints wall and user-CPU seconds per step (GNU time), two runs each.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tally="$(realpath "${1:-build/bin/tally}")"
data="${2:-/tmp/tally-significance}"
py="${PYTHON:-$here/../../.venv-ref/bin/python}"
[ -d "$data/acc1m" ] || "$py" "$here/make_data.py" "$data"
t() { local what="$1"; shift; for i in 1 2; do /usr/bin/time -f "$what: wall %e s, user %U s" "$@" >/dev/null 2>/tmp/tally-sig-time || true; tail -1 /tmp/tally-sig-time; done; }
cd "$data/acc1m"
t "1M Accuracy, plain" "$tally" run -q eval.yaml -o plain.json
t "1M Accuracy, + records" "$tally" run -q eval.yaml -o base.json --set output.records=base.rec
"$tally" run -q eval.yaml -o cand.json --set output.records=cand.rec --set data.fields.pred_scores=cand.npy
echo "records: $(stat -c %s base.rec) bytes for $(( $(stat -c %s base.npy) + $(stat -c %s labels.npy) )) bytes of input"
t "1M Accuracy, + records + intervals (B = 1000)" "$tally" run -q eval.yaml -o iv.json --set output.records=iv.rec --set intervals.resamples=1000
t "1M Accuracy, compare --records (McNemar + paired bootstrap B = 1000)" "$tally" compare -q cand.json base.json --records cand.rec --baseline-records base.rec
if [ -d "$data/coco5k" ]; then
  cd "$data/coco5k"
  t "COCO 5000 images bbox, plain" "$tally" run -q eval.yaml -o plain.json
  t "COCO 5000 images bbox, + records" "$tally" run -q eval.yaml -o base.json --set output.records=base.rec
  "$tally" run -q eval.yaml -o cand.json --set output.records=cand.rec --set data.results=dt2.json
  echo "records: $(stat -c %s base.rec) bytes for $(( $(stat -c %s gt.json) + $(stat -c %s dt.json) )) bytes of input"
  t "COCO 5000 images bbox, + records + intervals (B = 1000)" "$tally" run -q eval.yaml -o iv.json --set output.records=iv.rec --set intervals.resamples=1000
  t "COCO 5000 images bbox, compare --records (paired bootstrap B = 1000)" "$tally" compare -q cand.json base.json --records cand.rec --baseline-records base.rec
fi
