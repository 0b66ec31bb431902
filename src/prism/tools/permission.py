"""Permission: the host's yes/no on one tool call, asked after the call's arguments are known.

A [`PermissionPolicy`][prism.tools.permission.PermissionPolicy] receives a [`PermissionRequest`][prism.tools.permission.PermissionRequest] and answers ``True`` or ``None``
(allow) or ``False`` (deny); it may be async. An exception raised by the policy also denies the
call, and its message becomes the blocked result's message (see ``prism.tools.dispatch``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from prism._serde import Serializable

__all__ = ["PermissionPolicy", "PermissionRequest", "ask_permission"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionRequest(Serializable):
    """What a [`PermissionPolicy`][prism.tools.permission.PermissionPolicy] is asked."""

    kind: Literal["tool"] = "tool"
    """Always ``"tool"``."""
    action: Literal["execute"] = "execute"
    """Always ``"execute"``."""
    target: str
    """The tool name."""
    metadata: Mapping[str, Any]
    """The run metadata."""
    tool_call_id: str
    """The call's id."""
    arguments: Mapping[str, Any]
    """The call's arguments after the ``tool_call`` middleware hook."""


PermissionPolicy: TypeAlias = Callable[[PermissionRequest], "bool | None | Awaitable[bool | None]"]
"""``True``/``None`` allow, ``False`` denies, an exception denies with its message."""


async def ask_permission(policy: PermissionPolicy, request: PermissionRequest) -> bool:
    """Ask ``policy`` about ``request`` (awaiting an async answer); ``True`` when it allows.

    Only ``True`` and ``None`` allow; any other answer denies.

    Raises:
        Exception: whatever the policy raises (the caller treats it as a denial).
    """
    verdict = policy(request)
    if inspect.isawaitable(verdict):
        verdict = await verdict
    return verdict is True or verdict is None
