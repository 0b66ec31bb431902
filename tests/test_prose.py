"""Self-contained prose: the source explains its rules in words (ARCH issue 10, point 5).

The functional spec is not part of the repository, so requirement ids may name tests and commits
but never stand in code, docstrings or comments; numbered ``# step N`` comments go the same way.
The shipped SQL migrations are exempt: their checksums are recorded in every database.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "prism"
SPEC_ID = re.compile(
    r"\b(CON|RUN|EVT|DUR|PROV|ARCH|TOOL|TP|DB|REC|POOL|LIM|GVR|APR|STORE|LOOP|STEER|SO|GRD|OAI"
    r"|ANT|RETRY|ERR|SSL|MOCK|USAGE)-[0-9]+"
)
STEP_COMMENT = re.compile(r"#\s*(-+\s*)?(step\s+\d|steps\s+\d|\d+\.\s)", re.IGNORECASE)
SPEC_FILE = re.compile(r"\b\d\d-(contracts|session-runtime|loops|events|durable-runs|turn-policy"
                       r"|tools-guardrails|providers|error-codes|stores)\b")


def _sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_no_spec_ids_or_spec_file_names_in_the_source() -> None:
    found = []
    for path in _sources():
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if SPEC_ID.search(line) or SPEC_FILE.search(line):
                found.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert not found, "spec references left in the source:\n" + "\n".join(found)


def test_no_numbered_step_comments() -> None:
    found = []
    for path in _sources():
        tokens = tokenize.generate_tokens(io.StringIO(path.read_text("utf-8")).readline)
        for token in tokens:
            if token.type == tokenize.COMMENT and STEP_COMMENT.search(token.string):
                found.append(f"{path.relative_to(SRC)}:{token.start[0]}: {token.string}")
    assert not found, "numbered step comments:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("text", "flagged"),
    [
        ('"""Check SO-1."""', True),
        ("x = 1  # RUN-15 4-5", True),
        ('"""See 05-durable-runs."""', True),
        ('"""Structured-output names are 1-128 characters."""', False),
        ('"""ERR_PRISM_CONFIG"""', False),
    ],
)
def test_spec_id_scan_can_fail(text: str, flagged: bool) -> None:
    assert bool(SPEC_ID.search(text) or SPEC_FILE.search(text)) is flagged


@pytest.mark.parametrize(
    ("comment", "flagged"),
    [("# step 3", True), ("# -- 2. load", True), ("# Steps 6-9: usage", True),
     ("# The stored envelope.", False), ("# 1-based turn index", False)],
)
def test_step_comment_scan_can_fail(comment: str, flagged: bool) -> None:
    assert bool(STEP_COMMENT.search(comment)) is flagged
