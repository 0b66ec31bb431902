"""Tests for the artifact contracts (CON-22..CON-24)."""

from __future__ import annotations

from typing import Any

import pytest

from prism.abort import AbortController
from prism.artifact_contracts import (
    ArtifactContext,
    ArtifactError,
    ArtifactParseResult,
    ArtifactValidation,
)

# ----------------------------------------------------------------------------- CON-22


def test_con22_artifact_error_is_positional_and_path_defaults_to_none() -> None:
    err = ArtifactError("missing field")
    assert err.message == "missing field"
    assert err.path is None
    assert err.to_dict() == {"message": "missing field"}


def test_con22_validation_mapping_is_converted() -> None:
    got = ArtifactValidation.coerce(
        {"ok": False, "errors": [{"message": "bad", "path": "/a"}], "metadata": {"reason": "r"}}
    )
    assert got == ArtifactValidation(
        ok=False, errors=(ArtifactError("bad", path="/a"),), metadata={"reason": "r"}
    )


def test_con22_validation_mapping_minimal_and_instance_passthrough() -> None:
    assert ArtifactValidation.coerce({"ok": True}) == ArtifactValidation(ok=True)
    same = ArtifactValidation(ok=True)
    assert ArtifactValidation.coerce(same) is same


def test_con22_validation_list_errors_become_tuple_of_errors() -> None:
    v = ArtifactValidation(False, [{"message": "m"}, ArtifactError("n", "/x")])  # type: ignore[arg-type]
    assert v.errors == (ArtifactError("m"), ArtifactError("n", "/x"))
    assert isinstance(v.errors, tuple)


def test_con22_con3_validation_round_trip() -> None:
    v = ArtifactValidation(
        ok=False, errors=(ArtifactError("a", "/0"), ArtifactError("b")), metadata={"reason": "x"}
    )
    d = v.to_dict()
    assert d == {
        "ok": False,
        "errors": [{"message": "a", "path": "/0"}, {"message": "b"}],
        "metadata": {"reason": "x"},
    }
    assert ArtifactValidation.from_dict(d) == v


@pytest.mark.parametrize(
    ("value", "exc"),
    [
        ({"ok": "yes"}, TypeError),
        ({"ok": True, "extra": 1}, ValueError),
        ({"ok": False, "errors": [{"msg": "x"}]}, ValueError),
        ({"ok": False, "errors": [{"message": 3}]}, TypeError),
        ({"ok": False, "errors": "oops"}, TypeError),
        ({"ok": False, "metadata": 3}, TypeError),
        ("ok", TypeError),
        (None, TypeError),
    ],
)
def test_con22_malformed_validation_is_rejected(value: Any, exc: type[Exception]) -> None:
    with pytest.raises(exc):
        ArtifactValidation.coerce(value)


# ----------------------------------------------------------------------------- CON-23


def test_con23_artifact_context_fields_and_signal_not_serialised() -> None:
    signal = AbortController().signal
    ctx = ArtifactContext("s", "r", 2, signal, {"k": "v"})
    assert (ctx.session_id, ctx.run_id, ctx.turn, ctx.signal) == ("s", "r", 2, signal)
    assert ctx.to_dict() == {"session_id": "s", "run_id": "r", "turn": 2, "metadata": {"k": "v"}}


# ----------------------------------------------------------------------------- CON-24


def test_con24_parse_result_is_generic_and_mapping_converted() -> None:
    typed = ArtifactParseResult[int](ok=True, value=3)
    assert typed.value == 3
    assert ArtifactParseResult.coerce({"ok": True, "value": [1]}) == ArtifactParseResult(
        ok=True, value=[1]
    )
    assert ArtifactParseResult.coerce({"ok": False, "error": "no"}).error == "no"
    same: ArtifactParseResult[Any] = ArtifactParseResult(ok=False)
    assert ArtifactParseResult.coerce(same) is same


@pytest.mark.parametrize(
    "value", [{"ok": 1}, {"ok": True, "error": 5}, {"ok": True, "bogus": 1}, 42]
)
def test_con24_malformed_parse_result_is_rejected(value: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        ArtifactParseResult.coerce(value)
