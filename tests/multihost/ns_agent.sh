#!/bin/sh
# Open MPI's launch agent (--mca plm_rsh_agent) for the hosts of tests/multihost/netns.sh: called
# as `ns_agent.sh HOST COMMAND...` in place of `ssh HOST COMMAND...`, it runs COMMAND (Open MPI's
# orted daemon line, written for a remote shell) in the network namespace of HOST, 10.218.S.<K+1>
# -> tally<S>-h<K>, with that host's own hostname (a UTS namespace). The environment is mpirun's.
host=$1
shift
case "$host" in
  10.218.*.*) ;;
  *) echo "ns_agent.sh: not a test-bed address: '$host' (expected 10.218.S.<K+1>)" >&2; exit 255 ;;
esac
slot=$(echo "$host" | cut -d. -f3)
k=$(($(echo "$host" | cut -d. -f4) - 1))
ns="tally$slot-h$k"
exec ip netns exec "$ns" unshare --uts -- sh -c "hostname $ns && $*"
