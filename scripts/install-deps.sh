#!/usr/bin/env bash
# Installs the Debian packages tally builds and runs with (no argument), or also those its tests
# need (--test). Idempotent: apt-get runs only for packages that are missing. Run as root (or with
# sudo available).
set -euo pipefail

# What building and running tally needs (./scripts/example.sh): the compiler and CMake, the
# libraries the engine and plugins link, the MPI and Gloo backends' runtimes.
packages=(
  build-essential cmake ninja-build pkg-config
  libyaml-cpp-dev libmsgpack-cxx-dev libboost-dev libboost-filesystem-dev
  libopenmpi-dev openmpi-bin
  libgloo-dev                 # the gloo backend: TCP collectives without MPI (torchrun, srun)
  libfmt-dev libcli11-dev nlohmann-json3-dev
  libspng-dev                 # PNG label maps and images (png_masks, images readers)
  libsndfile1-dev             # WAV files (wav reader: audio metrics)
  libsimdjson-dev             # large JSON: jsonl reader, COCO annotations
  libzip-dev                  # .npz archives (npy reader)
  zlib1g-dev                  # CRC-32 of checkpoint shards
  libssl-dev                  # the TCP store: HMAC-SHA256 of its authentication (OpenSSL libcrypto)
  libicu-dev                  # text metrics: Unicode case mapping and categories
  libgeos-dev                 # HmeanIoU: polygon intersection and union (GEOS, as shapely)
  libjs-chart.js              # Chart.js, inlined into the HTML report at run time
)
# What only the test suite needs (--test: ./scripts/test.sh).
test_packages=(
  git
  libgtest-dev libgmock-dev libbenchmark-dev
  slurmctld slurmd slurm-client munge  # tests/launchers/slurm.sh: srun under a private local Slurm
  iproute2 util-linux         # tests/multihost/netns.sh: hosts as network namespaces (ip netns, unshare)
  libxml2-utils chromium      # tests: xmllint checks the JUnit XML, headless Chromium opens the HTML report
  python3-dev python3-venv    # the Python module (nanobind) and the venvs its tests and the docs run in
  mmdebstrap                  # bare Debian roots: the wheel's install test, tests/quickstart/fresh-root.sh
)
if [[ ${1:-} == --test ]]; then packages+=("${test_packages[@]}"); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
