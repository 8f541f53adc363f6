#!/bin/bash
# Starts N processes of one command as torchrun starts them (without torchrun): each with RANK,
# WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT set, waits for all of them, and exits with
# the code of the first one that failed (0 when every one succeeded).
#
#   launch_ranks.sh N [options] -- command [args...]
#     --addr A         MASTER_ADDR (default 127.0.0.1, or $MASTER_ADDR when set)
#     --port P         MASTER_PORT (default: $MASTER_PORT when set, else a free port)
#     --env R VAR=VAL  an extra (or different) variable for rank R only; repeatable
#     --grace S        after the first failure, how long the others may still run before they are
#                      killed (default 120 s)
#     --bound S        kill every rank after S seconds in all and exit 124 (default 600 s)
# The command sees {rank} replaced by its rank. Every rank's stdout and stderr go to this
# script's. Used by the gloo tests (tests/gloo); the GoogleTest programs there read the same
# variables torchrun sets.
set -u

usage() {
  echo "usage: launch_ranks.sh N [--addr A] [--port P] [--env R VAR=VAL]... [--grace S] [--bound S] -- command..." >&2
  exit 2
}

[ $# -ge 1 ] || usage
n=$1
shift
case $n in '' | *[!0-9]*) usage ;; esac
[ "$n" -ge 1 ] || usage

addr=${MASTER_ADDR:-127.0.0.1}
port=${MASTER_PORT:-}
grace=120
bound=600
declare -A extra
while [ $# -gt 0 ]; do
  case $1 in
    --addr) addr=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --env) extra[$2]+="$3"$'\n'; shift 3 ;;
    --grace) grace=$2; shift 2 ;;
    --bound) bound=$2; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[ $# -ge 1 ] || usage

# A free port: one that nothing on this host accepts connections on (bash's /dev/tcp), below
# the kernel's ephemeral range (ip_local_port_range), where the client sockets of tests running
# in parallel take their ports: a port picked inside it was sometimes taken by one of them
# between this check and rank 0's bind ("Address already in use").
if [ -z "$port" ]; then
  low=32768
  read -r low _ < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  span=$((low > 12000 ? low - 10000 : 2000))
  for _ in $(seq 1 50); do
    p=$((10000 + (RANDOM * 32768 + RANDOM) % span))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      port=$p
      break
    fi
  done
  [ -n "$port" ] || { echo "launch_ranks.sh: no free port found" >&2; exit 2; }
fi

pids=()
for ((r = 0; r < n; r++)); do
  args=()
  for a in "$@"; do args+=("${a//\{rank\}/$r}"); done
  envs=(RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=$addr MASTER_PORT=$port)
  if [ -n "${extra[$r]+x}" ]; then
    while IFS= read -r kv; do [ -n "$kv" ] && envs+=("$kv"); done <<<"${extra[$r]}"
  fi
  env "${envs[@]}" "${args[@]}" &
  pids+=($!)
done

# From here on this script's own messages go to fd 3 (the ranks keep the original stderr): bash's
# job reports ("Killed ...") for ranks that die are not wanted there.
exec 3>&2 2>/dev/null

# Whether process $1 still runs (a finished child stays a zombie until it is waited for).
running() {
  [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

kill_all() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
}

start=$SECONDS
first_fail=0
fail_at=
left=$n
declare -A done_pid
while [ "$left" -gt 0 ]; do
  # Poll once a tenth of a second: `wait -n` cannot also watch the clock.
  for i in "${!pids[@]}"; do
    p=${pids[$i]}
    [ -n "${done_pid[$p]+x}" ] && continue
    if ! running "$p"; then
      wait "$p" 2>/dev/null
      code=$?
      done_pid[$p]=1
      left=$((left - 1))
      if [ "$code" -ne 0 ] && [ "$first_fail" -eq 0 ]; then
        first_fail=$code
        fail_at=$SECONDS
        echo "launch_ranks.sh: rank $i exited with code $code" >&3
      fi
    fi
  done
  [ "$left" -gt 0 ] || break
  if [ $((SECONDS - start)) -ge "$bound" ]; then
    echo "launch_ranks.sh: ranks still running after $bound s: killed" >&3
    kill_all
    wait 2>/dev/null
    exit 124
  fi
  if [ -n "$fail_at" ] && [ $((SECONDS - fail_at)) -ge "$grace" ]; then
    echo "launch_ranks.sh: ranks still running $grace s after the first failure: killed" >&3
    kill_all
    wait 2>/dev/null
    exit "$first_fail"
  fi
  sleep 0.1
done
exit "$first_fail"
