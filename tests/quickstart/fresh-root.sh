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

cleanup() {
  umount -l "$root/dev" 2>/dev/null || true
  umount -l "$root/proc" 2>/dev/null || true
}
trap cleanup EXIT
cleanup
rm -rf "$root"
echo "fresh-root: making a minimal Debian 12 root in $root (mmdebstrap: minbase, git)"
mmdebstrap --quiet --variant=minbase --include=git,ca-certificates bookworm "$root" \
  /etc/apt/sources.list.d/debian.sources
git clone --quiet "$repo" "$root/src/tally"
echo "fresh-root: $(chroot "$root" dpkg-query -W -f '${Package}\n' | wc -l) Debian packages;" \
  "cloned $(git -C "$repo" rev-parse --short HEAD)"
for tool in cc gcc g++ cmake; do
  if chroot "$root" sh -c "command -v $tool" >/dev/null; then
    echo "fresh-root: the root already has $tool" >&2
    exit 1
  fi
done
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root LANG=C.UTF-8 bash -c 'cd /src/tally && start=$(date +%s) &&
    ./scripts/example.sh && echo "fresh-root: ./scripts/example.sh took $(( $(date +%s) - start )) s" \
    "on $(nproc) cores, package installs included"'
