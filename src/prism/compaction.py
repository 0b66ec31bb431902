"""Compaction: summarising the older part of a session branch into one ``compaction`` entry.

A long session branch is shortened by appending a ``compaction`` entry whose summary stands for
the older entries, while the most recent messages are kept verbatim. This module holds:

* the settings and values — [`CompactionOptions`][prism.compaction.CompactionOptions], [`CompactionInput`][prism.compaction.CompactionInput],
  [`CompactionResult`][prism.compaction.CompactionResult], the [`CompactionStrategy`][prism.compaction.CompactionStrategy] callable type — and their
  validation ([`validate_compaction_options()`][prism.compaction.validate_compaction_options]) and resolution across the agent and run
  layers ([`resolve_compaction_options()`][prism.compaction.resolve_compaction_options]);
* what a compaction entry covers on a branch ([`latest_compaction_index()`][prism.compaction.latest_compaction_index],
  [`compaction_window()`][prism.compaction.compaction_window]), which history rebuilding also uses;
* the built-in strategy ([`default_compaction_strategy()`][prism.compaction.default_compaction_strategy]), the check for automatic
  compaction at run setup ([`should_auto_compact()`][prism.compaction.should_auto_compact]), running a strategy with the
  ``compaction`` middleware hook ([`compute_compaction()`][prism.compaction.compute_compaction]) and building the entry
  ([`compaction_entry()`][prism.compaction.compaction_entry]).

Emitting the ``compaction_started`` / ``compaction_finished`` events around a compaction, and
appending the entry, are the runtime's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from prism._util import maybe_await
from prism.abort import AbortSignal
from prism.errors import PrismConfigError
from prism.middleware import MiddlewareRegistry
from prism.session_entry import SessionEntry, new_session_entry
from prism.types import (
    ImageContent,
    JsonValue,
    Message,
    TextContent,
    ToolCallContent,
    ToolResultContent,
    _Options,
)
from prism.types._options import check_secrets_option, resolve_option_layers

__all__ = [
    "NO_OLDER_ENTRIES_SUMMARY",
    "CompactionInput",
    "CompactionOptions",
    "CompactionResult",
    "CompactionStrategy",
    "CompactionTrigger",
    "compaction_entry",
    "compaction_strategy_name",
    "compaction_window",
    "compute_compaction",
    "default_compaction_strategy",
    "latest_compaction_index",
    "resolve_compaction_options",
    "should_auto_compact",
    "validate_compaction_options",
]

CompactionTrigger: TypeAlias = Literal["auto", "manual"]
"""Why a compaction ran: automatically at run setup (``auto``) or through
``session.compact()`` (``manual``)."""

NO_OLDER_ENTRIES_SUMMARY: Final = "No older session entries to summarize."
"""Summary of the default strategy when nothing is older than the kept messages."""

_REDACTED: Final = "[REDACTED]"
_ELLIPSIS: Final = "…"


# --------------------------------------------------------------------------- options and values


@dataclass(frozen=True, slots=True)
class CompactionResult(_Options):
    """The outcome of a compaction strategy."""

    summary: str
    """Summary text stored in the ``compaction`` entry."""
    through_entry_id: str | None = None
    """Last summarised branch entry; ``None`` when nothing was summarised."""
    keep_entry_ids: tuple[str, ...] = ()
    """Ids of message entries kept verbatim."""

    def __post_init__(self) -> None:
        if not isinstance(self.keep_entry_ids, tuple):
            object.__setattr__(self, "keep_entry_ids", tuple(self.keep_entry_ids))


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionOptions(_Options):
    """Compaction settings of an agent, a run or ``session.compact()``.

    Validated where used ([`validate_compaction_options()`][prism.compaction.validate_compaction_options]).
    """

    threshold_entries: int | None = None
    """Auto-compact at run setup when the branch has more entries than this; ``None`` disables
    auto-compaction (``session.compact()`` still works)."""
    keep_recent_entries: int = 8
    """Message entries kept verbatim by the default strategy (≥ 0)."""
    max_summary_chars: int = 4000
    """Longest default summary in characters (≥ 1); longer ones are cut and end with ``…``."""
    strategy: CompactionStrategy | None = field(default=None, metadata={"serialize": False})
    """Custom strategy (sync or async); ``None`` means [`default_compaction_strategy()`][prism.compaction.default_compaction_strategy].
    Not serialised."""
    secrets: tuple[str, ...] = ()
    """Strings replaced by ``[REDACTED]`` in the default summary."""

    def __post_init__(self) -> None:
        if isinstance(self.secrets, list):
            object.__setattr__(self, "secrets", tuple(self.secrets))

    @classmethod
    def coerce(cls, value: CompactionOptions | Mapping[str, Any]) -> CompactionOptions:
        """Return ``value`` itself, or the options built from a snake_case mapping, which may
        carry ``strategy`` (a host callable, never serialised).

        Values are not validated here ([`validate_compaction_options()`][prism.compaction.validate_compaction_options] does).

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — not a mapping, or an unknown key.
        """
        return cls._coerce_as_given(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionInput(_Options):
    """What a compaction strategy receives."""

    session_id: str
    """The session being compacted."""
    entries: tuple[SessionEntry, ...]
    """The branch, root→leaf."""
    options: CompactionOptions
    """The effective compaction options."""
    signal: AbortSignal | None = field(default=None, metadata={"serialize": False})
    """The run signal; ``None`` outside a run (``session.compact()``)."""

    def __post_init__(self) -> None:
        if not isinstance(self.entries, tuple):
            object.__setattr__(self, "entries", tuple(self.entries))


CompactionStrategy: TypeAlias = Callable[
    [CompactionInput], "CompactionResult | Awaitable[CompactionResult]"
]
"""``strategy(input) -> CompactionResult`` (sync or async). A custom strategy must keep
a tool call and its results on the same side of the boundary. Its stored name is its ``name``
attribute, else its ``__name__``."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_compaction_options(
    value: CompactionOptions | Mapping[str, Any], *, label: str = "compaction"
) -> CompactionOptions:
    """Coerce and check compaction options.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown key; ``threshold_entries`` not
            ``None`` or an ``int`` ≥ 1; ``keep_recent_entries`` not an ``int`` ≥ 0;
            ``max_summary_chars`` not an ``int`` ≥ 1; ``strategy`` not ``None`` or callable;
            ``secrets`` not a sequence of ``str``.
    """
    options = CompactionOptions.coerce(value)
    threshold: Any = options.threshold_entries
    if threshold is not None and (not _is_int(threshold) or threshold < 1):
        raise PrismConfigError(
            f"{label}.threshold_entries must be None or an int >= 1, got {threshold!r}"
        )
    keep: Any = options.keep_recent_entries
    if not _is_int(keep) or keep < 0:
        raise PrismConfigError(f"{label}.keep_recent_entries must be an int >= 0, got {keep!r}")
    chars: Any = options.max_summary_chars
    if not _is_int(chars) or chars < 1:
        raise PrismConfigError(f"{label}.max_summary_chars must be an int >= 1, got {chars!r}")
    if options.strategy is not None and not callable(options.strategy):
        raise PrismConfigError(f"{label}.strategy must be None or callable")
    secrets: Any = options.secrets
    check_secrets_option(secrets, label)
    if not isinstance(secrets, tuple):
        options = dataclasses.replace(options, secrets=tuple(secrets))
    return options


def resolve_compaction_options(
    agent: CompactionOptions | Mapping[str, Any] | Literal[False] | None,
    run: CompactionOptions | Mapping[str, Any] | Literal[False] | None = None,
) -> CompactionOptions | None:
    """Resolve the effective compaction options from the agent and run layers.

    Run ``False`` disables compaction; a run [`CompactionOptions`][prism.compaction.CompactionOptions] replaces the agent value;
    a run mapping overrides only the keys it names on top of the agent value (or of the defaults
    when the agent sets none or ``False``); run ``None`` takes the agent value. When neither layer
    sets compaction the result is ``None`` (no compaction). ``session.compact(**options)`` passes
    its keyword arguments as the run mapping.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — a layer is invalid or of another type.
    """
    return resolve_option_layers(
        CompactionOptions,
        agent,
        run,
        validate=validate_compaction_options,
        label="compaction",
        unset=None,
    )


# --------------------------------------------------------------------------- what a compaction covers


def latest_compaction_index(branch: Sequence[SessionEntry]) -> int:
    """Index of the last ``compaction`` entry of ``branch`` (root first), or -1 when none."""
    for i in range(len(branch) - 1, -1, -1):
        if branch[i].kind == "compaction":
            return i
    return -1


def compaction_window(branch: Sequence[SessionEntry], ci: int) -> tuple[int, frozenset[str]]:
    """What the compaction entry at index ``ci`` of ``branch`` summarised.

    Returns ``(index of its through_entry_id on the branch, ids of the messages it kept)``.

    A missing ``through_entry_id`` (nothing summarised) gives -1; one not found on the branch
    falls back to the compaction entry itself.
    """
    data = branch[ci].data or {}
    through = data.get("through_entry_id")
    keep_raw = data.get("keep_entry_ids") or ()
    keep = (
        frozenset(k for k in keep_raw if isinstance(k, str))
        if isinstance(keep_raw, (list, tuple))
        else frozenset()
    )
    if not isinstance(through, str):
        return -1, keep
    for i in range(ci, -1, -1):
        if branch[i].id == through:
            return i, keep
    return ci, keep


# --------------------------------------------------------------------------- default strategy


def _render_message(message: Message) -> str:
    segments: list[str] = []
    text_run: list[str] = []
    for part in message.content:
        if isinstance(part, TextContent):
            text_run.append(part.text)
            continue
        marker: str | None
        if isinstance(part, ToolCallContent):
            marker = f"[tool_call {part.name}]"
        elif isinstance(part, ToolResultContent):
            marker = f"[tool_result {part.name}]"
        elif isinstance(part, ImageContent):
            marker = "[image]"
        else:
            marker = None  # thinking parts are not part of a message's text
        if marker is None:
            continue
        if text_run:
            segments.append("".join(text_run))
            text_run = []
        segments.append(marker)
    if text_run:
        segments.append("".join(text_run))
    return f"{message.role}: {' '.join(s for s in segments if s)}"


def _render_entry(entry: SessionEntry) -> str | None:
    kind = entry.kind
    if kind == "message":
        return _render_message(entry.message) if entry.message is not None else None
    if kind in ("summary", "compaction"):
        return f"summary: {entry.summary or ''}"
    if kind == "model_change":
        model = entry.model
        return f"model changed to {model.provider}/{model.model}" if model is not None else None
    return None  # custom entries are host-private


def _finish_summary(lines: Sequence[str], options: CompactionOptions) -> str:
    if not lines:
        return NO_OLDER_ENTRIES_SUMMARY
    text = "\n".join(lines)
    for secret in options.secrets:
        if secret:
            text = text.replace(secret, _REDACTED)
    limit = options.max_summary_chars
    if len(text) > limit:
        text = text[: max(0, limit - 1)] + _ELLIPSIS
    return text


def default_compaction_strategy(input: CompactionInput) -> CompactionResult:
    """The built-in compaction strategy.

    Keeps the last ``keep_recent_entries`` message entries of the live view, extended backwards
    while the first kept message is a tool-result message (so a result is never kept without the
    assistant message holding its call, nor a call without its results). Every older branch
    entry becomes one line: ``"<role>: <text>"`` for messages (tool calls render as
    ``[tool_call <name>]``, tool results as ``[tool_result <name>]``, images as ``[image]``;
    thinking is left out), ``"summary: …"`` for summary entries, ``"model changed to
    <provider>/<model>"`` for model changes (custom entries are skipped). Lines are joined by
    ``"\\n"``, ``options.secrets`` are replaced by ``[REDACTED]`` and the text is cut to
    ``max_summary_chars`` characters ending with ``…``. With nothing older the summary is
    ``"No older session entries to summarize."`` and ``through_entry_id`` is ``None``.

    When the branch already holds a compaction, the entries that compaction summarised are
    represented by one ``"summary: <its summary>"`` line (first) instead of being listed again.

    Returns:
        ``CompactionResult(summary, through_entry_id, keep_entry_ids)`` where
        ``through_entry_id`` is the branch entry just before the first kept message (the last
        entry when nothing is kept) and ``keep_entry_ids`` the ids of the kept messages.
    """
    branch = input.entries
    options = input.options
    ci = latest_compaction_index(branch)
    covered_until = -1
    prior_keep: frozenset[str] = frozenset()
    if ci >= 0:
        covered_until, prior_keep = compaction_window(branch, ci)

    def visible(i: int, e: SessionEntry) -> bool:
        if i == ci:
            return False  # represented by its own summary line
        if i <= covered_until:
            return e.kind == "message" and e.id in prior_keep
        return True

    view = [(i, e) for i, e in enumerate(branch) if visible(i, e)]
    messages = [(i, e) for i, e in view if e.kind == "message" and e.message is not None]
    keep_n = options.keep_recent_entries
    if keep_n > 0 and messages:
        start = max(0, len(messages) - keep_n)
        while start > 0:
            msg = messages[start][1].message
            if msg is None or msg.role != "tool":
                break
            start -= 1
        kept = messages[start:]
    else:
        kept = []
    first_kept = kept[0][0] if kept else len(branch)

    lines: list[str] = []
    if ci >= 0:
        lines.append(f"summary: {branch[ci].summary or ''}")
    for i, e in view:
        if i < first_kept or (e.kind == "summary" and i > first_kept):
            line = _render_entry(e)
            if line is not None:
                lines.append(line)
    through = branch[first_kept - 1].id if first_kept > 0 else None
    return CompactionResult(
        summary=_finish_summary(lines, options),
        through_entry_id=through,
        keep_entry_ids=tuple(e.id for _, e in kept),
    )


def compaction_strategy_name(strategy: object | None) -> str:
    """The stored ``data["strategy"]`` of a compaction: ``"default"`` for the built-in
    strategy, else the strategy's ``name`` attribute, else its ``__name__``, else its type name."""
    if strategy is None or strategy is default_compaction_strategy:
        return "default"
    name = getattr(strategy, "name", None)
    if isinstance(name, str) and name:
        return name
    dunder = getattr(strategy, "__name__", None)
    if isinstance(dunder, str) and dunder:
        return dunder
    return type(strategy).__name__


def should_auto_compact(options: CompactionOptions | None, branch: Sequence[SessionEntry]) -> bool:
    """Whether run setup compacts the branch automatically: ``threshold_entries`` is set, the branch has
    more entries than it, and the last entry is not a compaction. O(1)."""
    if options is None or options.threshold_entries is None:
        return False
    if len(branch) <= options.threshold_entries:
        return False
    return branch[-1].kind != "compaction"


def _coerce_result(value: object, where: str) -> CompactionResult:
    if isinstance(value, CompactionResult):
        return value
    if isinstance(value, Mapping):
        return CompactionResult.coerce(value)
    raise TypeError(f"{where} must return a CompactionResult, got {type(value).__name__}")


async def compute_compaction(
    *,
    session_id: str,
    entries: Sequence[SessionEntry],
    options: CompactionOptions,
    signal: AbortSignal | None = None,
    middleware: MiddlewareRegistry | None = None,
) -> CompactionResult:
    """Run the compaction strategy and the ``compaction`` middleware hook.

    The caller emits ``compaction_started`` before and, after appending
    [`compaction_entry()`][prism.compaction.compaction_entry], ``compaction_finished(summary)``; then rebuilds the history and
    applies ``drop_trailing_input()`` on an auto compaction.

    Args:
        session_id: The session.
        entries: The branch root→leaf.
        options: The effective options ([`resolve_compaction_options()`][prism.compaction.resolve_compaction_options]).
        signal: The run signal, ``None`` outside a run.
        middleware: The agent's registry; its ``compaction`` hook may replace the result.

    Returns:
        The final [`CompactionResult`][prism.compaction.CompactionResult] (a mapping result is converted).

    Raises:
        TypeError: the strategy or a handler returned something other than a result.
        Exception: whatever the strategy or a middleware handler raises.
    """
    strategy = options.strategy or default_compaction_strategy
    data = CompactionInput(
        session_id=session_id, entries=tuple(entries), options=options, signal=signal
    )
    result = _coerce_result(await maybe_await(strategy(data)), "compaction strategy")
    if middleware is not None and middleware.has("compaction"):
        result = _coerce_result(await middleware.run("compaction", result), "compaction middleware")
    return result


def compaction_entry(
    result: CompactionResult,
    *,
    session_id: str,
    options: CompactionOptions,
    trigger: CompactionTrigger,
    parent_id: str | None = None,
    run_id: str | None = None,
) -> SessionEntry:
    """Build the ``compaction`` entry for ``result``.

    ``data`` is ``{"through_entry_id", "keep_entry_ids", "strategy", "trigger"}``.

    Args:
        result: The (middleware-processed) result.
        session_id: The session.
        options: The options whose strategy produced ``result`` (names ``data["strategy"]``).
        trigger: ``"auto"`` (automatic, at run setup) or ``"manual"`` (``session.compact()``).
        parent_id: The session's leaf.
        run_id: The run, when inside one.
    """
    data: dict[str, JsonValue] = {
        "through_entry_id": result.through_entry_id,
        "keep_entry_ids": list(result.keep_entry_ids),
        "strategy": compaction_strategy_name(options.strategy),
        "trigger": trigger,
    }
    return new_session_entry(
        "compaction",
        session_id=session_id,
        parent_id=parent_id,
        run_id=run_id,
        summary=result.summary,
        data=data,
    )
