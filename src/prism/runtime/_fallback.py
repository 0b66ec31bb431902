"""The fallback chain of a run's provider attempts (``prism.providers.fallback``).

:class:`~prism.runtime.attempts.ProviderAttempts` holds one :class:`FallbackChain` when the run's
provider is a ``FallbackProvider``. Every request starts with the primary and the agent's model;
after a provider's last attempt failed (its retry budget spent, or an error the retry policy does
not retry) the chain moves to the next link when all of these hold:

* a next link exists;
* the failed attempt emitted no streamed delta (``observable`` is false): once the host saw part
  of an answer, the error surfaces;
* the failure is a provider's, not a broken stream protocol (``retry`` is true);
* the run is not aborted (an abort or a cancellation never falls back);
* the chain's :class:`~prism.providers.fallback.FallbackPolicy` names the error.

The next link then serves the same request with its own model and a fresh retry budget.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeAlias

from prism.abort import AbortSignal
from prism.providers.base import AIProvider
from prism.providers.chain import FallbackPolicy, FallbackProvider
from prism.redaction import SecretRedactor
from prism.types import ModelConfig, ProviderRequest

__all__ = ["ChainLink", "FallbackChain"]

ChainLink: TypeAlias = tuple[AIProvider, str, ModelConfig]
"""One link: the provider, its id and the model it is asked for."""


class FallbackChain:
    """The links of a fallback provider and the one serving the current request."""

    __slots__ = ("index", "links", "policy", "primary")

    def __init__(self, links: tuple[ChainLink, ...], policy: FallbackPolicy) -> None:
        self.links = links
        self.policy = policy
        self.primary = links[0][0]
        self.index = 0
        """The link serving the current request (0: the primary)."""

    @classmethod
    def of(cls, provider: AIProvider, model: ModelConfig) -> FallbackChain | None:
        """The chain of ``provider`` when it is a ``FallbackProvider`` (its primary serving
        ``model``), else ``None``."""
        if not isinstance(provider, FallbackProvider):
            return None
        links: list[ChainLink] = [(provider.primary, provider.id, model)]
        for link in provider.fallbacks:
            links.append((link.provider, str(getattr(link.provider, "id", "") or ""), link.model))
        return cls(tuple(links), provider.policy)

    def reset(self) -> ChainLink:
        """Back to the primary (a new request)."""
        self.index = 0
        return self.links[0]

    def falls_back(self, failure: Any, signal: AbortSignal) -> bool:
        """Whether the failed attempt ``failure`` (an ``AttemptFailed``) moves to the next link."""
        return (
            self.index + 1 < len(self.links)
            and not failure.observable
            and failure.retry
            and not signal.aborted
            and self.policy.applies(failure.info)
        )

    def advance(self) -> ChainLink:
        """Move to the next link and return it."""
        self.index += 1
        return self.links[self.index]

    def request_for(
        self, request: ProviderRequest, redactor: SecretRedactor | None
    ) -> ProviderRequest:
        """``request`` asking the current link's model (redacted like the rest of the request);
        the primary's requests are left as they are."""
        if self.index == 0:
            return request
        model = self.links[self.index][2]
        if redactor is not None:
            model = redactor.redact(model)
        return dataclasses.replace(request, model=model)
