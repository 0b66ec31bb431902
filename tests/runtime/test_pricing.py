"""Per-token prices on the model config cost the usage a provider reports without a cost, so a
``max_cost`` budget works with providers that report tokens only."""

from __future__ import annotations

import pytest
from runtime_support import make_session

from prism.errors import AgentRunLimitError
from prism.providers.base import provider_done, provider_text_delta
from prism.types import ModelConfig, ModelPricing, Usage

PRICED = ModelConfig(
    provider="mock", model="m", pricing=ModelPricing(input=2.0, output=10.0, cache_read=0.5)
)


def turn(usage: Usage) -> list[object]:
    return [provider_text_delta("ok"), provider_done(usage, "end_turn")]


async def test_usage_without_cost_is_priced_per_million_tokens() -> None:
    usage = Usage(input_tokens=1_000, output_tokens=200, cache_read_tokens=400)
    session, _ = make_session([turn(usage), turn(usage)], model=PRICED)
    result = await session.run("a")
    assert result.usage is not None
    assert result.usage.cost == pytest.approx((1_000 * 2 + 200 * 10 + 400 * 0.5) / 1e6)
    assert result.usage.currency == "USD"


async def test_a_cost_the_provider_reports_is_kept() -> None:
    usage = Usage(input_tokens=1_000, output_tokens=200, cost=0.5, currency="USD")
    session, _ = make_session([turn(usage)], model=PRICED)
    result = await session.run("a")
    assert result.usage is not None and result.usage.cost == 0.5


async def test_max_cost_is_checked_against_priced_usage() -> None:
    usage = Usage(input_tokens=500_000, output_tokens=0)  # 1.00 USD
    session, _ = make_session([turn(usage)], model=PRICED,
                              limits={"max_cost": {"amount": 0.5, "currency": "USD"}})
    with pytest.raises(AgentRunLimitError) as info:
        await session.run("a")
    assert info.value.breach.limit == "max_cost"
    assert info.value.breach.observed == pytest.approx(1.0)


def test_pricing_round_trips_with_the_model_config() -> None:
    assert ModelConfig.from_dict(PRICED.to_dict()) == PRICED
    coerced = ModelConfig.coerce({"provider": "p", "model": "m",
                                  "pricing": {"input": 0.15, "output": 0.6}})
    assert coerced.pricing == ModelPricing(input=0.15, output=0.6)
