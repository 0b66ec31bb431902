"""RunOptions is the one definition of the run options; its keyword mirror follows it."""

from __future__ import annotations

import dataclasses

import pytest

from prism.errors import PrismConfigError
from prism.loop_needs import DEFAULT_LOOP_NEEDS, LoopNeeds, loop_needs
from prism.loops.single_shot import single_shot_loop
from prism.runtime.options import RUN_OPTION_NAMES, RunOptionKeywords, RunOptions


def test_keywords_list_exactly_the_run_option_fields() -> None:
    assert set(RunOptionKeywords.__annotations__) == RUN_OPTION_NAMES
    assert RUN_OPTION_NAMES == {f.name for f in dataclasses.fields(RunOptions)}


def test_unknown_keys_raise_prism_config_error_with_a_snake_case_hint() -> None:
    with pytest.raises(PrismConfigError, match=r"idempotencyKey \(use idempotency_key\)"):
        RunOptions.coerce({"idempotencyKey": "k"})
    with pytest.raises(PrismConfigError, match="unknown options key"):
        RunOptions().with_overrides({"nope": 1})


def test_overrides_replace_only_given_fields() -> None:
    base = RunOptions(idempotency_key="a", metadata={"x": 1})
    assert base.with_overrides({"idempotency_key": None}) is base
    assert base.with_overrides({"idempotency_key": "b"}).idempotency_key == "b"


def test_loops_declare_their_needs() -> None:
    from prism.loops.gvr import generate_validate_revise_loop

    assert loop_needs(single_shot_loop) is DEFAULT_LOOP_NEEDS
    assert loop_needs(object()) is DEFAULT_LOOP_NEEDS
    gvr = generate_validate_revise_loop(validator=lambda value, ctx: {"ok": True})
    assert loop_needs(gvr) == LoopNeeds(
        structured_output=None, artifact=True, dispatches_tools=False
    )
