#!/usr/bin/env bash
# Packs what tests/gpu/device_check.sh needs to run the GPU tests and benchmarks on a machine that
# has a GPU and its driver but not the Debian libraries tally links: the build folder's programs,
# libraries and plugins (stripped), and every shared library they load that is not part of the C
# runtime, the CUDA driver or NCCL (those come from that machine).
#
#   cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release
#   cmake --build build-gpu --target test_gpu_metrics test_gpu_kernels test_nccl_backend \
#         test_nccl_bootstrap tally_gpu_bench tally_cli tally_all_plugins
#   bash tests/gpu/make_bundle.sh build-gpu .gpu-bundle/bundle.tar.gz
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:?usage: make_bundle.sh BUILD_DIR OUT.tar.gz}
dest=${2:?usage: make_bundle.sh BUILD_DIR OUT.tar.gz}
cd "$root"
build=$(realpath --relative-to="$root" "$build")

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$build/bin" "$stage/.gpu-rt/lib"
echo "$root" >"$stage/.gpu-rt/source_dir"
echo "$build" >"$stage/.gpu-rt/build_dir"

files=()
for f in "$build"/bin/*; do
  [[ -f "$f" && -x "$f" ]] && files+=("$f")
done
while IFS= read -r f; do files+=("$f"); done < <(find "$build/lib" \( -name '*.so' -o -name '*.so.*' \) \( -type f -o -type l \))
# The Python package of a build configured with -DTALLY_BUILD_PYTHON=ON (build/python/tally).
if [[ -d "$build/python/tally" ]]; then
  for f in "$build"/python/tally/*; do
    [[ -L "$f" ]] && { mkdir -p "$stage/$build/python/tally"; cp -a "$f" "$stage/$f"; continue; }
    [[ -f "$f" ]] && files+=("$f")
  done
fi
for f in "${files[@]}"; do
  mkdir -p "$stage/$(dirname "$f")"
  cp -a "$f" "$stage/$f"
  [[ -L "$f" || "$f" == *.py ]] || strip --strip-unneeded "$stage/$f" 2>/dev/null || true
done

# The libraries they load, less the C runtime, the CUDA driver and NCCL (the machine's own).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libcuda\.|libnccl|libtally)'
for f in "${files[@]}"; do
  [[ -L "$f" || "$f" == *.py ]] && continue
  ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ "$name" =~ $skip ]] && continue
  cp -L "$path" "$stage/.gpu-rt/lib/$name"
done

mkdir -p "$(dirname "$dest")"
tar -C "$stage" -czf "$dest" .
echo "make_bundle: $dest ($(du -h "$dest" | cut -f1)), $(ls "$stage/.gpu-rt/lib" | wc -l) libraries"
