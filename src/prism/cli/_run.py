"""``prism run PROMPT`` and ``prism resume RUN_ID``: durable runs over the command's store.

Every run the command starts is durable (``checkpoint_policy="every-turn"``, DUR-1/DUR-7), so it
can be continued by a later ``prism resume``:

* a run stopped by ``--max-turns N`` (a turn-policy ``Stop``: ``succeeded`` with
  ``stop_reason="host_policy"``, TP-8, DUR-23);
* a run waiting for an approval (``--approve-tools``, APR-1..APR-9): on a terminal the command
  asks for each tool call; otherwise it exits with code 3 and ``prism resume RUN_ID --approve`` or
  ``--deny`` decides later;
* a run whose process ended mid-turn (crash recovery from its ``running`` envelope, DUR-22).

``prism run --session ID`` continues a stored conversation with the session's stored settings
(options given on the command line win).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import Callable
from typing import IO, Any, Final, Literal

from prism.cli._render import JsonRenderer, LiveRenderer, PlainRenderer, Renderer
from prism.cli._settings import BuiltAgent, RunSettings, UsageError, build_agent
from prism.cli._settings import tool_choice_policy as tool_choice_policy
from prism.cli._store import (
    StoreError,
    check_run,
    last_run,
    load_settings,
    open_cli_store,
    save_settings,
    store_url,
)
from prism.errors import AgentRunError, CheckpointConflictError, PrismError
from prism.redaction import SecretRedactor, create_secret_redactor
from prism.runtime.durable import DecisionOutcome
from prism.types import RunResult, ToolCallContent

__all__ = [
    "DENIED_MESSAGE",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_SUSPENDED",
    "EXIT_USAGE",
    "RunCommand",
    "UsageError",
    "tool_choice_policy",
]

EXIT_OK: Final = 0
"""The run succeeded (also: stopped by ``--max-turns``, or denied on request)."""
EXIT_FAILED: Final = 1
"""The run failed or was aborted, or cannot be resumed."""
EXIT_USAGE: Final = 2
"""Invalid command line or configuration (bad ``--model``, missing key or extra, bad schema,
unusable store)."""
EXIT_SUSPENDED: Final = 3
"""The run is waiting for an approval: ``prism resume RUN_ID --approve`` (or ``--deny``)."""

_PREVIEW_CHARS = 200

_ANSWERS: Final[dict[str, DecisionOutcome]] = {
    "y": "allow_once",
    "yes": "allow_once",
    "a": "allow_for_run",
    "always": "allow_for_run",
    "n": "reject_once",
    "no": "reject_once",
    "": "reject_once",
}
"""Terminal answers to an approval question (APR-7 outcomes)."""


class RunCommand:
    """One ``prism run`` or ``prism resume`` invocation.

    Args:
        args: Parsed arguments (see ``prism.cli.build_parser``).
        out: Standard output.
        err: Standard error.
        live: Use the live terminal view (otherwise plain text); ignored with ``--json``.
        stdin: Where approval answers are read from (asked only when it is a terminal).
        environ: Environment for API keys, ``PRISM_MODEL``, ``PRISM_STORE`` and the data dir.
        provider_override: Test seam: a callable returning the provider to use instead of the
            one the model spec builds.
    """

    def __init__(
        self,
        args: argparse.Namespace,
        *,
        out: IO[str],
        err: IO[str],
        live: bool,
        stdin: IO[str] | None = None,
        environ: dict[str, str] | None = None,
        provider_override: Callable[[], Any] | None = None,
    ) -> None:
        self.args = args
        self.out = out
        self.err = err
        self.live = live
        self.stdin = stdin
        self.environ = dict(os.environ if environ is None else environ)
        self.provider_override = provider_override
        self.redactor: SecretRedactor = create_secret_redactor([])

    # ------------------------------------------------------------------ helpers

    def _redact(self, text: str) -> str:
        redacted: str = self.redactor.redact(text)
        return redacted

    def _renderer(self) -> Renderer:
        if self.args.json:
            return JsonRenderer(self.out, self.err)
        if self.live:
            try:
                return LiveRenderer()
            except ImportError as exc:
                raise UsageError(str(exc)) from None
        return PlainRenderer(self.out, self.err)

    @property
    def interactive(self) -> bool:
        """Approvals are asked on the terminal (stdin is a TTY and the output is not JSON)."""
        stdin = self.stdin
        isatty = getattr(stdin, "isatty", None)
        return not self.args.json and bool(isatty and isatty())

    def _build(self, settings: RunSettings, store: Any) -> BuiltAgent:
        built = build_agent(
            settings, store, environ=self.environ, provider_override=self.provider_override
        )
        self.redactor = built.redactor
        return built

    def _usage(self, message: str) -> int:
        self.err.write(f"prism: {self._redact(message)}\n")
        return EXIT_USAGE

    # ------------------------------------------------------------------ prism run

    async def run(self) -> int:
        """``prism run``: returns the process exit code (0, 1, 2 or 3)."""
        try:
            store = await open_cli_store(store_url(self.args.store, self.environ))
        except StoreError as exc:
            return self._usage(str(exc))
        try:
            return await self._run(store)
        except (UsageError, StoreError) as exc:
            return self._usage(str(exc))
        finally:
            await store.aclose()

    async def _run(self, store: Any) -> int:
        session_id: str | None = self.args.session
        base: RunSettings | None = None
        if session_id is not None:
            if not await store.list(session_id):
                raise UsageError(
                    f"no session {session_id} in this store (prism sessions list shows them)"
                )
            stored = await load_settings(store, session_id)
            if stored is not None:
                base = RunSettings.from_json(stored)
            previous = await last_run(store, session_id)
            if previous is not None and previous.blocks_session:
                raise UsageError(
                    f"session {session_id} has an unfinished run {previous.run_id} "
                    f"({previous.describe()}); continue it first: prism resume "
                    f"{previous.run_id}" + (" --approve" if previous.status == "suspended" else "")
                )
        settings = RunSettings.from_args(self.args, self.environ, base)
        built = self._build(settings, store)
        renderer = self._renderer()
        session = built.agent.create_session(session_id, on_event=renderer.event)
        await save_settings(store, session.id, settings.to_json())
        turn_policy = None
        max_turns = self.args.max_turns
        if max_turns is not None:
            if max_turns < 1:
                raise UsageError("--max-turns must be at least 1")
            turn_policy = _max_turns_policy(max_turns)
        with renderer:
            try:
                result = await session.run(self.args.prompt, turn_policy=turn_policy)
                result = await self._settle(session, result, renderer)
            except AgentRunError as exc:
                renderer.failed(self._redact(str(exc)))
                renderer.notice(f"session {session.id}")
                return EXIT_FAILED
            except PrismError as exc:
                renderer.failed(self._redact(str(exc)))
                return EXIT_USAGE if getattr(exc, "code", "") == "ERR_PRISM_CONFIG" else EXIT_FAILED
            return await self._outcome(session, result, renderer)

    # ------------------------------------------------------------------ prism resume

    async def resume(self) -> int:
        """``prism resume RUN_ID``: returns the process exit code (0, 1, 2 or 3)."""
        try:
            store = await open_cli_store(store_url(self.args.store, self.environ))
        except StoreError as exc:
            return self._usage(str(exc))
        try:
            return await self._resume(store)
        except (UsageError, StoreError) as exc:
            return self._usage(str(exc))
        finally:
            await store.aclose()

    async def _resume(self, store: Any) -> int:
        from prism.runtime.durable import RunDecision, resume_agent_run

        run_id: str = self.args.run_id
        loaded = await check_run(store, run_id)
        state = loaded.state
        session_id = str(state["session_id"])
        stored = await load_settings(store, session_id)
        if stored is None:
            raise UsageError(
                f"run {run_id} was not started by the prism command (no stored settings for "
                f"session {session_id})"
            )
        status = state["status"]
        policy_stop = status == "succeeded" and state.get("stop_reason") == "host_policy"
        choice: Literal["approve", "deny"] | None = (
            "approve" if self.args.approve else "deny" if self.args.deny else None
        )
        if status == "suspended":
            if choice is None and not self.interactive:
                raise UsageError(
                    f"run {run_id} is waiting for an approval; pass --approve or --deny"
                )
        elif status == "running" or policy_stop:
            if choice is not None:
                raise UsageError(f"run {run_id} is not waiting for an approval")
        else:
            self.err.write(f"prism: run {run_id} is {status} and cannot be resumed\n")
            return EXIT_FAILED
        built = self._build(RunSettings.from_json(stored), store)
        renderer = self._renderer()
        session = built.agent.create_session(session_id, on_event=renderer.event)
        with renderer:
            try:
                decisions: list[RunDecision] | None = None
                if status == "suspended" and choice is None:
                    decisions = await self._ask(session, renderer, state.get("interruption"))
                    if decisions is None:
                        renderer.notice(_waiting(run_id))
                        return EXIT_SUSPENDED
                if decisions is not None:
                    result = await resume_agent_run(
                        session, run_id, decisions=decisions,
                        expected_version=loaded.record.version,
                    )
                else:
                    result = await resume_agent_run(
                        session, run_id, decision=choice or "continue",
                        expected_version=loaded.record.version,
                    )
                result = await self._settle(session, result, renderer)
            except CheckpointConflictError:
                renderer.failed(f"run {run_id} was resumed by another process")
                return EXIT_FAILED
            except AgentRunError as exc:
                renderer.failed(self._redact(str(exc)))
                return EXIT_FAILED
            except PrismError as exc:
                renderer.failed(self._redact(str(exc)))
                return EXIT_FAILED
            return await self._outcome(session, result, renderer)

    # ------------------------------------------------------------------ shared

    async def _settle(self, session: Any, result: RunResult, renderer: Renderer) -> RunResult:
        """Approval rounds asked on the terminal until the run no longer waits (APR-5..APR-9)."""
        from prism.runtime.durable import resume_agent_run

        while result.status == "suspended" and self.interactive:
            interruption = result.interruption
            raw = None if interruption is None else interruption.to_dict()
            decisions = await self._ask(session, renderer, raw)
            if decisions is None:
                return result
            assert result.run_state is not None
            result = await resume_agent_run(session, result.run_state, decisions=decisions)
        return result

    async def _ask(self, session: Any, renderer: Renderer, interruption: Any) -> Any:
        """Ask for each pending tool call; ``None`` when the input ends before all answers."""
        from prism.runtime.durable import AgentRunInterruption, RunDecision

        if not isinstance(interruption, dict) or self.stdin is None:
            return None
        pending = AgentRunInterruption.from_dict(interruption).pending_decisions
        calls = await _stored_calls(session)
        decisions: list[RunDecision] = []
        renderer.pause()
        try:
            for item in pending:
                call = calls.get(item.tool_call_id)
                shown = _call_text(call) if call is not None else str(item.scope.tool_name)
                while True:
                    self.err.write(f"allow {self._redact(shown)}? [y]es / [n]o / [a]lways: ")
                    self.err.flush()
                    line = await asyncio.to_thread(self.stdin.readline)
                    if not line:
                        self.err.write("\n")
                        return None
                    outcome = _ANSWERS.get(line.strip().lower())
                    if outcome is not None:
                        break
                decisions.append(RunDecision(item.approval_id, outcome))
        finally:
            renderer.unpause()
        return decisions

    async def _outcome(self, session: Any, result: RunResult, renderer: Renderer) -> int:
        run_id = result.run_id
        if result.status == "suspended":
            interruption = result.interruption
            if interruption is not None and interruption.pending_decisions:
                calls = await _stored_calls(session)
                for item in interruption.pending_decisions:
                    call = calls.get(item.tool_call_id)
                    shown = _call_text(call) if call is not None else str(item.scope.tool_name)
                    renderer.notice(f"⏸ {self._redact(shown)} needs approval")
            renderer.notice(_waiting(run_id))
            renderer.notice(f"session {result.session_id} · run {run_id}")
            return EXIT_SUSPENDED
        if result.status == "denied":
            await _answer_denied(session.store, result)
            renderer.notice(f"run {run_id} denied; the tool call did not run")
            renderer.notice(f"session {result.session_id} · run {run_id}")
            return EXIT_OK
        renderer.succeeded(result.usage, result.artifact)
        if result.stop_reason == "host_policy":
            renderer.notice(f"stopped at --max-turns; continue with: prism resume {run_id}")
        renderer.notice(f"session {result.session_id} · run {run_id}")
        return EXIT_OK


DENIED_MESSAGE: Final = "The operator denied this tool call; it did not run."
"""Text of the rows that answer a denied run's tool calls."""


async def _answer_denied(store: Any, result: RunResult) -> None:
    """Answer a denied run's calls with ``approval_rejected`` rows under its leaf.

    A denial (DUR-21) stores no rows, so the session's branch would end in tool calls without
    results, which providers refuse on the next turn; the command, as the host, answers them so
    that ``prism run --session`` can continue the conversation.
    """
    from prism.store import new_session_entry
    from prism.types import ErrorInfo, ToolResult, tool_result_message

    interruption = result.interruption
    parent = result.leaf_id
    if interruption is None or parent is None:
        return
    for item in interruption.pending_decisions:
        row = tool_result_message(
            ToolResult(
                tool_call_id=item.tool_call_id,
                name=item.scope.tool_name or "tool",
                error=ErrorInfo(message=DENIED_MESSAGE, code="approval_rejected"),
            )
        )
        entry = new_session_entry(
            "message",
            session_id=result.session_id,
            parent_id=parent,
            run_id=result.run_id,
            message=row,
        )
        await store.append(entry, expected_parent_id=parent)
        parent = entry.id


def _max_turns_policy(limit: int) -> Any:
    """A clean, resumable stop after ``limit`` model turns (TP-6 ``Stop``: ``host_policy``)."""
    from prism.runtime.turn_policy import Continue, Stop, TurnPolicy

    def stop(ctx: Any) -> Any:
        return Stop(f"--max-turns {limit}") if ctx.turns >= limit else Continue()

    return TurnPolicy(stop=stop)


def _waiting(run_id: str) -> str:
    return (
        f"waiting for approval; decide with: prism resume {run_id} --approve "
        f"(or --deny)"
    )


def _call_text(call: ToolCallContent) -> str:
    text = json.dumps(call.arguments, ensure_ascii=False)
    text = " ".join(text.split())
    if len(text) > _PREVIEW_CHARS:
        text = text[: _PREVIEW_CHARS - 1] + "…"
    return f"{call.name}({text})"


async def _stored_calls(session: Any) -> dict[str, ToolCallContent]:
    """Tool calls on the session's branch by id (interruptions never carry arguments, APR-6)."""
    calls: dict[str, ToolCallContent] = {}
    for entry in await session.entries():
        message = entry.message
        if message is None or message.role != "assistant":
            continue
        for part in message.content:
            if isinstance(part, ToolCallContent):
                calls[part.id] = part
    return calls
