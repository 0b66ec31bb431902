"""Guardrails: host checks on run input, provider output, tool calls and tool results.

A [`Guardrail`][prism.guardrails.Guardrail] is a named, staged callback returning a [`GuardrailDecision`][prism.guardrails.GuardrailDecision]. The runtime
evaluates the guards of one stage with ``run_guardrails()``, which never lets a broken guard pass:
invalid guards, malformed decisions and exceptions become ``tripwire`` records (fail closed).
What a non-``allow`` record does to the run depends on the stage and is decided by the
caller; [`guardrail_error()`][prism.guardrails.guardrail_error] builds the [`GuardrailError`][prism.errors.GuardrailError] for the cases that
fail the run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, TypeVar

from prism._keys import reject_unknown_keys
from prism._serde import Serializable
from prism.abort import AbortController, AbortSignal
from prism.errors import GuardrailError, PrismConfigError
from prism.events import GuardrailDecisionEvent
from prism.redaction import SecretRedactor
from prism.types import GuardrailAction, GuardrailRecord, GuardrailStage, canonical_json

__all__ = [
    "GUARDRAIL_ACTIONS",
    "GUARDRAIL_STAGES",
    "Guardrail",
    "GuardrailAction",
    "GuardrailContext",
    "GuardrailDecision",
    "GuardrailEvaluator",
    "GuardrailRunResult",
    "GuardrailStage",
    "Guardrails",
    "coerce_guardrails",
    "guardrail_error",
    "merge_guardrails",
    "run_guardrails",
]

GUARDRAIL_STAGES: frozenset[str] = frozenset({"input", "output", "tool_input", "tool_output"})
"""Every valid [`GuardrailStage`][prism.guardrails.GuardrailStage]."""

GUARDRAIL_ACTIONS: frozenset[str] = frozenset({"allow", "block", "tripwire", "interrupt"})
"""Every valid [`GuardrailAction`][prism.guardrails.GuardrailAction]."""

_MAX_NAME_CHARS = 128
_MAX_REASON_BYTES = 4096
_MAX_ERROR_BYTES = 4096
_MAX_METADATA_BYTES = 16 * 1024
_MAX_CONCURRENCY = 16
_MAX_DEPTH = 32

_V = TypeVar("_V")


@dataclass(frozen=True, slots=True)
class GuardrailDecision(Serializable):
    """The outcome of one guard evaluation.

    A guard may return a mapping with the same keys instead; ``run_guardrails()`` converts it. The
    action is checked at evaluation time (an unknown action is a ``guardrail_invalid_decision``
    tripwire), not at construction.
    """

    action: GuardrailAction
    """``"allow"``, ``"block"``, ``"tripwire"`` or ``"interrupt"``."""
    reason: str | None = None
    """Human-readable reason; redacted and cut to 4 KiB UTF-8 in the record. ``None``: no reason."""
    metadata: Mapping[str, Any] | None = None
    """JSON-compatible details; redacted, normalised and bounded to 16 KiB in the record."""


GuardrailEvaluator: TypeAlias = Callable[
    ["GuardrailContext[Any]"], "GuardrailDecision | Mapping[str, Any] | Awaitable[Any]"
]
"""``evaluate(context) -> GuardrailDecision | mapping`` (sync or async)."""


@dataclass(frozen=True, slots=True)
class Guardrail(Serializable):
    """A named check bound to one stage.

    Nothing is validated at construction: a guard with an empty or over-long name, a ``stage`` that
    differs from the stage it is evaluated under, or a non-callable ``evaluate`` yields a
    fail-closed ``tripwire`` record with reason ``guardrail_invalid`` when it runs.
    """

    name: str
    """1–128 characters; reported as ``GuardrailRecord.guardrail``."""
    stage: GuardrailStage
    """The stage this guard belongs to; must equal the list it is placed in."""
    evaluate: GuardrailEvaluator = field(metadata={"serialize": False})
    """The check; receives a [`GuardrailContext`][prism.guardrails.GuardrailContext] and returns a decision (sync or async)."""
    revision: str | None = None
    """Host-authored revision of the check. ``None``: unversioned."""


@dataclass(frozen=True, slots=True)
class GuardrailContext(Generic[_V]):
    """What a guard sees.

    ``value`` by stage: ``input`` → ``tuple[Message, ...]``; ``output`` → ``ProviderTurnResult``;
    ``tool_input`` → ``ToolCallContent``; ``tool_output`` → ``ToolResult`` (before redaction).
    """

    stage: GuardrailStage
    """The stage being evaluated."""
    value: _V
    """The value under check (see the class docstring)."""
    session_id: str
    """Session of the run."""
    run_id: str
    """Run being guarded."""
    metadata: Mapping[str, Any]
    """Merged run metadata (read-only)."""
    signal: AbortSignal | None
    """Aborted when the run aborts or when another guard of the same evaluation stopped it."""
    tool_call_id: str | None = None
    """The call's id on tool stages; ``None`` otherwise."""
    tool_name: str | None = None
    """The call's tool name on tool stages; ``None`` otherwise."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Guardrails(Serializable):
    """Guards per stage plus the optional parallelism of one evaluation.

    Raises:
        PrismConfigError: ``max_concurrency`` is not ``None`` or an ``int`` in 1–16 (``bool``
            rejected), or a stage is not a sequence (code ``ERR_PRISM_CONFIG``).
    """

    input: tuple[Guardrail, ...] = ()
    """Run input guards (run start and steered messages)."""
    output: tuple[Guardrail, ...] = ()
    """Provider output guards (completed ``ProviderTurnResult``)."""
    tool_input: tuple[Guardrail, ...] = ()
    """Tool call guards, after the ``tool_call`` middleware and before lookup."""
    tool_output: tuple[Guardrail, ...] = ()
    """Tool result guards, after ``tool_result`` middleware and before redaction."""
    max_concurrency: int | None = None
    """Guards of one stage evaluated at once (1–16). ``None``: one at a time, in order."""

    def __post_init__(self) -> None:
        for stage in ("input", "output", "tool_input", "tool_output"):
            value = getattr(self, stage)
            if not isinstance(value, tuple):
                if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                    raise PrismConfigError(
                        f"guardrails.{stage} must be a sequence of Guardrail objects"
                    )
                object.__setattr__(self, stage, tuple(value))
        mc = self.max_concurrency
        if mc is not None and (
            isinstance(mc, bool) or not isinstance(mc, int) or not 1 <= mc <= _MAX_CONCURRENCY
        ):
            raise PrismConfigError(
                f"guardrails.max_concurrency must be an int from 1 to {_MAX_CONCURRENCY}, got {mc!r}"
            )

    def for_stage(self, stage: str) -> tuple[Guardrail, ...]:
        """Return the guards of ``stage`` (``()`` for an unknown stage)."""
        if stage in GUARDRAIL_STAGES:
            result: tuple[Guardrail, ...] = getattr(self, stage)
            return result
        return ()


@dataclass(frozen=True, slots=True)
class GuardrailRunResult:
    """Outcome of ``run_guardrails()``."""

    records: tuple[GuardrailRecord, ...]
    """Records of the evaluated guards, in declaration order (skipped guards have none)."""
    terminal: GuardrailRecord | None
    """The first non-``allow`` record in declaration order; ``None`` when every guard allowed."""


_EMPTY_RESULT = GuardrailRunResult(records=(), terminal=None)


def coerce_guardrails(value: Guardrails | Mapping[str, Any] | None) -> Guardrails | None:
    """Accept a [`Guardrails`][prism.guardrails.Guardrails], a mapping of its fields, or ``None``.

    Raises:
        PrismConfigError: unknown keys, an invalid ``max_concurrency`` or a non-mapping value.
    """
    if value is None or isinstance(value, Guardrails):
        return value
    if isinstance(value, Mapping):
        reject_unknown_keys("Guardrails", value, {f.name for f in dataclasses.fields(Guardrails)})
        return Guardrails(**{str(k): v for k, v in value.items()})
    raise PrismConfigError(
        f"guardrails must be a Guardrails object or a mapping, got {type(value).__name__}"
    )


def merge_guardrails(
    agent: Guardrails | Mapping[str, Any] | None, run: Guardrails | Mapping[str, Any] | None
) -> Guardrails | None:
    """Merge agent and run guardrails: per stage agent guards first, then run guards.

    ``max_concurrency`` is the run's when set, else the agent's. Returns ``None`` when both are
    ``None`` and one side unchanged when the other is ``None``.
    """
    a = coerce_guardrails(agent)
    r = coerce_guardrails(run)
    if a is None:
        return r
    if r is None:
        return a
    return Guardrails(
        input=a.input + r.input,
        output=a.output + r.output,
        tool_input=a.tool_input + r.tool_input,
        tool_output=a.tool_output + r.tool_output,
        max_concurrency=r.max_concurrency if r.max_concurrency is not None else a.max_concurrency,
    )


def guardrail_error(record: GuardrailRecord) -> GuardrailError:
    """Return the [`GuardrailError`][prism.errors.GuardrailError] for a terminal record.

    Its code is ``ERR_PRISM_GUARDRAIL_BLOCKED`` for ``block``/``tripwire`` and
    ``ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE`` for ``interrupt``.
    """
    return GuardrailError(record)


# --------------------------------------------------------------------------- bounding


def _cut_utf8(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` UTF-8 bytes without splitting a character."""
    if len(text) * 4 <= limit:
        return text
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore")


def _redact(value: Any, redactor: SecretRedactor | None) -> Any:
    return value if redactor is None else redactor.redact(value)


def _normalise_json(value: Any, depth: int, stack: set[int]) -> Any:
    """Return ``value`` as plain JSON data (tuples → lists, mappings → dicts) or raise ValueError."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("non-finite float")
        return value
    if depth >= _MAX_DEPTH:
        raise ValueError("too deep")
    if isinstance(value, Mapping):
        if id(value) in stack:
            raise ValueError("cycle")
        stack.add(id(value))
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError("non-string key")
            out[k] = _normalise_json(v, depth + 1, stack)
        stack.discard(id(value))
        return out
    if isinstance(value, (list, tuple)):
        if id(value) in stack:
            raise ValueError("cycle")
        stack.add(id(value))
        items = [_normalise_json(v, depth + 1, stack) for v in value]
        stack.discard(id(value))
        return items
    raise ValueError(f"not JSON-compatible: {type(value).__name__}")


def _bound_metadata(metadata: Any, redactor: SecretRedactor | None) -> dict[str, Any] | None:
    """Redact, normalise and bound record metadata."""
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        return {"invalid": True}
    try:
        normalised = _normalise_json(_redact(metadata, redactor), 0, set())
        size = len(canonical_json(normalised).encode("utf-8"))
    except (ValueError, TypeError, RecursionError):
        return {"invalid": True}
    if size > _MAX_METADATA_BYTES:
        return {"truncated": True}
    result: dict[str, Any] = normalised
    return result


def _make_record(
    name: Any,
    stage: str,
    action: str,
    reason: Any,
    metadata: Any,
    redactor: SecretRedactor | None,
) -> GuardrailRecord:
    guard_name = name if isinstance(name, str) else ("" if name is None else str(name))
    if len(guard_name) > _MAX_NAME_CHARS:
        guard_name = guard_name[:_MAX_NAME_CHARS]
    text: str | None = None
    if reason is not None:
        text = _cut_utf8(str(_redact(str(reason), redactor)), _MAX_REASON_BYTES)
    return GuardrailRecord(
        guardrail=guard_name,
        stage=stage,  # type: ignore[arg-type]
        action=action,  # type: ignore[arg-type]
        reason=text,
        metadata=_bound_metadata(metadata, redactor),
    )


def _invalid_guard(guard: Any, stage: str) -> bool:
    name = getattr(guard, "name", None)
    return (
        not isinstance(name, str)
        or not name
        or len(name) > _MAX_NAME_CHARS
        or getattr(guard, "stage", None) != stage
        or not callable(getattr(guard, "evaluate", None))
    )


def _decision_parts(decision: Any) -> tuple[str, Any, Any] | None:
    """Return ``(action, reason, metadata)`` of a valid decision, else ``None``."""
    action: Any
    reason: Any
    metadata: Any
    if isinstance(decision, GuardrailDecision):
        action, reason, metadata = decision.action, decision.reason, decision.metadata
    elif isinstance(decision, Mapping):
        if not set(decision) <= {"action", "reason", "metadata"}:
            return None
        action = decision.get("action")
        reason = decision.get("reason")
        metadata = decision.get("metadata")
    else:
        return None
    if not isinstance(action, str) or action not in GUARDRAIL_ACTIONS:
        return None
    if reason is not None and not isinstance(reason, str):
        return None
    return action, reason, metadata


async def _evaluate_one(
    guard: Any, stage: str, context: GuardrailContext[Any], redactor: SecretRedactor | None
) -> GuardrailRecord:
    """Evaluate one guard and always return a record (never raises except on cancellation)."""
    name = getattr(guard, "name", None)
    if _invalid_guard(guard, stage):
        return _make_record(name, stage, "tripwire", "guardrail_invalid", None, redactor)
    try:
        decision = guard.evaluate(context)
        if inspect.isawaitable(decision):
            decision = await decision
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # fail closed
        message = _cut_utf8(str(_redact(str(exc), redactor)), _MAX_ERROR_BYTES)
        return _make_record(
            name, stage, "tripwire", "guardrail_failed", {"error": message}, redactor
        )
    parts = _decision_parts(decision)
    if parts is None:
        return _make_record(name, stage, "tripwire", "guardrail_invalid_decision", None, redactor)
    action, reason, metadata = parts
    return _make_record(name, stage, action, reason, metadata, redactor)


async def run_guardrails(
    stage: GuardrailStage,
    guardrails: Guardrails | Mapping[str, Any] | None,
    value: Any,
    context: GuardrailContext[Any],
    *,
    redactor: SecretRedactor | None = None,
    emit: Callable[[GuardrailDecisionEvent], object] | None = None,
) -> GuardrailRunResult:
    """Evaluate the guards of one stage and report their records.

    Guards run in declaration order, one at a time unless ``guardrails.max_concurrency`` > 1, in
    which case up to that many run at once (started in declaration order). The first non-``allow``
    record — in completion order — stops the evaluation: guards not yet started are skipped, guards
    still running are cancelled and their decisions discarded, and the signal the guards see is
    aborted. After evaluation the records are emitted as ``guardrail_decision`` events (with the
    context's ``tool_call_id``/``tool_name``) in declaration order.

    Args:
        stage: The stage to evaluate; selects ``guardrails.<stage>``.
        guardrails: The merged guardrails (a mapping is converted); ``None`` evaluates nothing.
        value: The value under check; replaces ``context.value``.
        context: Identity, metadata, run signal and tool fields for the guards. Its ``stage`` and
            ``value`` are replaced by the arguments.
        redactor: Redacts record reasons and metadata. ``None``: no redaction.
        emit: Sync callable receiving each [`GuardrailDecisionEvent`][prism.events.GuardrailDecisionEvent]; an
            awaitable result is awaited. ``None``: no events.

    Returns:
        The records in declaration order and the terminal (first non-``allow``) record or ``None``.

    Raises:
        PrismConfigError: ``guardrails`` is a mapping with unknown keys or invalid values.
    """
    g = coerce_guardrails(guardrails)
    if g is None:
        return _EMPTY_RESULT
    guards = g.for_stage(stage)
    if not guards:
        return _EMPTY_RESULT

    controller = AbortController()
    parent = context.signal
    remove: Callable[[], Any] | None = None
    if parent is not None:
        remove = parent.add_listener(lambda *_: controller.abort(parent.reason))
    local = dataclasses.replace(context, stage=stage, value=value, signal=controller.signal)
    try:
        concurrency = g.max_concurrency or 1
        if concurrency <= 1 or len(guards) == 1:
            slots = await _run_sequential(guards, stage, local, redactor, controller)
        else:
            slots = await _run_parallel(guards, stage, local, redactor, controller, concurrency)
    finally:
        if remove is not None:
            remove()

    records = tuple(r for r in slots if r is not None)
    terminal = next((r for r in records if r.action != "allow"), None)
    if emit is not None:
        for record in records:
            event = GuardrailDecisionEvent(
                session_id=context.session_id,
                run_id=context.run_id,
                record=record,
                tool_call_id=context.tool_call_id,
                tool_name=context.tool_name,
            )
            out = emit(event)
            if inspect.isawaitable(out):
                await out
    return GuardrailRunResult(records=records, terminal=terminal)


async def _run_sequential(
    guards: tuple[Guardrail, ...],
    stage: str,
    context: GuardrailContext[Any],
    redactor: SecretRedactor | None,
    controller: AbortController,
) -> list[GuardrailRecord | None]:
    slots: list[GuardrailRecord | None] = []
    for guard in guards:
        record = await _evaluate_one(guard, stage, context, redactor)
        slots.append(record)
        if record.action != "allow":
            controller.abort(GuardrailError(record))
            break
    return slots


async def _run_parallel(
    guards: tuple[Guardrail, ...],
    stage: str,
    context: GuardrailContext[Any],
    redactor: SecretRedactor | None,
    controller: AbortController,
    concurrency: int,
) -> list[GuardrailRecord | None]:
    slots: list[GuardrailRecord | None] = [None] * len(guards)
    running: dict[asyncio.Task[GuardrailRecord], int] = {}
    next_index = 0
    stopped = False
    try:
        while True:
            while not stopped and next_index < len(guards) and len(running) < concurrency:
                task = asyncio.ensure_future(
                    _evaluate_one(guards[next_index], stage, context, redactor)
                )
                running[task] = next_index
                next_index += 1
            if not running:
                break
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            # Decisions completing together are taken in declaration order.
            for task in sorted(done, key=running.__getitem__):
                index = running.pop(task)
                if stopped:
                    continue
                record = task.result()
                slots[index] = record
                if record.action != "allow":
                    stopped = True
                    controller.abort(GuardrailError(record))
            if stopped:
                break
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
    return slots
