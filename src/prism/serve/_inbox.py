"""The approval inbox: every pending decision of the store as a card, and a decision's way back.

* [`inbox_cards()`][prism.serve._inbox.inbox_cards] — [`prism.runtime.durable.list_pending_decisions()`][prism.runtime.durable.list_pending_decisions] as the cards the
  inbox shows: run, agent, tool, the arguments as the tool will receive them (redacted, pretty
  JSON), since when it waits, the agent-tool chain of a sub-agent's call, the tool's parameter
  schema when this process knows the agent, what a decision does here (the route of
  [`prism.serve._decisions.DecisionService.route()`][prism.serve._decisions.DecisionService.route]), and a decision already recorded for it
  that waits to be applied;
* [`parse_arguments()`][prism.serve._inbox.parse_arguments] — edited arguments read as the runtime takes them: a JSON object of at
  most 16 KiB (the tool's schema is the decision service's to check);
* [`read_decision()`][prism.serve._inbox.read_decision] — a submitted form as the decision to make, or the problems that stop
  it;
* [`notice_of()`][prism.serve._inbox.notice_of] — what a decision came to (applied, recorded, sent to the engine, or lost a
  race to an earlier decision, with that decision's outcome, who made it and when), as the
  page says it — never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from prism.errors import PrismError
from prism.runtime.durable import DecidedApproval, PendingDecisionRecord, list_decided_approvals
from prism.serve._decisions import ArgumentsInvalidError, DecisionResult, DecisionService
from prism.serve._views import pretty_json

__all__ = [
    "OUTCOMES",
    "Card",
    "DecisionForm",
    "Notice",
    "inbox_cards",
    "notice_of",
    "notice_of_error",
    "parse_arguments",
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

_MODE_TITLES: Final = {
    "in_process": "Runs here",
    "cli": "Runs here",
    "engine": "Sent to the engine",
    "recorded": "Recorded",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Card:
    """One pending decision as the inbox shows it."""

    item: PendingDecisionRecord
    arguments: str
    """Pretty JSON of the arguments (the raw text when it was cut)."""
    editable: str
    """What the edit box starts with (empty when the arguments were cut)."""
    can_edit: bool
    """Whether the arguments may be changed (not for a child run's call)."""
    mode: str
    """``in_process``, ``cli``, ``engine`` or ``recorded``."""
    mode_title: str
    mode_text: str
    """What deciding does here, in a sentence or two."""
    schema: str | None
    """Pretty JSON of the tool's parameter schema, when this process knows it."""
    schema_note: str | None
    """Why the schema is not known here (or why the arguments cannot be changed)."""
    recorded: DecidedApproval | None
    """A decision already recorded for it that waits to be applied."""


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


async def inbox_cards(
    items: Sequence[PendingDecisionRecord], *, service: DecisionService, store: Any
) -> list[Card]:
    """The cards of ``items`` (reads the store; writes nothing)."""
    decided: dict[str, list[DecidedApproval]] = {}
    cards = []
    for item in items:
        shown, editable = _pretty_arguments(item.arguments, item.arguments_truncated)
        route = await service.route(item)
        check = await service.check_arguments(item, {})
        if item.run_id not in decided:
            try:
                decided[item.run_id] = await list_decided_approvals(store, item.run_id)
            except PrismError:
                decided[item.run_id] = []
        waiting = [
            d
            for d in decided[item.run_id]
            if d.approval_id == item.approval_id and d.applied_at is None
        ]
        cards.append(
            Card(
                item=item,
                arguments=shown,
                editable=editable,
                can_edit=not item.chain,
                mode=route.mode,
                mode_title=_MODE_TITLES.get(route.mode, route.mode),
                mode_text=route.sentence,
                schema=pretty_json(dict(check.schema)) if check.schema is not None else None,
                schema_note=check.note,
                recorded=waiting[-1] if waiting else None,
            )
        )
    return cards


def parse_arguments(text: str) -> tuple[dict[str, Any] | None, tuple[str, ...]]:
    """Edited arguments as an object, or the problems: longer than 16 KiB, not JSON (with the
    line and column), not an object."""
    if len(text.encode()) > MAX_ARGUMENTS_BYTES:
        return None, ("The arguments are longer than 16 KiB.",)
    try:
        value = json.loads(text)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        column = getattr(exc, "colno", None)
        where = f" (line {line}, column {column})" if line is not None else ""
        return None, (f"Not valid JSON: {getattr(exc, 'msg', str(exc))}{where}.",)
    if not isinstance(value, dict):
        return None, ("The arguments must be a JSON object ({…}).",)
    return value, ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionForm:
    """A submitted decision, checked."""

    run_id: str
    approval_id: str
    outcome: str
    reason: str | None
    modified_arguments: dict[str, Any] | None
    problems: tuple[str, ...]


def read_decision(form: Mapping[str, str]) -> DecisionForm:
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
        arguments, found = parse_arguments(form.get("arguments", ""))
        problems.extend(found)
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
    winner: DecidedApproval | None = None
    """For ``lost``: the decision that settled the approval first."""
    outcome: str = ""
    """The short outcome the decided card shows in place of its waiting badge ("Allowed once",
    "Rejected for this run", …); empty when nothing was decided."""
    outcome_tone: str = "ok"


_TITLES: Final = {
    "applied": ("The run goes on", "ok"),
    "recorded": ("Recorded", "ok"),
    "sent": ("Sent to the engine", "ok"),
    "lost": ("Someone decided first", "wait"),
    "refused": ("Not decided", "bad"),
}


def notice_of(result: DecisionResult) -> Notice:
    """The notice of a [`DecisionResult`][prism.serve._decisions.DecisionResult]; a lost race names the
    winning outcome, who decided and when."""
    title, tone = _TITLES.get(result.status, ("Decided", "ok"))
    detail = result.message
    if result.status == "lost" and result.decided is not None:
        winner = result.decided
        label = dict(OUTCOMES).get(winner.outcome, winner.outcome)
        by = f" by {winner.by}" if winner.by else ""
        waiting = "" if winner.applied_at else " (recorded, waiting to be applied)"
        detail = (
            f"This call was already decided: “{label}”{by} at {winner.decided_at}{waiting}. "
            "Yours was not applied."
        )
        return Notice(kind="lost", title=title, detail=detail, tone=tone, winner=winner)
    if result.code and result.status in ("recorded", "refused"):
        detail += f" ({result.code})"
    outcome, outcome_tone = "", "ok"
    if result.decided is not None and result.status in ("applied", "recorded", "sent"):
        outcome = _DONE.get(result.decided.outcome, result.decided.outcome)
        outcome_tone = "ok" if result.decided.outcome.startswith("allow") else "bad"
    if result.status == "applied" and result.decided is not None:
        # one sentence: what was decided, by whom, and that the run goes on
        by = f" by {result.decided.by}" if result.decided.by else ""
        title = f"{outcome}{by} — the run goes on"
        _, _, after = detail.partition(" in this process.")
        detail = after.strip()
    if result.status != "applied" and outcome:
        outcome = f"{outcome} (not applied yet)" if result.status == "recorded" else outcome
    return Notice(
        kind=result.status,
        title=title,
        detail=detail,
        tone=tone,
        outcome=outcome,
        outcome_tone=outcome_tone,
    )


_DONE: Final = {
    "allow_once": "Allowed once",
    "allow_for_run": "Allowed for this run",
    "reject_once": "Rejected once",
    "reject_for_run": "Rejected for this run",
}


def notice_of_error(exc: PrismError) -> Notice:
    """The notice of a decision the service refused before recording anything (arguments that
    fail the tool's schema, a reason too long, …)."""
    if isinstance(exc, ArgumentsInvalidError):
        listed = "; ".join(f"{p.path or '(the arguments)'}: {p.message}" for p in exc.problems)
        return Notice(
            kind="refused",
            title="The arguments do not match the tool's schema",
            detail=listed + ". Nothing was recorded.",
            tone="bad",
        )
    return Notice(kind="refused", title="Not decided", detail=f"{exc} ({exc.code})", tone="bad")
