#!/usr/bin/env bash
# Installs the Debian packages tally builds and tests with. Idempotent: apt-get runs only
# for packages that are missing. Run as root (or with sudo available).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libyaml-cpp-dev libmsgpack-cxx-dev libboost-dev libboost-filesystem-dev
  libopenmpi-dev openmpi-bin
  libgloo-dev                 # the gloo backend: TCP collectives without MPI (torchrun, srun)
  slurmctld slurmd slurm-client munge  # tests/launchers/slurm.sh: srun under a private local Slurm
  iproute2 util-linux         # tests/multihost/netns.sh: hosts as network namespaces (ip netns, unshare)
  libfmt-dev libcli11-dev nlohmann-json3-dev
  libspng-dev                 # PNG label maps and images (png_masks, images readers)
  libsndfile1-dev             # WAV files (wav reader: audio metrics)
  libsimdjson-dev             # large JSON: jsonl reader, COCO annotations
  libzip-dev                  # .npz archives (npy reader)
  zlib1g-dev                  # CRC-32 of checkpoint shards
  libssl-dev                  # the TCP store: HMAC-SHA256 of its authentication (OpenSSL libcrypto)
  libicu-dev                  # text metrics: Unicode case mapping and categories
  libgeos-dev                 # HmeanIoU: polygon intersection and union (GEOS, as shapely)
  libgtest-dev libgmock-dev libbenchmark-dev
  libjs-chart.js              # Chart.js, inlined into the HTML report at run time
  libxml2-utils chromium      # tests: xmllint checks the JUnit XML, headless Chromium opens the HTML report
  python3-dev python3-venv    # the Python package (pip install .): headers and a venv to test it in
)

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
