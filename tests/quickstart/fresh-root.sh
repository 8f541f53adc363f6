#!/usr/bin/env bash
# The README's quick start as a new user meets it: a fresh Debian 12 root (mmdebstrap
# --variant=minbase with git, the way the user got the repository: no compiler, no -dev package,
# none of tally's dependencies), a clone of this repository's committed HEAD in it, and
# ./scripts/example.sh run in it, timed from the start of its package installs to the printed
# results table (the target: 6 minutes on 2 cores).
#
#   tests/quickstart/fresh-root.sh [ROOT]     (default /tmp/tally-fresh-root, made anew)
#
# Needs root, mmdebstrap and Debian's package mirror (it installs about 150 packages, some 200 MB),
# so it is not part of ctest: run it before changing what example.sh installs or builds.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
root=${1:-/tmp/tally-fresh-root}
if ((EUID != 0)) || ! command -v mmdebstrap >/dev/null; then
  echo "fresh-root: needs root and mmdebstrap (apt-get install mmdebstrap)" >&2
  exit 2
fi

. "$repo/tests/support/debian_root.sh"
echo "fresh-root: making a minimal Debian 12 root in $root (mmdebstrap: minbase, git)"
make_debian_root "$root" git,ca-certificates
git clone --quiet "$repo" "$root/src/tally"
echo "fresh-root: $(in_root "$root" dpkg-query -W -f '${Package}\n' | wc -l) Debian packages;" \
  "cloned $(git -C "$repo" rev-parse --short HEAD)"
no_build_tools "$root" fresh-root
cp /etc/resolv.conf "$root/etc/resolv.conf"
in_root "$root" bash -c 'cd /src/tally && start=$(date +%s) && ./scripts/example.sh &&
  echo "fresh-root: ./scripts/example.sh took $(( $(date +%s) - start )) s on $(nproc) cores," \
    "package installs included"'
