"""The durable run-state envelope: fingerprint, shape checks, load and save.

The value types and options of durable runs are in [`prism.runtime.durable._run_state`][prism.runtime.durable._run_state], the
typed envelope (its fields, JSON conversion, upgrade and field checks) in
[`prism.runtime.durable._run_envelope`][prism.runtime.durable._run_envelope]; this module holds the agent fingerprint a resume
compares, the size and shape checks every write passes, the operator's load/save access, and
the loop snapshot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, cast

from prism._fast_json import compact_text
from prism.checkpoints import AGENT_RUN_NAMESPACE, CheckpointRecord, CheckpointStore
from prism.errors import AgentLoopStateError, AgentRunStateError
from prism.loop_needs import loop_needs
from prism.loops.contracts import AgentLoopStrategy, effective_loop_revision
from prism.runtime.durable._run_envelope import (
    LoadedRunState,
    RunEnvelope,
    check_envelope,
    upgrade_envelope,
)
from prism.runtime.durable._run_state import (
    MAX_DEPTH,
    MAX_KEYS,
    MAX_LOADED_STATE_BYTES,
    is_int,
    is_strategy,
)
from prism.runtime.run.config import AgentConfig, ConfiguredAgent
from prism.types import (
    JsonValue,
    OwnershipScope,
    ToolDefinition,
    canonical_json,
    is_json_value,
)

__all__ = [
    "CallTexts",
    "agent_fingerprint",
    "agent_id_of",
    "arguments_hash",
    "check_shape",
    "checked_envelope",
    "encode_state",
    "json_text",
    "load_agent_run_state",
    "load_state",
    "loop_state_of",
    "parts_text",
    "run_key",
    "save_agent_run_state",
    "upgrade_envelope",
    "utf8_size",
]

# --------------------------------------------------------------------------- fingerprint


def _loop_identity(loop: object) -> dict[str, str]:
    """The loop's ``{"name", "revision"}`` entry of the fingerprint, for a configured loop
    (options, mapping, strategy or ``None``)."""
    if loop is None:
        return {"name": "single-shot", "revision": "1"}
    if isinstance(loop, Mapping):
        return {"name": str(loop.get("strategy")), "revision": "1"}
    strategy = getattr(loop, "strategy", None)
    if not is_strategy(loop) and isinstance(strategy, str):
        return {"name": strategy, "revision": "1"}
    return {"name": str(getattr(loop, "name", "")), "revision": effective_loop_revision(loop)}


def _definition(config: AgentConfig) -> dict[str, Any]:
    """What an agent's definition contributes to a fingerprint (its loop excepted)."""
    guardrails = config.guardrails
    guards: list[dict[str, Any]] = []
    if guardrails is not None:
        for stage in ("input", "output", "tool_input", "tool_output"):
            for guard in getattr(guardrails, stage):
                guards.append({"name": guard.name, "stage": stage, "revision": guard.revision})
    data: dict[str, Any] = {
        "id": config.id or config.name,
        "model": config.model.to_dict(),
        "instructions": config.instructions or None,
        "system_prompt": [{"id": c.id, "text": c.text} for c in config.system_prompt] or None,
        "skills": [{"name": s.name, "instructions": s.instructions} for s in config.skills],
        "tools": [_tool_identity(t) for t in config.tools],
        "guardrails": guards,
    }
    if config.tool_sources:
        data["tool_sources"] = [source.source_identity() for source in config.tool_sources]
    if config.tool_filter:
        data["tool_filters"] = [
            {"allow": list(f.allow), "deny": list(f.deny)} for f in config.tool_filter
        ]
    return data


def agent_id_of(config: AgentConfig) -> str:
    agent_id = config.id or config.name
    if not agent_id:
        raise AgentRunStateError("a durable run needs an agent with an id or a name")
    return agent_id


def agent_fingerprint(agent: ConfiguredAgent | AgentConfig, definition_revision: str, /) -> str:
    """Return the durable-run fingerprint of an agent definition; no I/O.

    ``sha256(canonical_json(F)).hexdigest()`` where ``F`` holds the agent id, the revision, the
    model, instructions, system prompt contributions, skills, tools (name, parameters,
    exclusive, and ``needs_approval`` when set), guardrails (name, stage, revision), the loop
    identity, and — only when the agent has them — the identities of its tool sources
    (``source_identity()``: which server, with which prefix and filters; not the tools they
    offer, which a resume checks one by one), the tool filters and, when the loop declares
    handoff targets (``needs.handoffs``), the same definition of each target, its loop excepted.
    Two agents built from equal configuration give equal fingerprints; a changed loop revision or
    a removed loop gives a different one.

    Args:
        agent: An ``Agent`` or its ``AgentConfig``.
        definition_revision: The ``run_state.definition_revision``.

    Returns:
        64 lowercase hex characters.

    Raises:
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — the agent has neither ``id`` nor
            ``name``.
    """
    config: AgentConfig = agent if isinstance(agent, AgentConfig) else agent.config
    data = _definition(config)
    data["id"] = agent_id_of(config)
    data["revision"] = definition_revision
    data["loop"] = _loop_identity(config.loop)
    targets = loop_needs(config.loop).handoffs
    if targets:
        data["handoffs"] = [_definition(target.config) for target in targets]
    return _sha256_hex(canonical_json(data))


_FINGERPRINT_COVERS: Final = (
    "model, instructions, system prompt contributions, skills, tools (name, parameters, "
    "exclusive, needs_approval), guardrails, loop, tool sources, tool filters and handoff targets"
)


def definition_mismatch(state: RunEnvelope, config: AgentConfig, revision: str) -> str | None:
    """Why a stored envelope does not belong to this agent definition (``None``: it does).

    Names the part that differs: the agent id, the ``definition_revision`` (stored vs the
    agent's), else the fingerprint — which stores only a hash, so the message lists what it
    covers. Each message says what to do. No I/O.
    """
    advice = (
        "resume with the agent definition the run was started with; a changed agent needs a new run"
    )
    stored_id, agent_id = state.agent_id, agent_id_of(config)
    if stored_id != agent_id:
        return f"agent id mismatch: the run was started by agent {stored_id!r}, not {agent_id!r}"
    stored = state.definition_revision
    if stored != revision:
        return (
            f"definition revision mismatch: the run was started with definition_revision "
            f"{stored!r}, the agent has {revision!r}; {advice}"
        )
    if state.fingerprint != agent_fingerprint(config, revision):
        return (
            f"fingerprint mismatch: the agent's definition changed since the run started under "
            f"definition_revision {revision!r} (the fingerprint covers its {_FINGERPRINT_COVERS}); "
            f"{advice} (or bump definition_revision for the changed agent's new runs)"
        )
    return None


def _tool_identity(tool: ToolDefinition) -> dict[str, Any]:
    """A tool's part of the fingerprint; ``needs_approval`` only when set (``True``, or the
    callable's qualified name), so the fingerprints of tools without it are unchanged."""
    out: dict[str, Any] = {
        "name": tool.name,
        "parameters": tool.parameters,
        "exclusive": tool.exclusive,
    }
    gate = tool.needs_approval
    if gate is True:
        out["needs_approval"] = True
    elif gate is not False:
        module = getattr(gate, "__module__", None) or ""
        out["needs_approval"] = f"{module}.{getattr(gate, '__qualname__', type(gate).__name__)}"
    return out


def arguments_hash(arguments: object) -> str:
    """``sha256(canonical_json(arguments)).hexdigest()`` — the scope hash of a call."""
    return _sha256_hex(canonical_json(arguments))


def _sha256_hex(text: str) -> str:
    """Hex SHA-256 of ``text`` as UTF-8; hashlib (an OpenSSL binding) loads with the first
    durable run, not with ``import prism``."""
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- envelope checks


_LEAVES: Final = frozenset((str, int, bool, type(None)))


def check_shape(value: Any, depth: int) -> None:
    """Every value JSON-compatible, depth ≤ 32, ≤ 256 keys per object. Raises ``ValueError``.

    ``depth`` is the number of containers above ``value`` (0 for the envelope itself). O(size).
    """
    t = type(value)
    if t in _LEAVES:
        return
    if t is dict:
        if depth >= MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH}")
        if len(value) > MAX_KEYS:
            raise ValueError(f"an object has more than {MAX_KEYS} keys")
        for key, item in value.items():
            if type(key) is not str:
                raise ValueError("non-string object key")
            if type(item) not in _LEAVES:
                check_shape(item, depth + 1)
        return
    if t is list or t is tuple:
        if depth >= MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH}")
        for item in value:
            if type(item) not in _LEAVES:
                check_shape(item, depth + 1)
        return
    if t is float:
        if value != value or value in (math.inf, -math.inf):
            raise ValueError("non-finite number")
        return
    # subclasses of the JSON types (e.g. an IntEnum) take the slow path
    if isinstance(value, (str, int)):
        return
    if isinstance(value, float):
        check_shape(float(value), depth)
        return
    if isinstance(value, dict):
        check_shape(dict(value), depth)
        return
    if isinstance(value, (list, tuple)):
        check_shape(list(value), depth)
        return
    raise ValueError(f"non-JSON value of type {t.__name__}")


def encode_state(state: Any, limit: int) -> int:
    """Shape-check ``state`` and return its canonical UTF-8 size (raises AgentRunStateError)."""
    try:
        check_shape(state, 0)
        size = len(canonical_json(state).encode("utf-8"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise AgentRunStateError(f"run state is not storable: {exc}") from exc
    if size > limit:
        raise AgentRunStateError(f"run state is {size} bytes, more than the {limit} allowed")
    return size


_TEXT: Final = compact_text()


def json_text(value: Any) -> str:
    """The compact JSON text of a JSON value (``ensure_ascii=False``, ``separators=(",", ":")``,
    keys in insertion order, NaN/inf refused): what the database stores write for it. It has
    the size of ``canonical_json(value)``, which differs only in the order of keys.

    Raises:
        TypeError: a value that is not JSON-compatible.
        ValueError: ``NaN`` or an infinity; a circular structure.
    """
    return _TEXT(value)


def utf8_size(text: str) -> int:
    """UTF-8 bytes of ``text``.

    Raises:
        UnicodeEncodeError: a lone surrogate.
    """
    return len(text) if text.isascii() else len(text.encode("utf-8"))


_CALL_DEPTH: Final = 3
"""Where a pending call's ``call`` object sits in an envelope: envelope → ``pending_calls`` →
the entry → ``call``."""


class CallTexts:
    """The compact JSON text of pending calls' ``call`` objects, each shape-checked and encoded
    once at its place in an envelope.

    A dispatch marking writes the open round's calls with every envelope of the round (a round
    of N calls: N writes, each with all N calls); only the entries' status changes between
    them. Kept by identity, with a reference to the object (its id cannot be reused meanwhile):
    the runtime never changes a call object once built, and a redacted envelope brings new
    objects, which simply miss. At most ``limit`` texts are kept; the owner clears them when
    the round ends.
    """

    __slots__ = ("_limit", "_texts")

    def __init__(self, limit: int = 256) -> None:
        self._limit = limit
        self._texts: dict[int, tuple[object, str]] = {}

    def clear(self) -> None:
        """Forget every text (the round ended)."""
        self._texts.clear()

    def text_of(self, call: object) -> str:
        """``json_text(call)``, after ``check_shape(call, 3)``; raises as they do."""
        texts = self._texts
        hit = texts.get(id(call))
        if hit is not None and hit[0] is call:
            return hit[1]
        check_shape(call, _CALL_DEPTH)
        text = json_text(call)
        if len(texts) >= self._limit:
            texts.clear()
        texts[id(call)] = (call, text)
        return text


def parts_text(
    head: Mapping[str, Any],
    pending_calls: list[Any],
    tail: Mapping[str, Any],
    calls: CallTexts,
) -> str:
    """The text of an envelope's written parts ``{**head, "pending_calls": pending_calls,
    **tail}`` as ``check_shape(parts, 0)`` then ``json_text(parts)`` give it, and raising as
    they do, with each pending call's ``call`` object taken from ``calls`` (checked and encoded
    once per round) instead of walked again. An entry that is not a dict starting with ``call``
    is checked and encoded whole.
    """
    if len(head) + len(tail) >= MAX_KEYS:
        check_shape({**head, "pending_calls": pending_calls, **tail}, 0)
    check_shape(head, 0)
    check_shape(tail, 0)
    items: list[str] = []
    for entry in pending_calls:
        if type(entry) is dict and len(entry) > 1 and next(iter(entry)) == "call":
            if len(entry) > MAX_KEYS:
                raise ValueError(f"an object has more than {MAX_KEYS} keys")
            rest = dict(entry)
            call_text = calls.text_of(rest.pop("call"))
            check_shape(rest, _CALL_DEPTH - 1)
            items.append('{"call":' + call_text + "," + json_text(rest)[1:])
        else:
            check_shape(entry, _CALL_DEPTH - 1)
            items.append(json_text(entry))
    start = json_text(head)[:-1] + "," if head else "{"
    end = "," + json_text(tail)[1:] if tail else "}"
    return start + '"pending_calls":[' + ",".join(items) + "]" + end


def checked_envelope(value: Any) -> dict[str, Any]:
    """A stored value as a current-schema envelope: upgraded, then shape-checked (size
    included). Raises AgentRunStateError."""
    encode_state(value, MAX_LOADED_STATE_BYTES)
    return check_envelope(upgrade_envelope(value))


def run_key(run_state: Any) -> str:
    if isinstance(run_state, str):
        return run_state
    return str(run_state.run_id)


async def _load_checked(
    checkpoints: CheckpointStore,
    run_id: str,
    session_id: str | None,
    ownership: OwnershipScope | None,
) -> tuple[CheckpointRecord, dict[str, Any], RunEnvelope]:
    record = await checkpoints.load_checkpoint(
        namespace=AGENT_RUN_NAMESPACE, key=run_id, ownership=ownership
    )
    if record is None:
        raise AgentRunStateError(f"no run {run_id} in this store (no run state is stored for it)")
    checked = checked_envelope(record.value)
    envelope = RunEnvelope.from_json(checked)
    if envelope.run_id != run_id:
        raise AgentRunStateError("malformed run state: run_id differs from its key")
    if session_id is not None and envelope.session_id != session_id:
        raise AgentRunStateError("run state belongs to another session")
    return record, checked, envelope


async def load_state(
    checkpoints: CheckpointStore,
    run_id: str,
    session_id: str | None,
    ownership: OwnershipScope | None,
) -> tuple[CheckpointRecord, RunEnvelope]:
    """The stored record of run ``run_id`` and its envelope, checked (see
    [`load_agent_run_state()`][prism.runtime.durable._envelope.load_agent_run_state])."""
    record, _, envelope = await _load_checked(checkpoints, run_id, session_id, ownership)
    return record, envelope


async def load_agent_run_state(
    checkpoints: CheckpointStore,
    *,
    run_id: str,
    session_id: str | None = None,
    ownership: OwnershipScope | None = None,
) -> LoadedRunState:
    """Load a stored envelope for inspection or repair.

    Args:
        checkpoints: The checkpoint store.
        run_id: The run id (the checkpoint key under ``"prism.agent-run"``).
        session_id: When given, the stored ``session_id`` must equal it.
        ownership: Passed to the store.

    Returns:
        The record and the envelope as stored.

    Raises:
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — no record, a malformed one (shape,
            more than 1 MiB), or another session's.
    """
    record, state, _ = await _load_checked(checkpoints, run_id, session_id, ownership)
    return LoadedRunState(record=record, state=state)


async def save_agent_run_state(
    *,
    checkpoints: CheckpointStore,
    state: Mapping[str, Any],
    expected_version: int,
    fencing_token: int | None = None,
    ownership: OwnershipScope | None = None,
) -> LoadedRunState:
    """Write a (possibly edited) envelope back. Recomputes nothing.

    The envelope is saved under ``key=state["run_id"]`` with ``version = expected_version + 1``
    and compare-and-set on ``expected_version``. An edited envelope still meets every resume
    check.

    Args:
        checkpoints: The checkpoint store.
        state: A JSON object with the envelope's keys (e.g. an edited ``LoadedRunState.state``).
        expected_version: The stored version being replaced.
        fencing_token: Passed to ``save_checkpoint``.
        ownership: Passed to the store.

    Returns:
        The new record and state.

    Raises:
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — not JSON-compatible, deeper than 32,
            an object with more than 256 keys, more than 1 MiB, or a malformed envelope.
        CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — stale ``expected_version``
            or fencing token.
    """
    if not is_int(expected_version) or expected_version < 0:
        raise AgentRunStateError("expected_version must be an int >= 0")
    value = upgrade_envelope(dict(state)) if isinstance(state, Mapping) else state
    encode_state(value, MAX_LOADED_STATE_BYTES)
    envelope = check_envelope(value)
    record = await checkpoints.save_checkpoint(
        namespace=AGENT_RUN_NAMESPACE,
        key=RunEnvelope.from_json(envelope).run_id,
        value=envelope,
        version=expected_version + 1,
        expected_version=expected_version,
        fencing_token=fencing_token,
        ownership=ownership,
    )
    return LoadedRunState(record=record, state=cast(dict[str, JsonValue], record.value))


# --------------------------------------------------------------------------- loop state


def loop_state_of(loop: AgentLoopStrategy) -> dict[str, Any] | None:
    """Capture ``{"name", "revision", "snapshot"}`` from a strategy with ``snapshot``.

    Args:
        loop: The active strategy.

    Returns:
        The loop state, or ``None`` when the strategy has no callable ``snapshot``.

    Raises:
        AgentLoopStateError: ``ERR_PRISM_LOOP_SNAPSHOT`` — ``snapshot()`` raised or returned a
            value that is not JSON-compatible (depth ≤ 32).
    """
    snapshot = getattr(loop, "snapshot", None)
    if not callable(snapshot):
        return None
    try:
        value = snapshot()
    except AgentLoopStateError:
        raise
    except Exception as exc:
        raise AgentLoopStateError(
            "ERR_PRISM_LOOP_SNAPSHOT", f"loop snapshot() raised {type(exc).__name__}"
        ) from exc
    if not is_json_value(value, max_depth=MAX_DEPTH):
        raise AgentLoopStateError("ERR_PRISM_LOOP_SNAPSHOT")
    return {"name": loop.name, "revision": effective_loop_revision(loop), "snapshot": value}
