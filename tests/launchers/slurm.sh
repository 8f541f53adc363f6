#!/usr/bin/env bash
# srun end to end: starts a private Slurm on this machine (its own slurm.conf, state and ports in
# a temporary folder, through SLURM_CONF: /etc/slurm is never read or touched), then runs
#   srun -n N tally run classification.yaml --set backend.type=auto    (auto: gloo, nondist at 1)
#   srun -n N tally run ... --set backend.type=gloo
# for N in 1, 2, 3, 4, 7, and
#   srun --mpi=pmix -n N tally run ... --set backend.type=auto          (auto: mpi through PMIx)
# for N in 2, 3, each compared bit for bit with the single-process run; and srun -n 2 with the
# default nondist backend, which must be refused. Stops the daemons in a trap. Skips (exit 77) saying exactly why where Slurm cannot run here.
#
#   bash tests/launchers/slurm.sh TALLY PLUGIN_DIR SOURCE_DIR
#
# The one node is this host, named localhost, with CPUs=8 whatever it has
# (SlurmdParameters=config_overrides) so that 7 tasks fit; auth/munge through a private munged
# (auth/none where munge is absent); the daemons listen on 127.0.0.1 only (NoInAddrAny,
# NoCtldInAddrAny), on free ports picked by this test. Run as root (slurmd starts the tasks).
set -uo pipefail
test_name=launchers.slurm
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=common.sh
source "${here}/common.sh"

tally=$1
plugin_dir=$2
src=$3
config=${src}/configs/examples/classification.yaml

[[ $(id -u) == 0 ]] || skip "not root: slurmd must run as root to start tasks (uid $(id -u))"
for cmd in slurmctld slurmd srun sinfo scontrol; do
  command -v "${cmd}" >/dev/null ||
    skip "${cmd} is not installed (Debian packages slurmctld, slurmd, slurm-client)"
done

tmp=$(mktemp -d /tmp/tally-slurm-XXXXXX)
daemons=()
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local p
  for p in "${daemons[@]}"; do kill "${p}" 2>/dev/null; done
  for p in "${daemons[@]}"; do wait "${p}" 2>/dev/null; done
  rm -rf "${tmp}"
}
trap cleanup EXIT

# The node is named localhost (slurmd -N): gloo's rendezvous under srun resolves the step's first
# node name, and localhost resolves on any machine, as this host's name may not.
node=localhost

# Authentication: a private munged (its own key, socket and logs in the temporary folder) where
# munge is installed, else auth/none; either way the daemons listen on 127.0.0.1 only.
if command -v munged >/dev/null && command -v munge >/dev/null; then
  mkdir -m 700 "${tmp}/munge"
  head -c 1024 /dev/urandom >"${tmp}/munge/munge.key"
  chmod 400 "${tmp}/munge/munge.key"
  munged -F -f --socket="${tmp}/munge/munge.sock" --key-file="${tmp}/munge/munge.key" \
    --log-file="${tmp}/munge/munged.log" --pid-file="${tmp}/munge/munged.pid" \
    --seed-file="${tmp}/munge/munged.seed" >"${tmp}/munged.out" 2>&1 &
  munged_pid=$!
  daemons+=("${munged_pid}")
  for _ in $(seq 1 50); do
    munge -S "${tmp}/munge/munge.sock" -n >/dev/null 2>&1 && break
    kill -0 "${munged_pid}" 2>/dev/null ||
      skip "munged exited at start: $(grep -v '^\s*$' "${tmp}/munged.out" | tail -1)"
    sleep 0.2
  done
  munge -S "${tmp}/munge/munge.sock" -n >/dev/null 2>&1 ||
    skip "munged does not answer on ${tmp}/munge/munge.sock: $(tail -1 "${tmp}/munged.out")"
  auth="AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${tmp}/munge/munge.sock"
elif [[ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/auth_none.so ]]; then
  auth="AuthType=auth/none
CredType=cred/none"
else
  skip "neither munged nor Slurm's auth/none plugin is installed (Debian package munge)"
fi
ctld_port=$(free_port) || skip "no free TCP port for slurmctld"
slurmd_port=$(free_port) || skip "no free TCP port for slurmd"
# A fresh Slurm numbers jobs from FirstJobId; gloo's rendezvous port under srun is
# 20000 + SLURM_JOB_ID % 10000: a random start keeps two test runs apart.
first_job=$((1000 + RANDOM % 8000))
mkdir -p "${tmp}/state" "${tmp}/spool/${node}"
cat >"${tmp}/slurm.conf" <<EOF
ClusterName=tallytest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=${ctld_port}
SlurmdPort=${slurmd_port}
SlurmUser=root
SlurmdUser=root
${auth}
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
FirstJobId=${first_job}
StateSaveLocation=${tmp}/state
SlurmdSpoolDir=${tmp}/spool/%n
SlurmctldPidFile=${tmp}/slurmctld.pid
SlurmdPidFile=${tmp}/slurmd.pid
SlurmctldLogFile=${tmp}/slurmctld.log
SlurmdLogFile=${tmp}/slurmd.log
NodeName=${node} NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=tally Nodes=${node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
export SLURM_CONF=${tmp}/slurm.conf
# srun, sinfo and the tasks must not take this shell's job, if the test runs inside one.
unset SLURM_JOB_ID SLURM_JOBID SLURM_STEP_ID SLURM_NTASKS SLURM_PROCID

slurmctld -D -i >"${tmp}/slurmctld.out" 2>&1 &
ctld_pid=$!
daemons+=("${ctld_pid}")
slurmd -D -N "${node}" >"${tmp}/slurmd.out" 2>&1 &
slurmd_pid=$!
daemons+=("${slurmd_pid}")

last_line() { grep -v '^\s*$' "$1" | tail -1; }
state=""
for _ in $(seq 1 60); do
  kill -0 "${ctld_pid}" 2>/dev/null ||
    skip "slurmctld exited at start: $(last_line "${tmp}/slurmctld.out")"
  kill -0 "${slurmd_pid}" 2>/dev/null ||
    skip "slurmd exited at start: $(last_line "${tmp}/slurmd.out")"
  state=$(sinfo -h -N -n "${node}" -o %t 2>/dev/null | head -1)
  [[ ${state} == idle ]] && break
  sleep 1
done
if [[ ${state} != idle ]]; then
  skip "node ${node} is '${state:-unknown}' after 60 s, not idle; slurmctld: $(last_line \
    "${tmp}/slurmctld.out"); slurmd: $(last_line "${tmp}/slurmd.out")"
fi
say "private Slurm up: node ${node} idle (slurmctld :${ctld_port}, slurmd :${slurmd_port}, ${auth%%$'\n'*})"

run_single
passed=""
partial=""

# srun_case NAME N BACKEND_SET EXPECT_BACKEND NOTICE [srun options...]
srun_case() {
  local name=$1 n=$2 type=$3 expect=$4 notice=$5
  shift 5
  local json=${tmp}/${name}.json err=${tmp}/${name}.err
  timeout 300 srun --kill-on-bad-exit=1 -n "${n}" "$@" "${tally}" run -q "${config}" \
    --set "backend.type=${type}" --set backend.timeout=60 -o "${json}" 2>"${err}"
  local rc=$?
  if [[ ${rc} != 0 ]]; then
    fail "${name}: srun exited ${rc}; stderr:"
    sed 's/^/    /' "${err}"
    return
  fi
  local before=${failures}
  check_run "${name}" "${json}" "${expect}" "${n}" "${err}" "${notice}"
  ((failures == before)) && passed+="${name} "
}

# nondist (the default) under srun -n 2: an error saying to set auto, not two whole runs (rank 0
# exits 2 at once; --kill-on-bad-exit then ends rank 1, and srun exits 143).
err=${tmp}/nondist_n2.err
timeout 120 srun --kill-on-bad-exit=1 -n 2 "${tally}" run -q "${config}" -o "${tmp}/never.json" \
  2>"${err}"
rc=$?
if [[ ${rc} == 2 || ${rc} == 143 ]] && grep -q "started as one of 2 ranks by a launcher, but the backend is nondist" \
  "${err}" && [[ ! -e ${tmp}/never.json ]]; then
  passed+="nondist_n2_refused "
else
  fail "nondist_n2: expected exit 2 (or 143) and 'started as one of 2 ranks', got ${rc}:"
  sed 's/^/    /' "${err}"
fi

# A world of one: auto takes nondist (no backend.timeout for it: auto leaves it out).
srun_case auto_n1 1 auto nondist "backend auto -> nondist (SLURM_PROCID=0, SLURM_NTASKS=1"

if have_gloo; then
  for n in 2 3 4 7; do
    # 4 as the README writes it: nodes and tasks per node.
    per_node=()
    ((n == 4)) && per_node=(-N 1 --ntasks-per-node 4)
    srun_case "auto_n${n}" "${n}" auto gloo \
      "backend auto -> gloo (SLURM_PROCID=0, SLURM_NTASKS=${n}, SLURM_STEP_ID=" "${per_node[@]}"
  done
  for n in 1 2 3 4 7; do
    srun_case "gloo_n${n}" "${n}" gloo gloo ""
  done
else
  partial="no gloo backend plugin (${plugin_dir}/libtally_gloo.so): srun with gloo and auto -> gloo not run"
fi

# srun --mpi=pmix: Open MPI joins through PMIx, and auto takes mpi.
if srun --mpi=list 2>&1 | grep -qw pmix; then
  for n in 2 3; do
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
      srun_case "pmix_auto_n${n}" "${n}" auto mpi \
      "backend auto -> mpi (PMIX_RANK=0, SLURM_PROCID=0, SLURM_NTASKS=${n}" --mpi=pmix
  done
else
  partial+="${partial:+; }this Slurm has no mpi/pmix plugin: srun --mpi=pmix not run"
fi

finish
