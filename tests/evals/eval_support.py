"""Agents on the scripted mock provider for the eval tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import prism
from prism.providers.mock import MockScriptItem
from prism.testing import (
    create_mock_provider,
    provider_done,
    provider_text_delta,
    provider_tool_call,
)
from prism.types import Usage

MODEL = {"provider": "mock", "model": "scripted"}


def usage(tokens: int = 15, cost: float | None = None) -> Usage:
    return Usage(
        input_tokens=tokens - 5,
        output_tokens=5,
        total_tokens=tokens,
        cost=cost,
        currency="USD" if cost is not None else None,
    )


def text_turn(text: str, *, tokens: int = 15, cost: float | None = None) -> list[MockScriptItem]:
    return [provider_text_delta(text), provider_done(usage(tokens, cost))]


def call_turn(*calls: tuple[str, str, dict[str, Any]]) -> list[MockScriptItem]:
    return [*(provider_tool_call(i, name, args) for i, name, args in calls), provider_done(usage())]


@prism.tool
def lookup(order: str) -> str:
    """Look up an order."""
    return f"order {order}: refund approved"


@prism.tool
def notify(channel: str) -> str:
    """Notify the customer."""
    return f"sent by {channel}"


def scripted_agent(
    *turns: Sequence[MockScriptItem], name: str = "support", **options: Any
) -> prism.Agent:
    """An agent whose provider answers call i with ``turns[i]``."""
    return prism.create_agent(
        provider=create_mock_provider(turns=[list(t) for t in turns]),
        model=MODEL,
        name=name,
        tools=[lookup, notify],
        **options,
    )
