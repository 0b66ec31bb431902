"""One unknown-key check: every mapping a host (or a stored record) hands prism is checked by
``prism._keys.reject_unknown_keys``, which raises ``PrismConfigError`` (a ``ValueError``) with
one message form and a snake_case hint for camelCase keys (ARCH-9, CON-3, issue 10 point 5)."""

from __future__ import annotations

import ast
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import prism
from prism._error_root import PrismConfigError as RootConfigError
from prism.artifact_contracts import ArtifactError, ArtifactParseResult, ArtifactValidation
from prism.compaction import CompactionOptions
from prism.errors import ERR_PRISM_CONFIG, PrismConfigError, PrismError
from prism.guardrails import coerce_guardrails
from prism.limits import RunLimits, RunLimitTracker, resolve_run_limits
from prism.loops.contracts import coerce_loop_options
from prism.retry import RetryOptions
from prism.runtime.options import RunOptions
from prism.runtime.turn_policy import coerce_turn_policy
from prism.types import ErrorInfo, Message, ModelConfig, ProviderRequestOptions, Usage

SRC = Path(__file__).resolve().parents[1] / "src" / "prism"


def test_config_error_is_one_class_a_value_error_and_named_in_prism_errors() -> None:
    assert PrismConfigError is RootConfigError is prism.PrismConfigError
    assert issubclass(PrismConfigError, ValueError) and issubclass(PrismConfigError, PrismError)
    assert PrismConfigError.__module__ == PrismError.__module__ == "prism.errors"
    err = pickle.loads(pickle.dumps(PrismConfigError("bad")))
    assert type(err) is PrismConfigError and err.code == ERR_PRISM_CONFIG and str(err) == "bad"


CASES: list[tuple[str, Callable[[dict[str, Any]], object], str]] = [
    ("value from_dict", lambda m: ErrorInfo.from_dict({"message": "m", **m}), "ErrorInfo"),
    ("message from_dict", lambda m: Message.from_dict({"role": "user", "content": [], **m}),
     "Message"),
    ("usage from_dict", lambda m: Usage.from_dict(m), "Usage"),
    ("model options", lambda m: ModelConfig.coerce({"provider": "p", "model": "m", **m}),
     "ModelConfig"),
    ("provider options", lambda m: ProviderRequestOptions.coerce(m), "ProviderRequestOptions"),
    ("limits", lambda m: RunLimits.from_dict(m), "RunLimits"),
    ("limits layer", lambda m: resolve_run_limits(m), "RunLimits"),
    ("retry", lambda m: RetryOptions.coerce(m), "RetryOptions"),
    ("compaction", lambda m: CompactionOptions.coerce(m), "CompactionOptions"),
    ("guardrails", lambda m: coerce_guardrails(m), "Guardrails"),
    ("loop options", lambda m: coerce_loop_options({"strategy": "single-shot", **m}),
     "single-shot loop"),
    ("run options", lambda m: RunOptions.coerce(m), "options"),
    ("turn policy", lambda m: coerce_turn_policy(m), "turn_policy"),
    ("limit counters", lambda m: RunLimitTracker(RunLimits(), counters=m), "limit counter"),
    ("artifact error", lambda m: ArtifactError.coerce({"message": "x", **m}), "artifact error"),
    ("artifact validation", lambda m: ArtifactValidation.coerce({"ok": True, **m}),
     "artifact validation"),
    ("artifact parse result", lambda m: ArtifactParseResult.coerce({"ok": True, **m}),
     "artifact parse result"),
]


@pytest.mark.parametrize(("what", "build", "label"), CASES, ids=[c[0] for c in CASES])
def test_every_mapping_check_raises_the_same_config_error(
    what: str, build: Callable[[dict[str, Any]], object], label: str
) -> None:
    with pytest.raises(PrismConfigError) as info:
        build({"zeta": 1, "alpha": 2})
    assert f"unknown {label} key(s): alpha, zeta" in str(info.value)
    assert info.value.code == ERR_PRISM_CONFIG


@pytest.mark.parametrize(
    ("build", "hint"),
    [
        (lambda: RunLimits.from_dict({"maxTurns": 2}), "maxTurns (use max_turns)"),
        (lambda: ProviderRequestOptions.coerce({"sessionId": "s"}), "sessionId (use session_id)"),
        (
            lambda: coerce_loop_options({"strategy": "single-shot", "toolConcurrency": 2}),
            "toolConcurrency (use tool_concurrency)",
        ),
        (lambda: RunOptions.coerce({"idempotencyKey": "k"}), "idempotencyKey (use idempotency_key)"),
    ],
)
def test_camel_case_keys_get_the_snake_case_hint(build: Callable[[], object], hint: str) -> None:
    with pytest.raises(PrismConfigError, match=rf"{hint.replace('(', '[(]').replace(')', '[)]')}"):
        build()


def _hand_written_checks(path: Path) -> list[int]:
    """Lines that raise an error whose message says ``unknown ... key``, outside the helper."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Raise) and node.exc is not None:
            text = " ".join(
                part.value.lower()
                for part in ast.walk(node.exc)
                if isinstance(part, ast.Constant) and isinstance(part.value, str)
            )
            if "unknown" in text and ("key" in text or "option(s)" in text or "counter" in text):
                lines.append(node.lineno)
    return lines


def test_the_check_is_written_once() -> None:
    found = {
        str(path.relative_to(SRC)): lines
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "_keys.py" and (lines := _hand_written_checks(path))
    }
    assert found == {}, f"unknown-key checks written outside prism._keys: {found}"


def test_the_written_once_scan_can_fail(tmp_path: Path) -> None:
    copy = tmp_path / "x.py"
    copy.write_text('def f(k):\n    raise ValueError(f"unknown keys: {k}")\n')
    assert _hand_written_checks(copy) == [2]
