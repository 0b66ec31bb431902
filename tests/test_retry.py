"""Retry options, validation, the default policy and transient classification (RETRY-1..RETRY-6)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from prism.abort import AbortController
from prism.errors import PrismConfigError
from prism.retry import (
    DEFAULT_TRANSIENT_CODES,
    RetryContext,
    RetryDecision,
    RetryOptions,
    RetryPayload,
    RetryPolicy,
    create_default_retry_policy,
    is_transient_error,
    resolve_retry_options,
    validate_retry_options,
)
from prism.types import ErrorInfo

TRANSIENT = ErrorInfo("server error", code=503)


def ctx(attempt: int, error: ErrorInfo = TRANSIENT, **kw: Any) -> RetryContext:
    return RetryContext(session_id="s", run_id="r", attempt=attempt, error=error, **kw)


def decide(options: RetryOptions, attempt: int, error: ErrorInfo = TRANSIENT, r: float = 0.5) -> (
    RetryDecision
):
    policy = create_default_retry_policy(options, random=lambda: r)
    out = policy.decide(ctx(attempt, error))
    assert isinstance(out, RetryDecision)
    return out


# --------------------------------------------------------------------------- RETRY-4 defaults


def test_retry4_defaults() -> None:
    """RETRY-4: the documented defaults."""
    o = RetryOptions()
    assert o.policy is None
    assert o.max_attempts == 3
    assert o.base_delay_ms == 100
    assert o.max_delay_ms == 1000
    assert o.jitter == 0.25
    assert o.transient_codes == ()
    assert o.secrets == ()
    assert o.metadata is None
    assert o.max_retry_after_ms == 60_000


def test_retry4_lists_become_tuples_and_policy_is_not_serialised() -> None:
    """CON-3: sequences are tuples; the policy is a host object left out of to_dict()."""
    policy = create_default_retry_policy()
    o = RetryOptions(policy=policy, transient_codes=["x", 1], secrets=["s"])  # type: ignore[arg-type]
    assert o.transient_codes == ("x", 1)
    assert o.secrets == ("s",)
    data = o.to_dict()
    assert "policy" not in data
    assert RetryOptions.from_dict(data) == RetryOptions(transient_codes=("x", 1), secrets=("s",))


def test_retry4_max_attempts_counts_the_first_attempt() -> None:
    """RETRY-4: 3 attempts means at most 2 retries; 1 means none."""
    o = RetryOptions(jitter=0)
    assert decide(o, 1).retry
    assert decide(o, 2).retry
    assert not decide(o, 3).retry
    assert not decide(RetryOptions(max_attempts=1), 1).retry


def test_retry4_exponential_backoff_capped() -> None:
    """RETRY-4: base * 2**(attempt-1), capped at max_delay_ms."""
    o = RetryOptions(max_attempts=10, jitter=0, base_delay_ms=100, max_delay_ms=1000)
    delays = [decide(o, n).delay_ms for n in range(1, 7)]
    assert delays == [100, 200, 400, 800, 1000, 1000]


def test_retry4_cap_never_below_base() -> None:
    """RETRY-4: the cap is never below base_delay_ms."""
    o = RetryOptions(max_attempts=10, jitter=0, base_delay_ms=500, max_delay_ms=100)
    assert decide(o, 1).delay_ms == 500
    assert decide(o, 4).delay_ms == 500


def test_retry4_jitter_uses_injected_random_and_rounds() -> None:
    """RETRY-4: the delay is multiplied by a factor in [1 - j, 1 + j] and rounded to an int."""
    o = RetryOptions(jitter=0.25, base_delay_ms=100)
    assert decide(o, 1, r=0.0).delay_ms == 75
    assert decide(o, 1, r=1.0).delay_ms == 125
    assert decide(o, 1, r=0.5).delay_ms == 100
    assert decide(o, 1, r=0.1).delay_ms == 80  # 100 * 0.8
    odd = RetryOptions(jitter=0.5, base_delay_ms=1)
    assert decide(odd, 1, r=0.0).delay_ms == 1  # 0.5 rounds half up
    assert decide(o, 2, r=0.123).delay_ms == float(int(decide(o, 2, r=0.123).delay_ms or 0))


def test_retry4_jitter_zero_disables_jitter() -> None:
    """RETRY-4: jitter=0 leaves the backoff unchanged whatever random returns."""
    o = RetryOptions(jitter=0)
    assert decide(o, 1, r=0.0).delay_ms == 100
    assert decide(o, 1, r=0.99).delay_ms == 100


def test_retry4_retry_after_hint_is_honoured_as_given() -> None:
    """RETRY-4: ceil(retry_after_ms), neither capped nor jittered."""
    hint = ErrorInfo("slow down", code=429, retry_after_ms=5000.2)
    out = decide(RetryOptions(max_delay_ms=1000, jitter=0.25), 1, hint, r=0.0)
    assert out == RetryDecision(True, 5001)


def test_retry4_retry_after_hint_above_max_stops_retrying() -> None:
    """RETRY-4: a hint beyond max_retry_after_ms means no retry."""
    hint = ErrorInfo("slow down", code=429, retry_after_ms=60_001)
    assert decide(RetryOptions(), 1, hint) == RetryDecision(False)
    ok = ErrorInfo("slow down", code=429, retry_after_ms=60_000)
    assert decide(RetryOptions(), 1, ok) == RetryDecision(True, 60_000)


def test_retry4_non_finite_hint_falls_back_to_backoff() -> None:
    """RETRY-4: only a finite non-negative hint counts."""
    for bad in (math.inf, -1.0, math.nan):
        hint = ErrorInfo("slow down", code=429, retry_after_ms=bad)
        assert decide(RetryOptions(jitter=0), 1, hint) == RetryDecision(True, 100)


def test_retry4_no_retry_when_signal_aborted() -> None:
    """RETRY-4: an aborted signal stops retrying."""
    controller = AbortController()
    controller.abort()
    policy = create_default_retry_policy(RetryOptions())
    assert policy.decide(ctx(1, signal=controller.signal)) == RetryDecision(False)


def test_retry4_no_retry_for_non_transient_error() -> None:
    """RETRY-4: a non-transient error is not retried."""
    assert decide(RetryOptions(), 1, ErrorInfo("bad request", code=400)) == RetryDecision(False)


def test_retry4_transient_codes_extend_the_defaults() -> None:
    """RETRY-4/RETRY-5: configured transient codes are retried."""
    err = ErrorInfo("custom failure", code="my_code")
    assert not decide(RetryOptions(), 1, err).retry
    assert decide(RetryOptions(transient_codes=("my_code",)), 1, err).retry


def test_default_policy_is_a_retry_policy() -> None:
    """RETRY-2: the default policy satisfies the RetryPolicy protocol."""
    assert isinstance(create_default_retry_policy(), RetryPolicy)


def test_default_policy_validates_options() -> None:
    """RETRY-6: create_default_retry_policy validates its options."""
    with pytest.raises(PrismConfigError):
        create_default_retry_policy(RetryOptions(max_attempts=0))


# --------------------------------------------------------------------------- RETRY-5


@pytest.mark.parametrize("code", sorted(DEFAULT_TRANSIENT_CODES, key=str))
def test_retry5_listed_codes_are_transient(code: str | int) -> None:
    """RETRY-5: every listed code is transient."""
    assert is_transient_error(ErrorInfo("failure", code=code))


def test_retry5_listed_codes_are_exactly_the_spec_list() -> None:
    """RETRY-5: the code list of the spec."""
    assert set(DEFAULT_TRANSIENT_CODES) == {
        "ETIMEDOUT", "ECONNRESET", "ECONNREFUSED", "EAI_AGAIN", "ENOTFOUND", "timeout",
        "rate_limit", "overloaded", "overloaded_error", "rate_limit_error", "api_error",
        "temporarily_unavailable", 408, 409, 425, 429, 500, 502, 503, 504, 529,
    }  # fmt: skip


@pytest.mark.parametrize("code", [400, 401, 404, 422, "invalid_request", "incomplete_delta", None])
def test_retry5_other_codes_are_not_transient(code: str | int | None) -> None:
    """RETRY-5: other codes with a neutral message are not transient."""
    assert not is_transient_error(ErrorInfo("failure", code=code))


def test_retry5_abort_is_never_transient() -> None:
    """RETRY-5: AbortError or a message matching `abort` is never transient."""
    assert not is_transient_error(ErrorInfo("whatever", name="AbortError", code=503))
    assert not is_transient_error(ErrorInfo("Request ABORTED by user", code=503))


@pytest.mark.parametrize(
    "message",
    [
        "Read Timeout",
        "service temporarily unavailable",
        "Temporary failure",
        "Rate limit reached",
        "rate-limit",
        "ratelimit",
        "server Overloaded",
        "Unavailable",
    ],
)
def test_retry5_message_patterns_are_transient(message: str) -> None:
    """RETRY-5: timeout|temporar|rate.?limit|overload|unavailable, case-insensitive."""
    assert is_transient_error(ErrorInfo(message, code="unknown"))


def test_retry5_extra_transient_codes() -> None:
    """RETRY-5: configured transient codes count."""
    assert is_transient_error(ErrorInfo("x", code=418), transient_codes=(418,))
    assert not is_transient_error(ErrorInfo("x", code=418), transient_codes=("418",))


# --------------------------------------------------------------------------- RETRY-6


@pytest.mark.parametrize(
    "overrides",
    [
        {"max_attempts": 0},
        {"max_attempts": True},
        {"max_attempts": 2.0},
        {"base_delay_ms": -1},
        {"base_delay_ms": math.inf},
        {"max_delay_ms": math.nan},
        {"max_retry_after_ms": -5},
        {"max_delay_ms": "10"},
        {"jitter": 1.5},
        {"jitter": -0.1},
        {"jitter": True},
        {"transient_codes": "abc"},
        {"transient_codes": (1.5,)},
        {"transient_codes": (True,)},
        {"secrets": "sk"},
        {"secrets": (1,)},
        {"policy": object()},
        {"metadata": 3},
    ],
)
def test_retry6_invalid_options_raise(overrides: dict[str, Any]) -> None:
    """RETRY-6: violations raise PrismConfigError."""
    with pytest.raises(PrismConfigError) as info:
        validate_retry_options(RetryOptions(**overrides))
    assert info.value.code == "ERR_PRISM_CONFIG"
    with pytest.raises(PrismConfigError):
        validate_retry_options(overrides)


def test_retry6_valid_edge_values() -> None:
    """RETRY-6: boundary values are accepted."""
    class Policy:
        def decide(self, context: RetryContext) -> RetryDecision:
            return RetryDecision(False)

    o = validate_retry_options(
        {
            "max_attempts": 1,
            "base_delay_ms": 0,
            "max_delay_ms": 0,
            "jitter": 1,
            "max_retry_after_ms": 0,
            "transient_codes": ["a", 1],
            "secrets": ["x"],
            "policy": Policy(),
        }
    )
    assert o.transient_codes == ("a", 1)
    assert isinstance(o.policy, Policy)


def test_retry6_unknown_mapping_key_names_snake_case() -> None:
    """RUN-7: a camelCase key is reported with its snake_case name."""
    with pytest.raises(PrismConfigError) as info:
        validate_retry_options({"maxAttempts": 2})
    assert "max_attempts" in str(info.value)
    with pytest.raises(PrismConfigError, match="nope"):
        validate_retry_options({"nope": 1})


# --------------------------------------------------------------------------- RUN-6 resolution


def test_run6_retry_on_by_default() -> None:
    """RETRY-1/RUN-6: neither layer sets retry -> RetryOptions()."""
    assert resolve_retry_options(None, None) == RetryOptions()


def test_run6_false_disables_retry() -> None:
    """RUN-6: run False disables; agent False disables when the run sets nothing."""
    assert resolve_retry_options(RetryOptions(max_attempts=5), False) is None
    assert resolve_retry_options(False, None) is None


def test_run6_run_dataclass_replaces_agent_value() -> None:
    """RUN-6: a run dataclass replaces the agent value entirely."""
    out = resolve_retry_options(RetryOptions(max_attempts=5, jitter=0), RetryOptions(max_attempts=2))
    assert out == RetryOptions(max_attempts=2)


def test_run6_run_mapping_overrides_named_keys_only() -> None:
    """RUN-6: a run mapping overrides only its keys, on the agent value or the defaults."""
    out = resolve_retry_options(RetryOptions(max_attempts=5, jitter=0), {"base_delay_ms": 7})
    assert out == RetryOptions(max_attempts=5, jitter=0, base_delay_ms=7)
    assert resolve_retry_options(False, {"max_attempts": 4}) == RetryOptions(max_attempts=4)
    assert resolve_retry_options(None, {"max_attempts": 4}) == RetryOptions(max_attempts=4)


def test_run6_invalid_run_layer_raises() -> None:
    """RETRY-6: an invalid run value raises PrismConfigError."""
    with pytest.raises(PrismConfigError):
        resolve_retry_options(None, {"max_attempts": 0})
    with pytest.raises(PrismConfigError):
        resolve_retry_options(None, {"maxAttempts": 2})
    with pytest.raises(PrismConfigError):
        resolve_retry_options("yes", None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- RETRY-2 value types


def test_retry2_context_and_payload_shapes() -> None:
    """RETRY-2: RetryContext(session_id, run_id, attempt, error, metadata, signal)."""
    signal = AbortController().signal
    context = ctx(2, metadata={"k": "v"}, signal=signal)
    data = context.to_dict()
    assert data == {
        "session_id": "s",
        "run_id": "r",
        "attempt": 2,
        "error": {"message": "server error", "code": 503},
        "metadata": {"k": "v"},
    }
    payload = RetryPayload(context, RetryDecision(True, 10))
    assert payload.to_dict()["decision"] == {"retry": True, "delay_ms": 10}
    assert RetryDecision(False).delay_ms is None


async def test_retry2_async_policy_satisfies_protocol() -> None:
    """RETRY-2/ARCH-10: a policy's decide may be async."""

    class AsyncPolicy:
        async def decide(self, context: RetryContext) -> RetryDecision:
            return RetryDecision(context.attempt < 2)

    policy = AsyncPolicy()
    assert isinstance(policy, RetryPolicy)
    assert await policy.decide(ctx(1)) == RetryDecision(True)
    validate_retry_options(RetryOptions(policy=policy))


def _counter() -> Iterator[float]:
    yield from (0.0, 0.5, 1.0)


def test_retry4_random_called_once_per_decision() -> None:
    """RETRY-4: random is consulted once per jittered delay."""
    values = _counter()
    calls: list[float] = []

    def rnd() -> float:
        v = next(values)
        calls.append(v)
        return v

    policy = create_default_retry_policy(RetryOptions(max_attempts=10), random=rnd)
    out = [policy.decide(ctx(n)) for n in (1, 2, 3)]
    assert calls == [0.0, 0.5, 1.0]
    assert [d.delay_ms for d in out if isinstance(d, RetryDecision)] == [75, 200, 500]
