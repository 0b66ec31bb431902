"""The ``prism`` command (extra ``prism-runtime[cli]``; also ``python -m prism``).

::

    prism run "What is 12*7?" --tool calculator                 # the embedded local model
    prism run "Summarise RFC 9110" --model openai:gpt-4o-mini
    prism run "Plan a trip" --model anthropic:claude-sonnet-4-5 --json
    prism run "Name two cities" --loop gvr --schema cities.schema.json
    prism run "hi" --model openai-compatible:llama3@http://127.0.0.1:8080/v1

``prism run`` streams the assistant text as it arrives, shows each tool call and its result, a live
status line (turn, tokens, elapsed time) on terminals, and a usage summary at the end. ``--json``
prints every event as one JSON line (``event.to_dict()``) instead. On pipes and files the output is
plain: the answer on stdout, notes on stderr. API keys come from ``OPENAI_API_KEY`` /
``ANTHROPIC_API_KEY`` (or ``--api-key-env`` for compatible servers), never from the command line,
and are redacted from everything the command prints.

Exit codes: 0 success, 1 the run failed or was aborted, 2 invalid command line or configuration,
130 interrupted (Ctrl-C).

Commands are registered in :func:`build_parser`; each has a ``_cmd_<name>`` coroutine. Session
storage (``--store URL``), ``prism sessions list/show`` and ``prism resume RUN_ID`` will plug in
there, sharing :func:`add_model_options` with ``run``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any

from prism.cli import _models, _run, _tools

__all__ = ["EXIT_INTERRUPTED", "add_model_options", "build_parser", "main"]

EXIT_INTERRUPTED = 130
"""Exit code after Ctrl-C."""


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


def build_parser() -> argparse.ArgumentParser:
    """Return the ``prism`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="prism",
        description="Run prism agents from the command line.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser(
        "run",
        help="run an agent on a prompt and stream the answer",
        description="Run an agent on PROMPT and stream its answer.",
    )
    run.add_argument("prompt", metavar="PROMPT", help="the user message")
    add_model_options(run)
    run.add_argument(
        "--tool",
        "-t",
        action="append",
        metavar="NAME",
        choices=sorted(_tools.BUILTIN_TOOLS),
        help=f"enable a built-in tool (repeatable): {', '.join(sorted(_tools.BUILTIN_TOOLS))}",
    )
    run.add_argument(
        "--tool-choice",
        choices=("auto", "required", "none"),
        default="auto",
        help="whether the model must call a tool when answering the prompt (default auto)",
    )
    run.add_argument(
        "--tool-rounds",
        type=int,
        metavar="N",
        help="tool rounds before the model must answer in text (default: 1 for the local "
        "model, unlimited for others; 0 = unlimited)",
    )
    run.add_argument("--system", metavar="TEXT", help="system instructions for the agent")
    run.add_argument(
        "--loop",
        choices=("single-shot", "gvr"),
        default="single-shot",
        help="turn loop: single-shot (default) or gvr (generate, validate against --schema, "
        "revise)",
    )
    run.add_argument("--schema", metavar="FILE.json", help="JSON Schema for --loop gvr")
    run.add_argument(
        "--max-revisions",
        type=int,
        default=3,
        metavar="N",
        help="--loop gvr: revisions after the first candidate (default 3)",
    )
    run.add_argument("--max-turns", type=int, metavar="N", help="cap on model turns")
    run.add_argument("--max-tool-rounds", type=int, metavar="N", help="cap on tool rounds")
    output = run.add_mutually_exclusive_group()
    output.add_argument(
        "--json", action="store_true", help="print every event as one JSON line instead"
    )
    output.add_argument(
        "--plain", action="store_true", help="plain output even on a terminal (no live status)"
    )
    run.set_defaults(handler=_cmd_run)
    return parser


async def _cmd_run(
    args: argparse.Namespace,
    out: IO[str],
    err: IO[str],
    provider_override: Callable[[], Any] | None,
) -> int:
    live = not args.plain and not args.json and _isatty(out)
    command = _run.RunCommand(
        args, out=out, err=err, live=live, provider_override=provider_override
    )
    return await command.run()


def _isatty(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def main(
    argv: Sequence[str] | None = None,
    *,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    provider_override: Callable[[], Any] | None = None,
) -> int:
    """Entry point of the ``prism`` command.

    Args:
        argv: Arguments without the program name; ``None`` means ``sys.argv[1:]``.
        out: Standard output (default ``sys.stdout``).
        err: Standard error (default ``sys.stderr``).
        provider_override: Test seam: builds the provider instead of the ``--model`` spec (the
            spec still supplies the ``ModelConfig``).

    Returns:
        The exit code: 0 success, 1 run failed or aborted, 2 usage or configuration error,
        130 interrupted.
    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    parser = build_parser()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed usage or help
        return int(exc.code or 0) if isinstance(exc.code, int) else _run.EXIT_USAGE
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(out)
        return _run.EXIT_USAGE
    try:
        code: int = asyncio.run(handler(args, out, err, provider_override))
    except KeyboardInterrupt:
        err.write("\nprism: interrupted\n")
        return EXIT_INTERRUPTED
    return code
