#!/usr/bin/env bash
# Sets up everything on a fresh Debian 12 machine and runs the example evaluation:
# installs the dependencies (apt), configures and builds tally, and runs
# configs/examples/classification.yaml, printing the results table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset default
cmake --build --preset default
./build/bin/tally run configs/examples/classification.yaml --output build/example-results.json
echo "results JSON: build/example-results.json"
