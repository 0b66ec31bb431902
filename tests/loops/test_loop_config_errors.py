"""Loop mistakes surface at configuration time, in words: artifact callbacks of the wrong shape
name the expected signature, and loop options without or with an unknown ``strategy`` are
rejected before any provider call, listing the strategies."""

from __future__ import annotations

import functools
from typing import Any

import pytest

import prism
from prism.errors import PrismConfigError
from prism.loops.contracts import GenerateValidateReviseLoopOptions
from prism.loops.gvr import generate_validate_revise_loop
from prism.providers.base import provider_done, provider_text_delta
from prism.providers.mock import create_mock_provider

MODEL = {"provider": "mock", "model": "demo"}


def ok(value: Any, ctx: Any) -> dict[str, bool]:
    return {"ok": True}


def test_a_one_parameter_validator_names_the_expected_signature() -> None:
    with pytest.raises(PrismConfigError) as info:
        generate_validate_revise_loop(validator=lambda v: {"ok": True})
    message = str(info.value)
    assert "'validator' must accept (value, ctx)" in message and "<lambda>(v)" in message


@pytest.mark.parametrize(
    ("role", "callback", "expected"),
    [
        ("parser", lambda text: None, "(text, ctx)"),
        ("repairer", lambda value, ctx: "fix", "(value, failure, ctx)"),
        ("validator", lambda value, ctx, *, strict: None, "(value, ctx)"),
    ],
)
def test_every_callback_role_is_checked_in_options_and_factory(
    role: str, callback: Any, expected: str
) -> None:
    options: dict[str, Any] = {"validator": ok, role: callback}
    with pytest.raises(PrismConfigError) as info:
        generate_validate_revise_loop(**options)
    assert f"'{role}' must accept {expected}" in str(info.value)
    with pytest.raises(PrismConfigError, match=f"'{role}' must accept"):
        GenerateValidateReviseLoopOptions(**options)
    with pytest.raises(PrismConfigError, match=f"'{role}' must accept"):
        prism.create_agent(model=MODEL, loop={"strategy": "generate-validate-revise", **options})


def test_callables_of_the_right_shape_are_accepted() -> None:
    class Validator:
        def __call__(self, value: Any, ctx: Any) -> dict[str, bool]:
            return {"ok": True}

    async def async_validator(value: Any, ctx: Any) -> dict[str, bool]:
        return {"ok": True}

    def loose(*args: Any) -> dict[str, bool]:
        return {"ok": True}

    def extra_default(value: Any, ctx: Any, strict: bool = False) -> dict[str, bool]:
        return {"ok": True}

    for validator in (Validator(), async_validator, loose, extra_default,
                      functools.partial(lambda prefix, value, ctx: ok(value, ctx), "p")):
        generate_validate_revise_loop(validator=validator)


@pytest.mark.parametrize(
    ("loop", "fragment"),
    [
        ({"validator": ok}, "requires a 'strategy' key, one of 'single-shot', "
                            "'generate-validate-revise'"),
        ({"strategy": "zig-zag"}, "unknown agent loop strategy: zig-zag (the strategies are "
                                  "'single-shot', 'generate-validate-revise')"),
    ],
)
async def test_bad_loop_options_fail_before_any_provider_call(
    loop: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(PrismConfigError) as at_agent:
        prism.create_agent(model=MODEL, loop=loop)
    assert fragment in str(at_agent.value)
    provider = create_mock_provider(turns=[[provider_text_delta("x"), provider_done()]])
    session = prism.create_agent(model=MODEL, provider=provider).create_session()
    with pytest.raises(PrismConfigError) as at_run:
        await session.run("hi", loop=loop)
    assert fragment in str(at_run.value)
    assert provider.call_count == 0
    assert await session.entries() == []
