"""Checkpoint store conformance suite: one behaviour for every CheckpointStore.

[`run_checkpoint_store_conformance()`][prism.testing._conformance_checkpoints.run_checkpoint_store_conformance] checks versions, fencing tokens, copies, timestamps,
isolation between keys, concurrent claims with one expected version (exactly one wins) and, for a
store with the optional run index, its listing
(``_conformance_run_index``); for a session store with the optional
``save_checkpoint_with_entries``, that its appends and save are one transaction
([`_conformance_entry_checkpoints`][prism.testing._conformance_entry_checkpoints]). It
uses its own keys in its own namespace, so it can run against a shared, non-empty database.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final, Protocol

from prism._util import new_id, now_iso
from prism.checkpoints import (
    AGENT_RUN_NAMESPACE,
    AgentRunIndex,
    CheckpointRecord,
    CheckpointStore,
    EntryCheckpointStore,
)
from prism.errors import CheckpointConflictError
from prism.store import SessionStore
from prism.testing._conformance_checks import CONCURRENT_WRITERS, check, expect
from prism.testing._conformance_entry_checkpoints import check_entry_checkpoints
from prism.types import (
    JsonValue,
)

__all__ = ["run_checkpoint_store_conformance"]

_NAMESPACE: Final = "prism.conformance"
"""The namespace of the suite's checkpoints."""


async def run_checkpoint_store_conformance(store: CheckpointStore) -> None:
    """Check that ``store`` behaves as the memory checkpoint store does (see the module docstring).

    Args:
        store: A [`CheckpointStore`][prism.checkpoints.CheckpointStore].

    Raises:
        AssertionError: the first deviation, with a message naming the requirement.
    """
    await _checkpoint_versions(store)
    await _checkpoint_fencing(store)
    await _checkpoint_copies(store)
    await _checkpoint_isolation(store)
    await _checkpoint_concurrent_claims(store)
    if isinstance(store, AgentRunIndex):  # the optional run index
        await check_run_index(store)
    if isinstance(store, EntryCheckpointStore) and isinstance(store, SessionStore):
        await check_entry_checkpoints(store)  # the optional entries-with-checkpoint write


async def _save(
    store: CheckpointStore,
    key: str,
    value: JsonValue,
    version: int,
    expected: int,
    token: int | None = None,
    namespace: str = _NAMESPACE,
) -> CheckpointRecord:
    return await store.save_checkpoint(
        namespace=namespace,
        key=key,
        value=value,
        version=version,
        expected_version=expected,
        fencing_token=token,
    )


async def _load(
    store: CheckpointStore, key: str, namespace: str = _NAMESPACE
) -> CheckpointRecord | None:
    return await store.load_checkpoint(namespace=namespace, key=key)


async def _checkpoint_versions(store: CheckpointStore) -> None:
    key = new_id("run")
    check(await _load(store, key) is None, "load of an absent key returns None")
    value: JsonValue = {
        "status": "running",
        "nested": {"list": [1, 2.5, "ü ✓", None, True, "nul:\x00"], "empty": {}},
    }
    before = now_iso()
    first = await _save(store, key, value, 1, 0)
    check(
        (first.namespace, first.key, first.version, first.fencing_token)
        == (_NAMESPACE, key, 1, None),
        f"the first save returns its record, got {first!r}",
    )
    check(first.value == value, "the saved record holds the value")
    check(
        first.created_at == first.updated_at and first.created_at >= before[:19],
        "a first save sets created_at == updated_at to the current time",
    )
    loaded = await _load(store, key)
    check(loaded == first, f"load returns the saved record, got {loaded!r} != {first!r}")
    exc = await expect(
        CheckpointConflictError,
        _save(store, key, {"x": 1}, 2, 0),
        "expected_version=0 on an existing key",
    )
    check(
        getattr(exc, "code", None) == "ERR_PRISM_CHECKPOINT_CONFLICT",
        "CheckpointConflictError.code must be ERR_PRISM_CHECKPOINT_CONFLICT",
    )
    await expect(
        CheckpointConflictError, _save(store, key, {"x": 1}, 5, 4), "stale expected_version"
    )
    await expect(
        CheckpointConflictError,
        _save(store, key, {"x": 1}, 1, 1),
        "a version that is not greater than the stored one",
    )
    check(await _load(store, key) == first, "refused saves must store nothing")
    second = await _save(store, key, ["replaced"], 2, 1)
    check(
        second.version == 2
        and second.created_at == first.created_at
        and second.updated_at >= first.updated_at,
        f"an update keeps created_at and advances updated_at, got {second!r}",
    )
    check(await _load(store, key) == second, "load returns the latest record")
    jumped = await _save(store, key, "v10", 10, 2)
    check(jumped.version == 10, "a version may jump (it only has to be greater)")
    odd_values: list[JsonValue] = [
        {"$prism_json": "[1]"},
        "\x00",
        [{"k": "\x00"}],
        0,
        None,
        True,
        -2.5,
    ]
    for odd in odd_values:
        key_odd = new_id("run")
        await _save(store, key_odd, odd, 1, 0)
        got = await _load(store, key_odd)
        check(
            got is not None and got.value == odd and type(got.value) is type(odd),
            f"checkpoint value {odd!r} did not round-trip, got {got!r}",
        )
    absent = new_id("run")
    await expect(
        CheckpointConflictError,
        _save(store, absent, {}, 2, 1),
        "expected_version > 0 on an absent key",
    )
    check(await _load(store, absent) is None, "a refused first save stores nothing")


async def _checkpoint_fencing(store: CheckpointStore) -> None:
    key = new_id("run")
    await _save(store, key, {"n": 1}, 1, 0)
    fenced = await _save(store, key, {"n": 2}, 2, 1, token=5)
    check(fenced.fencing_token == 5, "the record keeps the writer's fencing token")
    stored = await _load(store, key)
    check(stored is not None and stored.fencing_token == 5, "the fencing token is stored")
    await expect(
        CheckpointConflictError,
        _save(store, key, {"n": 3}, 3, 2, token=4),
        "a smaller fencing token than the stored one",
    )
    await expect(
        CheckpointConflictError,
        _save(store, key, {"n": 3}, 3, 2, token=None),
        "a save without a token once a token is stored",
    )
    same = await _save(store, key, {"n": 3}, 3, 2, token=5)
    check(same.version == 3, "an equal fencing token is accepted")
    larger = await _save(store, key, {"n": 4}, 4, 3, token=9)
    after = await _load(store, key)
    check(
        larger.fencing_token == 9 and after is not None and after.fencing_token == 9,
        "a larger fencing token is accepted and stored",
    )
    await expect(
        CheckpointConflictError,
        _save(store, key, {"n": 5}, 5, 4, token=5),
        "the stored token only grows (5 after 9 is refused)",
    )
    after = await _load(store, key)
    check(
        after is not None and after.value == {"n": 4} and after.version == 4,
        "refused fenced saves must store nothing",
    )


async def _checkpoint_copies(store: CheckpointStore) -> None:
    key = new_id("run")
    value: dict[str, Any] = {"items": [1, 2], "inner": {"a": 1}}
    saved = await _save(store, key, value, 1, 0)
    value["items"].append(3)
    value["inner"]["b"] = 2
    loaded = await _load(store, key)
    for handed_out, requirement in (
        (saved, "values are copied on save (caller and returned objects are not the store's)"),
        (loaded, "values are copied on load"),
    ):
        if handed_out is not None and isinstance(handed_out.value, dict):
            handed_out.value["mutated"] = True
        stored = await _load(store, key)
        check(
            stored is not None and stored.value == {"items": [1, 2], "inner": {"a": 1}},
            requirement,
        )


async def _checkpoint_isolation(store: CheckpointStore) -> None:
    key = new_id("run")
    await _save(store, key, "a", 1, 0)
    other = await _save(store, key, "b", 3, 0, namespace=_NAMESPACE + ".other")
    check(other.version == 3, "namespaces are independent")
    mine = await _load(store, key)
    check(
        mine is not None and mine.value == "a" and mine.version == 1,
        "a save in another namespace does not touch this one",
    )
    check(await _load(store, new_id("run")) is None, "keys are independent")


async def _checkpoint_concurrent_claims(store: CheckpointStore) -> None:
    key = new_id("run")
    await _save(store, key, {"status": "suspended"}, 1, 0)
    outcomes = await asyncio.gather(
        *(
            _save(store, key, {"status": "running", "worker": i}, 2, 1)
            for i in range(CONCURRENT_WRITERS)
        ),
        return_exceptions=True,
    )
    wins = [o for o in outcomes if isinstance(o, CheckpointRecord)]
    losses = [o for o in outcomes if isinstance(o, CheckpointConflictError)]
    check(
        len(wins) == 1 and len(losses) == CONCURRENT_WRITERS - 1,
        f"of {CONCURRENT_WRITERS} concurrent claims with one expected version "
        f"exactly one must win, got {outcomes!r}",
    )
    stored = await _load(store, key)
    check(
        stored is not None and stored.version == 2 and stored.value == wins[0].value,
        "the stored value is the winner's",
    )


# ---------------------------------------------------------------------------
# Run-index conformance: the optional ``list_run_checkpoints`` of a checkpoint store.

_TICK_S: Final = 0.003
"""Pause between saves, so each record has a later ``updated_at`` (millisecond precision)."""


class IndexedStore(CheckpointStore, AgentRunIndex, Protocol):
    """A checkpoint store with the run index."""


async def _save_run(store: IndexedStore, key: str, value: dict[str, Any], version: int = 1) -> None:
    await store.save_checkpoint(
        namespace=AGENT_RUN_NAMESPACE,
        key=key,
        value=value,
        version=version,
        expected_version=version - 1,
    )
    await asyncio.sleep(_TICK_S)


async def check_run_index(store: IndexedStore) -> None:
    """Check ``store.list_run_checkpoints`` (see [`AgentRunIndex`][prism.testing._conformance_checkpoints.AgentRunIndex]).

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
        await _save_run(store, runs[name], {"run_id": runs[name], **value})
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
    await _save_run(
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
