"""Pages the documentation site generates at build time (run by mkdocs-gen-files, see mkdocs.yml).

* ``reference/<module>.md`` — one API reference page per public module in ``REFERENCE``, rendered
  by mkdocstrings from the module's docstrings and signatures;
* ``reference/errors.md`` — every error code of ``prism.errors``: the exception that carries it,
  what it means and what to do;
* ``reference/cli.md`` — the ``prism`` command's help, from its argument parser.

``tests/test_docs_site.py`` reads ``REFERENCE`` to check that every public name has an entry.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import os
import sys
from pathlib import Path

# this checkout's source, not an installed copy
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

# The public modules with a reference page, and a short description of each for the index.
REFERENCE: dict[str, str] = {
    "prism": "agents, sessions, runs, messages, tools, errors, limits, durable runs, loops",
    "prism.providers": "the provider protocol, provider events and the adapters' builders",
    "prism.testing": "the mock provider, memory stores and store conformance suites",
    "prism.stores": "the SQLite and PostgreSQL stores",
    "prism.loops": "the built-in loops and what a custom loop implements",
    "prism.tools": "tool definitions, tool sources, permission and dispatch",
    "prism.events": "every agent event",
    "prism.types": "messages, content blocks, requests, results and usage",
    "prism.errors": "every exception with its code",
    "prism.artifacts": "artifacts for the generate-validate-revise loop",
    "prism.runtime": "the runtime's public entry points",
    "prism.mcp": "MCP servers as tool sources",
    "prism.mcp.serving": "agents served to MCP clients",
    "prism.otel": "OpenTelemetry spans of runs",
    "prism.engines.dbos": "runs on a fleet of DBOS workers",
    "prism.serve": "the local web inspector and approval inbox",
    "prism.evals": "datasets, evaluators and eval runs",
}

# What to do about each error code; the page fails to build when a code has no entry here.
ACTIONS: dict[str, str] = {
    "ERR_PRISM_ABORTED": "The host aborted the run; nothing to fix unless the abort was unexpected.",
    "ERR_PRISM_AGENT_RUN_STATE": "Check the run id and store, and that the stored envelope's version is one this release reads (see Upgrading).",
    "ERR_PRISM_AGENT_RUN_SUSPENDED": "Internal signal, never raised to a host: the run waits for a decision — resume it.",
    "ERR_PRISM_CHECKPOINT_CONFLICT": "Another process saved or claimed the run first: reload it and retry, or leave it to that process.",
    "ERR_PRISM_CONFIG": "Fix the option the message names; the run never started.",
    "ERR_PRISM_DECISION_DECIDED": "Another decision settled this approval first; read the error's `decided` and drop yours.",
    "ERR_PRISM_DECISION_DUPLICATE": "Send one decision per `approval_id` in a batch.",
    "ERR_PRISM_DECISION_INVALID": "Send a decision the pending approval accepts (approve, deny, or edited arguments that validate).",
    "ERR_PRISM_DECISION_LIMIT": "Send fewer decisions in one resume.",
    "ERR_PRISM_DECISION_UNKNOWN": "Use an `approval_id` from the run's pending decisions (`list_pending_decisions`).",
    "ERR_PRISM_DELEGATION_SUSPENDED": "A child run (an agent tool) waits for approval: decide its approval, then resume the parent.",
    "ERR_PRISM_ENGINE_NOT_READY": "Start a worker on the database once so the engine creates its tables, then submit again.",
    "ERR_PRISM_ENGINE_VERSION": "Run workers and submitters on the same application version, or drain the old fleet first.",
    "ERR_PRISM_GUARDRAIL_BLOCKED": "A guardrail ended the run; read the decision's reason, change the input or the guardrail.",
    "ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE": "An interrupting guardrail needs a durable run: give the run a checkpoint store.",
    "ERR_PRISM_LEDGER": "Check the ledger's store (disk, connection); the run's result is still returned.",
    "ERR_PRISM_LOOP_NOT_DURABLE": "Use a loop that supports durable runs, or run without a checkpoint store.",
    "ERR_PRISM_LOOP_REVISION": "Resume with the loop revision the run was saved with, or start a new run.",
    "ERR_PRISM_LOOP_SNAPSHOT": "Make the custom loop's snapshot JSON-compatible.",
    "ERR_PRISM_PROVIDER": "Read `info` (and `failures` for a fallback chain): fix the key, model or server, or add a retry policy.",
    "ERR_PRISM_PROVIDER_UNKNOWN": "Pass a provider, or a model name a registered provider serves.",
    "ERR_PRISM_REDACTED": "The original exception held a secret; read `original_type` and the redacted message.",
    "ERR_PRISM_RUN_ABORTED": "The run was aborted; start it again if the abort was not intended.",
    "ERR_PRISM_RUN_AMBIGUOUS": "A tool call may or may not have run (its worker died): check its effect, then decide the run.",
    "ERR_PRISM_RUN_FAILED": "Read `result.error` for the cause (provider, tool, loop).",
    "ERR_PRISM_RUN_LIMIT": "Raise the limit in `RunLimits`, or read `breach` for the counter that passed its maximum.",
    "ERR_PRISM_SESSION_APPEND_CONFLICT": "Another writer appended to the session first: reload it and append again.",
    "ERR_PRISM_SESSION_BUSY": "Wait for the session's active run to finish (or steer it) before starting another.",
    "ERR_PRISM_STEER_EMPTY": "Steer with a non-empty message.",
    "ERR_PRISM_STEER_LIMIT": "Wait for the run to take queued steer messages before sending more.",
    "ERR_PRISM_STEER_NO_RUN": "Start a run before steering; the session has none active.",
    "ERR_PRISM_STORE_CORRUPT": "The database or a row cannot be used: restore it from a backup or point to another store.",
    "ERR_PRISM_STORE_SCHEMA": "The database was migrated by a newer or altered release: use that release, or a fresh database.",
    "ERR_PRISM_STORE_UNDECODABLE": "A stored row cannot be decoded by this release: upgrade prism, or inspect the row.",
    "ERR_PRISM_STRUCTURED_OUTPUT": "Check the output schema and that the model supports structured output; `reason` says which.",
    "ERR_PRISM_TURN_POLICY": "Fix the turn policy callback: it raised or returned something other than Continue/Stop.",
}


def _code_meanings() -> dict[str, tuple[str, str]]:
    """Each code of ``prism.errors`` -> (exception class, meaning)."""
    import prism.errors as errors

    source = Path(inspect.getfile(errors)).read_text(encoding="utf-8")
    notes: dict[str, str] = {}  # a code constant's own docstring
    body = ast.parse(source).body
    for node, after in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.Assign)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id.startswith("ERR_"):
                notes[target.id] = " ".join(after.value.value.split())
    out: dict[str, tuple[str, str]] = {}
    classes = [getattr(errors, n) for n in errors.__all__ if isinstance(getattr(errors, n), type)]
    for name in sorted(n for n in errors.__all__ if n.startswith("ERR_")):
        code = getattr(errors, name)
        owners = [c for c in classes if code in (getattr(c, "codes", None) or {})]
        owners = owners or [c for c in classes if getattr(c, "code", None) == code]
        owners = owners or [errors.AgentRunError]
        cls = min(owners, key=lambda c: len(c.__mro__))
        codes = getattr(cls, "codes", None) or {}
        summary = (inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " ")
        meaning = notes.get(name) or codes.get(code) or summary
        out[code] = (cls.__name__, meaning)
    return out


def errors_page() -> str:
    lines = [
        "# Error codes",
        "",
        "Every exception prism raises carries a `code`. This table lists each code, the exception",
        "class that carries it, what it means, and what to do. It is generated from",
        "[`prism.errors`][prism.errors] when the site is built.",
        "",
        "| code | raised as | meaning | what to do |",
        "| --- | --- | --- | --- |",
    ]
    for code, (cls, meaning) in sorted(_code_meanings().items()):
        action = ACTIONS[code]  # a KeyError here names a code without an action
        meaning = meaning.replace("|", "\\|")
        lines.append(f"| `{code}` | [`{cls}`][prism.errors.{cls}] | {meaning} | {action} |")
    missing = set(ACTIONS) - set(_code_meanings())
    if missing:
        raise SystemExit(f"ACTIONS names codes prism.errors lacks: {sorted(missing)}")
    return "\n".join(lines) + "\n"


def cli_page() -> str:
    os.environ["COLUMNS"] = "100"
    from prism.cli import build_parser

    lines = [
        "# The `prism` command",
        "",
        "Generated from the command's argument parser: the help of `prism` and of each",
        "subcommand, as `prism … --help` prints it.",
        "",
    ]

    def walk(parser: argparse.ArgumentParser, name: str, depth: int) -> None:
        lines.extend([f"{'#' * depth} `{name}`", "", "```text", parser.format_help().rstrip(), "```", ""])
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    walk(child, f"{name} {sub}", min(depth + 1, 4))

    walk(build_parser(), "prism", 2)
    return "\n".join(lines)


def module_page(module: str, description: str) -> str:
    return f"# `{module}`\n\n{description[0].upper()}{description[1:]}.\n\n::: {module}\n"


def main() -> None:
    import mkdocs_gen_files

    index = ["# API reference", "", "One page per public module, generated from its docstrings.", ""]
    for module, description in REFERENCE.items():
        with mkdocs_gen_files.open(f"reference/{module}.md", "w") as f:
            f.write(module_page(module, description))
        index.append(f"- [`{module}`]({module}.md) — {description}")
    index += [
        "",
        "- [Error codes](errors.md) — every error code, its meaning and what to do",
        "- [The `prism` command](cli.md) — the CLI's help",
    ]
    with mkdocs_gen_files.open("reference/index.md", "w") as f:
        f.write("\n".join(index) + "\n")
    with mkdocs_gen_files.open("reference/errors.md", "w") as f:
        f.write(errors_page())
    with mkdocs_gen_files.open("reference/cli.md", "w") as f:
        f.write(cli_page())


if __name__ in ("__main__", "<run_path>"):
    main()
