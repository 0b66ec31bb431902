"""Tool results walked once: the dispatcher's walk hands its copy and size on to the store and the
request byte count.

When nothing can change a tool result after ``execute`` returned it (no redactor, no
``tool_result`` hook, no tool-output guardrail), the dispatcher checks a ``dict`` result with one
walk that also copies it and measures its canonical JSON size
(:func:`prism.tools.results.normalise_result`). :class:`ResultCarry` receives both:

* the size goes to the run's :class:`~prism.runtime._request_codec.RequestCodec`, which takes it
  when the result's message joins a request instead of measuring the value again;
* the copy is what the store keeps: :meth:`ResultCarry.store_message` gives the message to store
  with the copy in place of the value, and the loop context appends it with the copy donated
  (:func:`prism._fast_entry_copy.donated`), so a store that copies entries on the way in (the
  memory store) takes it as it is.

So a tool result is walked once per turn instead of three times (check, store copy, size). The
history, the run's messages and the events keep the value the tool returned; only the store holds
the copy, which nobody else references. Small results (under :data:`MIN_CARRIED_BYTES`) are only
checked: for them the bookkeeping would cost more than the walks it saves.
"""

from __future__ import annotations

from typing import Any, Final

from prism._fast_entry_copy import rebuild_dataclass
from prism.runtime._request_codec import RequestCodec
from prism.types import Message, ToolResultContent

__all__ = ["MIN_CARRIED_BYTES", "ResultCarry"]

MIN_CARRIED_BYTES: Final = 256
"""Canonical JSON size from which a result's copy and size are carried on."""


class ResultCarry:
    """The copies and sizes of one run leg's tool results, from the dispatcher to the store.

    Args:
        codec: The leg's request codec (receives the sizes).
    """

    __slots__ = ("_codec", "copies")

    def __init__(self, codec: RequestCodec) -> None:
        self._codec = codec
        self.copies: dict[int, tuple[Any, Any]] = {}
        """The kept ``(value, copy)`` pairs not handed out yet, by value id (empty: nothing to
        look for)."""

    def keep(self, value: Any, copy: Any, size: int) -> None:
        """The dispatcher's receiver (``measured``): ``copy`` and ``size`` of the dict ``value``."""
        if size < MIN_CARRIED_BYTES:
            return
        self.copies[id(value)] = (value, copy)
        self._codec.carry_size(value, size)

    def store_message(self, message: Message) -> tuple[Message, Any] | None:
        """``(message to store, the copy it holds)`` for a tool-result message whose value was
        kept, else ``None``. The message to store equals ``message``; its result value is the
        kept copy. Each copy is handed out once."""
        copies = self.copies
        if not copies or message.role != "tool":
            return None
        content = message.content
        part = content[0] if content else None
        if type(part) is not ToolResultContent:
            return None
        value = part.result
        hit = copies.pop(id(value), None)
        if hit is None or hit[0] is not value:
            return None
        copy = hit[1]
        stored = rebuild_dataclass(part, {"result": copy})
        return rebuild_dataclass(message, {"content": (stored, *content[1:])}), copy
