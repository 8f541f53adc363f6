#!/usr/bin/env bash
# A multi-host test bed on one machine: N "hosts" as Linux network namespaces, each with a veth
# pair to a bridge in the root namespace, on a private /24 used by nothing else. Needs root.
#
#   netns.sh check                 exit 0 if namespaces can be made here, else print why, exit 77
#   netns.sh up N [OWNER_PID]      make N >= 1 hosts; prints the bed's variables (see below)
#   netns.sh down NAME             remove bed NAME (idempotent: whatever is left of it)
#   netns.sh sweep                 remove every bed whose owner process is gone (after a crash)
#   netns.sh exec NAME K CMD...    run CMD as host K (its own network and hostname: NAME-hK)
#   netns.sh cut NAME K            cut host K's link (its veth down); `mend` puts it back up
#   netns.sh pids NAME K COMM      pids of the processes named COMM on host K
#
# Beds never collide (ctest -j): `up` takes the first free slot S in 1..200 (an atomic mkdir of
# /run/tally-multihost/S, holding the owner's pid) and the bed is NAME=tally<S>: namespaces
# tally<S>-h0..h<N-1>, bridge tally<S>-br (10.218.S.254: the root namespace reaches every host
# too), root ends of the veth pairs tally<S>-v<K>, each host's end `eth0` at
# 10.218.S.<K+1>/24, lo up. `up` first sweeps beds whose owner is dead. It prints, one a line:
#   NAME=tally7  SUBNET=10.218.7.0/24  BRIDGE_ADDR=10.218.7.254  HOSTS=10.218.7.1,10.218.7.2,...
#
# mpirun's launch agent for these hosts is tests/multihost/ns_agent.sh (it maps 10.218.S.<K+1> to
# the namespace tally<S>-h<K>); mpirun itself runs in host 0. By hand (docs/multihost.md):
#   eval "$(tests/multihost/netns.sh up 3 $$)"
#   tests/multihost/netns.sh exec $NAME 0 mpirun --allow-run-as-root \
#     --mca plm_rsh_agent $PWD/tests/multihost/ns_agent.sh --mca plm_rsh_no_tree_spawn 1 \
#     --mca btl tcp,self --mca btl_tcp_if_include $SUBNET --mca oob_tcp_if_include $SUBNET \
#     --host $HOSTS -np 3 hostname
#   tests/multihost/netns.sh down $NAME
set -uo pipefail

state=/run/tally-multihost
die() { echo "netns.sh: $*" >&2; exit 2; }

# Why namespaces cannot be made here, or nothing.
why_not() {
  [ "$(id -u)" = 0 ] || { echo "not root (uid $(id -u)): creating network namespaces needs root"; return; }
  command -v ip >/dev/null || { echo "no 'ip' command (iproute2)"; return; }
  command -v unshare >/dev/null || { echo "no 'unshare' command (util-linux)"; return; }
  local probe="tally-probe-$$" err
  if ! err=$(ip netns add "$probe" 2>&1); then
    echo "'ip netns add' failed: $err"; return
  fi
  if ! err=$(ip link add "tp$$a" type veth peer name "tp$$b" 2>&1); then
    ip netns del "$probe" 2>/dev/null
    echo "'ip link add ... type veth' failed: $err"; return
  fi
  ip link del "tp$$a" 2>/dev/null
  if ! err=$(ip link add "tp$$br" type bridge 2>&1); then
    ip netns del "$probe" 2>/dev/null
    echo "'ip link add ... type bridge' failed: $err"; return
  fi
  ip link del "tp$$br" 2>/dev/null
  ip netns del "$probe" 2>/dev/null
}

down() {
  local name=$1 ns slot
  [[ "$name" =~ ^tally([0-9]+)$ ]] || die "down: not a bed name: '$name' (expected tally<S>)"
  slot=${BASH_REMATCH[1]}
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${name}-h[0-9]+$"); do
    # Processes left in the namespace (a hung rank after a crash) go with it.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
             grep -E "^${name}-(v[0-9]+|br)$"); do
    ip link del "$l" 2>/dev/null
  done
  rm -rf "${state:?}/$slot"
}

sweep() {
  local d owner
  [ -d "$state" ] || return 0
  for d in "$state"/*; do
    [ -d "$d" ] || continue
    owner=$(cat "$d/owner" 2>/dev/null || echo 0)
    # A slot whose owner file is not written yet belongs to an `up` in progress: leave it.
    [ -f "$d/owner" ] || continue
    if [ "$owner" = 0 ] || ! kill -0 "$owner" 2>/dev/null; then down "tally$(basename "$d")"; fi
  done
}

up() {
  local n=$1 owner=${2:-$PPID} slot name k ns v addr hosts=""
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 16 ] || die "up: N must be 1..16, got '$n'"
  local reason; reason=$(why_not)
  [ -z "$reason" ] || { echo "netns.sh: cannot make network namespaces here: $reason" >&2; exit 77; }
  mkdir -p "$state"
  sweep
  for slot in $(seq 1 200); do
    mkdir "$state/$slot" 2>/dev/null && break
    slot=""
  done
  [ -n "$slot" ] || die "up: all 200 slots of $state are taken"
  echo "$owner" >"$state/$slot/owner"
  name="tally$slot"
  trap 'down "$name"' ERR
  set -e
  ip link add "$name-br" type bridge
  ip addr add "10.218.$slot.254/24" dev "$name-br"
  ip link set "$name-br" up
  for ((k = 0; k < n; k++)); do
    ns="$name-h$k"; v="$name-v$k"; addr="10.218.$slot.$((k + 1))"
    ip netns add "$ns"
    ip link add "$v" type veth peer name eth0 netns "$ns"
    ip link set "$v" master "$name-br"
    ip link set "$v" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    # A host gives up on a peer that stopped acknowledging after about 3 s (Linux's default,
    # tcp_retries2=15, is about 15 min): mpirun, which runs in host 0 and waits for its daemons
    # over TCP, then notices a cut link and ends the job instead of waiting that long.
    ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_retries2=3
    hosts="${hosts:+$hosts,}$addr"
  done
  set +e
  trap - ERR
  # Wait (at most 5 s) until every host's link has its carrier.
  for ((k = 0; k < n; k++)); do
    for _ in $(seq 1 50); do
      ip -n "$name-h$k" link show eth0 | grep -q LOWER_UP && break
      sleep 0.1
    done
  done
  echo "NAME=$name"
  echo "SUBNET=10.218.$slot.0/24"
  echo "BRIDGE_ADDR=10.218.$slot.254"
  echo "HOSTS=$hosts"
}

host_ns() {
  local name=$1 k=$2
  [[ "$name" =~ ^tally[0-9]+$ ]] || die "not a bed name: '$name'"
  [[ "$k" =~ ^[0-9]+$ ]] || die "not a host number: '$k'"
  ip netns list | awk '{print $1}' | grep -qx "$name-h$k" || die "no host $name-h$k"
  echo "$name-h$k"
}

cmd=${1:-}; shift || true
case "$cmd" in
  check)
    reason=$(why_not)
    [ -z "$reason" ] || { echo "cannot make network namespaces here: $reason"; exit 77; }
    echo "network namespaces can be made here" ;;
  up) [ $# -ge 1 ] || die "usage: netns.sh up N [OWNER_PID]"; up "$@" ;;
  down) [ $# -eq 1 ] || die "usage: netns.sh down NAME"; down "$1" ;;
  sweep) sweep ;;
  exec)
    [ $# -ge 3 ] || die "usage: netns.sh exec NAME K CMD..."
    ns=$(host_ns "$1" "$2") || exit 2; shift 2
    # Its own hostname too (a UTS namespace): Open MPI and Gloo see N hosts, not one.
    exec ip netns exec "$ns" unshare --uts -- sh -c 'hostname "$0" && exec "$@"' "$ns" "$@" ;;
  pids)  # pids of the processes named COMM (their /proc/PID/comm) on host K
    [ $# -eq 3 ] || die "usage: netns.sh pids NAME K COMM"
    ns=$(host_ns "$1" "$2") || exit 2
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$3" ] && echo "$pid"
    done
    exit 0 ;;
  cut | mend)
    [ $# -eq 2 ] || die "usage: netns.sh $cmd NAME K"
    host_ns "$1" "$2" >/dev/null || exit 2
    ip link set "$1-v$2" "$([ "$cmd" = cut ] && echo down || echo up)" ;;
  *) die "usage: netns.sh check | up N [OWNER_PID] | down NAME | sweep | exec NAME K CMD... | pids NAME K COMM | cut NAME K | mend NAME K" ;;
esac
