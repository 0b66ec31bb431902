"""The inspector's routes: one Starlette application over one store, built by
[`create_app()`][prism.serve._app.create_app] — one concept, the table of routes below and the
endpoint each names, kept together so a route's reads and the page it renders are found side by
side.

=====================================  ===========================================================
route                                  what it is
=====================================  ===========================================================
``GET /``                              redirects to ``/sessions``
``GET /sessions``                      sessions, filtered and paged, child sessions under parents
``GET /sessions/{session_id}``         one session: totals, runs, child sessions, transcript
``GET /runs``                          runs, newest first, filtered by agent and status
``GET /runs/{run_id}``                 a run: header, transcript, timeline and waterfall
``GET /runs/{run_id}/panels``          the run page's live part (HTML fragment)
``GET /runs/{run_id}/stream``          server-sent events of the run (``prism.serve._live``)
``GET /inbox``                         every pending decision, with the decision forms
``GET /inbox/list``                    the inbox's cards (HTML fragment)
``GET /inbox/stream``                  server-sent events when the pending set changes
``POST /inbox/validate``               check edited arguments against the tool's schema (JSON)
``POST /inbox/decide``                 decide one pending call (HTML, or JSON to ``fetch``)
``GET /usage``                         tokens and cost per day, per model, per agent
``GET|POST /login``, ``POST /logout``  the token → cookie exchange (only with a token)
``GET /static/…``                      the stylesheet and the script
=====================================  ===========================================================

Every page is rendered on the server by autoescaping Jinja templates; nothing from a run is
trusted as markup. The app writes to the store only through the decision service, to record or
apply decisions. A failure inside a page renders an error page with the error's code, never a
traceback.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from prism.checkpoints import CheckpointStore
from prism.errors import PrismConfigError, PrismError
from prism.inspection import (
    InspectionReader,
    LedgerRow,
    RunSummary,
    SessionFilter,
    SessionSummary,
    StoredEntry,
)
from prism.runtime import Agent
from prism.runtime.durable import (
    PendingDecisionRecord,
    list_decided_approvals,
    list_pending_decisions,
)
from prism.serve import _charts, _inbox, _live, _timeline, _views
from prism.serve._decisions import DecisionService
from prism.serve._security import COOKIE_NAME, SecurityMiddleware, SecurityPolicy

__all__ = ["create_app"]

_log = logging.getLogger("prism.serve")
_HERE: Final = Path(__file__).parent
_PAGE: Final = 50
_SESSION_RUNS: Final = 5
"""The latest runs a session page lists; the rest are on the runs page filtered to the session."""
_MAX_LEDGER_ROWS: Final = 20_000
_MAX_ENTRIES: Final = 20_000
_READ: Final = 10_000  # the most a read may ask; a read fetches that many of each ledger table
_STATUSES: Final = (
    "running",
    "suspended",
    "succeeded",
    "failed",
    "aborted",
    "denied",
    "queued",
    "ambiguous",
)
_RANGES: Final = (
    ("7d", "Last 7 days", 7),
    ("30d", "Last 30 days", 30),
    ("90d", "Last 90 days", 90),
)


@dataclass(slots=True)
class _Serve:
    """What every route reads: the store, the policy, the templates, the decision service."""

    store: Any
    reader: InspectionReader
    policy: SecurityPolicy
    env: Environment
    poll_interval: float
    decisions: DecisionService


def create_app(
    store: Any,
    *,
    agents: Mapping[str, Agent] | None = None,
    resume: bool = True,
    token: str | None = None,
    allowed_hosts: list[str] | tuple[str, ...] | None = None,
    poll_interval: float = 0.25,
    by: str = "prism serve",
    decisions: DecisionService | None = None,
) -> Starlette:
    """Build the inspector as an ASGI application (see [`prism.serve.create_app()`][prism.serve.create_app])."""
    if not isinstance(store, InspectionReader) or not isinstance(store, CheckpointStore):
        raise PrismConfigError(
            "store must implement prism.inspection.InspectionReader and "
            "prism.checkpoints.CheckpointStore (a SqliteStore or a PostgresStore), got "
            f"{type(store).__name__}"
        )
    if (
        isinstance(poll_interval, bool)
        or not isinstance(poll_interval, (int, float))
        or not math.isfinite(poll_interval)
        or not 0 < poll_interval <= 1.0
    ):
        raise PrismConfigError(
            f"poll_interval must be a number of seconds in (0, 1], got {poll_interval!r}"
        )
    if not isinstance(resume, bool):
        raise PrismConfigError(f"resume must be a bool, got {type(resume).__name__}")
    policy = SecurityPolicy.build(token=token, allowed_hosts=allowed_hosts)
    owned = decisions is None
    if decisions is None:
        decisions = DecisionService(store, agents=agents, resume=resume, by=by)
    elif not isinstance(decisions, DecisionService):
        raise PrismConfigError(
            f"decisions must be a DecisionService, got {type(decisions).__name__}"
        )
    elif agents is not None:
        raise PrismConfigError("give agents to the DecisionService passed as decisions=")
    env = Environment(
        loader=FileSystemLoader(_HERE / "templates"),
        autoescape=select_autoescape(["html"], default_for_string=True, default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        tokens=_views.format_tokens,
        cost=_views.format_cost,
        duration=_views.format_duration,
        tone=_views.status_tone,
    )
    env.globals.update(
        badge=_views.badge,
        waterfall_track=_charts.waterfall_track,
        axis_track=_charts.axis_track,
        meter=_charts.meter,
        outcomes=_inbox.OUTCOMES,
        outcome_labels=dict(_inbox.OUTCOMES),
        statuses=_STATUSES,
    )
    serve = _Serve(
        store=store,
        reader=store,
        policy=policy,
        env=env,
        poll_interval=float(poll_interval),
        decisions=decisions,
    )

    def page(
        handler: Callable[[_Serve, Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                return await handler(serve, request)
            except HTTPException:
                raise
            except PrismConfigError as exc:
                return await _error(serve, request, 400, "That request is not valid", exc)
            except Exception as exc:
                _log.error(
                    "prism serve: %s failed: %s: %s", request.url.path, type(exc).__name__, exc
                )
                return await _error(serve, request, 500, "This page could not be read", exc)

        return endpoint

    routes = [
        Route("/", page(_home)),
        Route("/sessions", page(_sessions)),
        Route("/sessions/{session_id}", page(_session)),
        Route("/runs", page(_runs)),
        Route("/runs/{run_id}", page(_run)),
        Route("/runs/{run_id}/panels", page(_run_panels)),
        Route("/runs/{run_id}/stream", page(_run_stream)),
        Route("/inbox", page(_inbox_page)),
        Route("/inbox/list", page(_inbox_list)),
        Route("/inbox/stream", page(_inbox_stream)),
        Route("/inbox/validate", page(_inbox_validate), methods=["POST"]),
        Route("/inbox/decide", page(_inbox_decide), methods=["POST"]),
        Route("/usage", page(_usage)),
        Route("/login", page(_login), methods=["GET", "POST"]),
        Route("/logout", page(_logout), methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=_HERE / "static"), name="static"),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        detail = getattr(exc, "detail", None) or "Not found"
        return await _error(serve, request, status, str(detail), None)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if owned:  # stop the runs it resumes here at their next turn boundary
                await serve.decisions.aclose()

    return Starlette(
        routes=routes,
        middleware=[Middleware(SecurityMiddleware, policy=policy)],
        exception_handlers={404: not_found, 405: not_found},
        lifespan=lifespan,
    )


# --------------------------------------------------------------------------- rendering


async def _pending(serve: _Serve, **filters: Any) -> list[PendingDecisionRecord] | None:
    if not hasattr(serve.store, "list_run_checkpoints"):
        return None
    try:
        return await list_pending_decisions(serve.store, limit=filters.pop("limit", 200), **filters)
    except PrismError:
        return None


async def _render(
    serve: _Serve, request: Request, name: str, status: int = 200, **context: Any
) -> HTMLResponse:
    if "pending_count" not in context:
        pending = await _pending(serve)
        context["pending_count"] = len(pending) if pending is not None else None
    context.update(request=request, path=request.url.path, token_auth=bool(serve.policy.token))
    return HTMLResponse(_html(serve, name, context), status_code=status)


def _fragment(serve: _Serve, name: str, **context: Any) -> HTMLResponse:
    return HTMLResponse(_html(serve, name, context))


def _html(serve: _Serve, name: str, context: dict[str, Any]) -> str:
    now = datetime.now(UTC)
    context.update(
        csrf_token=serve.policy.csrf_token,
        now=now,
        rel=lambda value: _views.relative_time(value, now),
        when=lambda value: _views.when(value, now),
        qs=_query,
    )
    return serve.env.get_template(name).render(context)


async def _error(
    serve: _Serve, request: Request, status: int, title: str, exc: Exception | None
) -> Response:
    code = getattr(exc, "code", None) if exc is not None else None
    message = str(exc) if isinstance(exc, PrismError) else ""
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse(
            {"ok": False, "title": title, "code": code, "message": message}, status_code=status
        )
    try:
        return await _render(
            serve, request, "error.html", status, title=title, code=code, message=message
        )
    except Exception:  # the error page itself failed: plain text, still no traceback
        return Response(f"{title}\n", status_code=status, media_type="text/plain")


def _query(base: Mapping[str, Any], **changes: Any) -> str:
    """A query string from ``base`` with ``changes`` (``None`` drops a key)."""
    merged = {k: v for k, v in {**base, **changes}.items() if v not in (None, "")}
    return ("?" + urlencode(merged)) if merged else ""


def _day(value: str | None) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        return None


def _iso(day: date) -> str:
    return f"{day.isoformat()}T00:00:00.000Z"


# --------------------------------------------------------------------------- sessions and runs


async def _home(serve: _Serve, request: Request) -> Response:
    return RedirectResponse("/sessions", status_code=303)


async def _sessions(serve: _Serve, request: Request) -> Response:
    q = request.query_params
    filters = {k: q.get(k, "").strip() for k in ("q", "agent", "status", "model", "since", "until")}
    since, until = _day(filters["since"]), _day(filters["until"])
    session_filter = SessionFilter(
        agent_id=filters["agent"] or None,
        status=filters["status"] or None,
        model=filters["model"] or None,
        since=_iso(since) if since else None,
        until=_iso(until + timedelta(days=1)) if until else None,
        text=filters["q"] or None,
        top_level=True,
    )
    cursor = q.get("cursor") or None
    listing = await serve.reader.list_session_summaries(
        filter=session_filter, cursor=cursor, limit=_PAGE
    )
    rows: list[tuple[SessionSummary, list[SessionSummary], bool]] = []
    for summary in listing.items:
        children = await serve.reader.list_session_summaries(
            filter=SessionFilter(parent_session_id=summary.session_id), limit=20
        )
        rows.append((summary, list(children.items), children.next_cursor is not None))
    shown = [r[0] for r in rows] + [c for r in rows for c in r[1]]
    return await _render(
        serve,
        request,
        "sessions.html",
        rows=rows,
        no_ledger=await _without_ledger(serve, shown),
        filters=filters,
        filtered=any(filters.values()),
        next_cursor=listing.next_cursor,
        first_page=cursor is None,
    )


async def _without_ledger(serve: _Serve, sessions: list[SessionSummary]) -> set[str]:
    """The sessions among ``sessions`` whose turns and tokens are unknown rather than zero:
    none counted, and their latest run wrote no ledger."""
    out: set[str] = set()
    for s in sessions:
        if s.turns or s.input_tokens or s.output_tokens or not s.last_run_id:
            continue
        run = await serve.reader.get_run_summary(s.last_run_id)
        if run is not None and not run.has_ledger:
            out.add(s.session_id)
    return out


async def _read_entries(serve: _Serve, session_id: str) -> list[StoredEntry]:
    out: list[StoredEntry] = []
    after = 0
    while len(out) < _MAX_ENTRIES:
        batch = await serve.reader.read_entries(session_id, after_seq=after, limit=_READ)
        out.extend(batch)
        if len(batch) < _READ:
            break
        after = batch[-1].seq
    return out


async def _session(serve: _Serve, request: Request) -> Response:
    session_id = request.path_params["session_id"]
    summary = await serve.reader.get_session_summary(session_id)
    if summary is None:
        raise HTTPException(404, f"No session {session_id} in this store")
    runs = await serve.reader.list_run_summaries(session_id=session_id, limit=_SESSION_RUNS)
    children = await serve.reader.list_session_summaries(
        filter=SessionFilter(parent_session_id=session_id), limit=200
    )
    entries = await _read_entries(serve, session_id)
    transcript, side_branches = _views.session_branches(entries)
    on_current = {item.run_id for item in transcript}
    other_branch_runs = {
        item.run_id for side in side_branches for item in side.items if item.run_id
    } - on_current
    parent = _parent_of(session_id)
    now = datetime.now(UTC)
    return await _render(
        serve,
        request,
        "session.html",
        session=summary,
        runs=runs.items,
        runs_with_duration=[(r, _timeline.run_duration_ms(r, now)) for r in runs.items],
        children=list(children.items),
        transcript=transcript,
        side_branches=side_branches,
        other_branch_runs=other_branch_runs,
        parent=parent,
        session_no_ledger=bool(await _without_ledger(serve, [summary])),
        no_ledger=await _without_ledger(serve, list(children.items)),
    )


async def _runs(serve: _Serve, request: Request) -> Response:
    q = request.query_params
    filters = {k: q.get(k, "").strip() for k in ("agent", "status", "session")}
    cursor = q.get("cursor") or None
    listing = await serve.reader.list_run_summaries(
        session_id=filters["session"] or None,
        agent_id=filters["agent"] or None,
        status=filters["status"] or None,
        cursor=cursor,
        limit=_PAGE,
    )
    now = datetime.now(UTC)
    return await _render(
        serve,
        request,
        "runs.html",
        runs=[(r, _timeline.run_duration_ms(r, now)) for r in listing.items],
        filters=filters,
        filtered=any(filters.values()),
        next_cursor=listing.next_cursor,
        first_page=cursor is None,
    )


def _parent_of(session_id: str) -> tuple[str, str] | None:
    """``(parent run id, tool call id)`` of a child session id ``<run id>.<tool call id>``."""
    run_id, dot, call_id = session_id.partition(".")
    return (run_id, call_id) if dot and run_id and call_id else None


@dataclass(frozen=True, slots=True)
class _RunData:
    run: RunSummary
    rows: list[LedgerRow]
    cursor: str | None
    entries: list[StoredEntry]
    children: dict[str, list[_timeline.ChildRun]]
    envelope: Mapping[str, Any] | None
    decided: list[Any]


async def _load_run(serve: _Serve, run_id: str) -> _RunData:
    run = await serve.reader.get_run_summary(run_id)
    if run is None:
        raise HTTPException(404, f"No run {run_id} in this store")
    rows: list[LedgerRow] = []
    cursor: str | None = None
    while len(rows) < _MAX_LEDGER_ROWS:
        sliced = await serve.reader.read_ledger(
            run_id, after=cursor, limit=_READ, event_types=_timeline.TIMELINE_EVENT_TYPES
        )
        rows.extend(sliced.rows)
        cursor = sliced.cursor
        if not sliced.has_more:
            break
    entries = await _read_entries(serve, run.session_id)
    sessions = await serve.reader.list_session_summaries(
        filter=SessionFilter(parent_session_id=run.session_id), limit=500
    )
    mine = [s for s in sessions.items if s.session_id.startswith(run_id + ".")]
    summaries: dict[str, RunSummary] = {}
    for child in mine:
        if child.last_run_id:
            found = await serve.reader.get_run_summary(child.last_run_id)
            if found is not None:
                summaries[child.last_run_id] = found
    children = _timeline.child_runs_by_call(run_id, mine, summaries)
    decided: list[Any] = []
    if hasattr(serve.store, "load_checkpoint"):
        with contextlib.suppress(PrismError):
            decided = list(await list_decided_approvals(serve.store, run_id))
    envelope = None
    if not rows and hasattr(serve.store, "load_checkpoint"):
        record = await serve.store.load_checkpoint(namespace="prism.agent-run", key=run_id)
        if record is not None and isinstance(record.value, Mapping):
            value = record.value
            envelope = {
                "status": value.get("status"),
                "version": record.version,
                "agent": value.get("agent_id"),
                "definition_revision": value.get("definition_revision"),
                "checkpoint_policy": value.get("checkpoint_policy"),
                "updated_at": record.updated_at,
            }
    return _RunData(run, rows, cursor, entries, children, envelope, decided)


def _run_context(data: _RunData) -> dict[str, Any]:
    now = datetime.now(UTC)
    run = data.run
    rejected = _timeline.rejected_calls(data.entries, run.run_id)
    timeline = _timeline.project_timeline(
        data.rows, run=run, children=data.children, decided=data.decided, rejected=rejected
    )
    waterfall = _charts.project_waterfall(
        timeline,
        started_at=timeline.started_at or run.started_at,
        finished_at=timeline.finished_at or run.finished_at,
        now=now,
        waiting=run.status == "suspended",
    )
    transcript = _views.project_transcript(data.entries, run_id=run.run_id)
    return {
        "run": run,
        "timeline": timeline,
        "waterfall": waterfall,
        "transcript": transcript,
        "duration_ms": _timeline.run_duration_ms(run, now),
        "live": run.status not in _views.FINAL_STATUSES,
        "cursor": data.cursor or "",
        "seq": data.entries[-1].seq if data.entries else 0,
        "envelope": data.envelope,
        "parent": _parent_of(run.session_id),
        "children_count": sum(len(v) for v in data.children.values()),
    }


async def _run(serve: _Serve, request: Request) -> Response:
    data = await _load_run(serve, request.path_params["run_id"])
    pending = await _pending(serve, run_id=data.run.run_id, limit=50) or []
    return await _render(serve, request, "run.html", pending=pending, **_run_context(data))


async def _run_panels(serve: _Serve, request: Request) -> Response:
    data = await _load_run(serve, request.path_params["run_id"])
    pending = await _pending(serve, run_id=data.run.run_id, limit=50) or []
    return _fragment(serve, "_run_panels.html", pending=pending, **_run_context(data))


async def _run_stream(serve: _Serve, request: Request) -> Response:
    run_id = request.path_params["run_id"]
    run = await serve.reader.get_run_summary(run_id)
    if run is None:
        raise HTTPException(404, f"No run {run_id} in this store")
    after = request.query_params.get("after") or None
    try:
        seq = max(int(request.query_params.get("seq", "0")), 0)
    except ValueError:
        seq = 0
    resumed = _live.decode_event_id(request.headers.get("last-event-id"))
    if resumed is not None:
        seq, after = resumed
    return _live.run_events(
        serve.reader,
        run_id=run_id,
        session_id=run.session_id,
        after=after,
        seq=seq,
        poll_interval=serve.poll_interval,
    )


# --------------------------------------------------------------------------- inbox


async def _inbox_context(serve: _Serve) -> dict[str, Any]:
    items = await _pending(serve)
    cards = (
        await _inbox.inbox_cards(items, service=serve.decisions, store=serve.store)
        if items is not None
        else []
    )
    return {
        "cards": cards,
        "supported": items is not None,
        "pending_count": len(items) if items is not None else None,
    }


async def _inbox_page(serve: _Serve, request: Request) -> Response:
    return await _render(serve, request, "inbox.html", notice=None, **await _inbox_context(serve))


async def _inbox_list(serve: _Serve, request: Request) -> Response:
    return _fragment(serve, "_inbox_cards.html", **await _inbox_context(serve))


async def _inbox_stream(serve: _Serve, request: Request) -> Response:
    async def ids() -> list[str]:
        items = await _pending(serve)
        return [item.approval_id for item in items or ()]

    return _live.inbox_events(ids, poll_interval=serve.poll_interval)


async def _form(request: Request) -> dict[str, str]:
    form = await request.form()
    return {k: v for k, v in form.items() if isinstance(v, str)}


def _wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


async def _pending_item(serve: _Serve, form: Mapping[str, str]) -> PendingDecisionRecord | None:
    run_id, approval_id = form.get("run_id", ""), form.get("approval_id", "")
    if not run_id or not approval_id:
        return None
    items = await _pending(serve, run_id=run_id, limit=1000) or []
    return next((item for item in items if item.approval_id == approval_id), None)


async def _inbox_validate(serve: _Serve, request: Request) -> Response:
    form = await _form(request)
    if not serve.policy.csrf_ok(form.get("csrf")):
        return JSONResponse({"ok": False, "problems": ["The form expired: reload."]}, 403)
    value, problems = _inbox.parse_arguments(form.get("arguments", ""))
    schema_known, note = False, None
    item = await _pending_item(serve, form)
    if value is not None and item is not None:
        check = await serve.decisions.check_arguments(item, value)
        schema_known, note = check.schema is not None, check.note
        problems = tuple(f"{p.path or '(the arguments)'}: {p.message}" for p in check.problems)
    elif item is None and value is not None:
        note = "This decision is no longer pending."
    return JSONResponse(
        {"ok": not problems, "problems": list(problems), "schema": schema_known, "note": note}
    )


async def _inbox_decide(serve: _Serve, request: Request) -> Response:
    form = await _form(request)
    if not serve.policy.csrf_ok(form.get("csrf")):
        notice = _inbox.Notice(
            kind="refused", title="The form expired", detail="Reload the page.", tone="bad"
        )
        return await _decided(serve, request, notice, 403)
    decision = _inbox.read_decision(form)
    if decision.problems:
        notice = _inbox.Notice(
            kind="refused", title="Not decided", detail=" ".join(decision.problems), tone="bad"
        )
        return await _decided(serve, request, notice, 422)
    try:
        result = await serve.decisions.decide(
            decision.run_id,
            decision.approval_id,
            decision.outcome,  # type: ignore[arg-type]  # checked by read_decision
            reason=decision.reason,
            modified_arguments=decision.modified_arguments,
        )
    except PrismError as exc:
        return await _decided(serve, request, _inbox.notice_of_error(exc), 422)
    notice = _inbox.notice_of(result)
    status = {"lost": 409, "refused": 409}.get(notice.kind, 200)
    return await _decided(serve, request, notice, status)


async def _decided(serve: _Serve, request: Request, notice: _inbox.Notice, status: int) -> Response:
    if _wants_json(request):
        return JSONResponse(
            {
                "ok": notice.kind not in ("refused",),
                "kind": notice.kind,
                "title": notice.title,
                "detail": notice.detail,
                "tone": notice.tone,
                "outcome": notice.outcome,
                "outcome_tone": notice.outcome_tone,
            },
            status_code=status,
        )
    return await _render(
        serve, request, "inbox.html", status, notice=notice, **await _inbox_context(serve)
    )


# --------------------------------------------------------------------------- usage


async def _usage(serve: _Serve, request: Request) -> Response:
    q = request.query_params
    today = datetime.now(UTC).date()
    preset = q.get("range", "30d")
    since_day, until_day = _day(q.get("since")), _day(q.get("until"))
    if since_day or until_day:
        preset = "custom"
    else:
        days = {key: n for key, _, n in _RANGES}.get(preset)
        if days is None:
            preset = "all"
        else:
            since_day, until_day = today - timedelta(days=days - 1), today
    if since_day and until_day and since_day > until_day:
        since_day, until_day = until_day, since_day
    since = _iso(since_day) if since_day else None
    until = _iso(until_day + timedelta(days=1)) if until_day else None
    by_day = list(await serve.reader.usage_report(group_by="day", since=since, until=until))
    by_model = list(await serve.reader.usage_report(group_by="model", since=since, until=until))
    by_agent = list(await serve.reader.usage_report(group_by="agent", since=since, until=until))
    days_shown = _fill_days(by_day, since_day, until_day)
    token_scale = _charts.bar_scale([float(b.input_tokens + b.output_tokens) for b in days_shown])
    costs = [b.cost for b in days_shown if b.cost is not None]
    cost_scale = _charts.bar_scale([float(c) for c in costs])
    token_chart = _charts.usage_columns(
        [
            _charts.ColumnDatum(b.key, (float(b.input_tokens), float(b.output_tokens)))
            for b in days_shown
        ],
        label="Tokens per day, input and output stacked",
        series=("input", "output"),
        scale=token_scale,
    )
    cost_chart = (
        _charts.usage_columns(
            [_charts.ColumnDatum(b.key, (float(b.cost or 0.0),)) for b in days_shown],
            label="Cost per day",
            series=("cost",),
            scale=cost_scale,
            cost=True,
        )
        if costs
        else None
    )
    total_in = sum(b.input_tokens for b in by_day)
    total_out = sum(b.output_tokens for b in by_day)
    day_costs = [b.cost for b in by_day if b.cost is not None]
    return await _render(
        serve,
        request,
        "usage.html",
        preset=preset,
        ranges=_RANGES,
        since=since_day.isoformat() if since_day else "",
        until=until_day.isoformat() if until_day else "",
        days=days_shown,
        by_model=by_model,
        by_agent=by_agent,
        token_chart=token_chart,
        token_scale=token_scale,
        cost_chart=cost_chart,
        cost_scale=cost_scale,
        totals={
            "input": total_in,
            "output": total_out,
            "turns": sum(b.turns for b in by_day),
            "cost": sum(day_costs) if day_costs else None,
        },
        model_scale=_charts.bar_scale([float(b.input_tokens + b.output_tokens) for b in by_model]),
        agent_scale=_charts.bar_scale([float(b.input_tokens + b.output_tokens) for b in by_agent]),
    )


def _fill_days(buckets: list[Any], since: date | None, until: date | None) -> list[Any]:
    """Day buckets with the days that had no usage filled in (zero), when the range is known
    and at most 400 days long."""
    from prism.inspection import UsageBucket

    if since is None or until is None or (until - since).days > 400:
        return buckets
    known = {b.key: b for b in buckets}
    out = []
    day = since
    while day <= until:
        key = day.isoformat()
        out.append(
            known.get(key)
            or UsageBucket(key=key, turns=0, input_tokens=0, output_tokens=0, cost=None)
        )
        day += timedelta(days=1)
    return out


# --------------------------------------------------------------------------- login


def _safe_next(value: str | None) -> str:
    if value and value.startswith("/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/sessions"


async def _login(serve: _Serve, request: Request) -> Response:
    policy = serve.policy
    target = _safe_next(request.query_params.get("next"))
    if policy.token is None:
        return RedirectResponse(target, status_code=303)
    error = None
    if request.method == "POST":
        form = await _form(request)
        target = _safe_next(form.get("next"))
        if not policy.csrf_ok(form.get("csrf")):
            error = "The form expired: try again."
        elif policy.token_ok(form.get("token", "")):
            response = RedirectResponse(target, status_code=303)
            assert policy.session_value is not None
            response.set_cookie(
                COOKIE_NAME,
                policy.session_value,
                httponly=True,
                samesite="strict",
                secure=request.url.scheme == "https",
                path="/",
            )
            return response
        else:
            error = "That is not the token this server was started with."
    return await _render(
        serve,
        request,
        "login.html",
        401 if error else 200,
        next_path=target,
        error=error,
        pending_count=None,
    )


async def _logout(serve: _Serve, request: Request) -> Response:
    form = await _form(request)
    if not serve.policy.csrf_ok(form.get("csrf")):
        return await _error(serve, request, 403, "The form expired: reload the page", None)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="strict")
    return response
