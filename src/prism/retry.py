"""Retry options, the retry policy contract and the default backoff policy.

The attempt loop itself (``generate_with_retry``) belongs to the runtime's provider-turn module;
this module supplies what it consults after a failed attempt:

* [`RetryOptions`][prism.retry.RetryOptions] — the keyword-only options, validated by
  ``validate_retry_options()`` and layered by [`resolve_retry_options()`][prism.retry.resolve_retry_options];
* [`RetryPolicy`][prism.retry.RetryPolicy] — ``decide(RetryContext) -> RetryDecision`` (sync or async);
* [`create_default_retry_policy()`][prism.retry.create_default_retry_policy] — exponential backoff with jitter, honouring a server's
  ``Retry-After`` hint;
* [`is_transient_error()`][prism.retry.is_transient_error] — which failures are worth retrying;
* [`RetryPayload`][prism.retry.RetryPayload] — the value the ``retry`` middleware hook receives.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, runtime_checkable

from prism.abort import AbortSignal
from prism.errors import PrismConfigError
from prism.types import ErrorInfo, JsonValue, _Options
from prism.types._options import check_secrets_option, resolve_option_layers

__all__ = [
    "DEFAULT_TRANSIENT_CODES",
    "RetryContext",
    "RetryDecision",
    "RetryOptions",
    "RetryPayload",
    "RetryPolicy",
    "create_default_retry_policy",
    "is_transient_error",
    "resolve_retry_options",
    "validate_retry_options",
]

DEFAULT_TRANSIENT_CODES: Final[frozenset[str | int]] = frozenset(
    {
        "ETIMEDOUT",
        "ECONNRESET",
        "ECONNREFUSED",
        "EAI_AGAIN",
        "ENOTFOUND",
        "timeout",
        "rate_limit",
        "overloaded",
        "overloaded_error",
        "rate_limit_error",
        "api_error",
        "temporarily_unavailable",
        408,
        409,
        425,
        429,
        500,
        502,
        503,
        504,
        529,
    }
)
"""Error codes that are always transient."""

_ABORT_RE: Final = re.compile("abort", re.IGNORECASE)
_TRANSIENT_RE: Final = re.compile(
    r"timeout|temporar|rate.?limit|overload|unavailable", re.IGNORECASE
)


# --------------------------------------------------------------------------- value types


@dataclass(frozen=True, slots=True)
class RetryDecision(_Options):
    """What a retry policy decided after a failed attempt."""

    retry: bool
    """Start another attempt."""
    delay_ms: float | None = None
    """Milliseconds to wait first; ``None`` counts as 0."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryContext(_Options):
    """What a retry policy sees about a failed attempt."""

    session_id: str
    """Session of the run."""
    run_id: str
    """Run id."""
    attempt: int
    """1-based number of the attempt that failed."""
    error: ErrorInfo
    """The attempt's failure, redacted."""
    metadata: Mapping[str, JsonValue] | None = None
    """``RetryOptions.metadata`` merged over the run metadata, when any."""
    signal: AbortSignal | None = field(default=None, metadata={"serialize": False})
    """The run's abort signal (not serialised)."""


@dataclass(frozen=True, slots=True)
class RetryPayload(_Options):
    """Payload of the ``retry`` middleware hook: the context and the policy's decision.

    A handler returns a replacement payload (typically ``dataclasses.replace(p,
    decision=RetryDecision(False))``) or ``None`` to keep it.
    """

    context: RetryContext
    """The failed attempt."""
    decision: RetryDecision
    """The policy's decision, which the hook may replace."""


@runtime_checkable
class RetryPolicy(Protocol):
    """Decides whether a failed provider attempt is retried.

    ``decide`` may be sync or return an awaitable; the runtime awaits it when needed.
    """

    def decide(self, context: RetryContext, /) -> RetryDecision | Awaitable[RetryDecision]:
        """Return the decision for the failed attempt described by ``context``."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryOptions(_Options):
    """Retry settings of an agent or a run.

    These defaults are also the run's settings when neither layer sets ``retry``:
    at most 3 attempts in total on transient errors, exponential backoff from 100 ms capped at
    1 000 ms, ±25 % jitter, ``Retry-After`` hints honoured up to 60 s. Values are validated where
    they are used (``validate_retry_options()``). Lists given for the sequence fields
    are stored as tuples.
    """

    policy: RetryPolicy | None = field(default=None, metadata={"serialize": False})
    """Custom policy; ``None`` means ``create_default_retry_policy(self)``. Not serialised."""
    max_attempts: int = 3
    """Attempts in total, the first included (3 → at most 2 retries; 1 → none)."""
    base_delay_ms: float = 100
    """Delay before the first retry, in milliseconds; doubles per retry."""
    max_delay_ms: float = 1000
    """Cap of the backoff delay in milliseconds (never below ``base_delay_ms`` as a cap)."""
    jitter: float = 0.25
    """Relative jitter in ``[0, 1]``: the delay is multiplied by a uniform factor in
    ``[1 - jitter, 1 + jitter]``; 0 disables it."""
    transient_codes: tuple[str | int, ...] = ()
    """Extra ``ErrorInfo.code`` values treated as transient."""
    secrets: tuple[str, ...] = ()
    """Extra secrets redacted from failed attempts' ``ErrorInfo``."""
    metadata: Mapping[str, JsonValue] | None = None
    """Metadata passed to the policy in ``RetryContext.metadata``."""
    max_retry_after_ms: float = 60_000
    """Longest ``Retry-After`` hint honoured, in milliseconds; a longer hint stops retrying."""

    def __post_init__(self) -> None:
        for name in ("transient_codes", "secrets"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))

    @classmethod
    def coerce(cls, value: RetryOptions | Mapping[str, Any]) -> RetryOptions:
        """Return ``value`` itself, or the options built from a snake_case mapping; it may carry
        ``policy`` (a host object, never serialised), and its values are validated by
        ``validate_retry_options()``, not here.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — not a mapping, or an unknown key.
        """
        return cls._coerce_as_given(value)


# --------------------------------------------------------------------------- validation


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float))


def validate_retry_options(
    value: RetryOptions | Mapping[str, Any], *, label: str = "retry"
) -> RetryOptions:
    """Coerce and check retry options.

    Args:
        value: A [`RetryOptions`][prism.retry.RetryOptions] or a snake_case mapping of its fields.
        label: Name used in messages (``"retry"``).

    Returns:
        The [`RetryOptions`][prism.retry.RetryOptions] (a mapping converted).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown key (a camelCase key reported with
            its snake_case name); ``max_attempts`` not an ``int`` ≥ 1 (``bool`` rejected);
            ``base_delay_ms``, ``max_delay_ms`` or ``max_retry_after_ms`` not a finite number
            ≥ 0; ``jitter`` not a number in ``[0, 1]``; ``transient_codes`` not a sequence of
            ``str``/``int``; ``secrets`` not a sequence of ``str``; ``metadata`` not a mapping;
            ``policy`` neither ``None`` nor an object with a callable ``decide``.
    """
    options = RetryOptions.coerce(value)
    attempts: Any = options.max_attempts
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise PrismConfigError(f"{label}.max_attempts must be an int >= 1, got {attempts!r}")
    for name in ("base_delay_ms", "max_delay_ms", "max_retry_after_ms"):
        v: Any = getattr(options, name)
        if not _is_number(v) or not math.isfinite(v) or v < 0:
            raise PrismConfigError(f"{label}.{name} must be a finite number >= 0, got {v!r}")
    jitter: Any = options.jitter
    if not _is_number(jitter) or not (0 <= jitter <= 1):
        raise PrismConfigError(f"{label}.jitter must be a number in [0, 1], got {jitter!r}")
    codes: Any = options.transient_codes
    if (
        isinstance(codes, (str, bytes))
        or not isinstance(codes, Iterable)
        or not all(isinstance(c, (str, int)) and not isinstance(c, bool) for c in codes)
    ):
        raise PrismConfigError(f"{label}.transient_codes must be a sequence of str or int")
    secrets: Any = options.secrets
    check_secrets_option(secrets, label)
    if not isinstance(codes, tuple) or not isinstance(secrets, tuple):
        options = dataclasses.replace(options, transient_codes=tuple(codes), secrets=tuple(secrets))
    if options.metadata is not None and not isinstance(options.metadata, Mapping):
        raise PrismConfigError(f"{label}.metadata must be a mapping or None")
    policy: Any = options.policy
    if policy is not None and not callable(getattr(policy, "decide", None)):
        raise PrismConfigError(f"{label}.policy must be None or an object with a callable decide")
    return options


def resolve_retry_options(
    agent: RetryOptions | Mapping[str, Any] | Literal[False] | None,
    run: RetryOptions | Mapping[str, Any] | Literal[False] | None = None,
) -> RetryOptions | None:
    """Resolve the effective retry options of a run from the agent and run layers.

    * run ``False`` disables retry; a run [`RetryOptions`][prism.retry.RetryOptions] replaces the agent value;
    * a run mapping overrides only the keys it names, on top of the agent value (or of the
      defaults when the agent sets none or ``False``);
    * run ``None`` takes the agent value (agent ``False`` disables retry);
    * when neither layer sets ``retry`` the result is ``RetryOptions()`` (retry is on by default).

    Args:
        agent: The agent's ``retry`` setting.
        run: The run's ``retry`` setting.

    Returns:
        The validated effective options, or ``None`` when retry is turned off for the run.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — either layer is invalid or not a
            ``RetryOptions``/mapping/``False``/``None``.
    """
    return resolve_option_layers(
        RetryOptions,
        agent,
        run,
        validate=validate_retry_options,
        label="retry",
        unset=RetryOptions(),
    )


# --------------------------------------------------------------------------- transient


def is_transient_error(info: ErrorInfo, transient_codes: Iterable[str | int] = ()) -> bool:
    """Whether a failed attempt's error is worth retrying.

    False when ``info.name == "AbortError"`` or the message contains ``abort``
    (case-insensitive); true when ``info.code`` is one of [`DEFAULT_TRANSIENT_CODES`][prism.retry.DEFAULT_TRANSIENT_CODES] or of
    ``transient_codes``; otherwise true when the message matches
    ``timeout|temporar|rate.?limit|overload|unavailable`` (case-insensitive).

    Args:
        info: The attempt's ``ErrorInfo``.
        transient_codes: Extra transient codes (``RetryOptions.transient_codes``).
    """
    message = info.message or ""
    if info.name == "AbortError" or _ABORT_RE.search(message):
        return False
    code = info.code
    if code is not None and not isinstance(code, bool):
        if code in DEFAULT_TRANSIENT_CODES:
            return True
        for extra in transient_codes:
            if extra == code and not isinstance(extra, bool):
                return True
    return _TRANSIENT_RE.search(message) is not None


# --------------------------------------------------------------------------- default policy


class _DefaultRetryPolicy:
    """The built-in backoff policy (see [`create_default_retry_policy()`][prism.retry.create_default_retry_policy])."""

    __slots__ = ("_options", "_random")

    def __init__(self, options: RetryOptions, random: Callable[[], float]) -> None:
        self._options = options
        self._random = random

    @property
    def options(self) -> RetryOptions:
        """The options this policy decides with."""
        return self._options

    def decide(self, context: RetryContext, /) -> RetryDecision:
        """Retry a transient failure while attempts remain, after the server's ``Retry-After`` hint
        or an exponential, jittered delay (synchronous)."""
        opts = self._options
        signal = context.signal
        if signal is not None and signal.aborted:
            return RetryDecision(False)
        if context.attempt >= opts.max_attempts:
            return RetryDecision(False)
        error = context.error
        if not is_transient_error(error, opts.transient_codes):
            return RetryDecision(False)
        hint = error.retry_after_ms
        if hint is not None and _is_number(hint) and math.isfinite(hint) and hint >= 0:
            if hint > opts.max_retry_after_ms:
                return RetryDecision(False)
            return RetryDecision(True, float(math.ceil(hint)))
        base = float(opts.base_delay_ms)
        cap = max(float(opts.max_delay_ms), base)
        exponent = max(0, context.attempt - 1)
        delay = cap if exponent >= 1024 else min(base * (2.0**exponent), cap)
        jitter = float(opts.jitter)
        if jitter > 0:
            delay *= 1.0 - jitter + 2.0 * jitter * self._random()
        return RetryDecision(True, float(math.floor(delay + 0.5)))


def create_default_retry_policy(
    options: RetryOptions | Mapping[str, Any] | None = None,
    *,
    random: Callable[[], float] | None = None,
) -> RetryPolicy:
    """Build the built-in retry policy.

    ``decide`` returns no retry when the signal is aborted, when ``attempt >= max_attempts`` or
    when the error is not transient ([`is_transient_error()`][prism.retry.is_transient_error]). Otherwise, with a finite
    ``retry_after_ms`` hint ≥ 0: the delay is ``ceil(retry_after_ms)`` (no cap, no jitter), or
    no retry when the hint exceeds ``max_retry_after_ms``. Without a hint: ``base_delay_ms *
    2 ** (attempt - 1)`` capped at ``max(max_delay_ms, base_delay_ms)``, multiplied by a factor
    uniform in ``[1 - jitter, 1 + jitter]`` and rounded (half up) to an integer number of
    milliseconds.

    Args:
        options: The options (``None`` → ``RetryOptions()``); validated.
        random: Returns a float in ``[0, 1)`` for the jitter (default ``random.random``);
            injectable for deterministic tests.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — invalid options.
    """
    opts = validate_retry_options(options if options is not None else RetryOptions())
    return _DefaultRetryPolicy(opts, random if random is not None else _global_random)


def _global_random() -> float:
    """``random.random()``; ``random`` is imported by the first jittered delay, not by
    ``import prism.retry`` (start-up cost)."""
    import random

    return random.random()
