"""Loop contracts: the seam between the runtime and a loop strategy.

* the [`AgentLoopStrategy`][prism.loops.contracts.AgentLoopStrategy] protocol and its durable-capable refinement
  ``DurableLoopStrategy``;
* the loop options [`SingleShotLoopOptions`][prism.loops.contracts.SingleShotLoopOptions] and [`GenerateValidateReviseLoopOptions`][prism.loops.contracts.GenerateValidateReviseLoopOptions];
* the [`LoopContext`][prism.loops.contracts.LoopContext] protocol that the runtime implements once per run leg.

The ``Artifact*`` value types and callback aliases live in [`prism.artifact_contracts`][prism.artifact_contracts] (below
the events, which carry them) and are re-exported here.

The contracts are host-domain free: no field or member name contains ``workflow``, ``node`` or
``step``.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, TypeAlias, runtime_checkable

from prism._keys import reject_unknown_keys
from prism._serde import Serializable
from prism.abort import AbortSignal
from prism.artifact_contracts import (
    ArtifactContext,
    ArtifactError,
    ArtifactParser,
    ArtifactParseResult,
    ArtifactRepairer,
    ArtifactValidation,
    ArtifactValidator,
)
from prism.errors import PrismConfigError
from prism.events import AgentEvent
from prism.structured_output import validate_structured_output
from prism.types import (
    AgentInput,
    JsonValue,
    Message,
    ProviderRequest,
    ProviderTurnResult,
    StructuredOutputOptions,
    ToolCallContent,
    ToolResult,
    Usage,
)

__all__ = [
    "AgentLoopOptions",
    "AgentLoopStrategy",
    "ArtifactContext",
    "ArtifactError",
    "ArtifactParseResult",
    "ArtifactParser",
    "ArtifactRepairer",
    "ArtifactValidation",
    "ArtifactValidator",
    "DurableLoopStrategy",
    "GenerateValidateReviseLoopOptions",
    "LoopContext",
    "SingleShotLoopOptions",
    "StructuredOutputMode",
    "StructuredOutputTiming",
    "ToolCallsMode",
    "coerce_loop_options",
    "coerce_structured_output",
    "effective_loop_revision",
    "is_durable_capable",
]


# --------------------------------------------------------------------------------------------
# Loop strategies
# --------------------------------------------------------------------------------------------


@runtime_checkable
class AgentLoopStrategy(Protocol):
    """A replaceable per-run turn-control strategy.

    Runtime-checkable on ``name`` and ``run`` only. Optional members, read with ``getattr``:

    * ``revision: str | None`` — host-authored revision (default ``"1"``); joins the
      durable fingerprint and the stored ``loop_state``;
    * ``snapshot() -> JsonValue`` and ``restore(snapshot) -> None`` — see
      ``DurableLoopStrategy``.
    """

    @property
    def name(self) -> str:
        """Stable identifier (e.g. ``"single-shot"``); joins the durable fingerprint."""
        ...

    async def run(self, ctx: LoopContext, /) -> Usage | None:
        """Drive one run leg through ``ctx`` only.

        Returns:
            A usage fallback for custom loops; the runtime accumulates usage itself.
        """
        ...


@runtime_checkable
class DurableLoopStrategy(AgentLoopStrategy, Protocol):
    """A loop strategy that can be checkpointed.

    An object is *durable-capable* when both ``snapshot`` and ``restore`` are callables; use
    [`is_durable_capable()`][prism.loops.contracts.is_durable_capable] rather than ``isinstance`` (which does not check callability).
    """

    def snapshot(self) -> JsonValue:
        """Capture loop-local resumable state; must be JSON-compatible."""
        ...

    def restore(self, snapshot: JsonValue, /) -> None:
        """Rehydrate from [`snapshot()`][prism.loops.contracts.DurableLoopStrategy.snapshot]'s value; called once before ``run`` on resume.

        Raises:
            AgentLoopStateError: ``ERR_PRISM_LOOP_SNAPSHOT`` (or any exception) on drift.
        """
        ...


def is_durable_capable(loop: object) -> bool:
    """Return ``True`` when ``loop`` defines callable ``snapshot`` and ``restore``."""
    return callable(getattr(loop, "snapshot", None)) and callable(getattr(loop, "restore", None))


def effective_loop_revision(loop: object) -> str:
    """Return ``getattr(loop, "revision", None) or "1"``.

    A non-``str`` truthy revision is converted with ``str``.
    """
    revision = getattr(loop, "revision", None)
    return str(revision) if revision else "1"


# --------------------------------------------------------------------------------------------
# Loop options
# --------------------------------------------------------------------------------------------

ToolCallsMode: TypeAlias = Literal["disabled", "bounded"]
"""Artifact-loop tool handling: ``"disabled"`` (default) or ``"bounded"`` (see ``GenerateValidateReviseLoopOptions.tool_calls``)."""

StructuredOutputMode: TypeAlias = Literal["native", "artifact-loop"]
"""``"native"`` requires the provider to constrain output to the schema (a model without
structured-output support fails the run); ``"artifact-loop"`` never sends it natively: the schema
goes into the instructions and is enforced by parse/validate/repair turns. Unset (``None``), an
explicit ``structured_output`` is native and the artifact factories' schema goes natively where
the model supports it, else into the instructions."""

StructuredOutputTiming: TypeAlias = Literal["every-turn", "final-turn-only"]
"""When the schema is attached with bounded tools."""

_TOOL_CALLS = ("disabled", "bounded")
_SO_MODES = (None, "native", "artifact-loop")
_SO_TIMINGS = ("every-turn", "final-turn-only")


def _options_from_mapping(cls: type[Any], strategy: str, value: Mapping[str, Any]) -> Any:
    if not isinstance(value, Mapping):
        raise PrismConfigError(f"{cls.__name__} must be built from a mapping")
    data = dict(value)
    given = data.pop("strategy", strategy)
    if given != strategy:
        raise PrismConfigError(f"{cls.__name__} requires strategy {strategy!r}, got {given!r}")
    reject_unknown_keys(f"{strategy} loop", data, {f.name for f in dataclasses.fields(cls)})
    return cls(**data)


@dataclass(frozen=True, slots=True, kw_only=True)
class SingleShotLoopOptions(Serializable):
    """Options selecting the default single-shot loop.

    ``tool_concurrency`` is not validated here: ``resolve_tool_concurrency`` treats a missing,
    non-numeric, non-finite or < 1 value as 1 and floors floats.
    """

    tool_concurrency: int = 1
    """Independent tool calls per round dispatched concurrently, at most (≥ 1; default 1)."""

    @property
    def strategy(self) -> Literal["single-shot"]:
        """The strategy literal, ``"single-shot"``."""
        return "single-shot"

    @classmethod
    def from_mapping(cls, value: Mapping[str, Any]) -> SingleShotLoopOptions:
        """Build from a snake_case mapping; an optional ``"strategy"`` key must match.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` for an unknown key or another strategy.
        """
        result: SingleShotLoopOptions = _options_from_mapping(cls, "single-shot", value)
        return result


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerateValidateReviseLoopOptions(Serializable):
    """Options selecting a generate → validate → revise artifact loop.

    All values are validated at construction. The callbacks are host objects and are left
    out of ``to_dict()``; these options therefore have no round trip.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` when ``validator`` is not callable,
            ``parser``/``repairer`` are neither callable nor ``None``, ``max_revisions`` is not an
            ``int`` ≥ 0 (``bool`` rejected), or a mode/timing literal is unknown.
        StructuredOutputError: ``ERR_PRISM_STRUCTURED_OUTPUT`` when ``structured_output`` fails
            the structured-output check (a name of 1–128 characters, a JSON-compatible schema
            of at most 65 536 bytes).
    """

    validator: ArtifactValidator[Any] = field(metadata={"serialize": False})
    """Accepts or rejects a parsed candidate (sync or async)."""

    parser: ArtifactParser[Any] | None = field(default=None, metadata={"serialize": False})
    """Turns assistant text into a value; ``None`` uses the text itself."""

    repairer: ArtifactRepairer[Any] | None = field(default=None, metadata={"serialize": False})
    """Builds the revision input; ``None`` joins the error messages with ``"\\n"``."""

    max_revisions: int = 3
    """Failed call-free candidates that may be revised; the run makes at most
    ``1 + max_revisions`` candidates. ``0`` disables revisions."""

    tool_calls: ToolCallsMode = "disabled"
    """``"disabled"`` answers host tool calls with ``tool_call_not_dispatched`` rows (a run that
    offers tools logs a warning on the ``prism`` logger); ``"bounded"`` dispatches them one at a
    time, for at most ``limits.max_tool_rounds`` rounds (and the run's
    ``answer_after_tool_rounds``), before the model commits to a candidate; a tool request beyond
    the rounds fails the artifact with reason ``tool_round_limit``."""

    structured_output: StructuredOutputOptions | None = None
    """Native JSON schema for the provider; a mapping with the same keys is accepted."""

    structured_output_mode: StructuredOutputMode | None = None
    """How the schema reaches the model (``StructuredOutputMode``); ``None``: natively where
    possible, else in the instructions."""

    structured_output_timing: StructuredOutputTiming = "every-turn"
    """``"final-turn-only"`` omits the schema while bounded tools may run."""

    def __post_init__(self) -> None:
        _validate_gvr_options(
            validator=self.validator,
            parser=self.parser,
            repairer=self.repairer,
            max_revisions=self.max_revisions,
            tool_calls=self.tool_calls,
            structured_output_mode=self.structured_output_mode,
            structured_output_timing=self.structured_output_timing,
        )
        so: Any = self.structured_output
        if so is not None:
            object.__setattr__(self, "structured_output", coerce_structured_output(so))

    @property
    def strategy(self) -> Literal["generate-validate-revise"]:
        """The strategy literal, ``"generate-validate-revise"``."""
        return "generate-validate-revise"

    @classmethod
    def from_mapping(cls, value: Mapping[str, Any]) -> GenerateValidateReviseLoopOptions:
        """Build from a snake_case mapping; an optional ``"strategy"`` key must match.

        Example: ``GenerateValidateReviseLoopOptions.from_mapping({"validator": v,
        "max_revisions": 1})``.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` for an unknown key, another strategy, a
                missing ``validator`` or an invalid value (as the constructor checks).
        """
        if "validator" not in value:
            raise PrismConfigError("generate-validate-revise loop requires a 'validator'")
        result: GenerateValidateReviseLoopOptions = _options_from_mapping(
            cls, "generate-validate-revise", value
        )
        return result


def _validate_gvr_options(
    *,
    validator: object,
    parser: object,
    repairer: object,
    max_revisions: object,
    tool_calls: object,
    structured_output_mode: object,
    structured_output_timing: object,
) -> None:
    """Check the generate-validate-revise options; shared by the options class and the loop
    factory."""
    if not callable(validator):
        raise PrismConfigError("generate-validate-revise 'validator' must be callable")
    if parser is not None and not callable(parser):
        raise PrismConfigError("generate-validate-revise 'parser' must be callable or None")
    if repairer is not None and not callable(repairer):
        raise PrismConfigError("generate-validate-revise 'repairer' must be callable or None")
    _check_callback_shape("validator", validator, "(value, ctx)")
    if parser is not None:
        _check_callback_shape("parser", parser, "(text, ctx)")
    if repairer is not None:
        _check_callback_shape("repairer", repairer, "(value, failure, ctx)")
    if isinstance(max_revisions, bool) or not isinstance(max_revisions, int) or max_revisions < 0:
        raise PrismConfigError(
            f"generate-validate-revise 'max_revisions' must be an int >= 0, got {max_revisions!r}"
        )
    if tool_calls not in _TOOL_CALLS:
        raise PrismConfigError(
            f"generate-validate-revise 'tool_calls' must be 'disabled' or 'bounded', "
            f"got {tool_calls!r}"
        )
    if structured_output_mode not in _SO_MODES:
        raise PrismConfigError(
            "generate-validate-revise 'structured_output_mode' must be None, 'native' or "
            f"'artifact-loop', got {structured_output_mode!r}"
        )
    if structured_output_timing not in _SO_TIMINGS:
        raise PrismConfigError(
            "generate-validate-revise 'structured_output_timing' must be 'every-turn' or "
            f"'final-turn-only', got {structured_output_timing!r}"
        )


def _check_callback_shape(role: str, callback: object, expected: str) -> None:
    """Reject a callback that cannot be called with the loop's positional arguments.

    The loop calls ``validator(value, ctx)``, ``parser(text, ctx)`` and
    ``repairer(value, failure, ctx)``; a callable whose signature cannot take them (a
    one-parameter lambda, a required keyword-only parameter) is a configuration error now rather
    than a ``TypeError`` in the middle of a run. A callable without an inspectable signature is
    accepted.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` naming the role, the expected signature and the
            callable's own.
    """
    try:
        signature = inspect.signature(callback)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return
    count = expected.count(",") + 1
    try:
        signature.bind(*([None] * count))
    except TypeError:
        name = getattr(callback, "__qualname__", type(callback).__name__)
        raise PrismConfigError(
            f"generate-validate-revise '{role}' must accept {expected}: "
            f"{name}{signature} does not (the loop calls it with {count} positional "
            "arguments, sync or async)"
        ) from None


def coerce_structured_output(
    value: StructuredOutputOptions | Mapping[str, Any],
) -> StructuredOutputOptions:
    """Convert a mapping to [`StructuredOutputOptions`][prism.loops.contracts.StructuredOutputOptions] and check it
    ([`validate_structured_output()`][prism.structured_output.validate_structured_output]).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` when the value is neither, or the mapping has
            unknown keys or wrongly typed values.
        StructuredOutputError: ``ERR_PRISM_STRUCTURED_OUTPUT`` on an invalid name/schema/size.
    """
    options = StructuredOutputOptions.coerce(value)
    validate_structured_output(options)
    return options


AgentLoopOptions: TypeAlias = SingleShotLoopOptions | GenerateValidateReviseLoopOptions
"""Loop options: single-shot or generate-validate-revise, told apart by ``strategy``."""


def coerce_loop_options(value: AgentLoopOptions | Mapping[str, Any]) -> AgentLoopOptions:
    """Convert a loop-options mapping by its ``"strategy"`` key.

    Args:
        value: Loop options (returned unchanged) or a mapping with a ``"strategy"`` key of
            ``"single-shot"`` or ``"generate-validate-revise"`` and the remaining keys in
            snake_case.

    Returns:
        The options dataclass.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` for a missing or unknown strategy (message
            ``unknown agent loop strategy: <value>`` and the list of strategies), an unknown key
            or an invalid option value.
    """
    if isinstance(value, (SingleShotLoopOptions, GenerateValidateReviseLoopOptions)):
        return value
    if not isinstance(value, Mapping):
        raise PrismConfigError(f"loop options must be a mapping, got {type(value).__name__}")
    if "strategy" not in value:
        raise PrismConfigError(
            f"loop options mapping requires a 'strategy' key, one of {_STRATEGY_LIST}"
        )
    strategy = value["strategy"]
    if strategy == "single-shot":
        return SingleShotLoopOptions.from_mapping(value)
    if strategy == "generate-validate-revise":
        return GenerateValidateReviseLoopOptions.from_mapping(value)
    raise PrismConfigError(
        f"unknown agent loop strategy: {strategy} (the strategies are {_STRATEGY_LIST})"
    )


_STRATEGY_LIST: Final = "'single-shot', 'generate-validate-revise'"
"""The strategy names a loop-options mapping accepts, as error messages list them."""


# --------------------------------------------------------------------------------------------
# LoopContext
# --------------------------------------------------------------------------------------------


class LoopContext(Protocol):
    """What the runtime gives a loop, built once per run leg.

    A loop reaches the model, tools, store and event stream only through these members.
    Built-in loops treat ``charge_tool_round``, ``is_tool_call_exclusive``,
    ``has_pending_steers`` and ``apply_pending_steers`` as optional: a duck-typed context
    without them behaves as no charge, not exclusive, no steers. A context may also offer
    ``observed() -> bool`` (whether anything observes ``emit`` right now); the built-in loops
    then leave out the progress events nothing would receive, and without it emit them all.
    """

    @property
    def session_id(self) -> str:
        """The session id."""
        ...

    @property
    def run_id(self) -> str:
        """The run id (same on every leg of a durable run)."""
        ...

    @property
    def metadata(self) -> Mapping[str, Any]:
        """Merged agent, session and run metadata, read-only."""
        ...

    @property
    def signal(self) -> AbortSignal:
        """The run's abort signal (session abort, external signal, limit breach, cancellation)."""
        ...

    @property
    def history(self) -> list[Message]:
        """The live, mutable transcript of this leg; loops append to it in place."""
        ...

    @property
    def input(self) -> AgentInput:
        """First-turn input as passed to ``run()`` (unredacted); ``[]`` on resumed legs without
        stored input."""
        ...

    @property
    def input_messages(self) -> tuple[Message, ...]:
        """``to_messages(input)`` after redaction — already appended to the store; the loop pushes
        them to ``history`` once, after the first ``generate``, so the first request does not
        carry them twice."""
        ...

    @property
    def max_tool_rounds(self) -> float:
        """Tool rounds left for the whole run (an ``int``), or ``prism.UNLIMITED`` (``math.inf``):
        ``limits.max_tool_rounds`` capped by the run's ``answer_after_tool_rounds`` policy.
        After a handoff (``ctx.handoff.switch``) it is the target agent's budget, counted from
        the switch."""
        ...

    @property
    def tool_concurrency(self) -> int:
        """Per-round parallel dispatch limit (≥ 1; default 1)."""
        ...

    @property
    def restored_loop_state(self) -> JsonValue | None:
        """The stored loop snapshot on a resumed leg with ``loop_state``; otherwise ``None``."""
        ...

    finish_reason: str | None
    """Writable. Set to ``"tool_round_limit"`` when the tool-round budget ended the run without a
    text answer, ``"turn_limit"`` when another ceiling ended it cleanly (``"token_limit"`` and
    ``"refusal"`` are reserved for custom loops); copied to the result."""

    artifact: Any
    """Writable. The accepted artifact value; copied to ``RunResult.artifact`` on success."""

    async def assemble(
        self,
        next_input: AgentInput,
        tool_results: Sequence[ToolResult] | None = None,
        turn: int | None = None,
        /,
    ) -> ProviderRequest:
        """Run the turn boundary (once per turn), then build the next ``ProviderRequest``.

        Args:
            next_input: Input appended after the live history (``[]`` for continuation turns).
            tool_results: Optional loop-local tool results to include.
            turn: 1-based turn index for context providers; ``None`` = the boundary's.

        Returns:
            The request (messages = system/context + history + ``next_input``).
        """
        ...

    async def generate(self, request: ProviderRequest, /) -> ProviderTurnResult:
        """Run policies, middleware, redaction, retry, the provider stream and output guardrails.

        Returns:
            The turn result; ``started=False`` means no assistant message must be appended.
        """
        ...

    async def dispatch_tool_call(self, call: ToolCallContent, /) -> ToolResult:
        """Fully guarded dispatch of one host call; raises only run-level
        failures."""
        ...

    async def charge_tool_round(self, calls: Sequence[ToolCallContent], /) -> None:
        """Charge one tool round (when ``calls`` is non-empty) and apply the approval gate.

        Optional. Must be awaited before dispatching a round.
        """
        ...

    def is_tool_call_exclusive(self, call: ToolCallContent, /) -> bool:
        """True when the registered tool named by ``call`` has ``exclusive=True``. Optional."""
        ...

    async def append_message(self, message: Message, /) -> None:
        """Append ``message`` to the store under this run, redacted; does not touch ``history``."""
        ...

    def emit(self, event: AgentEvent, /) -> None:
        """Emit a redacted event to subscribers, ``on_event`` and the ledger."""
        ...

    def has_pending_steers(self) -> bool:
        """True when steered messages are queued. Optional."""
        ...

    async def apply_pending_steers(self) -> bool:
        """Drain the steer queue into history and store; True when anything was drained.
        Optional."""
        ...
