"""The stored envelope is read in one module: no string-key reads of its fields elsewhere.

Every module of ``prism.runtime.durable``, ``prism.runtime.agents``, ``prism.engines`` and
``prism.cli`` reads a durable run's envelope through
:class:`~prism.runtime.durable._run_envelope.RunEnvelope` (fields, records, accessors); only
that module turns the stored JSON object into one and back. The check finds a subscript
(``x["pending_calls"]``) or a ``.get`` / ``.pop`` / ``.setdefault`` call (``x.get("leaf_id")``)
whose key is one of the envelope's top-level keys, or ``RELEASE_KEY``. Keys that also name
other things (``status``, ``run_id``, ``session_id``, ``model``, ``input``, ``interruption``
of a ``RunResult``) are checked in the
durable modules only, where any such read is an envelope read.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "prism"
ENVELOPE_MODULE = SRC / "runtime" / "durable" / "_run_envelope.py"

DISTINCTIVE = frozenset(
    (
        "schema_version",
        "agent_id",
        "definition_revision",
        "fingerprint",
        "interrupt_before_tool",
        "checkpoint_policy",
        "source_tools",
        "leaf_id",
        "stop_reason",
        "pending_calls",
        "sticky_decisions",
        "decided",
        "counters",
        "steers",
        "deadline_at",
        "loop_state",
        "release",
    )
)
"""Top-level envelope keys that name nothing else in the checked packages."""
GENERIC = frozenset(("status", "run_id", "session_id", "model", "input", "trace", "interruption"))
"""Top-level envelope keys that other mappings have too."""


def _key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id == "RELEASE_KEY":
        return "release"
    return None


def envelope_reads(path: Path, keys: frozenset[str]) -> list[str]:
    """``file:line key`` of each string-key read of ``keys`` in ``path``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        key: str | None = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = _key(node.slice)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault")
            and node.args
        ):
            key = _key(node.args[0])
        if key is not None and key in keys:
            found.append(f"{path.relative_to(SRC)}:{node.lineno} {key}")
    return found


def checked_modules() -> list[tuple[Path, frozenset[str]]]:
    durable = sorted((SRC / "runtime" / "durable").glob("*.py"))
    others = [
        *sorted((SRC / "runtime" / "agents").glob("*.py")),
        *sorted((SRC / "engines").rglob("*.py")),
        *sorted((SRC / "cli").rglob("*.py")),
    ]
    return [(p, DISTINCTIVE | GENERIC) for p in durable if p != ENVELOPE_MODULE] + [
        (p, DISTINCTIVE) for p in others
    ]


def test_the_check_finds_envelope_reads() -> None:
    """The check sees the reads the envelope module makes (it is the one allowed to)."""
    reads = envelope_reads(ENVELOPE_MODULE, DISTINCTIVE | GENERIC)
    assert any(r.endswith(" pending_calls") for r in reads)
    assert any(r.endswith(" leaf_id") for r in reads)
    assert any(r.endswith(" release") for r in reads)


def test_no_string_key_reads_of_the_envelope_outside_its_module() -> None:
    reads = [r for path, keys in checked_modules() for r in envelope_reads(path, keys)]
    assert reads == []


def test_stored_envelopes_convert_back_byte_for_byte() -> None:
    """``RunEnvelope.from_json(x).to_json()`` is ``x`` as stored: same keys, same order (the
    stores write the JSON text in key order), unknown keys and stored nulls kept."""
    import json

    from prism.runtime.durable._envelope import checked_envelope
    from prism.runtime.durable._run_envelope import RunEnvelope

    fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "envelopes"
    values = [
        checked_envelope(record["value"])
        for path in sorted(fixtures.glob("*.json"))
        for record in json.loads(path.read_text(encoding="utf-8"))["checkpoints"]
        if record["namespace"] == "prism.agent-run"
    ]
    assert values
    edited = dict(values[0])
    edited = {"zz_unknown": {"a": 1}, **edited, "leaf_id": None, "trace": None}
    values.append(edited)
    for value in values:
        again = RunEnvelope.from_json(value).to_json()
        assert json.dumps(again) == json.dumps(value)
