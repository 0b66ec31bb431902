"""Payloads walked once per turn: the walk that checks a tool result or a call's arguments also
copies and measures them, and the copy and the size are carried on to the store and the request
byte count.

Passes over a payload without a redactor (a ``dict`` of the types a JSON decoder produces):

* a tool call's arguments — one walk when the provider's call arrives
  ([`prism._json.copy_json()`][prism._json.copy_json]: the JSON check, a private copy, the canonical size), then the call
  around them is measured once: its size, with the event's tag, is charged to
  ``max_response_bytes`` and, when the assistant message joins a request, is the call's part of
  the request byte count; the copy is what the store keeps. (The tool's argument schema check is the
  tool's own, separate pass.)
* a tool result — one walk in the dispatcher (the same function, see
  [`prism.tools.results.normalise_result()`][prism.tools.results.normalise_result]), carried the same way, when nothing can change
  the result after ``execute`` (no ``tool_result`` hook, no tool-output guardrail).

[`PayloadCarry`][prism.runtime.run._carry.PayloadCarry] holds what was carried for one run leg. The codec
([`RequestCodec`][prism.runtime.run._request_codec.RequestCodec]) takes the sizes; [`PayloadCarry.for_store()`][prism.runtime.run._carry.PayloadCarry.for_store]
gives the message to store with the copies in place of the values, and says whether every
mutable container of that message is such a copy: then the loop context hands the entry over
(``MemorySessionStore.append_owned``) and the memory store keeps it without copying it again.
The history, the run's messages and the events keep the values the provider and the tool
produced; only the store holds the copies, which nobody else references.

Like messages, carried values are frozen once carried: a host that changes a tool's arguments or
result in place afterwards (an observer, a tool changing its own ``arguments``) is not seen by
the byte count. With a redactor every payload takes the general path (a check, the redaction,
the store's copy, a size). Payloads of every size are carried: the copy the walk made is the one
the store keeps, so nothing is copied twice.

Measured worth (the realistic scenario of ``benchmarks/bench_realistic.py``, memory store, against
the same tree checking, copying and measuring each payload separately): instructions per turn
(``valgrind --tool=cachegrind``, deterministic) 2.44 M → 2.17 M at N=200 and 2.97 M → 2.73 M at
N=20, together with the per-turn changes made alongside; CPU time per turn, interleaved A/B on a
loaded machine (11 rounds, median of paired ratios), −15 % at N=200 and −10 % at N=20.
"""

from __future__ import annotations

from typing import Any, Final

from prism._fast_entry_copy import replace_field
from prism._json import copy_json
from prism.runtime.run._json_size import canonical_size, canonical_size_known
from prism.runtime.run._request_codec import RequestCodec
from prism.types import (
    ImageContent,
    Message,
    ProviderToolCall,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
)

__all__ = ["PayloadCarry"]

_STRING_PARTS: Final = frozenset({TextContent, ThinkingContent, ImageContent})
"""Content parts made only of strings (nothing in them can be changed in place)."""
_ATOMIC: Final = frozenset({str, int, float, bool, type(None)})
_BARE_CALL: Final = ToolCallContent("", "", {})
_CALL_FRAME: Final = canonical_size(ProviderToolCall(_BARE_CALL)) - canonical_size(_BARE_CALL)
"""What a ``tool_call`` stream event adds to the size of its call (its ``type`` tag, braces)."""


class PayloadCarry:
    """The copies and sizes of one run leg's tool results and call arguments.

    Args:
        codec: The leg's request codec (receives the sizes).
    """

    __slots__ = ("_codec", "copies")

    def __init__(self, codec: RequestCodec) -> None:
        self._codec = codec
        self.copies: dict[int, tuple[Any, Any]] = {}
        """The carried ``(value, copy)`` pairs not handed out yet, by value id (empty: nothing
        to look for)."""

    def keep(self, value: Any, copy: Any, size: int) -> None:
        """Carry ``copy`` and ``size`` of the dict ``value`` (the dispatcher's ``measured``)."""
        self.copies[id(value)] = (value, copy)
        self._codec.carry_size(value, size)

    def call_size(self, event: ProviderToolCall) -> int:
        """The canonical size of a provider's tool call event, its arguments checked, copied and
        measured in one walk; the copy and the call's own size are carried on (the codec takes
        the size when it measures the assistant message holding the call). ``-1`` when the
        arguments take the general path (not a ``dict``, an ``arguments_error``, outside the
        decoded-JSON types)."""
        call = event.call
        arguments = call.arguments
        if type(arguments) is not dict or call.arguments_error is not None:
            return -1
        walked = copy_json(arguments)
        if walked is None:
            return -1
        copy, size = walked
        self.copies[id(arguments)] = (arguments, copy)
        size = canonical_size_known(call, {id(arguments): (arguments, size)})
        self._codec.carry_size(call, size)  # the assistant message holds this very call
        return size + _CALL_FRAME

    def for_store(self, message: Message) -> tuple[Message, bool]:
        """``(message to store, owned)``: ``message`` with its carried tool-result values and call
        arguments replaced by their copies (each copy is handed out once), and whether that
        message is the runtime's own — every mutable container in it is such a copy (text,
        thinking and image parts hold only strings), so a store may keep it without copying
        (``MemorySessionStore.append_owned``). The message to store equals ``message``."""
        copies = self.copies
        content = message.content
        owned = message.metadata is None
        if isinstance(content, str):
            return message, owned
        parts: list[Any] | None = None
        given: tuple[Any, ...] = content  # the parts' types are told apart by ``type`` below
        for index, part in enumerate(given):
            kind = type(part)
            name: str
            value: Any
            if kind is ToolResultContent:
                name, value = "result", part.result
                owned = owned and part.error is None
            elif kind is ToolCallContent:
                name, value = "arguments", part.arguments
                owned = owned and part.arguments_error is None and part.authority is None
            else:
                owned = owned and kind in _STRING_PARTS
                continue
            hit = copies.pop(id(value), None) if copies else None
            if hit is None or hit[0] is not value:
                owned = owned and type(value) in _ATOMIC
                continue
            if parts is None:
                parts = list(content)
            parts[index] = replace_field(part, name, hit[1])
        if parts is None:
            return message, owned
        return replace_field(message, "content", tuple(parts)), owned
