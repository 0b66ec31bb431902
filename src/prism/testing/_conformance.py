"""Store conformance suites: one behaviour for memory, SQLite, PostgreSQL and host stores (DB-9).

Each suite is an ``async`` function that exercises a store through its protocol and raises
``AssertionError`` with a message naming the requirement on the first deviation. They create their
own session ids, run ids and checkpoint keys (``new_id`` based), so they can run against a shared,
non-empty database and leave only their own rows behind.

* :func:`run_session_store_conformance` — STORE-2/STORE-3/STORE-5, DB-5, DB-8, DB-9: append order,
  round trips, copies, duplicate ids, the branch-tip compare-and-set (a second child under a tip
  fails, the same append with ``fork=True`` succeeds), idempotency keys, ``read_branch`` and
  concurrent appends to one tip (exactly one wins).
* :func:`run_checkpoint_store_conformance` — DUR-3, DB-6, DB-8: versions, fencing tokens, copies,
  timestamps and concurrent claims with one expected version (exactly one wins).
* :func:`run_ledger_conformance` — REC-1, REC-3, REC-4, REC-8, DB-7, DB-8: every record kind
  round-trips, per run and per session, in append order. The ledger protocol is write-only, so
  this suite reads back through ``list_runs``/``list_events``/``list_tool_calls``/``list_usage``
  (the database stores) or the ``runs``/``events``/``tool_calls``/``usage`` lists
  (:class:`~prism.ledger.MemoryRunLedger`).
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from prism._util import maybe_await, new_id, now_iso
from prism.errors import CheckpointConflictError, SessionAppendConflictError
from prism.events import (
    AgentFinishedEvent,
    AgentStartedEvent,
    MessageFinishedEvent,
    ToolExecutionFinishedEvent,
    ToolExecutionMetadata,
    TurnStartedEvent,
)
from prism.ledger import (
    AgentEventRecord,
    RunLedger,
    ToolCallRecord,
    UsageRecord,
    finish_run_record,
    start_run_record,
)
from prism.runtime.checkpoints import CheckpointRecord, CheckpointStore
from prism.store import SessionEntry, SessionStore, new_session_entry, read_branch
from prism.types import (
    ErrorInfo,
    JsonValue,
    Message,
    ModelConfig,
    OwnershipScope,
    TextContent,
    ToolCallContent,
    ToolResult,
    ToolResultContent,
    Usage,
)

__all__ = [
    "run_checkpoint_store_conformance",
    "run_ledger_conformance",
    "run_run_ledger_conformance",
    "run_session_store_conformance",
]

_CONCURRENT_WRITERS: Final = 8
_NAMESPACE: Final = "prism.conformance"


def _check(condition: object, message: str) -> None:
    """Raise ``AssertionError(message)`` unless ``condition`` (kept under ``python -O``)."""
    if not condition:
        raise AssertionError(message)


async def _expect(
    exc_type: type[BaseException], call: Awaitable[Any], message: str
) -> BaseException:
    try:
        await call
    except exc_type as exc:
        return exc
    except Exception as exc:
        raise AssertionError(
            f"{message}: expected {exc_type.__name__}, got {type(exc).__name__}: {exc}"
        ) from exc
    raise AssertionError(f"{message}: expected {exc_type.__name__}, nothing was raised")


# =========================================================================== sessions


def _message_entry(
    session_id: str, parent: SessionEntry | str | None, text: str, **extra: Any
) -> SessionEntry:
    return new_session_entry(
        "message",
        session_id=session_id,
        parent_id=parent.id if isinstance(parent, SessionEntry) else parent,
        message=Message(role="user", content=(TextContent(text=text),)),
        **extra,
    )


async def _ids(store: SessionStore, session_id: str) -> builtins.list[str]:
    return [e.id for e in await store.list(session_id)]


async def run_session_store_conformance(store: SessionStore) -> None:
    """Check that ``store`` behaves exactly as STORE-2/STORE-3 describe (DB-5, DB-9).

    Args:
        store: A :class:`~prism.store.SessionStore`; ``read_branch`` is checked when present.

    Raises:
        AssertionError: the first deviation, with a message naming the requirement.
    """
    await _session_round_trip(store)
    await _session_copies(store)
    await _session_duplicate_ids(store)
    await _session_tip_compare_and_set(store)
    await _session_missing_parent(store)
    await _session_idempotency(store)
    await _session_branches(store)
    await _session_concurrent_tip(store)
    await _session_concurrent_idempotent(store)


async def _session_round_trip(store: SessionStore) -> None:
    sid = new_id("session")
    model = ModelConfig(provider="mock", model="m-1", parameters={"temperature": 0.5})
    root = new_session_entry(
        "message",
        session_id=sid,
        run_id=new_id("run"),
        message=Message(
            role="assistant",
            content=(
                TextContent(text="héllo ✓ \U0001f600 nul:\x00 backslash:\\u0000"),
                ToolCallContent(id="call_1", name="lookup", arguments={"q": [1, 2.5, None]}),
            ),
        ),
        data={"nested": {"list": [1, "two", True, None], "float": 1.25}},
        metadata={"source": "conformance"},
    )
    change = new_session_entry(
        "model_change",
        session_id=sid,
        parent_id=root.id,
        model=model,
        previous_model=ModelConfig(provider="mock", model="m-0"),
    )
    tool = new_session_entry(
        "message",
        session_id=sid,
        parent_id=change.id,
        message=Message(
            role="tool",
            content=(ToolResultContent(tool_call_id="call_1", name="lookup", result={"ok": 1}),),
        ),
    )
    summary = new_session_entry("summary", session_id=sid, parent_id=tool.id, summary="s")
    custom = new_session_entry(
        "custom", session_id=sid, parent_id=summary.id, data={"k": "v"}
    )
    written = [root, change, tool, summary, custom]
    await store.append(root)
    previous = root
    for entry in written[1:]:
        await store.append(entry, expected_parent_id=previous.id)
        previous = entry
    listed = builtins.list(await store.list(sid))
    _check(
        [e.id for e in listed] == [e.id for e in written],
        "STORE-2: list() must return entries in append order",
    )
    for got, want in zip(listed, written, strict=True):
        _check(got == want, f"DB-8: entry {want.kind} did not round-trip: {got!r} != {want!r}")
        _check(type(got) is SessionEntry, "DB-8: list() must return SessionEntry objects")
    _check(
        builtins.list(await store.list(new_id("session"))) == [],
        "STORE-2: list() of an unknown session must be empty",
    )


async def _session_copies(store: SessionStore) -> None:
    sid = new_id("session")
    data: dict[str, Any] = {"items": [1, 2]}
    entry = _message_entry(sid, None, "copy", data=data)
    await store.append(entry)
    data["items"].append(3)
    data["extra"] = True
    first = (await store.list(sid))[0]
    _check(
        first.data == {"items": [1, 2]},
        "STORE-3: the store must keep a copy, not the caller's objects",
    )
    got = first.data
    if isinstance(got, dict) and isinstance(got.get("items"), builtins.list):
        got["items"].append(99)
    again = (await store.list(sid))[0]
    _check(
        again.data == {"items": [1, 2]},
        "STORE-3: entries returned by list() must be copies of the stored ones",
    )


async def _session_duplicate_ids(store: SessionStore) -> None:
    sid = new_id("session")
    entry = _message_entry(sid, None, "a")
    await store.append(entry)
    await _expect(ValueError, store.append(entry), "STORE-3: duplicate entry id")
    clash = _message_entry(sid, None, "b", id=entry.id)
    await _expect(ValueError, store.append(clash), "STORE-3: duplicate entry id (other content)")
    _check(await _ids(store, sid) == [entry.id], "STORE-3: a refused append must store nothing")
    other = new_id("session")
    await store.append(_message_entry(other, None, "c", id=entry.id))
    _check(
        await _ids(store, other) == [entry.id],
        "DB-5: entry ids are keyed by (session_id, id); another session may reuse an id",
    )


async def _session_tip_compare_and_set(store: SessionStore) -> None:
    sid = new_id("session")
    root = _message_entry(sid, None, "root")
    await store.append(root)
    first = _message_entry(sid, root, "first child")
    await store.append(first, expected_parent_id=root.id)
    second = _message_entry(sid, root, "second child")
    exc = await _expect(
        SessionAppendConflictError,
        store.append(second, expected_parent_id=root.id),
        "STORE-3/DB-9: an append under a parent that already has a child",
    )
    _check(
        getattr(exc, "code", None) == "ERR_PRISM_SESSION_APPEND_CONFLICT",
        "ERR-1: SessionAppendConflictError.code must be ERR_PRISM_SESSION_APPEND_CONFLICT",
    )
    _check(
        await _ids(store, sid) == [root.id, first.id],
        "STORE-3: a conflicting append must store nothing",
    )
    await store.append(second, expected_parent_id=root.id, fork=True)
    _check(
        await _ids(store, sid) == [root.id, first.id, second.id],
        "STORE-3/DB-9: the same append with fork=True must succeed",
    )
    # The new tip accepts a child; the forked-over parent still refuses one without fork.
    grandchild = _message_entry(sid, second, "grandchild")
    await store.append(grandchild, expected_parent_id=second.id)
    await _expect(
        SessionAppendConflictError,
        store.append(_message_entry(sid, root, "third"), expected_parent_id=root.id),
        "STORE-3: a parent with children is not a tip",
    )
    await _expect(
        ValueError,
        store.append(_message_entry(sid, root, "x"), fork=True),
        "STORE-3: fork=True without expected_parent_id",
    )
    # Conflict checks come before the duplicate-id check (STORE-3 order).
    await _expect(
        SessionAppendConflictError,
        store.append(first, expected_parent_id=root.id),
        "STORE-3: a tip conflict is reported before a duplicate id",
    )


async def _session_missing_parent(store: SessionStore) -> None:
    sid = new_id("session")
    other = new_id("session")
    root = _message_entry(sid, None, "root")
    await store.append(root)
    foreign = _message_entry(other, None, "foreign root")
    await store.append(foreign)
    orphan = _message_entry(sid, "entry_missing", "orphan")
    await _expect(
        SessionAppendConflictError,
        store.append(orphan, expected_parent_id="entry_missing"),
        "STORE-3: an expected parent missing from the session",
    )
    stray = _message_entry(sid, foreign, "stray")
    await _expect(
        SessionAppendConflictError,
        store.append(stray, expected_parent_id=foreign.id),
        "STORE-3: an expected parent that belongs to another session",
    )
    await _expect(
        SessionAppendConflictError,
        store.append(stray, expected_parent_id=foreign.id, fork=True),
        "STORE-3: fork=True still needs the parent to exist in the session",
    )
    await _expect(
        SessionAppendConflictError,
        store.append(
            _message_entry(sid, None, "dup", id=root.id), expected_parent_id="entry_missing"
        ),
        "STORE-3: a missing parent is reported before a duplicate id",
    )
    _check(await _ids(store, sid) == [root.id], "STORE-3: refused appends must store nothing")


async def _session_idempotency(store: SessionStore) -> None:
    sid = new_id("session")
    root = _message_entry(sid, None, "root")
    await store.append(root, idempotency_key="k1")
    exc = await _expect(
        SessionAppendConflictError,
        store.append(_message_entry(sid, None, "root again"), idempotency_key="k1"),
        "STORE-3: a repeated (session, idempotency_key, no expected parent) append",
    )
    _check(
        getattr(exc, "code", None) == "ERR_PRISM_SESSION_APPEND_CONFLICT",
        "STORE-3: a duplicate idempotent append raises ERR_PRISM_SESSION_APPEND_CONFLICT",
    )
    child = _message_entry(sid, root, "child")
    await store.append(child, expected_parent_id=root.id, idempotency_key="k1")
    await _expect(
        SessionAppendConflictError,
        store.append(
            _message_entry(sid, root, "child again"),
            expected_parent_id=root.id,
            idempotency_key="k1",
            fork=True,
        ),
        "STORE-3: a repeated (session, idempotency_key, expected parent) append, even with fork",
    )
    sibling = _message_entry(sid, root, "sibling")
    await store.append(sibling, expected_parent_id=root.id, idempotency_key="k2", fork=True)
    await _expect(
        SessionAppendConflictError,
        store.append(
            _message_entry(sid, None, "dup id", id=root.id), idempotency_key="k1"
        ),
        "STORE-3: a duplicate idempotent append is reported before a duplicate id",
    )
    _check(
        await _ids(store, sid) == [root.id, child.id, sibling.id],
        "STORE-3: refused idempotent appends must store nothing",
    )
    other = new_id("session")
    await store.append(_message_entry(other, None, "other"), idempotency_key="k1")
    _check(len(await _ids(store, other)) == 1, "STORE-3: idempotency keys are per session")


async def _session_branches(store: SessionStore) -> None:
    sid = new_id("session")
    root = _message_entry(sid, None, "root")
    a1 = _message_entry(sid, root, "a1")
    a2 = _message_entry(sid, a1, "a2")
    b1 = _message_entry(sid, root, "b1")
    b2 = _message_entry(sid, b1, "b2")
    await store.append(root)
    await store.append(a1, expected_parent_id=root.id)
    await store.append(a2, expected_parent_id=a1.id)
    await store.append(b1, expected_parent_id=root.id, fork=True)
    await store.append(b2, expected_parent_id=b1.id)
    _check(
        await _ids(store, sid) == [root.id, a1.id, a2.id, b1.id, b2.id],
        "STORE-2: list() returns every branch in append order",
    )
    _check(
        [e.id for e in await read_branch(store, sid, a2.id)] == [root.id, a1.id, a2.id],
        "STORE-5: the branch of a2 is root→a1→a2",
    )
    _check(
        await read_branch(store, sid, b2.id) == [root, b1, b2],
        "STORE-5/DB-8: the branch of b2 is root→b1→b2 and round-trips",
    )
    _check(
        [e.id for e in await read_branch(store, sid, root.id)] == [root.id],
        "STORE-5: the branch of a root is the root",
    )
    if not callable(getattr(store, "read_branch", None)):
        return
    reader: Callable[[str, str], Awaitable[Sequence[SessionEntry]]] = store.read_branch  # type: ignore[attr-defined]
    direct = builtins.list(await reader(sid, b2.id))
    _check(direct == [root, b1, b2], "STORE-2: read_branch returns root→leaf")
    exc = await _expect(
        ValueError, reader(sid, "entry_unknown"), "STORE-5: read_branch of an unknown leaf"
    )
    _check(
        "Unknown session leaf" in str(exc),
        f"STORE-5: message must say 'Unknown session leaf', got {exc}",
    )
    await _expect(
        ValueError,
        reader(new_id("session"), root.id),
        "STORE-5: read_branch of a leaf of another session",
    )
    orphan = _message_entry(sid, "entry_gone", "orphan")
    await store.append(orphan)
    exc = await _expect(
        ValueError, reader(sid, orphan.id), "STORE-5: read_branch over a missing parent"
    )
    _check(
        "Missing session parent" in str(exc),
        f"STORE-5: message must say 'Missing session parent', got {exc}",
    )


async def _session_concurrent_tip(store: SessionStore) -> None:
    sid = new_id("session")
    root = _message_entry(sid, None, "root")
    await store.append(root)
    contenders = [_message_entry(sid, root, f"c{i}") for i in range(_CONCURRENT_WRITERS)]
    outcomes = await asyncio.gather(
        *(store.append(c, expected_parent_id=root.id) for c in contenders),
        return_exceptions=True,
    )
    wins = [o for o in outcomes if o is None]
    losses = [o for o in outcomes if isinstance(o, SessionAppendConflictError)]
    _check(
        len(wins) == 1 and len(losses) == _CONCURRENT_WRITERS - 1,
        f"DB-9: of {_CONCURRENT_WRITERS} concurrent appends to one tip exactly one must win, "
        f"got {outcomes!r}",
    )
    _check(
        len(await _ids(store, sid)) == 2,
        "DB-9: exactly one child may be stored under a contested tip",
    )


async def _session_concurrent_idempotent(store: SessionStore) -> None:
    sid = new_id("session")
    contenders = [_message_entry(sid, None, f"r{i}") for i in range(_CONCURRENT_WRITERS)]
    outcomes = await asyncio.gather(
        *(store.append(c, idempotency_key="same") for c in contenders),
        return_exceptions=True,
    )
    wins = [o for o in outcomes if o is None]
    _check(
        len(wins) == 1
        and all(isinstance(o, SessionAppendConflictError) for o in outcomes if o is not None),
        f"STORE-3: of concurrent appends with one idempotency key exactly one must win, "
        f"got {outcomes!r}",
    )


# =========================================================================== checkpoints


async def run_checkpoint_store_conformance(store: CheckpointStore) -> None:
    """Check that ``store`` behaves exactly as DUR-3 describes (DB-6, DB-8, DB-9).

    Args:
        store: A :class:`~prism.runtime.checkpoints.CheckpointStore`.

    Raises:
        AssertionError: the first deviation, with a message naming the requirement.
    """
    await _checkpoint_versions(store)
    await _checkpoint_fencing(store)
    await _checkpoint_copies(store)
    await _checkpoint_isolation(store)
    await _checkpoint_concurrent_claims(store)


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
    _check(await _load(store, key) is None, "DUR-3: load of an absent key returns None")
    value: JsonValue = {
        "status": "running",
        "nested": {"list": [1, 2.5, "ü ✓", None, True, "nul:\x00"], "empty": {}},
    }
    before = now_iso()
    first = await _save(store, key, value, 1, 0)
    _check(
        (first.namespace, first.key, first.version, first.fencing_token)
        == (_NAMESPACE, key, 1, None),
        f"DUR-3: the first save returns its record, got {first!r}",
    )
    _check(first.value == value, "DUR-3: the saved record holds the value")
    _check(
        first.created_at == first.updated_at and first.created_at >= before[:19],
        "DUR-3: a first save sets created_at == updated_at to the current time",
    )
    loaded = await _load(store, key)
    _check(loaded == first, f"DB-8: load returns the saved record, got {loaded!r} != {first!r}")
    exc = await _expect(
        CheckpointConflictError,
        _save(store, key, {"x": 1}, 2, 0),
        "DUR-3: expected_version=0 on an existing key",
    )
    _check(
        getattr(exc, "code", None) == "ERR_PRISM_CHECKPOINT_CONFLICT",
        "ERR-1: CheckpointConflictError.code must be ERR_PRISM_CHECKPOINT_CONFLICT",
    )
    await _expect(
        CheckpointConflictError, _save(store, key, {"x": 1}, 5, 4), "DUR-3: stale expected_version"
    )
    await _expect(
        CheckpointConflictError,
        _save(store, key, {"x": 1}, 1, 1),
        "DUR-3: a version that is not greater than the stored one",
    )
    _check(await _load(store, key) == first, "DUR-3: refused saves must store nothing")
    second = await _save(store, key, ["replaced"], 2, 1)
    _check(
        second.version == 2
        and second.created_at == first.created_at
        and second.updated_at >= first.updated_at,
        f"DUR-3: an update keeps created_at and advances updated_at, got {second!r}",
    )
    _check(await _load(store, key) == second, "DUR-3: load returns the latest record")
    jumped = await _save(store, key, "v10", 10, 2)
    _check(jumped.version == 10, "DUR-3: a version may jump (it only has to be greater)")
    odd_values: list[JsonValue] = [
        {"$prism_json": "[1]"}, "\x00", [{"k": "\x00"}], 0, None, True, -2.5,
    ]
    for odd in odd_values:
        key_odd = new_id("run")
        await _save(store, key_odd, odd, 1, 0)
        got = await _load(store, key_odd)
        _check(
            got is not None and got.value == odd and type(got.value) is type(odd),
            f"DB-8: checkpoint value {odd!r} did not round-trip, got {got!r}",
        )
    absent = new_id("run")
    await _expect(
        CheckpointConflictError,
        _save(store, absent, {}, 2, 1),
        "DUR-3: expected_version > 0 on an absent key",
    )
    _check(await _load(store, absent) is None, "DUR-3: a refused first save stores nothing")


async def _checkpoint_fencing(store: CheckpointStore) -> None:
    key = new_id("run")
    await _save(store, key, {"n": 1}, 1, 0)
    fenced = await _save(store, key, {"n": 2}, 2, 1, token=5)
    _check(fenced.fencing_token == 5, "DUR-3: the record keeps the writer's fencing token")
    stored = await _load(store, key)
    _check(
        stored is not None and stored.fencing_token == 5, "DUR-3: the fencing token is stored"
    )
    await _expect(
        CheckpointConflictError,
        _save(store, key, {"n": 3}, 3, 2, token=4),
        "DUR-3: a smaller fencing token than the stored one",
    )
    await _expect(
        CheckpointConflictError,
        _save(store, key, {"n": 3}, 3, 2, token=None),
        "DUR-3: a save without a token once a token is stored",
    )
    same = await _save(store, key, {"n": 3}, 3, 2, token=5)
    _check(same.version == 3, "DUR-3: an equal fencing token is accepted")
    larger = await _save(store, key, {"n": 4}, 4, 3, token=9)
    after = await _load(store, key)
    _check(
        larger.fencing_token == 9 and after is not None and after.fencing_token == 9,
        "DUR-3: a larger fencing token is accepted and stored",
    )
    await _expect(
        CheckpointConflictError,
        _save(store, key, {"n": 5}, 5, 4, token=5),
        "DUR-3: the stored token only grows (5 after 9 is refused)",
    )
    after = await _load(store, key)
    _check(
        after is not None and after.value == {"n": 4} and after.version == 4,
        "DUR-3: refused fenced saves must store nothing",
    )


async def _checkpoint_copies(store: CheckpointStore) -> None:
    key = new_id("run")
    value: dict[str, Any] = {"items": [1, 2], "inner": {"a": 1}}
    saved = await _save(store, key, value, 1, 0)
    value["items"].append(3)
    value["inner"]["b"] = 2
    if isinstance(saved.value, dict):
        saved.value["mutated"] = True
    loaded = await _load(store, key)
    _check(
        loaded is not None and loaded.value == {"items": [1, 2], "inner": {"a": 1}},
        "DUR-3: values are copied on save (caller and returned objects are not the store's)",
    )
    assert loaded is not None
    if isinstance(loaded.value, dict):
        loaded.value["mutated"] = True
    again = await _load(store, key)
    _check(
        again is not None and again.value == {"items": [1, 2], "inner": {"a": 1}},
        "DUR-3: values are copied on load",
    )


async def _checkpoint_isolation(store: CheckpointStore) -> None:
    key = new_id("run")
    await _save(store, key, "a", 1, 0)
    other = await _save(store, key, "b", 3, 0, namespace=_NAMESPACE + ".other")
    _check(other.version == 3, "DUR-3: namespaces are independent")
    mine = await _load(store, key)
    _check(
        mine is not None and mine.value == "a" and mine.version == 1,
        "DUR-3: a save in another namespace does not touch this one",
    )
    _check(
        await _load(store, new_id("run")) is None, "DUR-3: keys are independent"
    )


async def _checkpoint_concurrent_claims(store: CheckpointStore) -> None:
    key = new_id("run")
    await _save(store, key, {"status": "suspended"}, 1, 0)
    outcomes = await asyncio.gather(
        *(
            _save(store, key, {"status": "running", "worker": i}, 2, 1)
            for i in range(_CONCURRENT_WRITERS)
        ),
        return_exceptions=True,
    )
    wins = [o for o in outcomes if isinstance(o, CheckpointRecord)]
    losses = [o for o in outcomes if isinstance(o, CheckpointConflictError)]
    _check(
        len(wins) == 1 and len(losses) == _CONCURRENT_WRITERS - 1,
        f"DB-6/DUR-19: of {_CONCURRENT_WRITERS} concurrent claims with one expected version "
        f"exactly one must win, got {outcomes!r}",
    )
    stored = await _load(store, key)
    _check(
        stored is not None and stored.version == 2 and stored.value == wins[0].value,
        "DB-6: the stored value is the winner's",
    )


# =========================================================================== ledger

_PLURAL: Final = {"run": "runs", "event": "events", "tool_call": "tool_calls", "usage": "usage"}


async def _read_ledger(
    ledger: object, kind: str, session_id: str, run_id: str | None
) -> builtins.list[Any]:
    plural = _PLURAL[kind]
    reader = getattr(ledger, f"list_{plural}", None)
    if callable(reader):
        return builtins.list(await maybe_await(reader(session_id, run_id=run_id)))
    rows = getattr(ledger, plural, None)
    if not isinstance(rows, builtins.list):
        raise AssertionError(
            "DB-9: the ledger conformance suite needs list_runs/list_events/list_tool_calls/"
            "list_usage or runs/events/tool_calls/usage lists to read records back"
        )

    def matches(r: Any) -> bool:
        rid = r.id if kind == "run" else r.run_id
        return bool(r.session_id == session_id and (run_id is None or rid == run_id))

    return [r for r in rows if matches(r)]


async def run_ledger_conformance(ledger: RunLedger) -> None:
    """Check that ``ledger`` stores every record kind faithfully and in order (REC-1, DB-7).

    Args:
        ledger: A :class:`~prism.ledger.RunLedger` (sync or async methods) that can be read back
            (see the module docstring).

    Raises:
        AssertionError: the first deviation, with a message naming the requirement.
    """
    sid = new_id("session")
    owner = OwnershipScope(tenant_id="tenant-1", account_id="acct-1", user_id="user-1")
    model = ModelConfig(provider="mock", model="m-1")
    runs = [new_id("run"), new_id("run")]
    written: dict[str, builtins.list[Any]] = {"run": [], "event": [], "tool_call": [], "usage": []}

    async def put(kind: str, record: Any) -> None:
        method = getattr(ledger, f"append_{kind}")
        await maybe_await(method(record))
        written[kind].append(record)

    starts = [
        start_run_record(
            run_id=rid, session_id=sid, branch_id=None, model=model, ownership=owner,
            idempotency_key=f"idem-{i}", metadata={"i": i},
        )
        for i, rid in enumerate(runs)
    ]
    for start in starts:
        await put("run", start)
    for turn in range(1, 4):  # interleave the two runs' rows (REC-4 order per run)
        for rid in runs:
            event: Any = TurnStartedEvent(session_id=sid, run_id=rid, turn=turn)
            if turn == 1:
                event = AgentStartedEvent(session_id=sid, run_id=rid)
            elif turn == 3:
                event = MessageFinishedEvent(
                    session_id=sid,
                    run_id=rid,
                    message=Message(
                        role="assistant", content=(TextContent(text="done ✓ \x00"),)
                    ),
                )
            await put(
                "event",
                AgentEventRecord(
                    id=new_id("event"), session_id=sid, run_id=rid, type=event.type,
                    timestamp=now_iso(), event=event, redacted=turn == 2,
                    tenant_id=owner.tenant_id, account_id=owner.account_id,
                    user_id=owner.user_id,
                ),
            )
    result = ToolResult(tool_call_id="call_1", name="lookup", value={"rows": [1, 2]})
    for rid in runs:
        started = ToolCallRecord(
            id=new_id("toolcall"), session_id=sid, run_id=rid, tool_call_id="call_1",
            name="lookup", arguments={"q": "x", "n": [1, None]}, status="started",
            started_at=now_iso(), tenant_id=owner.tenant_id,
        )
        await put("tool_call", started)
        await put(
            "tool_call",
            ToolCallRecord(
                id=new_id("toolcall"), session_id=sid, run_id=rid, tool_call_id="call_1",
                name="lookup", arguments={"q": "x", "n": [1, None]}, status="finished",
                started_at=started.started_at, finished_at=now_iso(), result=result,
                redacted=True,
            ),
        )
        finished = AgentFinishedEvent(session_id=sid, run_id=rid)
        await put(
            "event",
            AgentEventRecord(
                id=new_id("event"), session_id=sid, run_id=rid, type=finished.type,
                timestamp=now_iso(), event=finished,
            ),
        )
        await put(
            "usage",
            UsageRecord(
                id=new_id("usage"), session_id=sid, run_id=rid, scope="provider_turn",
                usage=Usage(input_tokens=10, output_tokens=5, total_tokens=15, cost=0.25,
                            currency="USD"),
                timestamp=now_iso(), turn=1, attempt=1, user_id=owner.user_id,
            ),
        )
        await put(
            "usage",
            UsageRecord(
                id=new_id("usage"), session_id=sid, run_id=rid, scope="run_total",
                usage=Usage(input_tokens=10, output_tokens=5, total_tokens=15),
                timestamp=now_iso(),
            ),
        )
    await put(
        "run",
        finish_run_record(
            starts[0], status="failed", error=ErrorInfo(message="boom", code="ERR_PRISM_PROVIDER")
        ),
    )
    await put(
        "run", finish_run_record(starts[1], status="succeeded", stop_reason="host_policy")
    )
    # a tool-execution event with nested dataclasses
    tool_event = ToolExecutionFinishedEvent(
        session_id=sid, run_id=runs[1], result=result,
        metadata=ToolExecutionMetadata(duration_ms=12, status="finished"),
    )
    await put(
        "event",
        AgentEventRecord(
            id=new_id("event"), session_id=sid, run_id=runs[1], type=tool_event.type,
            timestamp=now_iso(), event=tool_event,
        ),
    )

    for kind, rows in written.items():
        got = await _read_ledger(ledger, kind, sid, None)
        _check(
            len(got) == len(rows),
            f"DB-7: expected {len(rows)} {kind} rows for the session, got {len(got)}",
        )
        for i, (g, w) in enumerate(zip(got, rows, strict=True)):
            _check(
                g == w,
                f"DB-7/DB-8: {kind} row {i} of the session did not round-trip in order: "
                f"{g!r} != {w!r}",
            )
        for rid in runs:
            want = [r for r in rows if (r.id if kind == "run" else r.run_id) == rid]
            got_run = await _read_ledger(ledger, kind, sid, rid)
            _check(
                got_run == want,
                f"REC-4/DB-7: {kind} rows of run {rid} must come back in append order",
            )
    other = await _read_ledger(ledger, "event", new_id("session"), None)
    _check(other == [], "DB-7: rows are scoped to their session")


run_run_ledger_conformance = run_ledger_conformance
"""Alias of :func:`run_ledger_conformance`."""
