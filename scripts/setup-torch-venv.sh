#!/usr/bin/env bash
# Creates (or checks) the venv .venv-torch at the repository root with PyPI's torch (and
# mmengine, for the Python package's adapter test), for its
# `torchrun`: the launcher tests (tests/launchers/torchrun.sh, ctest label `launchers`) start tally
# under it, and skip with their reason when this venv is absent. Python is never needed to build
# or run tally; the tests never install anything themselves.
#
#   bash scripts/setup-torch-venv.sh                  # python3 from PATH
#   PYTHON=python3.11 TORCH=torch==2.15.0 bash scripts/setup-torch-venv.sh
#
# PyPI's Linux wheel of torch brings the CUDA libraries (about 5 GB installed); torchrun needs
# none of them.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${root}/.venv-torch"
python="${PYTHON:-python3}"
torch="${TORCH:-torch}"

if [[ ! -x "${venv}/bin/python" ]]; then
  echo "setup-torch-venv: creating ${venv}"
  "${python}" -m venv "${venv}"
fi
# mmengine: python/tests/test_adapters.py runs tally's mmengine metric inside mmengine's Evaluator.
# torchmetrics and pillow: tests/reference/panoptic.py (PanopticQuality's reference values).
# torchvision and pycocotools: torchmetrics' MeanAveragePrecision (python/tests/test_mean_ap.py).
# fast-bss-eval and pystoi: tests/reference/audio.py (torchmetrics' SDR with use_cg_iter calls
# fast-bss-eval's conjugate gradient; its STOI calls pystoi).
if [[ -x "${venv}/bin/torchrun" ]] &&
  "${venv}/bin/python" -c "import torch.distributed.run, mmengine, torchmetrics, PIL, fast_bss_eval, pystoi, torchvision, pycocotools" 2>/dev/null; then
  echo "setup-torch-venv: ${venv} has torch $("${venv}/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
  exit 0
fi
"${venv}/bin/python" -m pip install --quiet --upgrade pip
"${venv}/bin/python" -m pip install --quiet "${torch}" mmengine torchmetrics==1.9.0 pillow \
  fast-bss-eval==0.1.4 pystoi==0.4.1 torchvision pycocotools==2.0.11
echo "setup-torch-venv: installed torch $("${venv}/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null) in ${venv}"
