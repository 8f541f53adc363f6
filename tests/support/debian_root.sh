# Bare Debian 12 roots for the tests that install tally as a new user would (sourced by
# tests/wheel/bare-root.sh and tests/quickstart/fresh-root.sh; needs root and mmdebstrap).

# make_debian_root ROOT PACKAGES: a minbase Debian 12 root in ROOT (made anew) from the host's
# Debian sources, with PACKAGES (comma-separated) added.
make_debian_root() {
  rm -rf "$1"
  mmdebstrap --quiet --variant=minbase --include="$2" bookworm "$1" \
    /etc/apt/sources.list.d/debian.sources
}

# in_root ROOT COMMAND...: COMMAND inside ROOT, in a private mount namespace with /proc and /dev
# (nothing stays mounted after it), with a clean environment: nothing of the host's PATH, Python
# or libraries.
in_root() {
  unshare --mount --fork sh -c 'mount -t proc proc "$0/proc" && mount --rbind /dev "$0/dev" &&
    exec chroot "$0" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
      LANG=C.UTF-8 PIP_DISABLE_PIP_VERSION_CHECK=1 "$@"' "$@"
}

# no_build_tools ROOT LABEL: fails (exit 1, naming the tool) when ROOT has a compiler or CMake.
no_build_tools() {
  local tool
  for tool in cc gcc g++ c++ cmake; do
    if in_root "$1" sh -c "command -v $tool" >/dev/null; then
      echo "$2: FAILED: the root has a compiler or build tool ($tool)" >&2
      exit 1
    fi
  done
}
