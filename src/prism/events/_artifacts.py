"""Artifact loop events: validation, revision, acceptance and failure of a candidate."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from prism._serde import Serializable
from prism.artifact_contracts import ArtifactValidation

__all__ = [
    "ArtifactFailedEvent",
    "ArtifactFinishedEvent",
    "ArtifactRevisionStartedEvent",
    "ArtifactValidationFinishedEvent",
    "ArtifactValidationStartedEvent",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactValidationStartedEvent(Serializable):
    """Validation of a candidate began."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    turn: int
    """Turn index."""
    attempt: int
    """1-based call-free candidate count."""
    type: Literal["artifact_validation_started"] = field(
        default="artifact_validation_started", init=False
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactValidationFinishedEvent(Serializable):
    """Validation of a candidate ended."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    turn: int
    """Turn index."""
    attempt: int
    """1-based call-free candidate count."""
    result: ArtifactValidation
    """The validation outcome."""
    type: Literal["artifact_validation_finished"] = field(
        default="artifact_validation_finished", init=False
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactRevisionStartedEvent(Serializable):
    """A revision turn follows a failed candidate."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    turn: int
    """Turn index."""
    attempt: int
    """1-based call-free candidate count."""
    failure: ArtifactValidation
    """The failure being revised."""
    type: Literal["artifact_revision_started"] = field(
        default="artifact_revision_started", init=False
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactFinishedEvent(Serializable):
    """A candidate was accepted."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    turn: int
    """Turn index."""
    attempt: int
    """1-based call-free candidate count."""
    result: ArtifactValidation
    """The accepting validation."""
    type: Literal["artifact_finished"] = field(default="artifact_finished", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactFailedEvent(Serializable):
    """The artifact loop failed terminally."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    turn: int
    """Turn index."""
    attempt: int
    """1-based call-free candidate count."""
    result: ArtifactValidation
    """The failing validation; ``metadata['reason']`` is the error code."""
    type: Literal["artifact_failed"] = field(default="artifact_failed", init=False)
