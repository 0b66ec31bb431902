"""Tests for prism.redaction (EVT-21..26, CON-4)."""

from __future__ import annotations

import dataclasses
import traceback
from collections import namedtuple
from types import MappingProxyType
from typing import Any

import pytest

from prism.abort import AbortController
from prism.errors import AbortError, ProviderTurnError, RedactedError
from prism.events import (
    ArtifactFailedEvent,
    MessageFinishedEvent,
    ToolExecutionProgressEvent,
    TurnStartedEvent,
)
from prism.loops.contracts import ArtifactError, ArtifactValidation
from prism.redaction import (
    SecretRedactor,
    create_secret_redactor,
    error_to_error_info,
    redact_agent_event,
    redact_value,
    redacted_cause,
)
from prism.types import (
    ErrorInfo,
    Message,
    ModelConfig,
    ProviderRequest,
    TextContent,
    ToolCallContent,
    ToolDefinition,
    user_message,
)

SECRET = "sk-live-123"


# --------------------------------------------------------------------------- EVT-25


def test_evt25_create_secret_redactor_iterable_only() -> None:
    """EVT-25: one iterable; empty strings dropped; order kept; bare str -> TypeError."""
    redactor = create_secret_redactor(["sk-1", "", "sk-2"])
    assert redactor.secrets == ("sk-1", "sk-2")
    assert isinstance(redactor, SecretRedactor)
    assert redactor.redact("a sk-1 b sk-2") == "a [REDACTED] b [REDACTED]"
    with pytest.raises(TypeError):
        create_secret_redactor("sk-1")
    with pytest.raises(TypeError):
        create_secret_redactor([b"x"])  # type: ignore[list-item]
    assert create_secret_redactor(iter(["x"])).secrets == ("x",)
    assert SECRET not in repr(create_secret_redactor([SECRET]))


def test_evt25_host_redactor_protocol() -> None:
    """EVT-25: any object with ``secrets`` and ``redact`` satisfies SecretRedactor."""

    class Upper:
        secrets = ("x",)

        def redact(self, value: Any) -> Any:
            return value

    assert isinstance(Upper(), SecretRedactor)


# --------------------------------------------------------------------------- EVT-22


def test_evt22_secrets_applied_in_order() -> None:
    """EVT-22: every non-empty secret replaced, in the given order."""
    assert redact_value("abcdef", ["abc", "cde"]) == "[REDACTED]def"
    assert redact_value("abcdef", ["cde", "abc"]) == "ab[REDACTED]f"
    assert redact_value("x", [""]) == "x"


def test_evt22_walks_everything_and_keeps_container_kinds() -> None:
    """EVT-22: dataclass fields, mappings (keys too), lists, tuples at any depth."""
    proxy = MappingProxyType({"k": SECRET})
    value: dict[str, Any] = {
        "list": [1, SECRET, (f"x{SECRET}y", None)],
        SECRET: {"nested": [[{"deep": SECRET}]]},
        "proxy": proxy,
        "bytes": SECRET.encode(),
        "num": 1.5,
    }
    out = redact_value(value, [SECRET])
    assert out == {
        "list": [1, "[REDACTED]", ("x[REDACTED]y", None)],
        "[REDACTED]": {"nested": [[{"deep": "[REDACTED]"}]]},
        "proxy": {"k": "[REDACTED]"},
        "bytes": SECRET.encode(),
        "num": 1.5,
    }
    assert isinstance(out["list"], list) and isinstance(out["list"][2], tuple)
    assert type(out["proxy"]) is dict
    assert value["list"][1] == SECRET  # input untouched


def test_evt22_key_collisions_get_suffixes() -> None:
    """EVT-22: when redacted keys collide the later one gets __2, __3, ..."""
    out = redact_value({"a-sk": 1, "[REDACTED]": 2, "b-sk": 3}, ["a-sk", "b-sk"])
    assert out == {"[REDACTED]": 1, "[REDACTED]__2": 2, "[REDACTED]__3": 3}


def test_evt22_circular_and_max_depth() -> None:
    """EVT-22/EVT-23: cycles become "[Circular]", containers deeper than 32 "[MaxDepth]"."""
    cyclic: dict[str, Any] = {"s": SECRET}
    cyclic["self"] = cyclic
    out = redact_value(cyclic, [SECRET])
    assert out == {"s": "[REDACTED]", "self": "[Circular]"}
    shared = [SECRET]
    assert redact_value([shared, shared], [SECRET]) == [["[REDACTED]"], ["[REDACTED]"]]
    deep: list[Any] = []
    cursor = deep
    for _ in range(40):
        nxt: list[Any] = []
        cursor.append(nxt)
        cursor = nxt
    out2 = redact_value(deep, [SECRET])
    levels = 0
    node: Any = out2
    while isinstance(node, list):
        levels += 1
        node = node[0]
    assert levels == 32 and node == "[MaxDepth]"


def test_evt22_dataclasses_rebuilt_same_class() -> None:
    """EVT-22: dataclasses rebuilt as the same class; ``type`` kept; callables untouched."""

    def run(args: dict[str, Any], ctx: Any) -> str:
        return SECRET

    tool = ToolDefinition("t", run, description=f"uses {SECRET}")
    signal = AbortController().signal
    request = ProviderRequest(ModelConfig("mock", "m"), (user_message(SECRET),), tools=(tool,),
                              signal=signal)
    out = redact_value(request, [SECRET])
    assert type(out) is ProviderRequest
    assert out.messages[0].content == (TextContent("[REDACTED]"),)
    assert out.tools is not None and out.tools[0].description == "uses [REDACTED]"
    assert out.tools[0].execute is run and out.signal is signal
    assert out.messages[0].content[0].type == "text"


def test_evt22_unchanged_values_are_the_same_object() -> None:
    """EVT-22 (performance): nothing changed -> the very same objects come back."""
    msg = Message("assistant", (TextContent("hello"), ToolCallContent("c", "t", {"a": [1, "b"]})))
    redactor = create_secret_redactor([SECRET])
    assert redactor.redact(msg) is msg
    data = {"a": [1, {"b": "c"}], "t": ("x",)}
    assert redactor.redact(data) is data
    half = {"clean": {"x": [1]}, "dirty": SECRET}
    out = redactor.redact(half)
    assert out is not half and out["clean"] is half["clean"]
    assert redact_value(msg, []) is msg


def test_evt22_named_tuple_and_other_objects() -> None:
    """EVT-22: named tuples stay their class; sets and other objects returned unchanged."""
    Pair = namedtuple("Pair", "a b")
    out = redact_value(Pair(SECRET, 1), [SECRET])
    assert type(out) is Pair and out == Pair("[REDACTED]", 1)
    opaque = {SECRET}
    assert redact_value(opaque, [SECRET]) is opaque


# --------------------------------------------------------------------------- EVT-21, EVT-23, EVT-24


def test_evt21_redact_agent_event() -> None:
    """EVT-21/EVT-22: an event of the same class with every string redacted."""
    redactor = create_secret_redactor([SECRET])
    event = MessageFinishedEvent(session_id="s", run_id="r", message=user_message(SECRET))
    out = redact_agent_event(event, redactor)
    assert type(out) is MessageFinishedEvent and out.type == "message_finished"
    assert out.message.text == "[REDACTED]" and out.session_id == "s"
    progress = ToolExecutionProgressEvent(tool_call_id="c", name="t", progress={SECRET: [SECRET]})
    assert redact_agent_event(progress, redactor).progress == {"[REDACTED]": ["[REDACTED]"]}


def test_evt23_artifact_payloads_redacted_and_cycles_safe() -> None:
    """EVT-23: artifact error messages and cyclic metadata are redacted without crashing."""
    meta: dict[str, Any] = {"reason": "parse_error", "echo": SECRET}
    meta["loop"] = meta
    event = ArtifactFailedEvent(
        turn=1,
        attempt=1,
        result=ArtifactValidation(ok=False, errors=(ArtifactError(f"bad {SECRET}"),),
                                  metadata=meta),
    )
    out = redact_agent_event(event, create_secret_redactor([SECRET]))
    assert out.result.errors[0].message == "bad [REDACTED]"
    assert out.result.metadata == {"reason": "parse_error", "echo": "[REDACTED]",
                                   "loop": "[Circular]"}


def test_evt24_no_redactor_unchanged() -> None:
    """EVT-24: without a redactor the event is delivered unchanged."""
    event = TurnStartedEvent(turn=1)
    assert redact_agent_event(event, None) is event


def test_evt21_host_redactor_must_keep_class() -> None:
    """EVT-21: a host redactor returning another class is rejected."""

    class Broken:
        secrets = ()

        def redact(self, value: Any) -> Any:
            return {"not": "an event"}

    with pytest.raises(TypeError):
        redact_agent_event(TurnStartedEvent(turn=1), Broken())


# --------------------------------------------------------------------------- CON-4


class _Coded(Exception):
    code = "ERR_CUSTOM"
    retry_after_ms = 250


def test_con4_error_to_error_info() -> None:
    """CON-4: name, message, code, retry_after_ms and cause, all redacted."""
    try:
        try:
            raise KeyError(f"inner {SECRET}")
        except KeyError as inner:
            raise _Coded(f"outer {SECRET}") from inner
    except _Coded as exc:
        info = error_to_error_info(exc, [SECRET])
    assert info == ErrorInfo(
        message="outer [REDACTED]",
        name="_Coded",
        code="ERR_CUSTOM",
        retry_after_ms=250.0,
        cause="'inner [REDACTED]'",
    )


@pytest.mark.parametrize(
    ("code", "expected"), [(429, 429), ("timeout", "timeout"), (True, None), (1.5, None)]
)
def test_con4_code_only_str_or_int(code: Any, expected: Any) -> None:
    """CON-4: code is kept only when it is a str or int (bool excluded)."""
    exc = ValueError("x")
    exc.code = code  # type: ignore[attr-defined]
    assert error_to_error_info(exc).code == expected


@pytest.mark.parametrize("retry", [-1, float("inf"), float("nan"), "10", True])
def test_con4_retry_after_must_be_finite_non_negative(retry: Any) -> None:
    """CON-4: retry_after_ms only when a finite number >= 0."""
    exc = ValueError("x")
    exc.retry_after_ms = retry  # type: ignore[attr-defined]
    assert error_to_error_info(exc).retry_after_ms is None


def test_con4_non_exceptions_and_prism_errors() -> None:
    """CON-4: non-exceptions use str(value) without name; prism errors keep their code."""
    assert error_to_error_info(f"plain {SECRET}", [SECRET]) == ErrorInfo("plain [REDACTED]")
    info = error_to_error_info(AbortError())
    assert info.code == "ERR_PRISM_ABORTED" and info.name == "AbortError"
    assert error_to_error_info(ProviderTurnError(ErrorInfo("p", code=500))).message == "p"
    with pytest.raises(TypeError):
        error_to_error_info(ValueError("x"), SECRET)
    redactor = create_secret_redactor([SECRET])
    assert error_to_error_info(ValueError(SECRET), redactor).message == "[REDACTED]"


# --------------------------------------------------------------------------- EVT-26


def _raise_chain() -> BaseException:
    try:
        try:
            raise ValueError(f"token={SECRET}")
        except ValueError as inner:
            raise RuntimeError("wrapper") from inner
    except RuntimeError as exc:
        return exc


def test_evt26_clean_host_exception_chained_unchanged() -> None:
    """EVT-26: a cause without secrets is chained as-is."""
    exc = ValueError("nothing to hide")
    assert redacted_cause(exc, create_secret_redactor([SECRET])) is exc
    assert redacted_cause(exc, None) is exc


def test_evt26_secret_cause_replaced_by_redacted_error() -> None:
    """EVT-26: a secret-bearing cause becomes RedactedError(original_type, message, traceback
    text); the host exception is not edited and no secret appears in the formatted traceback."""
    redactor = create_secret_redactor([SECRET])
    inner = ValueError(f"token={SECRET}")
    try:
        raise inner
    except ValueError:
        pass
    stand_in = redacted_cause(inner, redactor)
    assert isinstance(stand_in, RedactedError)
    assert stand_in.original_type == "ValueError" and str(stand_in) == "token=[REDACTED]"
    # The traceback is kept as redacted text (and a note), not as the object whose frames hold
    # the raw values.
    assert stand_in.__traceback__ is None
    assert "raise inner" in stand_in.traceback_text and SECRET not in stand_in.traceback_text
    assert stand_in.__notes__ == [
        f"Original ValueError traceback (redacted):\n{stand_in.traceback_text}"
    ]
    assert str(inner) == f"token={SECRET}"

    chain = _raise_chain()
    top = redacted_cause(chain, redactor)
    assert isinstance(top, RedactedError) and top.original_type == "RuntimeError"
    assert isinstance(top.__cause__, RedactedError) and top.__cause__.original_type == "ValueError"
    assert chain.__cause__ is not None and SECRET in str(chain.__cause__)

    class HostRunError(Exception):
        pass

    try:
        raise HostRunError("Agent run failed") from top
    except HostRunError as outer:
        text = "".join(traceback.format_exception(outer))
    assert SECRET not in text and "[REDACTED]" in text
    assert "Original ValueError traceback (redacted)" in text


def test_evt26_secret_in_an_attribute_or_extra_secret_is_detected() -> None:
    """EVT-26: a secret only in an attribute (``vars()``), or one of the extra secrets, makes
    the cause a stand-in too."""

    class SdkError(Exception):
        def __init__(self, message: str, body: Any) -> None:
            super().__init__(message)
            self.body = body

    inner = SdkError("bad request", {"api_key": SECRET})
    stand_in = redacted_cause(inner, create_secret_redactor([SECRET]))
    assert isinstance(stand_in, RedactedError) and stand_in.original_type == "SdkError"
    assert SECRET not in repr(vars(stand_in))
    extra = ValueError("token sk-extra")
    assert redacted_cause(extra, None) is extra
    assert str(redacted_cause(extra, None, ("sk-extra",))) == "token [REDACTED]"


def test_evt26_frozen_dataclass_with_post_init_fallback() -> None:
    """EVT-22: a dataclass whose __post_init__ rejects redacted values is still rebuilt."""

    @dataclasses.dataclass(frozen=True)
    class Strict:
        token: str

        def __post_init__(self) -> None:
            if not self.token.startswith("sk-"):
                raise ValueError("bad token")

    out = redact_value(Strict(SECRET), [SECRET])
    assert type(out) is Strict and out.token == "[REDACTED]"
