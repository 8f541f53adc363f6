#!/usr/bin/env bash
# The multi-host sync benchmark in one command (root): makes N hosts as network namespaces
# (tests/multihost/netns.sh), runs build-rel/bin/tally_bench_multihost under mpirun with one rank
# per host, TCP only over the hosts' veth links (`--mca btl tcp,self`, mpirun in host 0 and its
# daemons started in the others by tests/multihost/ns_agent.sh), and prints one Markdown table per
# host count: tally's gather_object / reduce (mpi backend, and gloo backend when built) against
# raw MPI_Gatherv / MPI_Reduce and Gloo's own gather / allgatherv / reduce; removes the hosts.
#
#   bench/multihost/run.sh [OUT_DIR] [--max BYTES] [--reps N]    (HOSTS="3 4" to choose)
#
# Needs the Release build with the bench (BUILD=build-rel by default):
#   cmake -S . -B build-rel -G Ninja -DCMAKE_BUILD_TYPE=Release -DTALLY_BUILD_BENCH=ON \
#     -DTALLY_BUILD_TESTS=OFF
#   cmake --build build-rel --target tally_bench_multihost   (+ tally_plugin_gloo if present)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-/tmp/tally-bench-multihost}"; shift || true
max=$((256 << 20)); reps=3
while [ $# -gt 0 ]; do
  case "$1" in
    --max) max="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
build="${BUILD:-$root/build-rel}"
bin="$build/bin/tally_bench_multihost"
[ -x "$bin" ] || { echo "run.sh: $bin is not built (see the header of this script)" >&2; exit 2; }
bed="$root/tests/multihost/netns.sh"
"$bed" check >/dev/null || { "$bed" check; exit 77; }
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
NAME=""
trap '[ -z "$NAME" ] || "$bed" down "$NAME"' EXIT
for n in ${HOSTS:-3 4}; do
  eval "$("$bed" up "$n" $$)"
  first=${HOSTS%%,*}
  rm -rf "$out/store$n"; mkdir -p "$out/store$n"
  echo "#### $n hosts ($HOSTS), one rank each"
  "$bed" exec "$NAME" 0 mpirun --allow-run-as-root --bind-to none \
    --mca plm_rsh_agent "$root/tests/multihost/ns_agent.sh" --mca plm_rsh_no_tree_spawn 1 \
    --mca btl tcp,self --mca btl_tcp_if_include "$SUBNET" --mca oob_tcp_if_include "$SUBNET" \
    --host "$HOSTS" -np "$n" \
    "$bin" --store "$out/store$n" --iface eth0 --master-addr "$first" --max "$max" \
    --reps "$reps" --json "$out/multihost_np$n.json" | tee "$out/table_np$n.md"
  "$bed" down "$NAME"; NAME=""
done
