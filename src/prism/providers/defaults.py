"""What a provider says about itself: its default model and the run defaults that suit it.

A provider may carry a ``defaults`` attribute, a [`ProviderDefaults`][prism.providers.defaults.ProviderDefaults]
([`DescribedProvider`][prism.providers.defaults.DescribedProvider]); the runtime reads it with [`provider_defaults()`][prism.providers.defaults.provider_defaults]:

* ``create_agent(provider=p)`` without ``model=`` uses ``p.defaults.model``;
* a ``model`` whose ``provider`` field names another provider than ``p.defaults.model.provider``
  is a configuration error ([`check_model_for_provider()`][prism.providers.defaults.check_model_for_provider]);
* ``answer_after_tool_rounds`` is the tool-round policy a run gets when neither the run nor the
  agent sets one (the embedded model sets 1: a 135M-parameter model cannot tell when to stop
  calling tools).

A provider without ``defaults`` (a custom or scripted one) gets [`NO_DEFAULTS`][prism.providers.defaults.NO_DEFAULTS].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from prism.errors import PrismConfigError
from prism.types import ModelConfig

__all__ = [
    "NO_DEFAULTS",
    "DescribedProvider",
    "ProviderDefaults",
    "check_model_for_provider",
    "provider_defaults",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderDefaults:
    """Defaults a provider declares for the agents and runs that use it.

    Attributes:
        model: The model an agent uses when ``create_agent`` gets no ``model=``; ``None`` when
            the provider has no natural default (an OpenAI-compatible server built without
            ``model=``). Its ``provider`` field is the provider name a model config must carry
            to be used with this provider.
        answer_after_tool_rounds: Tool rounds a run allows before the model must answer in text
            (``None``: no default policy). An explicit run or agent option wins.
    """

    model: ModelConfig | None = None
    answer_after_tool_rounds: int | None = None


NO_DEFAULTS: Final = ProviderDefaults()
"""The defaults of a provider that declares none."""


@runtime_checkable
class DescribedProvider(Protocol):
    """A provider that declares [`ProviderDefaults`][prism.providers.defaults.ProviderDefaults] (optional beside ``AIProvider``)."""

    @property
    def defaults(self) -> ProviderDefaults:
        """The provider's defaults."""
        ...


def provider_defaults(provider: object) -> ProviderDefaults:
    """The [`ProviderDefaults`][prism.providers.defaults.ProviderDefaults] a provider declares in ``defaults``, else [`NO_DEFAULTS`][prism.providers.defaults.NO_DEFAULTS]."""
    value = getattr(provider, "defaults", None)
    return value if isinstance(value, ProviderDefaults) else NO_DEFAULTS


def check_model_for_provider(model: ModelConfig, provider: object) -> None:
    """Reject a model config that names another provider than the one it is used with.

    Only providers that declare a default model are checked (a provider without one serves
    whatever ``ModelConfig.provider`` says).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — ``model.provider`` differs from the provider's
            ``defaults.model.provider``; the message names both and the provider's default model.
    """
    default = provider_defaults(provider).model
    if default is None or model.provider == default.provider:
        return
    provider_id = getattr(provider, "id", type(provider).__name__)
    raise PrismConfigError(
        f"model {model.provider}/{model.model} does not match the provider "
        f"{type(provider).__name__} (id {provider_id!r}), which serves provider "
        f"{default.provider!r} models (its default model is {default.provider}/{default.model}); "
        f"leave model= out to use the default, or pass a model with provider={default.provider!r}"
    )
