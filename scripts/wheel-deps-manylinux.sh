#!/usr/bin/env bash
# cibuildwheel's before-all on manylinux_2_28 (AlmaLinux 8; pyproject.toml, [tool.cibuildwheel]):
# the C++ libraries tally builds with, in /usr/local. AlmaLinux 8 and EPEL 8 carry some at
# versions too old for tally (Boost 1.66 < 1.74, fmt 6, msgpack-c 3 without msgpack-cxx's CMake
# package, GEOS without its CMake config) and lack others (Gloo, simdjson, libspng, CLI11): those
# are built from pinned releases. Open MPI comes from the distribution only so that the mpi
# backend builds; the repair leaves libmpi out of the wheel (the cluster's own MPI is used).
#
# NOT RUN HERE: the development machine has no network beyond Debian's mirror and PyPI and no
# container runtime, so this script and the cibuildwheel configuration have never run. The wheel
# that was built and tested is scripts/build-wheel.sh's, on Debian 12 (manylinux_2_35).
set -euxo pipefail
dnf install -y epel-release
dnf config-manager --set-enabled powertools
dnf install -y ninja-build pkgconf-pkg-config zlib-devel openssl-devel libicu-devel libzip-devel \
  libsndfile-devel openmpi-devel
# Open MPI's compiler wrappers, for FindMPI.
echo 'export PATH=/usr/lib64/openmpi/bin:$PATH' > /etc/profile.d/openmpi.sh

src=/tmp/tally-deps
mkdir -p "$src"
cd "$src"
fetch() {  # URL FOLDER: a release tarball, unpacked into FOLDER
  mkdir -p "$2"
  curl -fsSL "$1" | tar -xz -C "$2" --strip-components=1
}
cmake_install() {  # FOLDER [CMAKE ARGS...]
  local dir=$1
  shift
  cmake -S "$dir" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX=/usr/local -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_TESTING=OFF "$@"
  cmake --build "$dir/build"
  cmake --install "$dir/build"
}

fetch https://archives.boost.io/release/1.83.0/source/boost_1_83_0.tar.gz boost
(cd boost && ./bootstrap.sh --with-libraries=filesystem --prefix=/usr/local &&
  ./b2 -j"$(nproc)" link=shared install)
fetch https://github.com/fmtlib/fmt/archive/refs/tags/10.2.1.tar.gz fmt
cmake_install fmt -DFMT_DOC=OFF -DFMT_TEST=OFF -DBUILD_SHARED_LIBS=ON
fetch https://github.com/msgpack/msgpack-c/archive/refs/tags/cpp-6.1.1.tar.gz msgpack
cmake_install msgpack -DMSGPACK_USE_BOOST=OFF -DMSGPACK_BUILD_EXAMPLES=OFF
fetch https://github.com/jbeder/yaml-cpp/archive/refs/tags/0.8.0.tar.gz yaml-cpp
cmake_install yaml-cpp -DYAML_BUILD_SHARED_LIBS=ON -DYAML_CPP_BUILD_TESTS=OFF
fetch https://github.com/CLIUtils/CLI11/archive/refs/tags/v2.4.2.tar.gz cli11
cmake_install cli11 -DCLI11_BUILD_TESTS=OFF -DCLI11_BUILD_EXAMPLES=OFF
fetch https://github.com/nlohmann/json/archive/refs/tags/v3.11.3.tar.gz json
cmake_install json -DJSON_BuildTests=OFF
fetch https://github.com/simdjson/simdjson/archive/refs/tags/v3.10.1.tar.gz simdjson
cmake_install simdjson -DBUILD_SHARED_LIBS=ON
fetch https://github.com/randy408/libspng/archive/refs/tags/v0.7.4.tar.gz spng
cmake_install spng -DSPNG_STATIC=OFF
fetch https://github.com/libgeos/geos/archive/refs/tags/3.12.2.tar.gz geos
cmake_install geos
# Gloo has no releases: the snapshot Debian 12's libgloo-dev packages (0.0~git20220518.5b14351).
# Debian patches it for GCC 12 and Linux 6 headers (#1012937, #1022319); if it fails to build
# here, the gloo backend is left out (backends/gloo builds only when Gloo's package is found).
fetch https://github.com/facebookincubator/gloo/archive/5b14351.tar.gz gloo
cmake_install gloo -DBUILD_SHARED_LIBS=ON -DUSE_REDIS=OFF -DUSE_IBVERBS=OFF ||
  echo "wheel-deps: Gloo did not build: the wheel has no gloo backend" >&2
# Chart.js for the HTML report, where the wheel build looks for Debian's copy (CMakeLists.txt).
fetch https://registry.npmjs.org/chart.js/-/chart.js-3.9.1.tgz chartjs
mkdir -p /usr/share/javascript/chart.js /usr/share/doc/libjs-chart.js
cp chartjs/dist/chart.min.js /usr/share/javascript/chart.js/
cp chartjs/LICENSE.md /usr/share/doc/libjs-chart.js/copyright
