"""What changed between a recording and a replay, said in words: the first differing field.

A replay that does not match its recording fails with one sentence naming the first difference,
in the order a reader checks an agent: the request's head ([`head_diff()`][prism.evals._diff.head_diff] — model, system
prompt, tools and their schemas, options, context), then its messages ([`messages_diff()`][prism.evals._diff.messages_diff]),
then a tool call's arguments ([`arguments_diff()`][prism.evals._diff.arguments_diff]) or a real tool's result
([`result_diff()`][prism.evals._diff.result_diff]). [`event_stream_diff()`][prism.evals._diff.event_stream_diff] compares the ledger events of two runs,
ignoring ids and timestamps.

Examples of the sentences: ``tool `search` schema changed: property `limit` added``; ``system
prompt changed at line 3: 'Be brief.' → 'Be thorough.'``; ``option `tool_choice` changed:
'auto' → 'none'``; ``tool `lookup` (call c1): argument `order` changed: '17' → '18'``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from prism._json import canonical_json

__all__ = [
    "arguments_diff",
    "event_stream_diff",
    "first_difference",
    "head_diff",
    "messages_diff",
    "normalized_event",
    "path_matches",
    "result_diff",
    "shown",
]

_MISSING: Final = object()
"""A key one side does not have."""

_SHOWN_CHARS: Final = 80


def shown(value: object) -> str:
    """A value as a short literal: a str in quotes, JSON otherwise, cut at 80 characters."""
    if value is _MISSING:
        return "(absent)"
    if isinstance(value, str):
        text = repr(value)
    else:
        try:
            text = canonical_json(value)
        except (TypeError, ValueError):
            text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def _join(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def first_difference(
    recorded: object, current: object, path: str = ""
) -> tuple[str, Any, Any] | None:
    """The first path at which two JSON values differ, with both values there (``_MISSING``
    for a key one side lacks); ``None`` when they are equal. Mappings are walked key by key
    (sorted), lists item by item; a ``bool`` never equals a number."""
    if isinstance(recorded, Mapping) and isinstance(current, Mapping):
        for key in sorted(set(recorded) | set(current), key=str):
            found = first_difference(
                recorded.get(key, _MISSING), current.get(key, _MISSING), _join(path, key)
            )
            if found is not None:
                return found
        return None
    if isinstance(recorded, (list, tuple)) and isinstance(current, (list, tuple)):
        for index in range(max(len(recorded), len(current))):
            found = first_difference(
                recorded[index] if index < len(recorded) else _MISSING,
                current[index] if index < len(current) else _MISSING,
                _join(path, index),
            )
            if found is not None:
                return found
        return None
    if type(recorded) is bool or type(current) is bool:
        same = type(recorded) is type(current) and recorded == current
    else:
        same = recorded == current
    return None if same else (path, recorded, current)


def _change(label: str, recorded: object, current: object) -> str:
    if recorded is _MISSING:
        return f"{label} added: {shown(current)}"
    if current is _MISSING:
        return f"{label} removed (was {shown(recorded)})"
    return f"{label} changed: {shown(recorded)} → {shown(current)}"


# --------------------------------------------------------------------------- tool schemas


def _schema_diff(recorded: Any, current: Any, where: str = "") -> str | None:
    """The first difference of two JSON Schemas of an argument object, in words."""
    if not isinstance(recorded, Mapping) or not isinstance(current, Mapping):
        found = first_difference(recorded, current)
        return None if found is None else _change("the schema", recorded, current)
    old_props = recorded.get("properties")
    new_props = current.get("properties")
    if isinstance(old_props, Mapping) and isinstance(new_props, Mapping):
        for name in new_props:
            if name not in old_props:
                return f"property `{where}{name}` added"
        for name in old_props:
            if name not in new_props:
                return f"property `{where}{name}` removed"
        old_required = set(recorded.get("required") or ())
        new_required = set(current.get("required") or ())
        for name in new_props:
            if name in new_required and name not in old_required:
                return f"property `{where}{name}` became required"
            if name in old_required and name not in new_required:
                return f"property `{where}{name}` is no longer required"
        for name in new_props:
            inner = _schema_diff(old_props[name], new_props[name], f"{where}{name}.")
            if inner is not None:
                return inner
    elif isinstance(old_props, Mapping) != isinstance(new_props, Mapping):
        return _change(f"`{where}properties`", old_props or _MISSING, new_props or _MISSING)
    items_old, items_new = recorded.get("items"), current.get("items")
    if isinstance(items_old, Mapping) and isinstance(items_new, Mapping):
        inner = _schema_diff(items_old, items_new, f"{where}[].")
        if inner is not None:
            return inner
    for key in sorted(set(recorded) | set(current)):
        if key in ("properties", "required") or (
            key == "items" and isinstance(items_old, Mapping) and isinstance(items_new, Mapping)
        ):
            continue
        old, new = recorded.get(key, _MISSING), current.get(key, _MISSING)
        if first_difference(old, new) is not None:
            subject = f"property `{where[:-1]}`: " if where else ""
            return _change(f"{subject}`{key}`", old, new)
    return None


def _tools_diff(recorded: Sequence[Any], current: Sequence[Any]) -> str | None:
    old = {t.get("name"): t for t in recorded if isinstance(t, Mapping)}
    new = {t.get("name"): t for t in current if isinstance(t, Mapping)}
    for name in new:
        if name not in old:
            return f"tool `{name}` added"
    for name in old:
        if name not in new:
            return f"tool `{name}` removed"
    for name, tool in new.items():
        before = old[name]
        if before.get("description") != tool.get("description"):
            return _change(
                f"tool `{name}` description",
                before.get("description", _MISSING),
                tool.get("description", _MISSING),
            )
        schema = _schema_diff(before.get("parameters") or {}, tool.get("parameters") or {})
        if schema is not None:
            return f"tool `{name}` schema changed: {schema}"
    if list(old) != list(new):
        return f"tools reordered: {', '.join(map(str, old))} → {', '.join(map(str, new))}"
    return None


# --------------------------------------------------------------------------- heads


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return shown(content)


def _system_diff(recorded: Sequence[Any], current: Sequence[Any]) -> str | None:
    for index in range(max(len(recorded), len(current))):
        label = "system prompt" if index == 0 else f"system message {index + 1}"
        if index >= len(recorded):
            return f"{label} added: {shown(_text_of(current[index]))}"
        if index >= len(current):
            return f"{label} removed (was {shown(_text_of(recorded[index]))})"
        if first_difference(recorded[index], current[index]) is None:
            continue
        old_lines = _text_of(recorded[index]).splitlines()
        new_lines = _text_of(current[index]).splitlines()
        for number in range(max(len(old_lines), len(new_lines))):
            old = old_lines[number] if number < len(old_lines) else _MISSING
            new = new_lines[number] if number < len(new_lines) else _MISSING
            if old != new:
                if old is _MISSING:
                    return f"{label} changed: line {number + 1} added: {shown(new)}"
                if new is _MISSING:
                    return f"{label} changed: line {number + 1} removed (was {shown(old)})"
                return f"{label} changed at line {number + 1}: {shown(old)} → {shown(new)}"
        return f"{label} changed (its non-text content)"
    return None


def head_diff(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> str | None:
    """The first difference of two request heads (``prism.request_hash.request_head``), in
    words; ``None`` when they are equal. Checked in order: model, system prompt, tools, options,
    context."""
    old_model, new_model = recorded.get("model") or {}, current.get("model") or {}
    for key in ("provider", "model"):
        if old_model.get(key) != new_model.get(key):
            return _change(f"model `{key}`", old_model.get(key), new_model.get(key))
    for key in ("parameters", "compat"):
        found = first_difference(old_model.get(key) or {}, new_model.get(key) or {})
        if found is not None:
            path, old, new = found
            return _change(f"model {key[:-1] if key == 'parameters' else key} `{path}`", old, new)
    system = _system_diff(recorded.get("system") or (), current.get("system") or ())
    if system is not None:
        return system
    tools = _tools_diff(recorded.get("tools") or (), current.get("tools") or ())
    if tools is not None:
        return tools
    found = first_difference(recorded.get("options") or {}, current.get("options") or {})
    if found is not None:
        path, old, new = found
        return _change(f"option `{path}`", old, new)
    found = first_difference(recorded.get("context") or [], current.get("context") or [])
    if found is not None:
        path, old, new = found
        return _change(f"context block `{path}`", old, new)
    return None


# --------------------------------------------------------------------------- messages


def _message_label(index: int, message: Mapping[str, Any]) -> str:
    role = message.get("role", "?")
    label = f"message {index + 1} ({role})"
    for part in message.get("content") or ():
        if isinstance(part, Mapping) and part.get("type") == "tool_result":
            return f"{label}, the result of `{part.get('name')}` (call {part.get('tool_call_id')})"
    return label


def messages_diff(
    recorded: Sequence[Mapping[str, Any]], current: Sequence[Mapping[str, Any]]
) -> str | None:
    """The first difference of two conversations (``{"role", "content"}`` messages), in
    words; ``None`` when they are equal."""
    for index, (old, new) in enumerate(zip(recorded, current, strict=False)):
        found = first_difference(old, new)
        if found is not None:
            path, before, after = found
            return _change(f"{_message_label(index, new)}: `{path}`", before, after)
    if len(current) > len(recorded):
        extra = current[len(recorded)]
        return (
            f"the request has {len(current)} messages, the recorded one {len(recorded)}: "
            f"{_message_label(len(recorded), extra)} is new"
        )
    if len(current) < len(recorded):
        return (
            f"the request has {len(current)} messages, the recorded one {len(recorded)}: "
            f"{_message_label(len(current), recorded[len(current)])} is missing"
        )
    return None


# --------------------------------------------------------------------------- tool calls


def arguments_diff(
    tool: str, call_id: str, recorded: Mapping[str, Any], current: Mapping[str, Any]
) -> str | None:
    """The first difference of a call's recorded and actual arguments, in words."""
    found = first_difference(dict(recorded), dict(current))
    if found is None:
        return None
    path, old, new = found
    return _change(f"tool `{tool}` (call {call_id}): argument `{path}`", old, new)


def path_matches(pattern: str, path: str) -> bool:
    """Whether a dotted ``path`` (``rows[0].updated_at`` is ``rows.0.updated_at``) matches
    ``pattern``, where ``*`` stands for one key or index and a pattern also matches every path
    below it."""
    parts = re.sub(r"\[(\d+)\]", r".\1", path).split(".")
    wanted = re.sub(r"\[(\d+|\*)\]", r".\1", pattern).split(".")
    if len(parts) < len(wanted):
        return False
    return all(w == "*" or w == p for w, p in zip(wanted, parts, strict=False))


def result_diff(
    tool: str,
    call_id: str,
    recorded: object,
    current: object,
    ignore: Iterable[str] = (),
) -> str | None:
    """The first difference of a real tool's result from the recorded one, outside the
    ``ignore`` paths ([`path_matches()`][prism.evals._diff.path_matches]), in words."""
    patterns = tuple(ignore)
    pending: list[tuple[str, Any, Any]] = [("", recorded, current)]
    while pending:
        path, old, new = pending.pop(0)
        if any(path_matches(p, path) for p in patterns if path):
            continue
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            for key in sorted(set(old) | set(new), key=str):
                pending.append((_join(path, key), old.get(key, _MISSING), new.get(key, _MISSING)))
            continue
        if isinstance(old, (list, tuple)) and isinstance(new, (list, tuple)):
            for index in range(max(len(old), len(new))):
                pending.append(
                    (
                        _join(path, index),
                        old[index] if index < len(old) else _MISSING,
                        new[index] if index < len(new) else _MISSING,
                    )
                )
            continue
        if first_difference(old, new) is not None:
            where = f" `{path}`" if path else ""
            return _change(f"tool `{tool}` (call {call_id}): result{where}", old, new)
    return None


# --------------------------------------------------------------------------- event streams

_VOLATILE_SUFFIXES: Final = ("_at", "_ms", "_id")
_KEPT: Final = frozenset({"tool_call_id", "provider_id"})


def normalized_event(event: Mapping[str, Any]) -> Any:
    """An event's dict without its ids and times: keys ``id``, ``timestamp`` and those ending
    in ``_id``, ``_at`` or ``_ms`` are dropped at every depth (``tool_call_id`` and
    ``provider_id`` are kept)."""

    def walk(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {
                key: walk(item)
                for key, item in value.items()
                if key in _KEPT
                or not (
                    key in ("id", "timestamp")
                    or (isinstance(key, str) and key.endswith(_VOLATILE_SUFFIXES))
                )
            }
        if isinstance(value, (list, tuple)):
            return [walk(item) for item in value]
        return value

    return walk(event)


def _call_of(event: Mapping[str, Any]) -> str | None:
    call = event.get("tool_call_id")
    if isinstance(call, str):
        return call
    inner = event.get("call")
    if isinstance(inner, Mapping) and isinstance(inner.get("id"), str):
        return str(inner["id"])
    return None


def event_stream_diff(
    recorded: Sequence[Mapping[str, Any]], replayed: Sequence[Mapping[str, Any]]
) -> str | None:
    """The first difference of two runs' event streams (event dicts, ``event.to_dict()``),
    ignoring ids and timestamps (``normalized_event()``); ``None`` when they are equal.

    Events of one tool call (those naming its ``tool_call_id``) are compared per call, in
    order, so that parallel calls whose events interleave differently still compare equal;
    every other event is compared in stream order."""

    def split(events: Sequence[Mapping[str, Any]]) -> tuple[list[Any], dict[str, list[Any]]]:
        main: list[Any] = []
        calls: dict[str, list[Any]] = {}
        for event in events:
            call = _call_of(event) if str(event.get("type", "")).startswith("tool_") else None
            normal = normalized_event(event)
            if call is None:
                main.append(normal)
            else:
                calls.setdefault(call, []).append(normal)
        return main, calls

    old_main, old_calls = split(recorded)
    new_main, new_calls = split(replayed)
    for index in range(max(len(old_main), len(new_main))):
        old = old_main[index] if index < len(old_main) else _MISSING
        new = new_main[index] if index < len(new_main) else _MISSING
        found = first_difference(old, new)
        if found is not None:
            shown_event: Any = new if new is not _MISSING else old
            path, before, after = found
            where = f" `{path}`" if path else ""
            return _change(f"event {index + 1} ({shown_event.get('type')}){where}", before, after)
    for call in sorted(set(old_calls) | set(new_calls)):
        found = first_difference(old_calls.get(call, []), new_calls.get(call, []))
        if found is not None:
            path, before, after = found
            return _change(f"events of tool call {call} `{path}`", before, after)
    return None
