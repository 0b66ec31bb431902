"""A durable envelope's text is the standard encoder's, however it is put together (DUR-3).

* [`parts_text()`][prism.runtime.durable._envelope.parts_text] gives ``json.dumps(parts)`` (compact, NaN refused) and raises exactly when
  ``check_shape`` or the encoder would, with the open round's calls taken from the
  [`CallTexts`][prism.runtime.durable._envelope.CallTexts] memo or not;
* the compact text functions built once ([`prism._fast_json.compact_text()`][prism._fast_json.compact_text]) give the standard
  encoder's text and errors, a circular value included;
* the tracker's exported counters are ``counters.to_dict()``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prism._fast_json import compact_text
from prism._serde import to_json_text
from prism.limits import RunLimits
from prism.limits.tracker import RunLimitTracker
from prism.runtime.durable._envelope import CallTexts, check_shape, json_text, parts_text
from prism.types import Message, TextContent, ToolCallContent


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _plain(parts: Any) -> str | type[Exception]:
    """What the plain path gives: the text, or the class of the error it raises."""
    try:
        check_shape(parts, 0)
        return _dumps(parts)
    except (TypeError, ValueError, RecursionError) as exc:
        return type(exc)


def _fast(
    head: dict[str, Any], pending: list[Any], tail: dict[str, Any], calls: CallTexts
) -> str | type[Exception]:
    try:
        return parts_text(head, pending, tail, calls)
    except (TypeError, ValueError, RecursionError) as exc:
        return type(exc)


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=6),
    st.floats(allow_nan=True, allow_infinity=True),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"d": value}
    return value


call_objects = st.one_of(
    st.builds(
        lambda name, args: {"type": "tool_call", "id": "call_1", "name": name, "arguments": args},
        st.text(max_size=4),
        st.dictionaries(st.text(max_size=3), json_values, max_size=4),
    ),
    st.integers(26, 32).map(_nested),  # around the depth limit at the call's place
    st.just({str(i): i for i in range(257)}),  # over the key limit
    json_values,
)
entries = st.one_of(
    st.builds(
        lambda call, status, extra: {"call": call, "status": status, **extra},
        call_objects,
        st.sampled_from(["ready", "dispatched"]),
        st.dictionaries(st.sampled_from(["approval_id", "decision", "child"]), json_values),
    ),
    json_values,  # another shape: the plain path for that entry
)


@given(
    before=st.dictionaries(st.sampled_from(["status", "leaf_id", "input"]), json_values),
    pending=st.lists(entries, max_size=3),
    after=st.dictionaries(st.sampled_from(["counters", "loop_state", "trace"]), json_values),
)
@settings(max_examples=400, deadline=None)
def test_parts_text_is_the_plain_text_or_error_DUR_3(
    before: dict[str, Any], pending: list[Any], after: dict[str, Any]
) -> None:
    parts = {**before, "pending_calls": pending, **after}
    calls = CallTexts()
    expected = _plain(parts)
    assert _fast(before, pending, after, calls) == expected
    # a second write takes the remembered calls
    assert _fast(before, pending, after, calls) == expected


def test_parts_text_reuses_a_call_only_while_it_is_the_same_object() -> None:
    calls = CallTexts(limit=2)
    call = {"id": "c1", "arguments": {"q": "x"}}
    head = {"status": "running"}
    pending: list[Any] = [{"call": call, "status": "ready"}]
    tail = {"counters": {"turns": 1}}

    def plain() -> str:
        return _dumps({**head, "pending_calls": pending, **tail})

    assert parts_text(head, pending, tail, calls) == plain()
    pending[0]["status"] = "dispatched"
    assert parts_text(head, pending, tail, calls) == plain()
    pending[0]["call"] = {"id": "c1", "arguments": {"q": "y"}}  # a new object: encoded anew
    assert parts_text(head, pending, tail, calls) == plain()
    for i in range(5):  # the memo stays within its limit
        calls.text_of({"n": i})
    assert len(calls._texts) <= 2
    calls.clear()
    assert not calls._texts


def test_parts_text_without_other_members() -> None:
    pending: list[Any] = [{"call": {"a": 1}, "status": "ready"}]
    assert parts_text({}, pending, {}, CallTexts()) == _dumps({"pending_calls": pending})
    assert parts_text({}, [], {}, CallTexts()) == '{"pending_calls":[]}'
    many = {f"k{i}": i for i in range(300)}  # over the key limit together
    with pytest.raises(ValueError, match="keys"):
        parts_text(many, [], {}, CallTexts())


@given(json_values)
@settings(max_examples=300, deadline=None)
def test_compact_text_is_json_dumps(value: Any) -> None:
    text = compact_text()
    try:
        expected: Any = _dumps(value)
    except ValueError:
        expected = ValueError
    try:
        got: Any = text(value)
    except ValueError:
        got = ValueError
    assert got == expected
    if expected is not ValueError:
        assert json_text(value) == expected


def test_compact_text_errors_are_the_standard_ones() -> None:
    text = compact_text()
    circular: list[Any] = []
    circular.append(circular)
    with pytest.raises(ValueError, match="Circular reference"):
        text(circular)
    looped: dict[str, Any] = {}
    looped["self"] = looped
    with pytest.raises(ValueError, match="Circular reference"):
        to_json_text(looped)
    with pytest.raises(TypeError, match="Object of type object is not JSON serializable"):
        text({"x": object()})
    with pytest.raises(ValueError):
        text([math.nan])
    # the encoder is reused after a failure
    assert text({"a": [1, 2.5, None, True, "é"]}) == '{"a":[1,2.5,null,true,"é"]}'


def test_to_json_text_of_an_entry_is_dumps_of_its_dict() -> None:
    message = Message(
        role="assistant",
        content=(TextContent("hi ✓"), ToolCallContent("call_1", "search", {"q": [1, {"x": None}]})),
    )
    assert to_json_text(message) == _dumps(message.to_dict())


def test_export_counters_is_counters_to_dict() -> None:
    tracker = RunLimitTracker(RunLimits())
    assert tracker.export_counters() == tracker.counters.to_dict()
    assert list(tracker.export_counters()) == list(tracker.counters.to_dict())
    tracker.charge_turn()
    tracker.charge_tool_round()
    tracker.charge_request_bytes(123)
    assert tracker.export_counters() == tracker.counters.to_dict()
    restored = RunLimitTracker(RunLimits(), counters={**tracker.export_counters(), "cost": 1.5})
    assert restored.export_counters() == restored.counters.to_dict()
