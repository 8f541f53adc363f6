#!/usr/bin/env bash
# Creates (or updates) the reference Python environment .venv-ref at the repository root from
# tests/reference/requirements.txt. Idempotent: a second run with unchanged requirements only
# checks them. Python is never needed to build or test tally; this environment regenerates the
# committed reference data (classification.py, make_example_data.py).
#
#   bash tests/reference/setup_venv.sh            # uses python3 from PATH
#   PYTHON=python3.11 bash tests/reference/setup_venv.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../.." && pwd)"
venv="${root}/.venv-ref"
req="${here}/requirements.txt"
python="${PYTHON:-python3}"

if [[ ! -x "${venv}/bin/python" ]]; then
  echo "setup_venv: creating ${venv}"
  "${python}" -m venv "${venv}"
fi

stamp="${venv}/.requirements.sha256"
want="$(sha256sum "${req}" | cut -d' ' -f1)"
if [[ -f "${stamp}" && "$(cat "${stamp}")" == "${want}" ]]; then
  echo "setup_venv: ${venv} is up to date"
  exit 0
fi

"${venv}/bin/python" -m pip install --quiet --upgrade pip
"${venv}/bin/python" -m pip install --quiet -r "${req}"
echo "${want}" > "${stamp}"
echo "setup_venv: installed $(${venv}/bin/python -c 'import numpy, sklearn, mmeval; print("numpy", numpy.__version__, "scikit-learn", sklearn.__version__, "mmeval", mmeval.__version__)')"
