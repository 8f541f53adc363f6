#!/usr/bin/env bash
# Makes .venv-py (PyPI): what configuring the Python module needs (nanobind) and its tests
# (pytest, numpy, pyyaml). Prints the interpreter's path. PYTHON=python3.12 picks the interpreter.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-py"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "python-venv: creating $venv" >&2
  "${PYTHON:-python3}" -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import nanobind, numpy, pytest, yaml" 2>/dev/null; then
  "$venv/bin/python" -m pip install -q "nanobind>=2.4" numpy pytest pyyaml >&2
fi
echo "$venv/bin/python"
