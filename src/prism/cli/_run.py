"""``prism run PROMPT`` and ``prism resume RUN_ID``: durable runs over the command's store.

Every run the command starts is durable (``checkpoint_policy="every-turn"``), so it
can be continued by a later ``prism resume``:

* a run stopped at a turn boundary by ``--max-turns N`` or by a first Ctrl-C (a turn-policy
  ``Stop``: ``succeeded`` with ``stop_reason="host_policy"``);
* a run waiting for an approval (``--approve-tools``): on a terminal the command
  asks for each tool call; otherwise it exits with code 3 and ``prism resume RUN_ID --approve`` or
  ``--deny`` decides later — or ``prism resume RUN_ID --recorded`` applies the decisions another
  process recorded for it (an approval inbox that could not run the tool itself);
* a run whose process ended mid-turn (crash recovery from its ``running`` envelope).

Each run also writes its run ledger (run rows, events, tool calls, usage) to the store, so an
inspector shows its timeline (``InspectionReader``).

``prism run --session ID`` continues a stored conversation with the session's stored settings
(options given on the command line win). ``prism run -`` reads the prompt from standard input.

Everything the command line can get wrong is checked before a store is opened or a session
created (exit 2, nothing stored): numbers out of range, options that do not apply
(``--max-revisions`` without ``--loop gvr``, ``--api-key-env`` with a model that is not
``openai-compatible``), an empty prompt, a bad ``--model`` (missing key, ``local:PATH`` that is
not a GGUF file), a ``--tool MODULE:ATTR`` that cannot be loaded. A model server that cannot be
reached is found before the run starts (one TCP connection, ``prism.cli._reachable``): the
command fails (exit 1) and stores nothing, so no session holding only the prompt is left behind.

Outcomes (exit codes; ``--json`` ends with a ``run_result`` line saying the same):

=====  ===========================================================================================
0      done: succeeded, stopped by ``--max-turns`` (resumable), or denied with ``--deny``
1      the run failed or was aborted
2      usage, configuration or store error; a run that cannot be resumed (finished, failed, …)
3      the run waits for an approval
130    Ctrl-C: stopped at a turn boundary (resumable), aborted, or an approval question left open
141    the output was closed (``prism run … | head``): the run was aborted, nothing more printed
=====  ===========================================================================================
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import json
import os
import socket
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Final, Literal, cast
from urllib.parse import urlsplit

from prism.abort import AbortController
from prism.cli._approval_prompt import ApprovalPrompt, calls_in, waiting_lines
from prism.cli._exit_codes import EXIT_FAILED, EXIT_USAGE, PIPE_ABORT_REASON
from prism.cli._interrupt import Interrupts
from prism.cli._models import ModelChoice
from prism.cli._render import (
    JsonRenderer,
    LiveRenderer,
    PipeGuard,
    PlainRenderer,
    Renderer,
    guard,
)
from prism.cli._report import RunReport
from prism.cli._settings import (
    BuiltAgent,
    RunSettings,
    UsageError,
    build_agent,
    check_model,
    check_number_options,
)
from prism.cli._store import (
    StoreError,
    check_run,
    display_url,
    is_default_store,
    last_run,
    load_run,
    load_settings,
    open_cli_store,
    python_resume_text,
    redact_store_text,
    save_settings,
    store_url,
)
from prism.errors import AgentRunError, AgentRunStateError, CheckpointConflictError, PrismError
from prism.redaction import SecretRedactor, create_secret_redactor
from prism.runtime.durable import RunDecision, not_resumable_message, resume_agent_run
from prism.runtime.durable._run_envelope import RunEnvelope
from prism.stores import DatabaseStore
from prism.types import RunResult
from prism.usage import UsageAccumulator

if TYPE_CHECKING:
    from prism import AgentSession
    from prism.providers.base import AIProvider

__all__ = [
    "RunCommand",
    "UsageError",
]


class _Waiting(Exception):
    """``prism resume`` of a waiting run stopped asking before every call was decided."""


class RunCommand:
    """One ``prism run`` or ``prism resume`` invocation.

    Args:
        args: Parsed arguments (see ``prism.cli.build_parser``).
        out: Standard output (wrapped in a ``PipeGuard`` unless it is one).
        err: Standard error (likewise).
        live: Use the live terminal view (otherwise plain text); ignored with ``--json``.
        stdin: Where approval answers (and the prompt of ``prism run -``) are read from; answers
            are asked only when it is a terminal.
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
        provider_override: Callable[[], AIProvider] | None = None,
    ) -> None:
        self.args = args
        self.out = guard(out)
        self.err = guard(err)
        self.live = live
        self.stdin = stdin
        self.environ = dict(os.environ if environ is None else environ)
        self.provider_override = provider_override
        self.redactor: SecretRedactor = create_secret_redactor([])
        self.url = store_url(args.store, self.environ)
        self.controller = AbortController()
        self.interrupts = Interrupts(self.controller, self._notify)
        self.broken = False
        """Standard output or error was closed by its reader."""
        self._usage = UsageAccumulator()
        self._renderer: Renderer | None = None
        self._choice: ModelChoice | None = None
        self._stdin_used = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._approvals = ApprovalPrompt(
            stdin=stdin,
            err=self._io(self.err),
            interrupts=self.interrupts,
            redact=self._redact,
            broken=lambda: self.broken,
        )
        self.out.on_broken(self._pipe_closed)
        self.err.on_broken(self._pipe_closed)

    # ------------------------------------------------------------------ helpers

    def _redact(self, text: str) -> str:
        redacted: str = self.redactor.redact(redact_store_text(text, self.url))
        return redacted

    def _bind_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()

    def _pipe_closed(self) -> None:
        """A reader closed our output: abort the run (from whichever thread wrote)."""
        self.broken = True
        loop = self._loop
        if loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            self.controller.abort(PIPE_ABORT_REASON)
            return
        try:
            loop.call_soon_threadsafe(self.controller.abort, PIPE_ABORT_REASON)
        except RuntimeError:  # the loop is closed
            pass

    def _notify(self, text: str) -> None:
        renderer = self._renderer
        if renderer is not None:
            renderer.notice(text)
        else:
            self.err.write(f"prism: {text}\n")
            self.err.flush()

    def _make_renderer(self) -> Renderer:
        renderer: Renderer
        if self.args.json:
            renderer = JsonRenderer(self._io(self.out), self._io(self.err))
        elif self.live:
            try:
                renderer = LiveRenderer(file=self.out)
            except ImportError as exc:
                raise UsageError(str(exc)) from None
        else:
            renderer = PlainRenderer(self._io(self.out), self._io(self.err))
        self._renderer = renderer
        return renderer

    @staticmethod
    def _io(stream: PipeGuard) -> IO[str]:
        return cast("IO[str]", stream)

    @property
    def interactive(self) -> bool:
        """Approvals are asked on the terminal (stdin is a TTY not used for the prompt, and the
        output is not JSON)."""
        stdin = self.stdin
        isatty = getattr(stdin, "isatty", None)
        return not self.args.json and not self._stdin_used and bool(isatty and isatty())

    def _build(self, settings: RunSettings, store: DatabaseStore) -> BuiltAgent:
        built = build_agent(
            settings, store, environ=self.environ, provider_override=self.provider_override
        )
        self.redactor = built.redactor
        self._choice = built.choice
        return built

    def _usage_error(self, message: str) -> int:
        self.err.write(f"prism: {self._redact(message)}\n")
        self.err.flush()
        return EXIT_USAGE

    async def _with_store(
        self, body: Callable[[DatabaseStore], Awaitable[int]], *, create: bool
    ) -> int:
        try:
            store = await open_cli_store(
                self.url,
                create=create,
                create_folder=create and is_default_store(self.args.store, self.environ),
            )
        except StoreError as exc:
            return self._usage_error(str(exc))
        try:
            return await body(store)
        except (UsageError, StoreError) as exc:
            return self._usage_error(str(exc))
        finally:
            await store.aclose()

    # ------------------------------------------------------------------ prism run

    async def run(self) -> int:
        """``prism run``: returns the process exit code (see the module docstring)."""
        self._bind_loop()
        try:
            check_number_options(self.args)
            prompt = self._prompt()
            settings: RunSettings | None = None
            if self.args.session is None:
                settings = RunSettings.from_args(self.args, self.environ)
                check_model(settings, self.environ)
        except UsageError as exc:
            return self._usage_error(str(exc))

        async def body(store: DatabaseStore) -> int:
            return await self._run(store, prompt, settings)

        # continuing a session needs an existing store; a new conversation may create it
        return await self._with_store(body, create=self.args.session is None)

    def _prompt(self) -> str:
        """The prompt argument, or standard input for ``-``.

        Raises:
            UsageError: the prompt is empty or whitespace only.
        """
        prompt: str = self.args.prompt
        source = ""
        if prompt == "-":
            if self.stdin is None:
                raise UsageError("prism run -: there is no standard input to read the prompt from")
            prompt = self.stdin.read()
            self._stdin_used = True
            source = " (nothing was read from standard input)"
            if prompt.endswith("\n"):
                prompt = prompt[:-2] if prompt.endswith("\r\n") else prompt[:-1]
        if not prompt.strip():
            raise UsageError(f"the prompt is empty{source}")
        return prompt

    async def _run(self, store: DatabaseStore, prompt: str, settings: RunSettings | None) -> int:
        session_id: str | None = self.args.session
        if session_id is not None:
            if not await store.list(session_id):
                raise UsageError(
                    f"no session {session_id} in this store (prism sessions list shows them)"
                )
            base: RunSettings | None = None
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
        assert settings is not None
        if self.provider_override is None:
            unreachable = await check_endpoint(
                check_model(settings, self.environ).endpoint, self.environ
            )
            if unreachable is not None:
                return self._unreachable(store, session_id, settings, unreachable)
        built = self._build(settings, store)
        renderer = self._make_renderer()
        session = built.agent.create_session(session_id, on_event=renderer.event)
        await save_settings(store, session.id, settings.to_json())
        policy = self.interrupts.turn_policy(self.args.max_turns)

        async def first() -> RunResult:
            self.interrupts.policy_leg = True
            try:
                result: RunResult = await session.run(
                    prompt, turn_policy=policy, signal=self.controller.signal
                )
            finally:
                self.interrupts.policy_leg = False
            return result

        return await self._drive(store, session, renderer, first)

    def _unreachable(
        self,
        store: DatabaseStore,
        session_id: str | None,
        settings: RunSettings,
        unreachable: Unreachable,
    ) -> int:
        """Report a model server that cannot be reached; nothing has been stored."""
        endpoint = check_model(settings, self.environ).endpoint or ""
        message = self._redact(
            f"cannot reach the model at {display_url(endpoint)}: {unreachable.reason} "
            f"({unreachable.code})"
        )
        renderer = self._make_renderer()
        with renderer:
            report = self._report(store, renderer)
            return report.unreachable(session_id, message, unreachable.code, EXIT_FAILED)

    def _report(self, store: DatabaseStore, renderer: Renderer) -> RunReport:
        return RunReport(
            renderer,
            store=store,
            usage=self._usage,
            interrupts=self.interrupts,
            redact=self._redact,
            broken=lambda: self.broken,
            endpoint=self._choice.endpoint if self._choice is not None else None,
        )

    # ------------------------------------------------------------------ prism resume

    async def resume(self) -> int:
        """``prism resume RUN_ID``: returns the process exit code (see the module docstring)."""
        self._bind_loop()
        # a store that does not exist holds no run: nothing is created
        return await self._with_store(self._resume, create=False)

    async def _resume(self, store: DatabaseStore) -> int:
        run_id: str = self.args.run_id
        loaded = await check_run(store, run_id)
        state = RunEnvelope.from_json(loaded.state)
        session_id = state.session_id
        stored = await load_settings(store, session_id)
        status = state.status
        if stored is None:
            info = await load_run(store, run_id)
            if info.parent_run is not None and info.continuable:
                raise UsageError(f"run {run_id} is a {info.how_to_continue()}")
            how = python_resume_text(run_id, waiting=status == "suspended")
            raise UsageError(
                f"run {run_id} was not started by the prism command (no stored settings for "
                f"session {session_id})" + (f"; {how}" if info.continuable else "")
            )
        policy_stop = state.policy_stop
        choice: Literal["approve", "deny"] | None = (
            "approve" if self.args.approve else "deny" if self.args.deny else None
        )
        recorded = bool(getattr(self.args, "recorded", False))
        if status == "suspended":
            if choice is None and not recorded and not self.interactive:
                calls = calls_in(await store.list(session_id))
                lines = waiting_lines(state.interruption, calls)
                raise UsageError(
                    f"run {run_id} is waiting for an approval; pass --approve or --deny"
                    + "".join(f"\n  {self._redact(line)}" for line in lines)
                )
        elif status == "running" or policy_stop:
            if choice is not None or recorded:
                raise UsageError(f"run {run_id} is not waiting for an approval")
        else:
            raise UsageError(_not_resumable(run_id, session_id, str(status)))
        built = self._build(RunSettings.from_json(stored), store)
        renderer = self._make_renderer()
        session = built.agent.create_session(session_id, on_event=renderer.event)

        operator = getattr(self.args, "arguments", None)
        if operator is not None and (status != "suspended" or choice != "approve" or recorded):
            raise UsageError("--arguments goes with --approve, for a run waiting for an approval")
        given = (
            None if operator is None else _operator_decisions(state.interruption, operator, run_id)
        )

        async def first() -> RunResult:
            if recorded:  # decided elsewhere: apply what was recorded
                applied: RunResult = await resume_agent_run(
                    session,
                    run_id,
                    decisions="recorded",
                    expected_version=loaded.record.version,
                    signal=self.controller.signal,
                )
                return applied
            decisions: list[RunDecision] | None = given
            if status == "suspended" and choice is None:
                decisions = await self._approvals.ask(session, renderer, state.interruption)
                if decisions is None:
                    raise _Waiting
            if decisions is not None:
                result: RunResult = await resume_agent_run(
                    session,
                    run_id,
                    decisions=decisions,
                    expected_version=loaded.record.version,
                    signal=self.controller.signal,
                )
            else:
                result = await resume_agent_run(
                    session,
                    run_id,
                    decision=choice or "continue",
                    expected_version=loaded.record.version,
                    signal=self.controller.signal,
                )
            return result

        return await self._drive(store, session, renderer, first, run_id=run_id)

    # ------------------------------------------------------------------ shared

    async def _drive(
        self,
        store: DatabaseStore,
        session: AgentSession,
        renderer: Renderer,
        first: Callable[[], Awaitable[RunResult]],
        *,
        run_id: str = "",
    ) -> int:
        """Run the first leg, the approval rounds asked on the terminal, and report."""
        report = self._report(store, renderer)
        with renderer, self.interrupts:
            try:
                result = await first()
                self._usage.add(result.usage)
                result = await self._settle(session, result, renderer)
            except _Waiting:
                return report.still_waiting(session.id, run_id)
            except CheckpointConflictError as exc:
                message = f"run {run_id} was resumed by another process"
                return report.error(session.id, run_id, message, exc.code, EXIT_FAILED)
            except AgentRunError as exc:
                return await report.failed(session, exc)
            except AgentRunStateError as exc:
                message = self._redact(str(exc))
                if exc.reason is not None and run_id and await _suspended(store, run_id):
                    return report.still_suspended(session.id, run_id, message, exc.code)
                return report.error(session.id, run_id, message, exc.code, EXIT_FAILED)
            except PrismError as exc:
                code = getattr(exc, "code", "ERR_PRISM")
                exit_code = EXIT_USAGE if code == "ERR_PRISM_CONFIG" else EXIT_FAILED
                message = self._redact(str(exc))
                return report.error(session.id, run_id, message, code, exit_code)
            return await report.outcome(session, result)

    async def _settle(
        self, session: AgentSession, result: RunResult, renderer: Renderer
    ) -> RunResult:
        """Approval rounds asked on the terminal until the run no longer waits;
        never after a Ctrl-C or with a closed output."""
        while (
            result.status == "suspended"
            and self.interactive
            and not self.interrupts.count
            and not self.broken
        ):
            interruption = result.interruption
            raw = None if interruption is None else interruption.to_dict()
            decisions = await self._approvals.ask(session, renderer, raw)
            if decisions is None:
                return result
            assert result.run_state is not None
            result = await resume_agent_run(
                session, result.run_state, decisions=decisions, signal=self.controller.signal
            )
            self._usage.add(result.usage)
        return result


async def _suspended(store: DatabaseStore, run_id: str) -> bool:
    """Whether the stored run still waits for an approval (best effort)."""
    try:
        loaded = await check_run(store, run_id)
    except Exception:
        return False
    return RunEnvelope.from_json(loaded.state).status == "suspended"


def _operator_decisions(
    interruption: Mapping[str, Any] | None, arguments: str, run_id: str
) -> list[RunDecision]:
    """``--approve --arguments JSON``: the one call the run waits for is allowed with the
    operator's arguments (they are the approved arguments; a ``tool_call`` middleware that
    changes them asks again)."""
    try:
        value = json.loads(arguments)
    except ValueError as exc:
        raise UsageError(f"--arguments is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError("--arguments must be a JSON object")
    pending = [
        p
        for p in (interruption or {}).get("pending_decisions") or ()
        if isinstance(p, Mapping) and p.get("subagent") is None
    ]
    if len(pending) != 1:
        raise UsageError(
            f"--arguments needs a run waiting for exactly one tool call; run {run_id} waits "
            f"for {len(pending)}"
        )
    return [RunDecision(str(pending[0]["approval_id"]), "allow_once", modified_arguments=value)]


def _not_resumable(run_id: str, session_id: str, status: str) -> str:
    after = f"continue the conversation with: prism run --session {session_id} PROMPT"
    return f"{not_resumable_message(run_id, status)} — {after}"


# ---------------------------------------------------------------------------
# Whether the model's server can be reached, checked before a run stores anything.

CONNECT_TIMEOUT_S: Final = 10.0
"""Seconds to wait for the TCP connection (the provider's own connect timeout)."""

_PROXY_VARIABLES: Final = ("https_proxy", "http_proxy", "all_proxy")
_DEFAULT_PORTS: Final = {"https": 443, "http": 80}


@dataclass(frozen=True, slots=True)
class Unreachable:
    """Why the endpoint cannot be reached."""

    code: str
    """``ECONNREFUSED``, ``ENOTFOUND``, ``ETIMEDOUT`` or another ``errno`` name."""
    reason: str
    """What the operating system said, e.g. ``connection refused``."""


def _proxied(environ: Mapping[str, str]) -> bool:
    names = {name.lower() for name, value in environ.items() if value.strip()}
    return any(name in names for name in _PROXY_VARIABLES)


async def check_endpoint(
    endpoint: str | None,
    environ: Mapping[str, str],
    *,
    timeout_s: float = CONNECT_TIMEOUT_S,
) -> Unreachable | None:
    """Open and close one TCP connection to ``endpoint``'s host and port.

    Args:
        endpoint: The model's base URL (``None``: nothing to check).
        environ: The environment (proxy variables).
        timeout_s: Connect timeout in seconds.

    Returns:
        ``None`` when the connection opened, or when nothing can be checked (no endpoint, not an
        http(s) URL, a proxy configured); otherwise why it failed.
    """
    if endpoint is None or _proxied(environ):
        return None
    parts = urlsplit(endpoint)
    scheme = parts.scheme.lower()
    host = parts.hostname
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:  # a port out of range: the provider reports it
        return None
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except TimeoutError:
        return Unreachable("ETIMEDOUT", f"no connection within {timeout_s:g} s")
    except socket.gaierror as exc:
        return Unreachable("ENOTFOUND", f"host {host!r} not found ({exc.strerror or exc})")
    except OSError as exc:
        if exc.errno:
            code = errno.errorcode.get(exc.errno, "ECONNREFUSED")
            return Unreachable(code, os.strerror(exc.errno).lower())
        # several addresses failed (e.g. IPv6 and IPv4 of "localhost"): no single errno
        text = str(exc) or type(exc).__name__
        return Unreachable("ECONNREFUSED" if "refused" in text.lower() else "ECONNRESET", text)
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None
