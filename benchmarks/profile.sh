#!/usr/bin/env bash
# Profile prism's per-turn path in the benchmark venv (see profile_turns.py for the options).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bash "$here/setup.sh" >/dev/null
exec "${PRISM_BENCH_VENV:-$here/.venv-compare}/bin/python" "$here/profile_turns.py" "$@"
