"""The fallback chain of a run's provider attempts (``prism.providers.fallback``).

:class:`~prism.runtime.run.attempts.ProviderAttempts` holds one :class:`FallbackChain` when the run's
provider is a ``FallbackProvider``, and streams from it: the chain streams from its current link.
Every request starts with the primary and the agent's model; after a provider's last attempt
failed (its retry budget spent, or an error the retry policy does not retry) the chain moves to
the next link when all of these hold:

* a next link exists;
* the failed attempt emitted no streamed delta (``observable`` is false): once the host saw part
  of an answer, the error surfaces;
* the failure is a provider's, not a broken stream protocol (``retry`` is true);
* the run is not aborted (an abort or a cancellation never falls back);
* the chain's :class:`~prism.providers.chain.FallbackPolicy` names the error.

The next link then serves the same request with its own model and a fresh retry budget; the
attempts' ``provider_id`` and ``model`` (the metadata of their events and usage rows) follow it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any, TypeAlias

from prism.abort import AbortSignal
from prism.providers.base import AIProvider
from prism.providers.chain import FallbackPolicy, FallbackProvider
from prism.redaction import SecretRedactor
from prism.types import ModelConfig, ProviderEvent, ProviderRequest

__all__ = ["ChainLink", "FallbackChain"]

ChainLink: TypeAlias = tuple[AIProvider, str, ModelConfig]
"""One link: the provider, its id and the model it is asked for."""


class FallbackChain:
    """The links of a fallback provider and the one serving the current request.

    It is itself a provider (``id`` and ``generate`` are the current link's).
    """

    __slots__ = ("id", "index", "links", "policy", "redactor")

    def __init__(
        self,
        links: tuple[ChainLink, ...],
        policy: FallbackPolicy,
        redactor: SecretRedactor | None = None,
    ) -> None:
        self.links = links
        self.policy = policy
        self.redactor = redactor
        self.index = 0
        """The link serving the current request (0: the primary)."""
        self.id: str = links[0][1]
        """The current link's provider id."""

    @classmethod
    def of(
        cls, provider: AIProvider, model: ModelConfig, redactor: SecretRedactor | None
    ) -> FallbackChain | None:
        """The chain of ``provider`` when it is a ``FallbackProvider`` (its primary serving
        ``model``), else ``None``. ``redactor`` redacts the fallbacks' models in requests."""
        if not isinstance(provider, FallbackProvider):
            return None
        links: list[ChainLink] = [(provider.primary, provider.id, model)]
        for link in provider.fallbacks:
            links.append((link.provider, str(getattr(link.provider, "id", "") or ""), link.model))
        return cls(tuple(links), provider.policy, redactor)

    def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """The current link's stream."""
        return self.links[self.index][0].generate(request)

    def falls_back(self, failure: Any, signal: AbortSignal) -> bool:
        """Whether the failed attempt ``failure`` (an ``AttemptFailed``) moves to the next link."""
        return (
            self.index + 1 < len(self.links)
            and not failure.observable
            and failure.retry
            and not signal.aborted
            and self.policy.applies(failure.info)
        )

    def switch(self, attempts: Any, index: int, request: ProviderRequest) -> ProviderRequest:
        """Make link ``index`` serve: ``attempts.provider_id``/``model`` become its own, and the
        returned request asks for its model (redacted like the rest of the request; link 0 is
        the primary, whose requests are the run's own)."""
        self.index = index
        _, provider_id, model = self.links[index]
        self.id = attempts.provider_id = provider_id
        attempts.model = model
        if index == 0:
            return request
        redactor = self.redactor
        if redactor is not None:
            model = redactor.redact(model)
        return dataclasses.replace(request, model=model)
