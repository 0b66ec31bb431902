"""Artifact loop events: validation, revision, acceptance and failure of a candidate."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from prism._fast_init import fast_init
from prism.artifact_contracts import ArtifactValidation
from prism.events._base import ArtifactEventFields

__all__ = [
    "ArtifactFailedEvent",
    "ArtifactFinishedEvent",
    "ArtifactRevisionStartedEvent",
    "ArtifactValidationFinishedEvent",
    "ArtifactValidationStartedEvent",
]


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactValidationStartedEvent(ArtifactEventFields):
    """Validation of a candidate began."""

    type: Literal["artifact_validation_started"] = field(
        default="artifact_validation_started", init=False
    )


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactValidationFinishedEvent(ArtifactEventFields):
    """Validation of a candidate ended."""

    result: ArtifactValidation
    """The validation outcome."""
    type: Literal["artifact_validation_finished"] = field(
        default="artifact_validation_finished", init=False
    )


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactRevisionStartedEvent(ArtifactEventFields):
    """A revision turn follows a failed candidate."""

    failure: ArtifactValidation
    """The failure being revised."""
    type: Literal["artifact_revision_started"] = field(
        default="artifact_revision_started", init=False
    )


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactFinishedEvent(ArtifactEventFields):
    """A candidate was accepted."""

    result: ArtifactValidation
    """The accepting validation."""
    type: Literal["artifact_finished"] = field(default="artifact_finished", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactFailedEvent(ArtifactEventFields):
    """The artifact loop failed terminally."""

    result: ArtifactValidation
    """The failing validation; ``metadata['reason']`` is the error code."""
    type: Literal["artifact_failed"] = field(default="artifact_failed", init=False)
