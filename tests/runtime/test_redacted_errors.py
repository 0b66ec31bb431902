"""No raw secret in the exception chain a failed run raises (EVT-26).

The error ``run()`` raises is walked through every ``__cause__``, ``__context__``, ``__notes__``,
``args`` and attribute (``vars()``) of every link, recursively into the values found there: the
registered secret appears nowhere, and a ``RedactedError`` stand-in holds a redacted traceback
text instead of the traceback object whose frames hold the raw values.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import AsyncIterator
from typing import Any

import pytest
from runtime_support import make_session

from prism.errors import AgentRunError, ProviderTurnError, RedactedError
from prism.providers.base import provider_done, provider_text_delta
from prism.redaction import create_secret_redactor
from prism.runtime.turn_policy import TurnPolicy
from prism.types import ErrorInfo, ProviderErrorEvent, ProviderEvent, ProviderRequest

SECRET = "sk-live-0123456789abcdef"


class HostTransportError(Exception):
    """A host/SDK error that keeps the request body as an attribute."""

    def __init__(self, message: str, *, body: Any = None) -> None:
        super().__init__(message)
        self.body = body


class FailingProvider:
    """Streams one text delta, then raises ``error``."""

    id = "failing"

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        yield provider_text_delta("partial ")
        raise self.error


class ErrorEventProvider:
    """Streams an ``error`` event whose message holds the secret (never started: retried)."""

    id = "error-event"

    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        self.calls += 1
        yield ProviderErrorEvent(
            error=ErrorInfo(f"503: overloaded, key {SECRET}", code=503, cause=f"key={SECRET}")
        )


def _wrapped(inner: BaseException, outer_message: str) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise HostTransportError(outer_message) from exc
    except HostTransportError as outer:
        return outer


def secret_paths(root: BaseException) -> list[str]:
    """Every path from ``root`` to a string holding the raw secret."""
    found: list[str] = []
    seen: set[int] = set()

    def visit(value: Any, path: str, depth: int) -> None:
        if isinstance(value, str):
            if SECRET in value:
                found.append(path)
            return
        if isinstance(value, (bytes, bytearray)):
            if SECRET.encode() in value:
                found.append(path)
            return
        if value is None or isinstance(value, (int, float, bool)) or depth > 12:
            return
        if id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, BaseException):
            if isinstance(value, RedactedError) and value.__traceback__ is not None:
                found.append(f"{path}.__traceback__ (frames of the raw exception)")
            visit(value.args, f"{path}.args", depth + 1)
            visit(value.__cause__, f"{path}.__cause__", depth + 1)
            visit(value.__context__, f"{path}.__context__", depth + 1)
            visit(getattr(value, "__notes__", None), f"{path}.__notes__", depth + 1)
        if isinstance(value, dict):
            for key, item in value.items():
                visit(key, f"{path}[key]", depth + 1)
                visit(item, f"{path}[{key!r}]", depth + 1)
            return
        if isinstance(value, (list, tuple, set, frozenset)):
            for index, item in enumerate(value):
                visit(item, f"{path}[{index}]", depth + 1)
            return
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                visit(getattr(value, f.name, None), f"{path}.{f.name}", depth + 1)
        attrs: dict[str, Any] = {}
        try:
            attrs.update(vars(value))
        except TypeError:
            pass
        for cls in type(value).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if isinstance(name, str) and hasattr(value, name):
                    attrs.setdefault(name, getattr(value, name))
        for name, item in attrs.items():
            visit(item, f"{path}.{name}", depth + 1)

    visit(root, "error", 0)
    return found


def _session(provider: Any = None, **options: Any) -> Any:
    if provider is not None:
        options["provider"] = provider
    session, _ = make_session(
        [[provider_text_delta("hi"), provider_done()]],
        redactor=create_secret_redactor([SECRET]),
        **options,
    )
    return session


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(RuntimeError(f"upstream said key={SECRET}"), id="message"),
        pytest.param(
            HostTransportError("bad request", body={"headers": {"authorization": SECRET}}),
            id="attribute-only",
        ),
        pytest.param(
            _wrapped(ValueError(f"token {SECRET}"), "transport failed"), id="clean-wrapper"
        ),
    ],
)
async def test_evt26_no_raw_secret_anywhere_in_a_provider_failure_chain(
    error: BaseException,
) -> None:
    """EVT-26: the provider failure, its private attempt record and their chains are clean;
    the stand-ins keep a redacted traceback text, not the raw traceback."""
    session = _session(FailingProvider(error))
    with pytest.raises(AgentRunError) as info:
        await session.run("go")
    err = info.value
    assert secret_paths(err) == []
    text = "".join(traceback.format_exception(err))
    assert SECRET not in text
    links: list[BaseException] = []
    link: BaseException | None = err
    while link is not None and len(links) < 10:
        links.append(link)
        link = link.__cause__ or link.__context__
    assert any(isinstance(item, ProviderTurnError) for item in links)
    stand_ins = [item for item in links if isinstance(item, RedactedError)]
    assert stand_ins, "the secret-bearing host exception is replaced by a stand-in"
    for stand_in in stand_ins:
        assert stand_in.__traceback__ is None
        assert "Traceback" not in stand_in.traceback_text or SECRET not in stand_in.traceback_text
    # The stand-in of the raised host exception keeps where it was raised, as text.
    assert any("in generate" in item.traceback_text for item in stand_ins)
    # The host's exception object is never edited.
    assert str(error) and (SECRET in str(error) or SECRET in str(vars(error)) or
                           SECRET in str(error.__cause__))


async def test_evt26_no_raw_secret_in_a_turn_policy_failure_chain() -> None:
    """EVT-26: a stop callback failing with a secret leaves no raw secret in the chain."""

    def stop(_context: Any) -> Any:
        raise HostTransportError("policy store down", body=[f"dsn=postgres://u:{SECRET}@db"])

    session = _session()
    with pytest.raises(AgentRunError) as info:
        await session.run("go", turn_policy=TurnPolicy(stop=stop))
    assert secret_paths(info.value) == []
    assert SECRET not in "".join(traceback.format_exception(info.value))


async def test_evt26_no_raw_secret_after_retried_provider_error_events() -> None:
    """EVT-26: provider ``error`` events with the secret, retried then given up: the raised
    error, its private attempt records and the chain hold only redacted text."""
    provider = ErrorEventProvider()
    session = _session(provider, retry={"max_attempts": 2, "base_delay_ms": 0, "jitter": 0})
    with pytest.raises(AgentRunError) as info:
        await session.run("go")
    assert provider.calls == 2
    assert secret_paths(info.value) == []
    assert SECRET not in "".join(traceback.format_exception(info.value))
