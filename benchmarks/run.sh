#!/usr/bin/env bash
# The one command of the comparison suite: create/update the benchmark venv, then run every
# comparison and print the table. Extra arguments go to compare.py (e.g. --quick, --only turns).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bash "$here/setup.sh"
exec "${PRISM_BENCH_VENV:-$here/.venv-compare}/bin/python" "$here/compare.py" "$@"
