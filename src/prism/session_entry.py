"""Session entries: the append-only records a session transcript is made of.

* [`SessionEntry`][prism.session_entry.SessionEntry] — one record; entries form a tree through ``parent_id`` and a branch is
  the path from a root to a leaf;
* [`SessionEntryKind`][prism.session_entry.SessionEntryKind] — what an entry records;
* [`new_session_entry()`][prism.session_entry.new_session_entry] — build an entry with a generated id and the current time.

This module sits below the session store and compaction, which both build and read entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias

from prism._fast_init import fast_init
from prism._serde import Serializable
from prism._util import new_id, now_iso
from prism.types import JsonValue, Message, ModelConfig

__all__ = ["SessionEntry", "SessionEntryKind", "new_session_entry"]

SessionEntryKind: TypeAlias = Literal["message", "model_change", "compaction", "summary", "custom"]
"""What a session entry records."""


@fast_init
@dataclass(frozen=True, slots=True)
class SessionEntry(Serializable):
    """One append-only record of a session transcript.

    Entries form a tree through ``parent_id``; a branch is the path from a root to a leaf.
    """

    id: str
    """Entry id, ``entry_<32 hex>`` when generated."""
    session_id: str
    """Owning session."""
    kind: SessionEntryKind
    """``message``, ``model_change``, ``compaction``, ``summary`` or ``custom``."""
    timestamp: str
    """ISO-8601 UTC time of creation with milliseconds and ``Z``."""
    parent_id: str | None = None
    """Previous entry on the branch; ``None`` for a root."""
    run_id: str | None = None
    """Run that appended the entry (``None`` outside a run)."""
    message: Message | None = None
    """The message of a ``message`` entry."""
    model: ModelConfig | None = None
    """The new model of a ``model_change`` entry."""
    previous_model: ModelConfig | None = None
    """The model in effect before a ``model_change`` entry."""
    summary: str | None = None
    """The summary text of a ``compaction`` or ``summary`` entry."""
    data: Mapping[str, JsonValue] | None = None
    """Kind-specific data; for ``compaction``: ``through_entry_id``, ``keep_entry_ids``,
    ``strategy`` and ``trigger``."""
    metadata: Mapping[str, JsonValue] | None = None
    """Host metadata."""


def new_session_entry(
    kind: SessionEntryKind,
    *,
    session_id: str,
    parent_id: str | None = None,
    run_id: str | None = None,
    message: Message | None = None,
    model: ModelConfig | None = None,
    previous_model: ModelConfig | None = None,
    summary: str | None = None,
    data: Mapping[str, JsonValue] | None = None,
    metadata: Mapping[str, JsonValue] | None = None,
    id: str | None = None,
    timestamp: str | None = None,
) -> SessionEntry:
    """Build an entry with a generated ``entry_…`` id and the current timestamp.

    Args:
        kind: The entry kind.
        session_id: Owning session.
        parent_id: The session's current leaf (``None`` makes a root).
        run_id: The appending run, if any.
        message: For ``message`` entries.
        model: For ``model_change`` entries.
        previous_model: For ``model_change`` entries.
        summary: For ``compaction``/``summary`` entries.
        data: Kind-specific data.
        metadata: Host metadata.
        id: Explicit id (default ``new_id("entry")``).
        timestamp: Explicit timestamp (default ``now_iso()``).
    """
    return SessionEntry(
        id=id if id is not None else new_id("entry"),
        session_id=session_id,
        kind=kind,
        timestamp=timestamp if timestamp is not None else now_iso(),
        parent_id=parent_id,
        run_id=run_id,
        message=message,
        model=model,
        previous_model=previous_model,
        summary=summary,
        data=data,
        metadata=metadata,
    )
