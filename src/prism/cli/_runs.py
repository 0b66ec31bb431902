"""``prism runs`` and ``prism runs resolve RUN_ID CALL_ID``: finding and repairing stored runs.

``prism runs`` lists the runs of the store that ``prism resume`` can continue (waiting for an
approval, stopped at a turn boundary, or cut off mid-run — also one whose process ended before
its prompt was stored), most recently updated first, each with how to continue it: ``prism resume
RUN_ID`` for a run the prism command started; for a run started from Python (no settings stored
for its session) the ``prism.resume_agent_run(agent, RUN_ID, …)`` call with the same agent
definition; for the child run of an agent tool (its stored input names its ``parent_run``) the
same for its parent run, which continues the child. Under a run waiting for approvals, one line
per approval names its tool, the arguments the tool will run with (as the approval shows them,
secrets redacted), the call id and the approval id — for a child run's call (an agent tool's
child) also the child's agent and run and the agent-tool calls leading to it
([`prism.list_pending_decisions()`][prism.list_pending_decisions]). ``--all`` lists every stored run, ``--session ID`` one
session's. ``--json`` prints one ``{"run_id", "session_id", "status", "stop_reason"?, "version",
"resumable", "started_by_prism", "parent_run"?, "pending"?}`` object per run (``pending``: the
``PendingDecisionRecord.to_dict()`` of each approval it waits for).

``prism runs resolve RUN_ID CALL_ID --rejected|--succeeded`` is the operator's repair of a call a
crash left ambiguous (``prism resume`` names them): ``--rejected`` answers it with an error row
(refused when its result is stored: it ran), ``--succeeded`` with its stored result, or
``--result JSON``. It then says what continues the run: ``prism resume RUN_ID`` for a run the
command started, the ``prism.resume_agent_run`` call for one started from Python, the calling run
for a child run. Both are read-only unless they resolve; a SQLite store file that does not exist
holds no runs (nothing is created).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from typing import IO, Any, Literal

from prism.cli._render import guard
from prism.cli._store import (
    RunInfo,
    StoreError,
    StoreMissingError,
    display_url,
    load_run,
    open_cli_store,
    redact_store_text,
    store_url,
)
from prism.errors import PrismError
from prism.runtime.durable import (
    PendingDecisionRecord,
    list_agent_runs,
    list_pending_decisions,
    resolve_ambiguous_call,
)

__all__ = [
    "RunsCommand",
    "StoreCommand",
    "add_runs_parser",
    "child_mark",
    "pending_approvals",
    "pending_lines",
    "resume_hint",
]

_EXIT_USAGE = 2
_EXIT_BROKEN_PIPE = 141


def add_runs_parser(
    commands: Any, add_store_option: Callable[[argparse.ArgumentParser], None]
) -> argparse.ArgumentParser:
    """Register ``prism runs`` (and ``runs resolve``) on the command's subparsers."""
    runs: argparse.ArgumentParser = commands.add_parser(
        "runs",
        help="list the runs prism resume can continue, or resolve an ambiguous tool call",
        description="List the stored runs that prism resume can continue (newest first), or "
        "resolve a tool call a crash left ambiguous.",
    )
    runs.add_argument("--all", action="store_true", help="every stored run, not only resumable")
    runs.add_argument("--session", metavar="ID", help="only this session's runs")
    runs.add_argument(
        "--limit", type=int, default=50, metavar="N", help="most runs shown (default 50)"
    )
    runs.add_argument("--json", action="store_true", help="one JSON object per run")
    add_store_option(runs)
    runs_commands = runs.add_subparsers(dest="runs_command", metavar="SUBCOMMAND")
    resolve = runs_commands.add_parser(
        "resolve",
        help="say what happened to a tool call a crash left ambiguous",
        description="Record the outcome of a tool call that started but stored no result "
        "(prism resume names such calls). Check the tool's own records first. Then continue "
        "the run with prism resume RUN_ID.",
    )
    resolve.add_argument("run_id", metavar="RUN_ID", help="the run")
    resolve.add_argument("call_id", metavar="CALL_ID", help="the ambiguous tool call")
    outcome = resolve.add_mutually_exclusive_group(required=True)
    outcome.add_argument(
        "--rejected",
        action="store_true",
        help="it did not happen: the model is told the call was rejected (refused when its "
        "result is stored)",
    )
    outcome.add_argument(
        "--succeeded",
        action="store_true",
        help="it happened: the model gets its stored result, or --result",
    )
    resolve.add_argument("--reason", metavar="TEXT", help="with --rejected: what the model reads")
    resolve.add_argument(
        "--result", metavar="JSON", help="with --succeeded: the result when none is stored"
    )
    # given after the subcommand; the value given before it (on ``runs``) stays otherwise
    resolve.add_argument("--store", default=argparse.SUPPRESS, help="the store (as for runs)")
    runs.set_defaults(runs_command=None)
    return runs


class StoreCommand:
    """A ``prism`` subcommand that reads the store named by ``--store`` / ``PRISM_STORE``.

    Args:
        args: Parsed arguments.
        out: Standard output (the listing).
        err: Standard error (problems).
        environ: Environment for ``PRISM_STORE`` and the data dir.
    """

    def __init__(
        self,
        args: argparse.Namespace,
        *,
        out: IO[str],
        err: IO[str],
        environ: dict[str, str] | None = None,
    ) -> None:
        self.args = args
        self.out = guard(out)
        self.err = guard(err)
        self.environ = dict(os.environ if environ is None else environ)
        self.url = store_url(self.args.store, self.environ)

    def report(self, message: str) -> None:
        """Write ``prism: <message>`` to standard error, the store URL's secrets redacted."""
        self.err.write(f"prism: {redact_store_text(message, self.url)}\n")
        self.err.flush()


class RunsCommand(StoreCommand):
    """One ``prism runs`` / ``prism runs resolve`` invocation.

    Args:
        args: Parsed arguments.
        out: Standard output (the listing).
        err: Standard error (problems, the outcome of a resolve).
        environ: Environment for ``PRISM_STORE`` and the data dir.
    """

    def _problem(self, message: str) -> int:
        self.report(message)
        return _EXIT_USAGE

    async def run(self) -> int:
        """Run the subcommand; 0, 2 for a bad argument, an unusable store or a refused
        resolution, 141 when the output was closed."""
        resolving = self.args.runs_command == "resolve"
        result: Any = None
        if resolving:
            if self.args.reason is not None and not self.args.rejected:
                return self._problem("--reason goes with --rejected")
            if self.args.result is not None:
                if not self.args.succeeded:
                    return self._problem("--result goes with --succeeded")
                try:
                    result = json.loads(self.args.result)
                except ValueError as exc:
                    return self._problem(f"--result is not JSON: {exc}")
        elif self.args.limit < 1:
            return self._problem("--limit must be at least 1")
        try:
            store = await open_cli_store(self.url, create=False)
        except StoreMissingError:
            if resolving:
                return self._problem(f"no run {self.args.run_id} in {display_url(self.url)}")
            if not self.args.json:
                self._problem(f"no runs in {display_url(self.url)} (no such file)")
            return 0
        except StoreError as exc:
            return self._problem(str(exc))
        try:
            code = await (self._resolve(store, result) if resolving else self._list(store))
        finally:
            await store.aclose()
        self.out.flush()
        return _EXIT_BROKEN_PIPE if self.out.broken or self.err.broken else code

    async def _list(self, store: Any) -> int:
        status: Literal["resumable"] | None = None if self.args.all else "resumable"
        try:
            states = await list_agent_runs(
                store, session_id=self.args.session, status=status, limit=self.args.limit
            )
        except PrismError as exc:
            return self._problem(str(exc))
        for state in states:
            if self.out.broken:
                return _EXIT_BROKEN_PIPE
            info = await load_run(store, state.run_id)
            pending = await pending_approvals(store, state.run_id, state.status)
            if self.args.json:
                item = {
                    "run_id": state.run_id,
                    "session_id": state.session_id,
                    "status": state.status,
                    "stop_reason": state.stop_reason,
                    "version": state.version,
                    "resumable": info.continuable,
                    "started_by_prism": info.by_command,
                    "parent_run": None if info.parent_run is None else dict(info.parent_run),
                    "pending": [p.to_dict() for p in pending] or None,
                }
                self.out.write(json.dumps({k: v for k, v in item.items() if v is not None}) + "\n")
            else:
                self.out.write(
                    f"{state.run_id}  session {state.session_id}  {info.describe()}"
                    f"{child_mark(info)}{resume_hint(info)}\n"
                )
                for line in pending_lines(pending):
                    self.out.write(f"  {line}\n")
        if not states and not self.args.json:
            what = "runs" if self.args.all else "runs to resume"
            self._problem(f"no {what} in {display_url(self.url)}")
        return 0

    async def _resolve(self, store: Any, result: Any) -> int:
        run_id, call_id = self.args.run_id, self.args.call_id
        outcome: Literal["rejected", "succeeded"] = (
            "rejected" if self.args.rejected else "succeeded"
        )
        try:
            await resolve_ambiguous_call(
                store, run_id, call_id, outcome=outcome, reason=self.args.reason, result=result
            )
        except PrismError as exc:
            return self._problem(str(exc))
        info = await load_run(store, run_id)
        if info.by_command and info.parent_run is None:
            hint = f"continue with: prism resume {run_id}"
        else:  # started from Python, or a child run continued through its calling run
            hint = info.how_to_continue() or f"continue with: prism resume {run_id}"
        self.err.write(f"call {call_id} of run {run_id} resolved as {outcome}; {hint}\n")
        return 0


async def pending_approvals(
    store: Any, run_id: str, status: str | None
) -> list[PendingDecisionRecord]:
    """The approvals a suspended run waits for (none for another status, or for a child run
    whose calling run lists them)."""
    if status != "suspended":
        return []
    return await list_pending_decisions(store, run_id=run_id, limit=1_000)


def pending_lines(pending: list[PendingDecisionRecord]) -> list[str]:
    """One line per approval: ``waits for approval: pay {"invoice": 7} (call c1, approval
    approval_…)``; a child run's call also names the child's run and agent and the agent-tool
    calls leading to it (``… in run R of agent payer, through agent-tool calls l1 (clerk) → k1
    (payer)``)."""
    lines = []
    for item in pending:
        where = f"call {item.tool_call_id}"
        if item.chain:
            path = " → ".join(f"{link.tool_call_id} ({link.agent})" for link in item.chain)
            where += (
                f" in run {item.calling_run_id} of agent {item.calling_agent}, through "
                f"agent-tool call{'s' if len(item.chain) > 1 else ''} {path}"
            )
        arguments = " " + item.arguments if item.arguments is not None else ""
        lines.append(
            f"waits for approval: {item.tool_name}{arguments} ({where}, approval "
            f"{item.approval_id})"
        )
    return lines


def resume_hint(info: RunInfo) -> str:
    """`` — <how to continue it>`` (see [`RunInfo.how_to_continue()`][prism.cli._runs.RunInfo.how_to_continue]), or ``""``."""
    text = info.how_to_continue()
    return f" — {text}" if text else ""


def child_mark(info: RunInfo) -> str:
    """`` (child of run PARENT, tool call ID)`` for a child run that cannot be continued (a
    continuable child's hint names its parent already), else ``""``."""
    parent = info.parent_run
    if parent is None or info.continuable:
        return ""
    return f" (child of run {parent['run_id']}, tool call {parent['tool_call_id']})"
