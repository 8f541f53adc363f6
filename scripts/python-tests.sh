#!/usr/bin/env bash
# Builds the Python package with `pip install .`'s build (scikit-build-core + nanobind, a wheel in
# build-py/dist, incremental in build-py/) into the venv .venv-py and runs its tests with pytest:
# every example config through Python against the CLI, NumPy inputs of every dtype read in place,
# errors, checkpoints, the adapters, 1-4 ranks under mpirun. Where .venv-torch exists
# (scripts/setup-torch-venv.sh), the wheel goes there too and the tests run again with torch:
# torch inputs, torchrun on 1-4 ranks, and on a machine with a GPU the CUDA tests. Without torch
# those tests skip with the reason.
#
#   bash scripts/python-tests.sh [PYTEST ARGS...]      (PYTHON=python3.12 to pick the interpreter)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${PYTHON:-python3}"
venv="$root/.venv-py"

if [[ ! -x "$venv/bin/python" ]]; then
  echo "python-tests: creating $venv"
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.4" numpy pytest pyyaml

# One wheel per interpreter version among the venvs.
wheel_for() {
  local py="$1"
  local tag
  tag=$("$py" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
  if ! "$py" -c "import scikit_build_core, nanobind" 2>/dev/null; then
    "$py" -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.4"
  fi
  rm -f build-py/dist/tally-*-"$tag"-*.whl
  "$py" -m pip wheel -q --no-build-isolation --no-deps . -w build-py/dist >&2
  ls build-py/dist/tally-*-"$tag"-*.whl
}

run_tests() {
  local venv_dir="$1"
  shift
  local whl
  whl=$(wheel_for "$venv_dir/bin/python")
  "$venv_dir/bin/python" -m pip install -q --force-reinstall --no-deps "$whl"
  echo "python-tests: $("$venv_dir/bin/python" -c 'import tally, sys; print(f"tally {tally.__version__} on Python {sys.version.split()[0]}")') in $venv_dir"
  # From another folder: the installed package is tested, not the sources in python/.
  (cd "$(mktemp -d)" && "$venv_dir/bin/python" -m pytest -q -rs -p no:cacheprovider "$root/python/tests" "$@")
}

run_tests "$venv" "$@"
if [[ -x "$root/.venv-torch/bin/python" ]]; then
  "$root/.venv-torch/bin/python" -m pip install -q numpy pytest pyyaml
  run_tests "$root/.venv-torch" "$@"
else
  echo "python-tests: no .venv-torch (scripts/setup-torch-venv.sh): the torch, torchrun and CUDA tests were skipped"
fi
