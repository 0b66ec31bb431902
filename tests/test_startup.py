"""What ``import prism`` loads: the modules only a rare path needs load with that path.

The start-up cost of prism (``benchmarks/bench_startup.py``) is mostly module loading, so a module
that only an uncommon path uses is imported inside the function that uses it. This test keeps
those imports out of ``import prism``; the paths themselves are tested where they live (HTTP-date
``Retry-After`` headers in tests/providers/test_base.py, durable fingerprints in
tests/runtime/test_durable_state.py, blocking tools in parallel rounds in tests/tools).
"""

from __future__ import annotations

import json
import subprocess
import sys

_LOADED_PROBE = """
import json, sys
import prism
sys.stdout.write(json.dumps(sorted(sys.modules)))
"""

# module → the path that loads it
_COLD_PATH_MODULES = {
    "email.utils": "a Retry-After header holding an HTTP date (prism.providers.base)",
    "hashlib": "the fingerprint and argument hashes of durable runs (prism.runtime.durable._envelope)",
    "concurrent.futures.thread": "the first round of blocking tools (prism.tools.execution)",
}


def test_import_prism_leaves_cold_path_modules_unloaded() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _LOADED_PROBE], capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(out.stdout))
    early = {name: path for name, path in _COLD_PATH_MODULES.items() if name in loaded}
    assert early == {}, f"imported by `import prism` although only these paths use them: {early}"
