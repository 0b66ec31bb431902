"""Model configuration and per-request provider options."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict, TypeVar

from prism._json import JsonValue
from prism.errors import PrismConfigError
from prism.types._options import _Options
from prism.types._usage import Usage

_T = TypeVar("_T")

__all__ = [
    "ModelCapabilities",
    "ModelConfig",
    "ModelLimits",
    "ModelPricing",
    "NamedToolChoice",
    "ProviderRequestOptions",
    "StructuredOutputOptions",
    "ToolChoice",
    "check_tool_choice",
    "merge_provider_options",
]


@dataclass(frozen=True, slots=True)
class ModelCapabilities(_Options):
    """What a model supports."""

    input: tuple[str, ...] = ("text",)
    """Input modalities, e.g. ``("text", "image")``."""
    output: tuple[str, ...] = ("text",)
    """Output modalities."""
    reasoning: bool = False
    """Produces thinking content."""
    tools: bool = False
    """Supports tool calls."""
    streaming: bool = True
    """Supports streaming."""
    structured_output: bool | Literal["json_schema"] = False
    """Native structured output support."""

    if TYPE_CHECKING:

        def __init__(
            self,
            input: Sequence[str] = ("text",),
            output: Sequence[str] = ("text",),
            reasoning: bool = False,
            tools: bool = False,
            streaming: bool = True,
            structured_output: bool | Literal["json_schema"] = False,
        ) -> None: ...

    def __post_init__(self) -> None:
        if not isinstance(self.input, tuple):
            object.__setattr__(self, "input", tuple(self.input))
        if not isinstance(self.output, tuple):
            object.__setattr__(self, "output", tuple(self.output))


@dataclass(frozen=True, slots=True)
class ModelLimits(_Options):
    """Model size limits in tokens."""

    context_window: int | None = None
    """Context window in tokens."""
    max_output_tokens: int | None = None
    """Maximum output tokens."""


@dataclass(frozen=True, slots=True)
class ModelPricing(_Options):
    """Per-token prices of a model, for providers that report no cost.

    When a provider reports usage without ``cost``, the runtime prices it:
    ``input_tokens × input + output_tokens × output`` (+ ``cache_read_tokens × cache_read`` and
    ``cache_write_tokens × cache_write`` when those prices are set), per million tokens, in
    ``currency``. Token counts are taken as the provider reports them (OpenAI's input count
    includes cached tokens, so without a ``cache_read`` price they are charged at the input
    price: an upper bound). The priced usage is what ``RunResult.usage.cost`` sums and what a
    ``limits={"max_cost": ...}`` budget in the same currency is checked against.
    """

    input: float
    """Price of one million input tokens."""
    output: float
    """Price of one million output tokens."""
    cache_read: float | None = None
    """Price of one million cache-read tokens; ``None``: not charged separately."""
    cache_write: float | None = None
    """Price of one million cache-write tokens; ``None``: not charged separately."""
    currency: str = "USD"
    """Currency of the prices."""

    def cost(self, usage: Usage) -> float:
        """The cost of ``usage`` at these prices, in ``currency`` units."""
        total = (usage.input_tokens or 0) * self.input + (usage.output_tokens or 0) * self.output
        if self.cache_read is not None:
            total += (usage.cache_read_tokens or 0) * self.cache_read
        if self.cache_write is not None:
            total += (usage.cache_write_tokens or 0) * self.cache_write
        return total / 1_000_000


@dataclass(frozen=True, slots=True)
class ModelConfig(_Options):
    """Which model to call and how."""

    provider: str
    """Provider id used for resolution (e.g. ``"openai"``)."""
    model: str
    """Provider model name."""
    display_name: str | None = None
    """Human-friendly name."""
    capabilities: ModelCapabilities | None = None
    """Capabilities; ``None`` means defaults."""
    limits: ModelLimits | None = None
    """Token limits."""
    compat: Mapping[str, Any] | None = None
    """Provider compatibility switches."""
    parameters: Mapping[str, JsonValue] | None = None
    """Passed verbatim into request bodies (``temperature``, ``max_tokens``, ...)."""
    metadata: Mapping[str, Any] | None = None
    """Host metadata."""
    pricing: ModelPricing | None = None
    """Per-token prices used to cost usage the provider reports without a cost."""


@dataclass(frozen=True, slots=True)
class StructuredOutputOptions(_Options):
    """Native structured output request."""

    name: str
    """Schema name (1-128 characters once stripped)."""
    schema: dict[str, JsonValue]
    """JSON Schema object."""
    strict: bool | None = None
    """Provider strict mode."""


@dataclass(frozen=True, slots=True)
class ProviderRequestOptions(_Options):
    """Per-request provider options; merged with ``merge_provider_options``."""

    session_id: str | None = None
    """Session id forwarded to the provider (e.g. for caching)."""
    headers: Mapping[str, str] | None = None
    """Extra HTTP headers."""
    compat: Mapping[str, Any] | None = None
    """Provider compatibility switches."""
    extra: Mapping[str, Any] | None = None
    """Extra request body fields."""
    structured_output: StructuredOutputOptions | None = None
    """Native structured output."""
    max_tokens: int | None = None
    """Cap on the tokens the model generates in this request (≥ 1); every provider maps it to
    its own field (``max_completion_tokens`` for OpenAI, ``max_tokens`` elsewhere) and it wins
    over ``model.parameters``. A reply cut by it ends with the provider stop reason
    ``"max_tokens"``."""
    tool_choice: ToolChoice | None = None
    """Whether the model may (``"auto"``), must (``"required"``) or must not (``"none"``) call
    the request's tools, or must call the one named (``{"name": TOOL}``, a tool of the
    request); each provider maps it to its own wire form. ``None``: the provider's default
    (``"auto"``)."""

    def __post_init__(self) -> None:
        max_tokens = self.max_tokens
        if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 1):
            raise PrismConfigError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
        if self.tool_choice is not None:
            object.__setattr__(self, "tool_choice", check_tool_choice(self.tool_choice))


class NamedToolChoice(TypedDict):
    """A tool choice that forces one tool: ``{"name": "search"}``."""

    name: str
    """The tool's name."""


ToolChoice: TypeAlias = Literal["auto", "none", "required"] | NamedToolChoice
"""Provider-neutral tool choice ([`ProviderRequestOptions.tool_choice`][prism.types._models.ProviderRequestOptions.tool_choice], and the
``tool_choice`` option of ``create_agent`` and ``run()``): ``"auto"``, ``"none"``,
``"required"`` or ``{"name": TOOL}``."""


def check_tool_choice(value: object, tool_names: Sequence[str] | None = None) -> ToolChoice:
    """Check a tool choice and return it (a named choice as a new plain ``{"name": TOOL}``).

    Args:
        value: The choice to check.
        tool_names: The tools a named choice may name; ``None`` checks only the shape.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — not one of ``"auto"``, ``"none"``,
            ``"required"`` or a mapping with exactly the key ``"name"`` holding a non-empty
            string (the message names the value), or a name not in ``tool_names`` (the message
            names the tool and the known ones).
    """
    if isinstance(value, str) and value in ("auto", "none", "required"):
        return value  # type: ignore[return-value]  # narrowed by the check above
    name = value.get("name") if isinstance(value, Mapping) and set(value) == {"name"} else None
    if not isinstance(name, str) or not name:
        raise PrismConfigError(
            f"tool_choice must be 'auto', 'none', 'required' or {{'name': TOOL}}, got {value!r}"
        )
    if tool_names is not None and name not in tool_names:
        known = ", ".join(sorted(tool_names)) or "none"
        raise PrismConfigError(
            f"tool_choice names the tool {name!r}, which is not among the tools (known: {known})"
        )
    return {"name": name}


def _merge_maps(
    base: Mapping[str, _T] | None, patch: Mapping[str, _T] | None
) -> Mapping[str, _T] | None:
    if patch is None:
        return base
    if base is None:
        return patch
    return {**base, **patch}


def merge_provider_options(
    base: ProviderRequestOptions | None, patch: ProviderRequestOptions | None
) -> ProviderRequestOptions | None:
    """Merge two option sets.

    Non-``None`` fields of ``patch`` win, except ``headers``, ``compat`` and ``extra``, which merge
    key by key with ``patch`` keys winning. ``None`` on either side returns the other side.
    """
    if patch is None:
        return base
    if base is None:
        return patch
    return ProviderRequestOptions(
        session_id=patch.session_id if patch.session_id is not None else base.session_id,
        headers=_merge_maps(base.headers, patch.headers),
        compat=_merge_maps(base.compat, patch.compat),
        extra=_merge_maps(base.extra, patch.extra),
        structured_output=(
            patch.structured_output
            if patch.structured_output is not None
            else base.structured_output
        ),
        max_tokens=patch.max_tokens if patch.max_tokens is not None else base.max_tokens,
        tool_choice=patch.tool_choice if patch.tool_choice is not None else base.tool_choice,
    )
