"""Model fallback: an ordered chain of providers, the next one used when one is unavailable.

``fallback(primary, (secondary, model), ...)`` builds a [`FallbackProvider`][prism.providers.chain.FallbackProvider]. The agent's
model is the primary's (the agent's ``model`` is what the primary is asked for); each fallback
names the model it is asked for instead. The runtime drives the chain for every provider turn:

* the turn starts with the primary, which gets the run's whole retry budget (``retry=``);
* when its last attempt fails with an error the policy names (by default: unavailable,
  overloaded, rate-limited, timeouts and connection errors, see [`DEFAULT_FALLBACK_CODES`][prism.providers.chain.DEFAULT_FALLBACK_CODES]),
  the next provider serves the same request with its own model, again with the whole retry
  budget; and so on down the chain;
* never after the failing attempt's first content, thinking or tool-call delta (part of an
  answer streamed: the error surfaces) — a stream that only opened (a message start) and failed
  still falls back, and its ``message_started`` was never emitted (held until the first delta) —
  never when the run was aborted or cancelled, never for errors the policy does not name (a
  ``400`` surfaces at once), and never for a provider that broke the stream protocol.

When every provider tried fails, the error (``ProviderTurnError``, ``RunResult.error``) lists each
one in ``ErrorInfo.providers`` ([`ProviderFailure`][prism.types.ProviderFailure]: provider id, model, code,
redacted message, attempts) and in its message; its ``__cause__`` is the last failure's.

Every attempt's ``provider_turn_started`` / ``provider_turn_finished`` event names the provider and
the model that served it (``metadata.provider_id`` / ``metadata.model``), so do the ledger's
``provider_turn`` usage rows (``provider_id``, ``model``): usage and cost are attributed to the
provider that produced them. Calling [`FallbackProvider.generate()`][prism.providers.chain.FallbackProvider.generate] directly (outside a run)
uses the primary alone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from prism.errors import PrismConfigError
from prism.providers.base import AIProvider
from prism.providers.defaults import ProviderDefaults, check_model_for_provider, provider_defaults
from prism.types import ErrorInfo, ModelConfig, ProviderEvent, ProviderRequest

__all__ = [
    "DEFAULT_FALLBACK_CODES",
    "FallbackModel",
    "FallbackPolicy",
    "FallbackProvider",
    "fallback",
]

DEFAULT_FALLBACK_CODES: Final[frozenset[str | int]] = frozenset(
    {
        # unavailable / overloaded
        500,
        502,
        503,
        504,
        529,
        "overloaded",
        "overloaded_error",
        "api_error",
        "temporarily_unavailable",
        # rate-limited
        429,
        "rate_limit",
        "rate_limit_error",
        # timeouts
        408,
        "timeout",
        "ETIMEDOUT",
        # connection errors
        "ECONNRESET",
        "ECONNREFUSED",
        "EAI_AGAIN",
        "ENOTFOUND",
    }
)
"""The ``ErrorInfo.code`` values that move a turn to the next provider by default: the HTTP
statuses and the transport codes prism's adapters report for an unavailable, overloaded or
rate-limited service, a timeout, or a connection that failed."""


@dataclass(frozen=True, slots=True)
class FallbackModel:
    """One link of the chain after the primary: a provider and the model it is asked for."""

    provider: AIProvider
    """The provider."""
    model: ModelConfig
    """The model the provider is asked for (replaces the request's model)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FallbackPolicy:
    """Which failures move a turn to the next provider.

    ``when(error)``, when given, decides alone; otherwise an error falls back when its ``code``
    is in ``codes``.
    """

    codes: frozenset[str | int] = DEFAULT_FALLBACK_CODES
    """Error codes that fall back."""
    when: Callable[[ErrorInfo], bool] | None = field(default=None, compare=False)
    """A predicate on the (redacted) error of the provider's last attempt."""

    def applies(self, error: ErrorInfo) -> bool:
        """Whether ``error`` moves the turn to the next provider."""
        when = self.when
        if when is not None:
            return bool(when(error))
        code = error.code
        return code is not None and code in self.codes


class FallbackProvider:
    """A provider that stands for an ordered chain; built by [`fallback()`][prism.providers.chain.fallback].

    Its ``id`` and ``defaults`` are the primary's (an agent without ``model=`` gets the primary's
    default model). The runtime reads ``primary``, ``fallbacks`` and ``policy``;
    ``generate`` alone (outside a run) streams from the primary.
    """

    __slots__ = ("defaults", "fallbacks", "id", "policy", "primary")

    def __init__(
        self, primary: AIProvider, fallbacks: tuple[FallbackModel, ...], policy: FallbackPolicy
    ) -> None:
        self.primary = primary
        self.fallbacks = fallbacks
        self.policy = policy
        self.id: str = str(getattr(primary, "id", "") or "")
        self.defaults: ProviderDefaults = provider_defaults(primary)

    def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """The primary's stream for ``request``."""
        return self.primary.generate(request)

    def __repr__(self) -> str:
        names = [self.id, *(str(getattr(f.provider, "id", "")) for f in self.fallbacks)]
        return f"<FallbackProvider {' → '.join(names)}>"


def _model(value: Any, index: int) -> ModelConfig:
    if isinstance(value, (ModelConfig, Mapping)):
        return ModelConfig.coerce(value)
    raise PrismConfigError(
        f"fallback {index}: the model must be a ModelConfig or a mapping, got {type(value).__name__}"
    )


def _check_provider(value: object, label: str) -> None:
    if not callable(getattr(value, "generate", None)):
        raise PrismConfigError(f"{label} must be a provider with a callable generate(request)")
    if isinstance(value, FallbackProvider):
        raise PrismConfigError(f"{label} is itself a fallback chain; list its providers instead")


def fallback(
    primary: AIProvider,
    *fallbacks: FallbackModel | tuple[AIProvider, ModelConfig | Mapping[str, Any]],
    policy: FallbackPolicy | None = None,
) -> FallbackProvider:
    """Chain ``primary`` with fallbacks tried in order when it is unavailable.

    Args:
        primary: The provider of the agent's model.
        *fallbacks: ``(provider, model)`` pairs (or [`FallbackModel`][prism.providers.chain.FallbackModel]); ``model`` is a
            ``ModelConfig`` or a mapping of its fields.
        policy: Which errors fall back; default [`FallbackPolicy()`][prism.providers.chain.FallbackPolicy] (the codes of
            [`DEFAULT_FALLBACK_CODES`][prism.providers.chain.DEFAULT_FALLBACK_CODES]).

    Returns:
        The provider to give ``create_agent(provider=...)``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — no fallback given, something that is not a
            provider, a fallback chain inside the chain, an invalid model or one that names
            another provider than its provider's default model does, or a ``policy`` that is
            not a ``FallbackPolicy``.
    """
    _check_provider(primary, "fallback: the primary")
    if not fallbacks:
        raise PrismConfigError("fallback: give at least one (provider, model) after the primary")
    links: list[FallbackModel] = []
    for index, item in enumerate(fallbacks, start=1):
        if isinstance(item, FallbackModel):
            link = item
        elif isinstance(item, tuple) and len(item) == 2:
            link = FallbackModel(item[0], _model(item[1], index))
        else:
            raise PrismConfigError(
                f"fallback {index}: expected a (provider, model) pair, got {type(item).__name__}"
            )
        _check_provider(link.provider, f"fallback {index}")
        check_model_for_provider(link.model, link.provider)
        links.append(link)
    if policy is None:
        policy = FallbackPolicy()
    elif not isinstance(policy, FallbackPolicy):
        raise PrismConfigError("fallback: policy must be a FallbackPolicy")
    return FallbackProvider(primary, tuple(links), policy)
