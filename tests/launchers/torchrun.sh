#!/usr/bin/env bash
# torchrun end to end (torchrun from PyTorch's wheel in a venv: scripts/setup-torch-venv.sh).
# tally is no Python program: torchrun --no-python starts it directly.
#
#   bash tests/launchers/torchrun.sh TALLY PLUGIN_DIR SOURCE_DIR VENV single|multinode
#
# single:     torchrun --nproc-per-node N tally run classification.yaml, backend auto (gloo; nondist
#             at 1) and gloo, N in 1, 2, 3, 4, 7.
# multinode:  two torchrun agents on this machine as two nodes, the way teams run across hosts:
#             torchrun --nnodes 2 --node-rank {0,1} --nproc-per-node 2 --master-addr 127.0.0.1
#             --master-port P, backend auto and gloo (4 ranks).
# Each run's results equal the single-process run's bit for bit. Skips (exit 77) with the reason
# when the venv or the gloo plugin is absent.
set -uo pipefail
test_name=launchers.torchrun
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
source "${here}/common.sh"

tally=$1
plugin_dir=$2
src=$3
venv=$4
mode=$5
test_name=launchers.torchrun_${mode}
config=${src}/configs/examples/classification.yaml
torchrun=${venv}/bin/torchrun

[[ -x ${torchrun} ]] ||
  skip "no torchrun at ${torchrun}: build the venv with scripts/setup-torch-venv.sh"
have_gloo || skip "no gloo backend plugin (${plugin_dir}/libtally_gloo.so): torchrun needs gloo"

tmp=$(mktemp -d /tmp/tally-torchrun-XXXXXX)
agents=()
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local p
  for p in "${agents[@]}"; do kill "${p}" 2>/dev/null; done
  rm -rf "${tmp}"
}
trap cleanup EXIT
# torchrun's own advice about threads, once per agent, is not what these tests look at.
export OMP_NUM_THREADS=1
unset RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT OMPI_COMM_WORLD_SIZE PMIX_RANK PMI_SIZE \
  SLURM_PROCID SLURM_STEP_ID

run_single
passed=""

tally_args() {  # TYPE JSON
  echo run -q "${config}" --set "backend.type=$1" --set backend.timeout=60 -o "$2"
}

# single_case NAME N TYPE EXPECT NOTICE
single_case() {
  local name=$1 n=$2 type=$3 expect=$4 notice=$5
  local json=${tmp}/${name}.json err=${tmp}/${name}.err port
  port=$(free_port) || {
    fail "${name}: no free port"
    return
  }
  # shellcheck disable=SC2046
  timeout 300 "${torchrun}" --nproc-per-node "${n}" --master-port "${port}" --no-python \
    "${tally}" $(tally_args "${type}" "${json}") 2>"${err}" >/dev/null
  local rc=$?
  if [[ ${rc} != 0 ]]; then
    fail "${name}: torchrun exited ${rc}; stderr:"
    sed 's/^/    /' "${err}" | tail -40
    return
  fi
  local before=${failures}
  check_run "${name}" "${json}" "${expect}" "${n}" "${err}" "${notice}"
  ((failures == before)) && passed+="${name} "
}

# multinode_case NAME TYPE EXPECT NOTICE: two agents, 2 ranks each.
multinode_case() {
  local name=$1 type=$2 expect=$3 notice=$4
  local json=${tmp}/${name}.json port rc node
  port=$(free_port) || {
    fail "${name}: no free port"
    return
  }
  agents=()
  for node in 0 1; do
    # shellcheck disable=SC2046
    timeout 300 "${torchrun}" --nnodes 2 --node-rank "${node}" --nproc-per-node 2 \
      --master-addr 127.0.0.1 --master-port "${port}" --no-python \
      "${tally}" $(tally_args "${type}" "${json}") 2>"${tmp}/${name}.node${node}.err" >/dev/null &
    agents+=($!)
  done
  for node in 0 1; do
    wait "${agents[${node}]}"
    rc=$?
    if [[ ${rc} != 0 ]]; then
      fail "${name}: the torchrun of node ${node} exited ${rc}; stderr:"
      sed 's/^/    /' "${tmp}/${name}.node${node}.err" | tail -40
    fi
  done
  agents=()
  cat "${tmp}/${name}.node0.err" "${tmp}/${name}.node1.err" >"${tmp}/${name}.err"
  local before=${failures}
  check_run "${name}" "${json}" "${expect}" 4 "${tmp}/${name}.err" "${notice}"
  ((failures == before)) && passed+="${name} "
}

case ${mode} in
  single)
    single_case auto_n1 1 auto nondist "backend auto -> nondist (RANK=0, WORLD_SIZE=1"
    for n in 2 3 4 7; do
      single_case "auto_n${n}" "${n}" auto gloo \
        "backend auto -> gloo (RANK=0, WORLD_SIZE=${n}, LOCAL_RANK=0, MASTER_ADDR="
    done
    for n in 1 2 3 4 7; do
      single_case "gloo_n${n}" "${n}" gloo gloo ""
    done
    ;;
  multinode)
    multinode_case nodes2x2_auto auto gloo \
      "backend auto -> gloo (RANK=0, WORLD_SIZE=4, LOCAL_RANK=0, MASTER_ADDR=127.0.0.1"
    multinode_case nodes2x2_gloo gloo gloo ""
    ;;
  *)
    echo "usage: torchrun.sh TALLY PLUGIN_DIR SOURCE_DIR VENV single|multinode" >&2
    exit 2
    ;;
esac

finish
