#!/usr/bin/env bash
# Builds the docs site: creates the .venv-docs venv (MkDocs and the Material theme from PyPI,
# pinned), writes docs/reference/ (one page per metric, reader and backend) from
# `tally plugins --json` with scripts/gen-docs.py, and runs `mkdocs build --strict` into
# build-docs/site. Any warning fails it (exit non-zero): a page not in mkdocs.yml's nav, a link to
# a page or anchor that does not exist, a link out of docs/.
#
#   scripts/docs.sh [TALLY]     # TALLY: the tally binary (default build-ci/bin/tally, else
#                               # build/bin/tally); an AddressSanitizer build is fine
#   DOCS_SITE=DIR scripts/docs.sh   # the site elsewhere (default build-docs/site)
set -euo pipefail
export NO_MKDOCS_2_WARNING=1  # no end-of-life banner from mkdocs-material
cd "$(dirname "$0")/.."

tally_bin=${1:-}
if [ -z "$tally_bin" ]; then
  for b in build-ci/bin/tally build/bin/tally; do
    if [ -x "$b" ]; then tally_bin=$b; break; fi
  done
fi
if [ -z "$tally_bin" ] || [ ! -x "$tally_bin" ]; then
  echo "docs.sh: no tally binary (build-ci/bin/tally or build/bin/tally; or pass one): build tally first" >&2
  exit 2
fi

venv=.venv-docs
want="mkdocs==1.6.1 mkdocs-material==9.8.2"
if [ ! -x "$venv/bin/mkdocs" ] || ! "$venv/bin/python" -m pip freeze 2>/dev/null |
    grep -qx 'mkdocs-material==9.8.2'; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check $want
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}  # an ASan build of tally reports leaks at exit
"$venv/bin/python" scripts/gen-docs.py "$tally_bin"

site=${DOCS_SITE:-build-docs/site}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# --strict turns warnings into a failure; the grep also catches any WARNING line it lets by.
if ! "$venv/bin/mkdocs" build --strict --clean -f mkdocs.yml -d "$(realpath -m "$site")" 2>&1 | tee "$log"; then
  echo "docs.sh: mkdocs build --strict failed" >&2
  exit 1
fi
if grep -q '^WARNING' "$log"; then
  echo "docs.sh: mkdocs printed warnings" >&2
  exit 1
fi
echo "docs.sh: site in $site"
