"""A worker process for the many-workers tests (DB-11); run as a script, not collected.

Usage: ``python _race_worker.py STORE_URL [SCHEMA]``. Opens the store, prints ``ready``, then
executes one JSON command per stdin line and prints one JSON result per line:

* ``{"op": "load", "key"}`` then ``{"op": "claim", "key", "expected"}`` — what a resume does
  (DUR-17 steps 2/4, DUR-19): load the run's envelope (``load`` reports its version), check that
  version equals ``expected``, then save ``status="running"`` with ``version = expected + 1`` and
  compare-and-set on ``expected``. Split in two commands so that every worker has loaded (and
  passed the version check) before any of them claims: then only the compare-and-set can decide;
* ``{"op": "append", "session", "parent", "id"}`` — append an entry under ``parent`` with
  ``expected_parent_id=parent`` (no fork), as a continuing session does (STORE-4).

Results: ``{"ok": true}`` or ``{"ok": false, "code": <error code>}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from prism.errors import PrismError
from prism.runtime.checkpoints import AGENT_RUN_NAMESPACE
from prism.store import new_session_entry
from prism.stores import open_store
from prism.types import Message, TextContent

_loaded: dict[str, Any] = {}


async def _run(store: Any, command: dict[str, Any]) -> dict[str, Any]:
    op = command["op"]
    if op == "load":
        record = await store.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=command["key"])
        _loaded[command["key"]] = record
        return {"ok": True, "version": record.version if record is not None else None}
    if op == "claim":
        record = _loaded.pop(command["key"], None)
        if record is None or record.version != command["expected"]:
            return {"ok": False, "code": "ERR_PRISM_CHECKPOINT_CONFLICT"}  # stale: lost at load
        await store.save_checkpoint(
            namespace=AGENT_RUN_NAMESPACE,
            key=command["key"],
            value={**record.value, "status": "running", "claimed_by": os.getpid()},
            version=command["expected"] + 1,
            expected_version=command["expected"],
        )
        return {"ok": True}
    if op == "append":
        entry = new_session_entry(
            "message",
            session_id=command["session"],
            parent_id=command["parent"],
            id=command["id"],
            message=Message(role="assistant", content=(TextContent(text=str(os.getpid())),)),
        )
        await store.append(entry, expected_parent_id=command["parent"])
        return {"ok": True}
    raise ValueError(f"unknown op {op!r}")


async def main() -> None:
    url = sys.argv[1]
    options: dict[str, Any] = {}
    if len(sys.argv) > 2:
        options = {"schema": sys.argv[2], "max_size": 1}
    store = await open_store(url, **options)
    try:
        print("ready", flush=True)
        while True:
            line = await asyncio.to_thread(sys.stdin.readline)
            if not line:
                return
            try:
                result = await _run(store, json.loads(line))
            except PrismError as exc:
                result = {"ok": False, "code": exc.code}
            except Exception as exc:
                result = {"ok": False, "code": f"{type(exc).__name__}: {exc}"}
            print(json.dumps(result), flush=True)
    finally:
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main())
