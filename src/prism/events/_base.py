"""The fields events open with: the ids the runtime stamps, and the turn (and candidate) they
belong to.

An event class that inherits one of these bases has the base's fields first (``__init__``
parameters, ``dataclasses.fields`` and ``to_dict()`` keys, in the order declared here), then its
own, then its ``type`` literal. ``ErrorEvent`` (both ids optional) and ``SubagentEvent`` (the
calling run's ids) declare theirs themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from prism._serde import Serializable

__all__ = ["ArtifactEventFields", "RunEventFields", "SessionEventFields", "TurnEventFields"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEventFields(Serializable):
    """``session_id`` and ``run_id`` of an event that belongs to a run."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEventFields(Serializable):
    """``session_id`` and ``run_id`` of an event of a session that may belong to no run."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str | None = None
    """Run id, when the event belongs to a run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEventFields(RunEventFields):
    """The ids and the turn of an event that belongs to one loop turn."""

    turn: int
    """1-based turn index within the leg."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactEventFields(TurnEventFields):
    """The ids, the turn and the candidate of an artifact loop event."""

    attempt: int
    """1-based call-free candidate count."""
