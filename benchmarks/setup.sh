#!/usr/bin/env bash
# Create the comparison venv (benchmarks/.venv-compare, git-ignored): an editable prism with its
# pydantic extra plus the other frameworks and profilers pinned in requirements-compare.txt.
# Idempotent: re-running only installs what changed. Needs python3.11+ and PyPI access.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
venv="${PRISM_BENCH_VENV:-$here/.venv-compare}"
python="${PYTHON:-python3}"
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "setup.sh: $python is older than 3.11; set PYTHON=python3.11" >&2
    exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
fi
"$venv/bin/python" -m pip install --quiet -e "$root[pydantic]" -r "$here/requirements-compare.txt" 2> >(grep -v "is ignored: it is neither" >&2)
"$venv/bin/python" -c 'import prism, pydantic_ai, agents, langgraph, langchain.agents, instructor, langgraph.checkpoint.sqlite.aio'
echo "benchmark venv ready: $venv"
