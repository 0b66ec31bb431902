"""The memory store's entry copy equals ``copy.deepcopy`` and shares nothing mutable (STORE-3 as
revised): flat containers copied whole, nested ones through ``marshal``, anything ``marshal`` does
not take one by one."""

from __future__ import annotations

import copy
import enum
from collections import OrderedDict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from prism._fast_entry_copy import clone
from prism.store import copy_entry, new_session_entry
from prism.types import Message, TextContent, ToolResultContent


class Colour(enum.IntEnum):
    RED = 1


class Tagged(str):
    """A ``str`` subclass: marshal refuses it."""


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.sampled_from([Colour.RED, Tagged("t")]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=6), inner, max_size=4),
        st.tuples(inner, inner),
        st.builds(
            lambda d: OrderedDict(d), st.dictionaries(st.text(max_size=3), inner, max_size=2)
        ),
    ),
    max_leaves=20,
)


def _mutables(value: Any, found: list[Any]) -> list[Any]:
    if isinstance(value, (dict, list)):
        found.append(value)
    if isinstance(value, dict):
        for item in value.values():
            _mutables(item, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _mutables(item, found)
    return found


@settings(max_examples=300, deadline=None)
@given(values)
def test_clone_equals_deepcopy_and_shares_no_container_store_3(value: Any) -> None:
    copied = clone(value)
    assert copied == copy.deepcopy(value)
    assert type(copied) is type(value)
    originals = {id(c) for c in _mutables(value, [])}
    assert not originals & {id(c) for c in _mutables(copied, [])}


def test_a_value_shared_twice_and_a_deep_one_are_copied_store_3() -> None:
    row = {"id": 1, "tags": ["a"]}
    value = {"rows": [row, row]}
    copied = clone(value)
    assert copied == value and copied["rows"][0] is not row
    deep: Any = "leaf"
    for _ in range(1500):  # deeper than marshal's limit is copied one by one or not at all
        deep = [deep]
    try:
        assert clone(deep) == deep
    except RecursionError:
        pass


def test_an_entry_without_mutable_contents_is_shared_store_3() -> None:
    text = new_session_entry(
        "message", session_id="s", message=Message("user", (TextContent("hi"),))
    )
    assert copy_entry(text) is text
    result = Message(
        "tool", (ToolResultContent(tool_call_id="c", name="t", result={"rows": [{"a": 1}]}),)
    )
    entry = new_session_entry("message", session_id="s", message=result)
    copied = copy_entry(entry)
    assert copied is not entry and copied == entry
    assert copied.message is not None and entry.message is not None
    part, original = copied.message.content[0], entry.message.content[0]
    assert isinstance(part, ToolResultContent) and isinstance(original, ToolResultContent)
    assert part.result is not original.result
