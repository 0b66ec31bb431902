"""Provider-request policies: per-request options and secrets supplied by the host.

A policy is called once per provider request, before middleware and redaction. It may return
options merged over the request's options and secrets that are redacted from the errors of that
request's failed attempts. [`apply_request_policies()`][prism.runtime.run.policies.apply_request_policies] runs the agent's policies, then the
run's, in order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from prism._util import maybe_await
from prism.abort import AbortSignal
from prism.types import ProviderRequest, ProviderRequestOptions, merge_provider_options

__all__ = [
    "PolicyContext",
    "ProviderRequestPolicy",
    "ProviderRequestPolicyResult",
    "apply_request_policies",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyContext:
    """What a provider-request policy sees."""

    request: ProviderRequest
    """The request as assembled (policies run before middleware and redaction)."""
    session_id: str
    """Session id."""
    run_id: str
    """Run id."""
    metadata: Mapping[str, Any]
    """Run metadata (read-only)."""
    signal: AbortSignal | None = None
    """The run's abort signal."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderRequestPolicyResult:
    """A policy's contribution to one request.

    ``options`` are merged into ``request.options``; ``secrets`` are collected to redact
    the ``ErrorInfo`` of failed attempts.
    """

    options: ProviderRequestOptions | None = None
    """Options merged over the request's (``patch`` wins)."""
    secrets: tuple[str, ...] = ()
    """Strings to redact from provider errors of this request."""

    def __post_init__(self) -> None:
        if not isinstance(self.secrets, tuple):
            object.__setattr__(self, "secrets", tuple(self.secrets))


ProviderRequestPolicy: TypeAlias = Callable[
    [PolicyContext],
    "ProviderRequestPolicyResult | None | Awaitable[ProviderRequestPolicyResult | None]",
]
"""``policy(ctx) -> ProviderRequestPolicyResult | None`` (sync or async)."""


async def apply_request_policies(
    policies: Sequence[ProviderRequestPolicy],
    request: ProviderRequest,
    *,
    session_id: str,
    run_id: str,
    metadata: Mapping[str, Any],
    signal: AbortSignal,
) -> tuple[ProviderRequest, tuple[str, ...]]:
    """Run ``policies`` in order over ``request``.

    Each policy sees the request as changed by the ones before it. A mapping result is read as a
    [`ProviderRequestPolicyResult`][prism.runtime.run.policies.ProviderRequestPolicyResult]; its ``options`` (a mapping is coerced) are merged over
    the request's options.

    Returns:
        The request with the merged options, and every non-empty secret the policies returned.

    Raises:
        TypeError: a policy returned something other than a result, a mapping or ``None``.
        Exception: whatever a policy raises.
    """
    secrets: list[str] = []
    for policy in policies:
        context = PolicyContext(
            request=request,
            session_id=session_id,
            run_id=run_id,
            metadata=metadata,
            signal=signal,
        )
        outcome: Any = await maybe_await(policy(context))
        if outcome is None:
            continue
        if isinstance(outcome, Mapping):
            outcome = ProviderRequestPolicyResult(
                options=outcome.get("options"), secrets=tuple(outcome.get("secrets") or ())
            )
        if not isinstance(outcome, ProviderRequestPolicyResult):
            raise TypeError(
                "provider request policy returned "
                f"{type(outcome).__name__}, not a ProviderRequestPolicyResult"
            )
        options: Any = outcome.options
        if isinstance(options, Mapping):
            options = ProviderRequestOptions.coerce(options)
        if options is not None:
            request = dataclasses.replace(
                request, options=merge_provider_options(request.options, options)
            )
        secrets.extend(s for s in outcome.secrets if s)
    return request, tuple(secrets)
