"""Run-index conformance: the optional ``list_run_checkpoints`` of a checkpoint store.

:func:`check_run_index` runs as part of ``run_checkpoint_store_conformance`` for a store that has
the :class:`~prism.checkpoints.AgentRunIndex` method. It writes run-state-like records
under ``"prism.agent-run"`` for session ids of its own (so it can run against a shared,
non-empty database) and checks the filters, the order and the limit.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final, Protocol

from prism._util import new_id
from prism.checkpoints import AGENT_RUN_NAMESPACE, AgentRunIndex, CheckpointStore
from prism.testing._conformance_checks import check

__all__ = ["IndexedStore", "check_run_index"]

_TICK_S: Final = 0.003
"""Pause between saves, so each record has a later ``updated_at`` (millisecond precision)."""


class IndexedStore(CheckpointStore, AgentRunIndex, Protocol):
    """A checkpoint store with the run index."""


async def _save(store: IndexedStore, key: str, value: dict[str, Any], version: int = 1) -> None:
    await store.save_checkpoint(
        namespace=AGENT_RUN_NAMESPACE,
        key=key,
        value=value,
        version=version,
        expected_version=version - 1,
    )
    await asyncio.sleep(_TICK_S)


async def check_run_index(store: IndexedStore) -> None:
    """Check ``store.list_run_checkpoints`` (see :class:`AgentRunIndex`).

    Raises:
        AssertionError: the first deviation.
    """
    session, other = new_id("session"), new_id("session")
    runs = {name: new_id("run") for name in ("r1", "r2", "r3", "r4", "r5", "r6")}
    written = [
        ("r1", {"session_id": session, "status": "running"}),
        ("r2", {"session_id": session, "status": "suspended"}),
        ("r3", {"session_id": session, "status": "succeeded", "stop_reason": "host_policy"}),
        ("r4", {"session_id": session, "status": "succeeded"}),
        ("r5", {"session_id": session, "status": "failed"}),
        ("r6", {"session_id": other, "status": "running"}),
    ]
    for name, value in written:
        await _save(store, runs[name], {"run_id": runs[name], **value})
    await store.save_checkpoint(  # another namespace is never listed
        namespace=AGENT_RUN_NAMESPACE + ".other",
        key=runs["r1"],
        value={"session_id": session, "status": "running"},
        version=1,
        expected_version=0,
    )

    def keys(records: list[Any]) -> list[str]:
        names = {v: k for k, v in runs.items()}
        return [names.get(r.key, r.key) for r in records]

    listed = await store.list_run_checkpoints(session_id=session)
    check(
        keys(listed) == ["r5", "r4", "r3", "r2", "r1"],
        f"a session's runs, most recently updated first, only from prism.agent-run; got "
        f"{keys(listed)}",
    )
    check(
        all(r.namespace == AGENT_RUN_NAMESPACE and r.version == 1 for r in listed),
        "listed records carry their namespace and version",
    )
    resumable = await store.list_run_checkpoints(session_id=session, resumable=True)
    check(
        keys(resumable) == ["r3", "r2", "r1"],
        "resumable: running, suspended, and succeeded with stop_reason host_policy; got "
        f"{keys(resumable)}",
    )
    chosen = await store.list_run_checkpoints(session_id=session, statuses=["failed", "succeeded"])
    check(keys(chosen) == ["r5", "r4", "r3"], f"statuses filter; got {keys(chosen)}")
    check(
        await store.list_run_checkpoints(session_id=session, statuses=[]) == [],
        "no statuses: nothing listed",
    )
    limited = await store.list_run_checkpoints(session_id=session, limit=2)
    check(keys(limited) == ["r5", "r4"], f"limit keeps the newest; got {keys(limited)}")
    # r1 finishes: newest now, and no longer resumable
    await _save(
        store,
        runs["r1"],
        {"run_id": runs["r1"], "session_id": session, "status": "failed"},
        version=2,
    )
    after = await store.list_run_checkpoints(session_id=session, limit=1)
    check(keys(after) == ["r1"] and after[0].version == 2, "an update moves a run first")
    resumable = await store.list_run_checkpoints(session_id=session, resumable=True)
    check(keys(resumable) == ["r3", "r2"], "a finished run is no longer resumable")
    everywhere = keys(await store.list_run_checkpoints(resumable=True, limit=10_000))
    check(
        {"r2", "r3", "r6"} <= set(everywhere) and "r1" not in everywhere,
        "without session_id every session's runs are listed",
    )
    first = (await store.list_run_checkpoints(session_id=session, limit=1))[0]
    assert isinstance(first.value, dict)
    first.value["status"] = "mutated"
    again = (await store.list_run_checkpoints(session_id=session, limit=1))[0]
    check(
        isinstance(again.value, dict) and again.value["status"] == "failed",
        "listed values are copies",
    )
    try:
        await store.list_run_checkpoints(limit=0)
    except ValueError:
        pass
    else:
        raise AssertionError("limit < 1 raises ValueError")
