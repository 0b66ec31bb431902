"""``prism run`` never prints a secret a provider streams in pieces (EVT-21, EVT-25).

The API key the command registers, split at any chunk boundaries in thinking, text and
tool-argument deltas of a scripted provider, is absent from ``--plain`` and ``--json`` output and
from the SQLite store; the text deltas ``--json`` prints join to the redacted text.
"""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.cli import main
from prism.providers.base import (
    provider_done,
    provider_text_delta,
    provider_thinking_delta,
    provider_tool_call_delta,
)
from prism.providers.mock import MockScriptItem, create_mock_provider
from prism.redaction import create_secret_redactor

# Characters JSON leaves alone and that no id, field name, event type, CLI note or
# "[REDACTED]" marker contains; fillers share them and add a space.
SECRET_CHARS = "GHJKXYZ-"
keys = st.text(alphabet=SECRET_CHARS, min_size=2, max_size=16)
fillers = st.text(alphabet=SECRET_CHARS + " ", max_size=10)


def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in zip(points, points[1:], strict=False) if b > a] or [text]


def _script(thinking: list[str], text: list[str], arguments: list[str]) -> list[list[Any]]:
    first: list[MockScriptItem] = [provider_thinking_delta(chunk) for chunk in thinking]
    for n, chunk in enumerate(arguments):
        if n < len(text):
            first.append(provider_text_delta(text[n]))
        extra = {"id": "c1", "name": "calculator"} if n == 0 else {}
        first.append(provider_tool_call_delta(0, arguments_text=chunk, **extra))
    first.extend(provider_text_delta(chunk) for chunk in text[len(arguments) :])
    first.append(provider_done())
    return [first, [provider_text_delta(" done"), provider_done()]]


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data(), key=keys)
def test_a_key_streamed_in_pieces_is_never_printed_or_stored(
    data: st.DataObject, key: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """EVT-21/EVT-25: ``--plain`` and ``--json`` output and the store hold no piece-wise
    streamed key; the ``--json`` text deltas join to the redacted text."""
    monkeypatch.setenv("OPENAI_API_KEY", key)

    def around(value: str) -> str:
        return data.draw(fillers) + value + data.draw(fillers)

    text = around(key)
    thinking = around(key)
    arguments = json.dumps({"expression": around(key)})
    cuts = st.lists(st.integers(0, 100), max_size=8)
    script = _script(
        _split(thinking, data.draw(cuts)),
        _split(text, data.draw(cuts)),
        _split(arguments, data.draw(cuts)),
    )
    store = Path(tempfile.mkdtemp(dir=tmp_path))  # one store per example
    for flag in ("--plain", "--json"):
        provider = create_mock_provider(turns=script)
        out, err = io.StringIO(), io.StringIO()
        code = main(
            ["run", "x", "--model", "openai:gpt-test", "--store", f"sqlite:///{store}/s.db", flag],
            out=out,
            err=err,
            provider_override=lambda p=provider: p,
        )
        printed = out.getvalue() + err.getvalue()
        assert code == 0, printed
        assert key not in printed
        expected = create_secret_redactor([key]).redact(text) + " done"
        if flag == "--plain":  # the text as it streams; a line break ends each message
            assert out.getvalue().replace("\n", "") == expected
        else:
            lines = [json.loads(line) for line in out.getvalue().splitlines()]
            deltas = [
                line["content"]["text"]
                for line in lines
                if line["type"] == "message_delta" and line["content"]["type"] == "text"
            ]
            assert "".join(deltas) == expected
    assert key not in _store_text(store / "s.db")


def _store_text(path: Path) -> str:
    """Every value of every row of every table, as text."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return "\n".join(
            repr(row) for table in tables for row in db.execute(f'SELECT * FROM "{table}"')
        )
