# shellcheck shell=bash disable=SC2154  # tmp, tally, config, plugin_dir: set by the sourcing script
# Shared by the launcher tests (slurm.sh, torchrun.sh): sourced, not run.
#
# Each test runs `tally run` on configs/examples/classification.yaml (897 samples: uneven shards
# on 2, 3, 4 and 7 ranks) under a launcher and checks that the results equal the single-process
# run's bit for bit: the "results" part of the two results JSON files must be the same text
# (tally writes every double with the digits that round-trip it exactly).
#
# Exit codes: 0 passed, 1 failed, 77 skipped (ctest SKIP_RETURN_CODE), with the reason on stdout.

launcher_skip=77
failures=0

say() { printf '%s: %s\n' "${test_name:-launchers}" "$*"; }
skip() {
  say "SKIP: $*"
  exit "${launcher_skip}"
}
fail() {
  say "FAIL: $*"
  failures=$((failures + 1))
}

# A TCP port nothing listens on, from 30000-59999 (gloo's srun rendezvous uses 20000-29999).
free_port() {
  local p
  for _ in $(seq 1 100); do
    p=$((30000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/${p}") 2>/dev/null; then
      echo "${p}"
      return 0
    fi
  done
  return 1
}

# The "results" part of a results JSON file (everything before "run").
results_of() { sed '/^  "run": {/,$d' "$1"; }

# check_run NAME JSON EXPECTED_BACKEND EXPECTED_WORLD STDERR_FILE [NOTICE]
# The run wrote JSON with the single-process results, the backend and world size expected, and
# (when NOTICE is given) its stderr holds exactly one line starting with "tally: NOTICE".
check_run() {
  local name=$1 json=$2 backend=$3 world=$4 err=$5 notice=${6:-}
  if [[ ! -s ${json} ]]; then
    fail "${name}: no results file; stderr:"
    sed 's/^/    /' "${err}"
    return
  fi
  if ! diff <(results_of "${single_json}") <(results_of "${json}") >"${json}.diff"; then
    fail "${name}: results differ from the single-process run:"
    head -20 "${json}.diff" | sed 's/^/    /'
  fi
  grep -q "\"backend\": \"${backend}\"" "${json}" ||
    fail "${name}: run.backend is not ${backend}: $(grep '"backend"' "${json}")"
  grep -q "\"world_size\": ${world}," "${json}" ||
    fail "${name}: run.world_size is not ${world}: $(grep '"world_size"' "${json}")"
  if [[ -n ${notice} ]]; then
    local n
    n=$(grep -c "^tally: ${notice}" "${err}")
    [[ ${n} == 1 ]] || {
      fail "${name}: expected one line 'tally: ${notice}...' on stderr, found ${n}:"
      sed 's/^/    /' "${err}"
    }
  fi
}

# The single-process run every launcher run is compared with: ${single_json}.
run_single() {
  single_json=${tmp}/single.json
  "${tally}" run -q "${config}" -o "${single_json}" 2>"${tmp}/single.err" ||
    {
      say "FAIL: the single-process run failed:"
      cat "${tmp}/single.err"
      exit 1
    }
}

# "yes" when the gloo backend plugin is built beside the other plugins.
have_gloo() { [[ -e ${plugin_dir}/libtally_gloo.so ]]; }

finish() {
  if ((failures > 0)); then
    say "${failures} check(s) failed"
    exit 1
  fi
  if [[ -n ${partial:-} ]]; then skip "${partial}"; fi
  say "passed: ${passed:-}"
  exit 0
}
