"""The ``prism`` command (extra ``prism-runtime[cli]``; also ``python -m prism``).

::

    prism run "What is 12*7?" --tool calculator                 # the embedded local model
    prism run "Summarise RFC 9110" --model openai:gpt-4o-mini
    prism run "Plan a trip" --model anthropic:claude-sonnet-4-5 --json
    prism run "Name two cities" --loop gvr --schema cities.schema.json
    prism run "hi" --model openai-compatible:llama3@http://127.0.0.1:8080/v1
    git diff | prism run -                                      # the prompt from stdin
    prism run --session SESSION_ID "and in Celsius?"            # continue a conversation
    prism run --max-turns 2 "Investigate"                       # stop cleanly after 2 turns
    prism run --approve-tools --tool clock "What time is it?"   # ask before each tool call
    prism run --tool mytools:add "What is 2+3?"                 # your own tool (./mytools.py)
    prism run --mcp "python files_server.py" "List the files"   # an MCP server's tools
    prism run --mcp-url https://host/mcp --mcp-header Authorization=MCP_TOKEN "Search"
    OTEL_TRACES_EXPORTER=console prism run --otel "hi"          # OpenTelemetry spans on stderr
    prism resume RUN_ID [--approve [--arguments JSON] | --deny] # continue a stopped run
    prism resume RUN_ID --recorded                              # apply recorded decisions
    prism sessions list
    prism sessions show SESSION_ID
    prism runs                                                  # the runs to resume
    prism runs resolve RUN_ID CALL_ID --rejected|--succeeded    # repair an ambiguous call
    prism worker --engine dbos --store postgresql://… --agents myagents:REGISTRY --concurrency 8
    prism eval run evals/refunds.yaml --agents myagents:REGISTRY --junit results.xml
    prism eval capture RUN_ID --into evals/refunds.yaml         # a stored run becomes a case
    prism eval run evals/refunds.yaml --replay                  # replayed: no model, no network
    prism serve                                                 # inspect runs in a browser
    prism mcp serve --agents myagents:REGISTRY                  # agents as MCP tools (stdio)
    prism mcp serve --agents myagents:REGISTRY --http --port 8765

``--tool`` takes a built-in tool name or ``MODULE:ATTR``, the import path of the host's own tool
(a ``@prism.tool`` object or a plain function; ``prism.cli._host_tools``). ``--mcp COMMAND`` and
``--mcp-url URL`` add the tools of MCP servers (``prism.cli._mcp``).

``prism run`` streams the assistant text as it arrives, shows each tool call and its result, a live
status line (turn, tokens, elapsed time) on terminals, and a usage summary at the end (completed
provider turns and the usage of every leg shown, approval rounds included). ``--json`` prints every
event as one JSON line (``event.to_dict()``) instead, then one summary line
``{"type": "run_result", "status", "run_id", "session_id", "usage", "stop_reason",
"provider_stop_reason", "turns",
"exit_code"}`` (plus ``stop_detail`` and ``error`` when set) — ``agent_finished`` carries no status
by design. On pipes and files the output is plain: the answer on stdout, notes on stderr.
When the reader of the output goes away (``prism run … | head -1``) the run is aborted quietly and
the command exits with 141. API keys come from ``OPENAI_API_KEY`` /
``ANTHROPIC_API_KEY`` (or ``--api-key-env`` for compatible servers), never from the command line,
and are redacted from everything the command prints.

Sessions live in a store: ``--store URL`` (``sqlite:///file.db``,
``sqlite:////abs/file.db``, ``postgresql://…``), else ``$PRISM_STORE``, else the SQLite file
``$XDG_DATA_HOME/prism/sessions.db`` (``~/.local/share/prism/sessions.db``); only that default
location's folder is created, the folder of a store named explicitly must exist. A model server
that cannot be reached is reported before anything is stored. Every run is durable
with every-turn checkpoints, so ``prism resume RUN_ID`` continues a run stopped by ``--max-turns``,
one waiting for a tool approval (``--approve-tools``), or one whose process ended mid-run. Read-only
commands (``sessions list/show``) never create a store.

Ctrl-C: the first one stops ``prism run`` cleanly at the next turn boundary (``prism resume
RUN_ID`` continues it); a second one — or the first during a resumed leg, which cannot stop at a
boundary — aborts the run at once (an aborted run is final; ``prism run --session ID``
continues the conversation).

Exit codes ([`EXIT_CODES_HELP`][prism.cli.EXIT_CODES_HELP]): 0 done (also a ``--max-turns`` stop and a ``--deny`` that
denied as asked), 1 the run failed or was aborted, 2 invalid command line, configuration or store,
or a run that cannot be resumed, 3 the run waits for an approval (``prism resume RUN_ID
--approve`` or ``--deny``; also a resume refused before it changed anything: "still suspended"),
130 Ctrl-C, 141 the output was closed.

Commands are registered in [`build_parser()`][prism.cli.build_parser]; each has a ``_cmd_<name>`` coroutine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Literal, cast

from prism.cli import (
    _eval,
    _host_tools,
    _mcp,
    _models,
    _otel,
    _run,
    _runs,
    _serve,
    _sessions,
    _tools,
    _worker,
)
from prism.cli._exit_codes import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_USAGE
from prism.cli._render import PipeGuard, guard
from prism.cli._settings import UsageError
from prism.cli._store import STORE_ENV

if TYPE_CHECKING:
    from prism.providers.base import AIProvider

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_CODES_HELP",
    "EXIT_INTERRUPTED",
    "add_model_options",
    "add_output_options",
    "add_store_option",
    "build_parser",
    "main",
]

EXIT_CODES_HELP = """\
exit codes:
  0    done: the run succeeded, stopped at --max-turns (prism resume RUN_ID continues it),
       or prism resume --deny denied the waiting tool calls as asked
  1    the run failed or was aborted
  2    invalid command line, configuration or store; a run that cannot be resumed
  3    the run waits for an approval: prism resume RUN_ID --approve (or --deny); also
       "still suspended": a resume refused before it changed anything (the agent or a stored
       field changed, arguments holding a secret that cannot be restored), the run still waits
  130  Ctrl-C: the first stops prism run at the next turn boundary (resumable),
       a second aborts the run (final; prism run --session ID continues the conversation)
  141  the output was closed (e.g. | head): the run was aborted, nothing more printed

With --json the last line is {"type": "run_result", "status": ..., "run_id": ...,
"session_id": ..., "usage": ..., "stop_reason": ...,
"provider_stop_reason": ..., "turns": ..., "exit_code": ...}.
"""
"""The exit code table (``prism --help`` epilog)."""


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """Add the options that choose and tune the model (shared by commands that run agents)."""
    parser.add_argument(
        "--model",
        "-m",
        metavar="SPEC",
        help=f"model to use: {_models.MODEL_SPEC_HELP}. Default: $PRISM_MODEL, else local.",
    )
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="for openai-compatible servers: environment variable holding the API key",
    )
    parser.add_argument("--max-tokens", type=int, metavar="N", help="max tokens per model turn")
    parser.add_argument("--temperature", type=float, metavar="T", help="sampling temperature")


def add_store_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--store URL`` (shared by every command that reads or writes sessions)."""
    parser.add_argument(
        "--store",
        metavar="URL",
        help=f"session store: sqlite:///FILE.db, sqlite:////ABS/FILE.db or postgresql://… "
        f"(default: ${STORE_ENV}, else $XDG_DATA_HOME/prism/sessions.db)",
    )


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--json`` / ``--plain`` and ``--otel`` (commands that stream a run)."""
    parser.add_argument(
        "--otel",
        action="store_true",
        help="trace the run with OpenTelemetry, set up from the OTEL_* environment variables "
        "(OTEL_TRACES_EXPORTER=console writes spans to stderr; default otlp, needs "
        "opentelemetry-exporter-otlp); needs prism-runtime[otel] and opentelemetry-sdk",
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--json",
        action="store_true",
        help="print every event as one JSON line instead, then a run_result summary line",
    )
    output.add_argument(
        "--plain", action="store_true", help="plain output even on a terminal (no live status)"
    )


def build_parser() -> argparse.ArgumentParser:
    """Return the ``prism`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="prism",
        description="Run prism agents from the command line.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser(
        "run",
        help="run an agent on a prompt and stream the answer",
        description="Run an agent on PROMPT and stream its answer. The conversation is stored "
        "as a session; the run can be continued with prism resume.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "prompt", metavar="PROMPT", help="the user message; - reads it from standard input"
    )
    run.add_argument(
        "--session",
        "-s",
        metavar="ID",
        help="continue this stored session (with its model and tools unless given again)",
    )
    add_store_option(run)
    add_model_options(run)
    run.add_argument(
        "--tool",
        "-t",
        action="append",
        metavar="NAME|MODULE:ATTR",
        type=_tool_option,
        help=f"enable a tool (repeatable): a built-in one ({', '.join(sorted(_tools.BUILTIN_TOOLS))}"
        ") or your own as MODULE:ATTR — a @prism.tool object or a plain function, imported "
        "with the current directory on the path (e.g. --tool mytools:add for ./mytools.py)",
    )
    run.add_argument(
        "--mcp",
        action="append",
        metavar="COMMAND",
        help="use the tools of an MCP server started as COMMAND over stdio (repeatable; "
        "quoted, e.g. --mcp 'python server.py'; a bare python is the interpreter running prism)",
    )
    run.add_argument(
        "--mcp-url",
        action=_mcp.McpUrlAction,
        metavar="URL",
        help="use the tools of a streamable-HTTP MCP server (repeatable)",
    )
    run.add_argument(
        "--mcp-header",
        action=_mcp.McpHeaderAction,
        metavar="NAME=ENV_VAR",
        help="send header NAME, valued from environment variable ENV_VAR, to the --mcp-url "
        "before it (the value is never stored or printed)",
    )
    run.add_argument(
        "--tool-choice",
        choices=("auto", "required", "none"),
        help="whether the model must call a tool when answering the prompt (default auto)",
    )
    rounds = run.add_argument_group(
        "tool rounds",
        "Two different bounds. --tool-rounds steers: after N tool rounds the model is\n"
        "asked for its text answer and gets one more turn to give it. --max-tool-rounds\n"
        "stops: tool calls beyond N rounds are not run and the run ends at once, without\n"
        "a text answer. To get an answer, keep --tool-rounds at or below --max-tool-rounds.",
    )
    rounds.add_argument(
        "--tool-rounds",
        type=_tool_rounds_option,
        metavar="N|unlimited",
        help="tool rounds after which the model must answer in text (later turns get "
        "tool_choice none; 0 = answer at once, the first request already gets it; unlimited = "
        "never force the answer; default: 1 for the local model, unlimited for others)",
    )
    run.add_argument(
        "--approve-tools",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="ask before each tool call runs (on a terminal; otherwise the run waits for "
        "prism resume RUN_ID --approve or --deny)",
    )
    run.add_argument("--system", metavar="TEXT", help="system instructions for the agent")
    run.add_argument(
        "--loop",
        choices=("single-shot", "gvr"),
        help="turn loop: single-shot (default) or gvr (generate, validate against --schema, "
        "revise)",
    )
    run.add_argument("--schema", metavar="FILE.json", help="JSON Schema for --loop gvr")
    run.add_argument(
        "--max-revisions",
        type=int,
        metavar="N",
        help="revisions after the first candidate (default 3; needs --loop gvr)",
    )
    run.add_argument(
        "--max-turns",
        type=int,
        metavar="N",
        help="stop cleanly after N model turns; prism resume RUN_ID continues the run",
    )
    rounds.add_argument(
        "--max-tool-rounds",
        type=int,
        metavar="N",
        help="hard limit on tool rounds per run: the calls of a later round are answered "
        "'not dispatched' and the run stops (stop reason tool_round_limit; default: the "
        "runtime's limit, 8)",
    )
    add_output_options(run)
    run.set_defaults(handler=_cmd_run)

    resume = commands.add_parser(
        "resume",
        help="continue a stopped, interrupted or approval-waiting run",
        description="Continue a run stopped by --max-turns or Ctrl-C, a run whose process ended, "
        "or a run waiting for a tool approval (decide with --approve or --deny, or answer on a "
        "terminal). A finished, failed, aborted or denied run cannot be resumed (exit 2).",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    resume.add_argument("run_id", metavar="RUN_ID", help="the run to continue")
    decide = resume.add_mutually_exclusive_group()
    decide.add_argument(
        "--approve", action="store_true", help="allow the tool calls the run waits for (once)"
    )
    decide.add_argument(
        "--deny",
        action="store_true",
        help="refuse them: the run ends as denied (exit 0), nothing runs",
    )
    decide.add_argument(
        "--recorded",
        action="store_true",
        help="apply the decisions recorded for the run (by prism serve --no-resume, or "
        "prism.runtime.durable.record_decisions)",
    )
    resume.add_argument(
        "--arguments",
        metavar="JSON",
        help="with --approve: run the one waiting tool call with these arguments (a JSON object) "
        "instead of the stored ones; they are the arguments approved (e.g. when the stored ones "
        "hold a secret this command cannot restore)",
    )
    add_store_option(resume)
    add_output_options(resume)
    resume.set_defaults(handler=_cmd_resume)

    sessions = commands.add_parser(
        "sessions",
        help="list stored sessions or show one",
        description="List the stored sessions, or show one session's conversation and runs.",
    )
    sessions_commands = sessions.add_subparsers(dest="sessions_command", metavar="SUBCOMMAND")
    listing = sessions_commands.add_parser(
        "list",
        help="list conversations, most recently used first",
        description="List the stored conversations, most recently used first. The child "
        "sessions of agent tools (ids RUN_ID.TOOL_CALL_ID, the sub-agent runs a tool call "
        "started) are left out and counted on stderr; --all lists each one indented under its "
        "parent session. prism sessions show ID shows them nested under their tool calls.",
    )
    listing.add_argument(
        "--limit", type=int, default=50, metavar="N", help="most sessions shown (default 50)"
    )
    listing.add_argument(
        "--all",
        action="store_true",
        help="also list the child sessions of agent tools, under their parent session",
    )
    listing.add_argument("--json", action="store_true", help="one JSON object per session")
    add_store_option(listing)
    show = sessions_commands.add_parser("show", help="show a session's conversation and runs")
    show.add_argument("session_id", metavar="ID", help="the session to show")
    show.add_argument("--json", action="store_true", help="the entries and runs as JSON lines")
    add_store_option(show)
    sessions.set_defaults(handler=_cmd_sessions, sessions_command=None)
    _runs.add_runs_parser(commands, add_store_option).set_defaults(handler=_cmd_runs)
    _worker.add_worker_parser(commands).set_defaults(handler=_cmd_worker)
    _eval.add_eval_parser(commands).set_defaults(handler=_cmd_eval)
    _serve.add_serve_parser(commands).set_defaults(handler=_cmd_serve)
    _mcp.add_mcp_parser(commands).set_defaults(handler=_cmd_mcp, mcp_command=None)
    return parser


def _tool_option(value: str) -> str:
    """``--tool`` values: a built-in tool name or a ``MODULE:ATTR`` spec (loaded later).

    Raises:
        argparse.ArgumentTypeError: neither (argparse reports it with the usage, exit 2).
    """
    if value in _tools.BUILTIN_TOOLS or _host_tools.is_host_tool_spec(value):
        return value
    raise argparse.ArgumentTypeError(
        f"invalid choice: {value!r} (built-in tools: {', '.join(sorted(_tools.BUILTIN_TOOLS))}; "
        "or MODULE:ATTR for your own tool)"
    )


def _tool_rounds_option(value: str) -> int | Literal[False]:
    """``--tool-rounds`` values: a whole number of rounds ≥ 0 (``0``: answer at once) or
    ``unlimited`` (``False``: never force the answer).

    Raises:
        argparse.ArgumentTypeError: anything else (argparse reports it with the usage, exit 2).
    """
    if value.strip().lower() == "unlimited":
        return False
    try:
        rounds = int(value)
    except ValueError:
        rounds = -1
    if rounds < 0:
        raise argparse.ArgumentTypeError(
            f"--tool-rounds must be 0 (answer at once) or more, or unlimited, got {value!r}"
        )
    return rounds


@dataclass(frozen=True, slots=True)
class _Streams:
    """What every command handler gets besides its parsed arguments (see [`main()`][prism.cli.main])."""

    out: IO[str]
    err: IO[str]
    stdin: IO[str] | None
    provider_override: Callable[[], AIProvider] | None


def _run_command(args: argparse.Namespace, streams: _Streams) -> _run.RunCommand:
    """The command behind ``run`` and ``resume``; live output only on a terminal."""
    live = not args.plain and not args.json and _isatty(streams.out)
    return _run.RunCommand(
        args,
        out=streams.out,
        err=streams.err,
        live=live,
        stdin=streams.stdin,
        provider_override=streams.provider_override,
    )


async def _cmd_run(args: argparse.Namespace, streams: _Streams) -> int:
    return await _run_command(args, streams).run()


async def _cmd_resume(args: argparse.Namespace, streams: _Streams) -> int:
    return await _run_command(args, streams).resume()


async def _cmd_sessions(args: argparse.Namespace, streams: _Streams) -> int:
    if args.sessions_command is None:
        streams.err.write("prism: sessions needs a subcommand: list or show ID\n")
        return EXIT_USAGE
    return await _sessions.SessionsCommand(args, out=streams.out, err=streams.err).run()


async def _cmd_runs(args: argparse.Namespace, streams: _Streams) -> int:
    return await _runs.RunsCommand(args, out=streams.out, err=streams.err).run()


async def _cmd_worker(args: argparse.Namespace, streams: _Streams) -> int:
    return await _worker.run_worker(args, streams.out, streams.err)


async def _cmd_eval(args: argparse.Namespace, streams: _Streams) -> int:
    return await _eval.run_eval_command(
        args, streams.out, streams.err, provider_override=streams.provider_override
    )


async def _cmd_serve(args: argparse.Namespace, streams: _Streams) -> int:
    return await _serve.run_serve(args, streams.out, streams.err)


async def _cmd_mcp(args: argparse.Namespace, streams: _Streams) -> int:
    if args.mcp_command is None:
        streams.err.write("prism: mcp needs a subcommand: serve\n")
        return EXIT_USAGE
    return await _mcp.run_mcp_serve(args, streams.out, streams.err)


def _isatty(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def main(
    argv: Sequence[str] | None = None,
    *,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    stdin: IO[str] | None = None,
    provider_override: Callable[[], AIProvider] | None = None,
) -> int:
    """Entry point of the ``prism`` command.

    Args:
        argv: Arguments without the program name; ``None`` means ``sys.argv[1:]``.
        out: Standard output (default ``sys.stdout``).
        err: Standard error (default ``sys.stderr``).
        stdin: Where approval answers and the prompt of ``prism run -`` are read (default
            ``sys.stdin``; answers are asked only when it is a terminal).
        provider_override: Test seam: builds the provider instead of the ``--model`` spec (the
            spec still supplies the ``ModelConfig``).

    Returns:
        The exit code ([`EXIT_CODES_HELP`][prism.cli.EXIT_CODES_HELP]): 0 done, 1 run failed or aborted, 2 usage,
        configuration or store error, 3 waiting for an approval, 130 Ctrl-C, 141 output closed.
    """
    out_guard = guard(sys.stdout if out is None else out)
    err_guard = guard(sys.stderr if err is None else err)
    stdin = sys.stdin if stdin is None else stdin
    out_io, err_io = cast("IO[str]", out_guard), cast("IO[str]", err_guard)
    code = _main(argv, out_io, err_io, stdin, provider_override)
    if out_guard.broken or err_guard.broken:
        # a closed pipe: no traceback and no "Exception ignored" when Python flushes at exit
        _discard_rest(out_guard)
        _discard_rest(err_guard)
        return EXIT_BROKEN_PIPE
    return code


def _main(
    argv: Sequence[str] | None,
    out: IO[str],
    err: IO[str],
    stdin: IO[str] | None,
    provider_override: Callable[[], AIProvider] | None,
) -> int:
    parser = build_parser()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed usage or help
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_USAGE
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(out)
        return EXIT_USAGE
    stop_tracing = None
    if getattr(args, "otel", False):
        try:
            stop_tracing = _otel.start_tracing(err, os.environ)
        except UsageError as exc:
            err.write(f"prism: {exc}\n")
            return EXIT_USAGE
    try:
        streams = _Streams(out, err, stdin, provider_override)
        code: int = asyncio.run(handler(args, streams))
    except KeyboardInterrupt:
        err.write("\nprism: interrupted\n")
        err.flush()
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # a write outside the guarded streams
        return EXIT_BROKEN_PIPE
    finally:
        if stop_tracing is not None:
            stop_tracing()
    return code


def _discard_rest(stream: PipeGuard) -> None:
    """Point a broken standard stream's descriptor at the null device (the standard pattern:
    the interpreter's final flush of ``sys.stdout`` then succeeds silently)."""
    if not stream.broken:
        return
    target = stream.stream
    try:
        fd = target.fileno() if target is not None else -1
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return
    if fd < 0:
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
