#!/usr/bin/env bash
# The quick start on a fresh Debian 12 machine: installs what building and running need (apt,
# scripts/install-deps.sh without --test), builds the engine, the CLI and the plugins the example
# uses (the default preset: no tests), and runs configs/examples/classification.yaml, printing
# its results table. About 4 minutes on 2 cores from a fresh Debian 12 root, packages included
# (tests/quickstart/fresh-root.sh: 254 s), most of it compiling. Then
# `cmake --build build` builds every other plugin (about 20 more minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
cat <<'MSG'
example: 1/3 installing the Debian packages tally builds with (apt; only those missing)
example: 2/3 building libtally, the tally command and the 3 plugins the example loads
         (classification, the npy reader, the nondist backend) into build/: about 4 min on 2 cores
example: 3/3 running configs/examples/classification.yaml (897 digits, 10 classes)
MSG
bash scripts/install-deps.sh
mkdir -p build
cmake --preset default > build/configure.log 2>&1 || { cat build/configure.log >&2; exit 1; }
ninja -C build tally_cli tally_plugin_classification tally_plugin_npy tally_plugin_nondist
./build/bin/tally run configs/examples/classification.yaml --output build/example-results.json
echo "example: done in $((SECONDS - start)) s; results JSON: build/example-results.json"
echo "example: every other metric, reader and backend plugin: cmake --build build"
