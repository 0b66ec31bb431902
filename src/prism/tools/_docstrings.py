"""Reading a tool function's docstring: its description and one description per parameter.

The ``@tool`` decorator shows the model the docstring up to its first section header or field
(Google ``Args:``/``Returns:``/... or reST ``:param x:``), and puts each parameter's description
into the generated JSON Schema. Both Google-style ``Args:`` sections and reST ``:param`` fields
are understood; continuation lines are joined with single spaces.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence

__all__ = ["split_docstring"]

_GOOGLE_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|"
    r"Returns?|Yields?|Raises|Examples?|Notes?|Attributes|See Also|Warnings?|Todo|References)"
    r"\s*:\s*$"
)
_GOOGLE_ARGS = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments)\s*:\s*$"
)
_GOOGLE_ITEM = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:(.*)$")
_REST_FIELD = re.compile(r"^:(\w+)(?:\s+([^:]*?))?\s*:(.*)$")


def split_docstring(doc: str | None) -> tuple[str | None, dict[str, str]]:
    """Return (description up to the parameter section, per-parameter descriptions).

    The description is ``None`` when empty; parameters without a description are absent.
    """
    if not doc:
        return None, {}
    lines = inspect.cleandoc(doc).splitlines()
    cut = len(lines)
    for i, line in enumerate(lines):
        stripped = line.strip()
        if _GOOGLE_SECTION.match(stripped) or _REST_FIELD.match(stripped):
            cut = i
            break
    description = "\n".join(lines[:cut]).strip() or None
    params: dict[str, str] = {}
    _parse_google(lines, params)
    _parse_rest(lines, params)
    return description, params


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _parse_google(lines: Sequence[str], params: dict[str, str]) -> None:
    """Add the items of every Google ``Args:``-style section to ``params``."""
    i = 0
    while i < len(lines):
        header = lines[i]
        if not _GOOGLE_ARGS.match(header.strip()):
            i += 1
            continue
        base = _indent(header)
        i += 1
        item_indent: int | None = None
        current: str | None = None
        while i < len(lines):
            line = lines[i]
            if not line.strip():
                i += 1
                continue
            ind = _indent(line)
            if ind <= base:
                break
            if item_indent is None:
                item_indent = ind
            text = line.strip()
            if ind <= item_indent:
                match = _GOOGLE_ITEM.match(text)
                if match:
                    current = match.group(1)
                    params[current] = match.group(2).strip()
                else:
                    current = None
            elif current is not None:
                params[current] = (params[current] + " " + text).strip()
            i += 1


def _parse_rest(lines: Sequence[str], params: dict[str, str]) -> None:
    """Add every reST ``:param x:`` (or ``:arg``/``:key``/...) field to ``params``."""
    current: str | None = None
    field_indent = 0
    for line in lines:
        text = line.strip()
        match = _REST_FIELD.match(text)
        if match:
            current = None
            kind, target, rest = match.group(1), match.group(2), match.group(3)
            if kind in ("param", "parameter", "arg", "argument", "key", "keyword") and target:
                current = target.split()[-1]
                params[current] = rest.strip()
                field_indent = _indent(line)
            continue
        if current is not None and text and _indent(line) > field_indent:
            params[current] = (params[current] + " " + text).strip()
        elif current is not None and (not text or _indent(line) <= field_indent):
            current = None
