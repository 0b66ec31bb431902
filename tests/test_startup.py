"""What ``import prism`` loads: nothing but the namespace; a module loads with the path that uses it.

The start-up cost of prism (``benchmarks/bench_startup.py``) is mostly module loading. ``import
prism`` loads ``prism`` and ``prism._moved`` only (each top-level name's module is imported the
first time the name is read), and not asyncio or jsonschema. Beyond that, a module that only an
uncommon path uses is imported inside the function that uses it. These tests keep those imports
out of the modules behind the top-level names; the paths themselves are tested where they live
(HTTP-date ``Retry-After`` headers in tests/providers/test_base.py, durable fingerprints in
tests/runtime/test_durable_state.py, blocking tools in parallel rounds and the ``@tool`` fast path
in tests/tools, retry jitter in tests/test_retry.py, the deadline text in tests/test_limits.py,
timelines in tests/test_timeline.py).
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

# Every top-level name bound: the modules behind them all loaded (what `import prism` loaded
# before the names became lazy).
_ALL_NAMES_PROBE = """
import json, sys
from prism import *
sys.stdout.write(json.dumps(sorted(sys.modules)))
"""

# module → the path that loads it
_COLD_PATH_MODULES = {
    "email.utils": "a Retry-After header holding an HTTP date (prism.providers.base)",
    "hashlib": "the fingerprint and argument hashes of durable runs (prism.runtime.durable._envelope)",
    "concurrent.futures.thread": "the first round of blocking tools (prism.tools.execution)",
    "random": "the jitter of a retry delay (prism.retry)",
    "datetime": "the ISO text of a run's wall-time deadline (prism.limits.tracker)",
    "prism.timeline": "projecting a run's ledger rows into a timeline (prism.ledger)",
    "pydantic": "a @tool parameter or argument the fast path leaves (prism.tools.decorator)",
}


def test_top_level_names_leave_cold_path_modules_unloaded() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _ALL_NAMES_PROBE], capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(out.stdout))
    early = {name: path for name, path in _COLD_PATH_MODULES.items() if name in loaded}
    assert early == {}, f"loaded by the top-level names although only these paths use them: {early}"


def test_import_prism_loads_only_the_namespace() -> None:
    """``import prism`` imports ``prism`` and ``prism._moved`` and no other prism module, nor
    asyncio or jsonschema: every top-level name's module loads when the name is first read."""
    out = subprocess.run(
        [sys.executable, "-c", _LOADED_PROBE], capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(out.stdout))
    prism_modules = {name for name in loaded if name == "prism" or name.startswith("prism.")}
    assert prism_modules == {"prism", "prism._moved"}
    heavy = {"asyncio", "jsonschema", "typing", "dataclasses"} & loaded
    assert heavy == set(), f"imported by `import prism`: {sorted(heavy)}"
