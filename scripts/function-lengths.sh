#!/usr/bin/env bash
# The project's rule "no function over 120 lines" in engine/, backends/ and plugins/, checked by
# lizard (PyPI, a well-kept C/C++ function analyser) in the venv .venv-lint, made on first use.
# Exit 1 listing every function longer than the limit (file:line, name, length); exit 0 with a
# one-line summary otherwise. Part of scripts/test.sh.
#
#   bash scripts/function-lengths.sh [LIMIT]        (default 120)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
limit="${1:-120}"
venv="$root/.venv-lint"
if [[ ! -x "$venv/bin/lizard" ]]; then
  "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/python" -m pip install -q "lizard==1.24.*"
fi
# -C: no cyclomatic-complexity warnings (only the length is the rule); -L: the length limit.
# lizard prints "FILE:LINE: warning: NAME has N NLOC, M CCN, T token, P PARAM, L length, ..."
# for each function over it.
over=$("$venv/bin/lizard" -C 100000 -L "$limit" -w engine backends plugins || true)
if [[ -n "$over" ]]; then
  echo "function-lengths: functions longer than $limit lines (split them into named steps):"
  echo "$over" | sed -E 's/^([^:]+:[0-9]+): warning: (.*) has .* ([0-9]+) length.*/  \1 \2 (\3 lines)/'
  exit 1
fi
count=$("$venv/bin/lizard" -C 100000 -L 100000 engine backends plugins | tail -1 | awk '{print $5}')
echo "function-lengths: no function over $limit lines in engine/, backends/, plugins/ (${count:-?} functions)"
