#!/usr/bin/env bash
# Builds the `fuzz` preset and runs every libFuzzer target for a fixed budget, one after another
# (fuzz/README.md). Usage:
#
#   fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]      # default 60 s; all targets
#
# Each target starts from its seeds (fuzz/corpus/<target>/, read only) and a working corpus
# (build-fuzz/fuzz-out/corpus/<target>/, which grows and is reused by the next run). A crash, leak,
# timeout or out-of-memory input is kept under build-fuzz/fuzz-out/artifacts/<target>/ and the
# target restarts for the rest of its budget. Prints per target: runs executed, coverage (cov:
# and ft: of libFuzzer's last status line), corpus size and the inputs kept. Exit status 1 when
# any target found something.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
budget=${1:-60}
shift || true
all_targets=(state_payload npy config jsonl coco_json png)
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=("${all_targets[@]}")

build=$root/build-fuzz
out=$build/fuzz-out
lock=${TALLY_BUILD_LOCK:-/tmp/tally-build.lock}
jobs=${TALLY_BUILD_JOBS:-2}

(cd "$root" && cmake --preset fuzz >/dev/null)
build_cmd=(cmake --build "$build" -j"$jobs" --target tally_fuzz_targets)
if command -v flock >/dev/null; then
  flock "$lock" "${build_cmd[@]}"
else
  "${build_cmd[@]}"
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if command -v llvm-symbolizer >/dev/null; then
  export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer)}
fi

summary=()
found_any=0
run_start=$(date +%s)
for t in "${targets[@]}"; do
  bin=$build/bin/fuzz_$t
  [[ -x $bin ]] || { echo "no target $bin" >&2; exit 2; }
  work=$out/corpus/$t
  art=$out/artifacts/$t
  log=$out/logs/$t.log
  tmp=$out/tmp/$t
  mkdir -p "$work" "$art" "$(dirname "$log")" "$tmp"
  : >"$log"
  dict=()
  [[ -f $root/fuzz/dicts/$t.dict ]] && dict=(-dict="$root/fuzz/dicts/$t.dict")

  start=$(date +%s)
  end=$((start + budget))
  runs=0
  restarts=0
  echo "== fuzz_$t: ${budget}s (log: $log)"
  while :; do
    now=$(date +%s)
    left=$((end - now))
    ((left > 0)) || break
    run_log=$out/logs/$t.last-run.log
    rc=0
    TMPDIR=$tmp "$bin" -max_total_time="$left" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -use_value_profile=1 -artifact_prefix="$art/" "${dict[@]}" "$work" "$root/fuzz/corpus/$t" \
      >"$run_log" 2>&1 || rc=$?
    cat "$run_log" >>"$log"
    n=$(awk '/^stat::number_of_executed_units/ {n = $NF} END {print n + 0}' "$run_log")
    runs=$((runs + n))
    ((rc == 0)) && break
    restarts=$((restarts + 1))
    grep -E '^(==[0-9]+==ERROR|SUMMARY|tally fuzz:|.*runtime error:)' "$run_log" | head -3 | sed 's/^/   /'
    ((restarts < 20)) || break
  done
  rm -rf "${tmp:?}"/tally-fuzz-*
  secs=$(($(date +%s) - start))
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
  cov=$(sed -nE 's/.*cov: ([0-9]+).*/\1/p' <<<"$last")
  ft=$(sed -nE 's/.*ft: ([0-9]+).*/\1/p' <<<"$last")
  corp=$(sed -nE 's/.*corp: ([0-9]+\/[0-9A-Za-z]+).*/\1/p' <<<"$last")
  kept=$(find "$art" -type f -newermt "@$start" | wc -l)
  ((kept == 0)) || found_any=1
  summary+=("$(printf '%-14s %6ss %12s %8s %8s %12s %7s' "$t" "$secs" "$runs" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$kept")")
done

echo
printf '%-14s %7s %12s %8s %8s %12s %7s\n' target time runs cov ft corpus found
printf '%s\n' "${summary[@]}"
if ((found_any)); then
  echo
  echo "inputs kept (fix, then copy each into tests/data/fuzz_regressions/<target>/):"
  find "$out/artifacts" -type f -newermt "@$run_start" | sort
  exit 1
fi
