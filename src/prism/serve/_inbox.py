"""The approval inbox: every pending decision of the store as a card, and a decision's way back.

* :func:`inbox_cards` — :func:`prism.runtime.durable.list_pending_decisions` as the cards the
  inbox shows: run, agent, tool, the arguments as the tool will receive them (redacted, pretty
  JSON), since when it waits, the agent-tool chain of a sub-agent's call, the tool's parameter
  schema when the server knows the agent, and what a decision does here (its *mode*);
* :func:`check_arguments` — edited arguments checked as the runtime will check them: a JSON
  object of at most 16 KiB, valid against the tool's schema when it is known (each problem with
  its JSON path);
* :func:`read_decision` — a submitted form as the decision to make, or the problems that stop
  it;
* :func:`notice_of` — what a decision came to (applied, recorded, sent to the engine, or lost a
  race to an earlier decision, with that decision's outcome, who made it and when), as the
  page says it — never a traceback.

Deciding itself is :class:`prism.serve._decisions.DecisionService`'s; this module only shapes
what goes in and out of it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

import jsonschema

from prism.runtime.durable import PendingDecisionRecord
from prism.serve._views import pretty_json

__all__ = [
    "OUTCOMES",
    "ArgumentCheck",
    "Card",
    "DecisionForm",
    "DecisionPort",
    "Notice",
    "check_arguments",
    "inbox_cards",
    "notice_of",
    "read_decision",
]

OUTCOMES: Final = (
    ("allow_once", "Allow once"),
    ("allow_for_run", "Allow for this run"),
    ("reject_once", "Reject once"),
    ("reject_for_run", "Reject for this run"),
)
"""Every ``DecisionOutcome`` with its label, in the order the form offers them."""
MAX_ARGUMENTS_BYTES: Final = 16 * 1024
"""Largest edited argument object (UTF-8 JSON), as ``RunDecision.modified_arguments`` allows."""
MAX_REASON_BYTES: Final = 2048
"""Longest reason, as ``RunDecision.reason`` allows."""

_MODES: Final = {
    "in_process": (
        "Runs here",
        "Approving runs the tool inside this prism serve process (started with --agents), "
        "then the run continues here.",
    ),
    "engine": (
        "Sent to the engine",
        "The decision is sent to the engine: a DBOS worker resumes the run.",
    ),
    "recorded": (
        "Recorded",
        "The decision is recorded in the store; the run's own process (or prism resume) "
        "applies it when it resumes.",
    ),
}


class DecisionPort(Protocol):
    """What the inbox needs of a decision service."""

    def mode(self, pending: PendingDecisionRecord) -> Any:
        """How a decision on ``pending`` takes effect."""
        ...

    async def decide(
        self,
        run_id: str,
        approval_id: str,
        outcome: str,
        *,
        reason: str | None = None,
        modified_arguments: dict[str, Any] | None = None,
    ) -> Any:
        """Make the decision; the result says whether it applied, was recorded, was sent to
        the engine or lost a race."""
        ...


def _mode_key(value: Any) -> str:
    text = str(getattr(value, "value", value) or "").lower()
    if text in ("in_process", "agents", "applied", "apply", "local", "run", "resume"):
        return "in_process"
    if text in ("engine", "dbos", "sent", "send"):
        return "engine"
    return "recorded"


@dataclass(frozen=True, slots=True, kw_only=True)
class Card:
    """One pending decision as the inbox shows it."""

    item: PendingDecisionRecord
    arguments: str
    """Pretty JSON of the arguments (the raw text when it was cut)."""
    editable: str
    """What the edit box starts with (empty when the arguments were cut)."""
    chain: tuple[str, ...]
    """``agent (tool call)`` per agent-tool call from the run down to the calling child."""
    mode: str
    """``in_process``, ``engine`` or ``recorded``."""
    mode_title: str
    mode_text: str
    schema: str | None
    """Pretty JSON of the tool's parameter schema, when known."""


def _pretty_arguments(text: str | None, truncated: bool) -> tuple[str, str]:
    if text is None:
        return "(not stored: the run was suspended by an older version)", ""
    if truncated:
        return text, ""
    try:
        value = json.loads(text)
    except ValueError:
        return text, ""
    pretty = pretty_json(value)
    return pretty, pretty


def inbox_cards(
    items: Sequence[PendingDecisionRecord],
    *,
    port: DecisionPort | None,
    schemas: Mapping[str, Mapping[str, Any]],
) -> list[Card]:
    """The cards of ``items``; ``schemas`` maps an approval id to its tool's parameter schema
    (when the server knows the agent)."""
    cards = []
    for item in items:
        shown, editable = _pretty_arguments(item.arguments, item.arguments_truncated)
        key = _mode_key(port.mode(item)) if port is not None else "recorded"
        title, text = _MODES[key]
        schema = schemas.get(item.approval_id)
        cards.append(
            Card(
                item=item,
                arguments=shown,
                editable=editable,
                chain=tuple(f"{link.agent} ({link.tool_call_id})" for link in item.chain),
                mode=key,
                mode_title=title,
                mode_text=text,
                schema=pretty_json(dict(schema)) if schema is not None else None,
            )
        )
    return cards


@dataclass(frozen=True, slots=True)
class ArgumentCheck:
    """The outcome of :func:`check_arguments`."""

    value: dict[str, Any] | None
    """The parsed object, when it passed."""
    problems: tuple[str, ...]
    """What is wrong (empty when it passed)."""
    schema_known: bool


def check_arguments(text: str, schema: Mapping[str, Any] | None) -> ArgumentCheck:
    """Check edited arguments: JSON, an object, at most 16 KiB, valid against ``schema``."""
    known = schema is not None
    if len(text.encode()) > MAX_ARGUMENTS_BYTES:
        return ArgumentCheck(None, ("The arguments are longer than 16 KiB.",), known)
    try:
        value = json.loads(text)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        column = getattr(exc, "colno", None)
        where = f" (line {line}, column {column})" if line is not None else ""
        message = getattr(exc, "msg", str(exc))
        return ArgumentCheck(None, (f"Not valid JSON: {message}{where}.",), known)
    if not isinstance(value, dict):
        return ArgumentCheck(None, ("The arguments must be a JSON object ({…}).",), known)
    if schema is not None:
        try:
            validator = jsonschema.validators.validator_for(schema)(schema)
            errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        except jsonschema.exceptions.SchemaError:
            errors = []
        if errors:
            return ArgumentCheck(
                None,
                tuple(
                    f"{'/'.join(str(p) for p in e.absolute_path) or '(top level)'}: {e.message}"
                    for e in errors[:10]
                ),
                known,
            )
    return ArgumentCheck(value, (), known)


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionForm:
    """A submitted decision, checked."""

    run_id: str
    approval_id: str
    outcome: str
    reason: str | None
    modified_arguments: dict[str, Any] | None
    problems: tuple[str, ...]


def read_decision(form: Mapping[str, str], schema: Mapping[str, Any] | None) -> DecisionForm:
    """Read a decision form: ``run_id``, ``approval_id``, ``outcome``, ``reason``, and — with
    ``edit`` on an allowing outcome — ``arguments``."""
    run_id = form.get("run_id", "").strip()
    approval_id = form.get("approval_id", "").strip()
    outcome = form.get("outcome", "").strip()
    reason = form.get("reason", "").strip() or None
    problems: list[str] = []
    if not run_id or not approval_id:
        problems.append("The form names no pending decision.")
    if outcome not in dict(OUTCOMES):
        problems.append("Choose an outcome.")
    if reason is not None and len(reason.encode()) > MAX_REASON_BYTES:
        problems.append("The reason is longer than 2048 bytes.")
    arguments: dict[str, Any] | None = None
    if form.get("edit") and outcome.startswith("allow"):
        check = check_arguments(form.get("arguments", ""), schema)
        problems.extend(check.problems)
        arguments = check.value
    return DecisionForm(
        run_id=run_id,
        approval_id=approval_id,
        outcome=outcome,
        reason=reason,
        modified_arguments=arguments,
        problems=tuple(problems),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice:
    """What a decision came to, as the page says it."""

    kind: str
    """``applied``, ``recorded``, ``sent``, ``lost`` or ``refused``."""
    title: str
    detail: str = ""
    tone: str = "ok"


def _first(value: Any, *names: str) -> Any:
    for name in names:
        found = value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)
        if found is not None:
            return found
    return None


def notice_of(result: Any) -> Notice:
    """The notice of a decision service's result (see the module docstring)."""
    kind = str(_first(result, "kind", "status", "result") or "recorded").lower()
    winner = _first(result, "winner", "existing", "recorded_decision")
    if winner is None:
        decided = _first(result, "decided")
        if isinstance(decided, Sequence) and not isinstance(decided, str) and decided:
            winner = decided[0]
    if kind in ("lost", "lost_race", "conflict", "already_decided") or winner is not None:
        outcome = _first(winner, "outcome") if winner is not None else None
        by = _first(winner, "by", "decided_by") if winner is not None else None
        when = _first(winner, "decided_at", "at", "time") if winner is not None else None
        label = dict(OUTCOMES).get(str(outcome), str(outcome or "another decision"))
        parts = [f"“{label}”"]
        if by:
            parts.append(f"by {by}")
        if when:
            parts.append(f"at {when}")
        return Notice(
            kind="lost",
            title="Someone decided first",
            detail="This call was already decided: " + " ".join(parts) + ". Yours was not applied.",
            tone="wait",
        )
    if kind in ("applied", "resumed", "in_process"):
        status = _first(result, "run_status")
        detail = f"The run continued here and is now {status}." if status else ""
        return Notice(kind="applied", title="Applied: the run continued", detail=detail)
    if kind in ("sent", "engine", "sent_to_engine"):
        return Notice(
            kind="sent", title="Sent to the engine", detail="A worker resumes the run with it."
        )
    return Notice(
        kind="recorded",
        title="Recorded",
        detail="The run's own process applies it when the run resumes.",
    )
