"""Tests for the loop contracts (CON-26..CON-29, GVR-1, LOOP-1, LOOP-4)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from prism import artifact_contracts
from prism.errors import PrismConfigError
from prism.loops import contracts
from prism.loops.contracts import (
    AgentLoopStrategy,
    ArtifactContext,
    ArtifactValidation,
    DurableLoopStrategy,
    GenerateValidateReviseLoopOptions,
    LoopContext,
    SingleShotLoopOptions,
    coerce_loop_options,
    effective_loop_revision,
    is_durable_capable,
)
from prism.types import Usage


def _ok(value: Any, ctx: ArtifactContext) -> ArtifactValidation:
    return ArtifactValidation(ok=True)


# ----------------------------------------------------------------------------- CON-26, LOOP-4


class _Custom:
    name = "custom"

    async def run(self, ctx: LoopContext) -> Usage | None:
        return None


class _DurableCustom(_Custom):
    revision = "7"

    def snapshot(self) -> Any:
        return {}

    def restore(self, snapshot: Any) -> None:
        return None


def test_con26_runtime_checkable_on_name_and_run() -> None:
    assert isinstance(_Custom(), AgentLoopStrategy)
    assert not isinstance(object(), AgentLoopStrategy)
    assert not isinstance(_Custom(), DurableLoopStrategy)
    assert isinstance(_DurableCustom(), DurableLoopStrategy)


def test_con26_durable_capable_needs_both_callable_hooks() -> None:
    assert is_durable_capable(_DurableCustom())
    assert not is_durable_capable(_Custom())
    half = _Custom()
    half.snapshot = lambda: {}  # type: ignore[attr-defined]
    assert not is_durable_capable(half)
    fake = _Custom()
    fake.snapshot = 1  # type: ignore[attr-defined]
    fake.restore = 2  # type: ignore[attr-defined]
    assert not is_durable_capable(fake)


def test_loop4_effective_revision_defaults_to_one() -> None:
    assert effective_loop_revision(_Custom()) == "1"
    assert effective_loop_revision(_DurableCustom()) == "7"
    none_rev = _Custom()
    none_rev.revision = None  # type: ignore[attr-defined]
    assert effective_loop_revision(none_rev) == "1"


# ----------------------------------------------------------------------------- CON-27, GVR-1


def test_con27_strategy_properties_and_defaults() -> None:
    single = SingleShotLoopOptions()
    assert single.strategy == "single-shot"
    assert single.tool_concurrency == 1
    gvr = GenerateValidateReviseLoopOptions(validator=_ok)
    assert gvr.strategy == "generate-validate-revise"
    assert (gvr.parser, gvr.repairer, gvr.max_revisions) == (None, None, 3)
    assert gvr.tool_calls == "disabled"
    assert gvr.structured_output is None and gvr.structured_output_mode is None
    assert gvr.structured_output_timing == "every-turn"


def test_con27_options_are_keyword_only_and_frozen() -> None:
    with pytest.raises(TypeError):
        SingleShotLoopOptions(2)  # type: ignore[call-arg]
    opts = SingleShotLoopOptions(tool_concurrency=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.tool_concurrency = 3  # type: ignore[misc]


def test_con27_gvr_options_leave_callbacks_out_of_to_dict() -> None:
    opts = GenerateValidateReviseLoopOptions(validator=_ok, max_revisions=1)
    assert opts.to_dict() == {
        "max_revisions": 1,
        "tool_calls": "disabled",
        "structured_output_timing": "every-turn",
    }


@pytest.mark.parametrize(
    "kwargs",
    [
        {"validator": None},
        {"validator": "nope"},
        {"validator": _ok, "parser": 1},
        {"validator": _ok, "repairer": "x"},
        {"validator": _ok, "max_revisions": -1},
        {"validator": _ok, "max_revisions": True},
        {"validator": _ok, "max_revisions": 1.0},
        {"validator": _ok, "tool_calls": "parallel"},
        {"validator": _ok, "structured_output_mode": "json"},
        {"validator": _ok, "structured_output_timing": "sometimes"},
    ],
)
def test_gvr1_invalid_options_raise_config_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(PrismConfigError) as info:
        GenerateValidateReviseLoopOptions(**kwargs)
    assert info.value.code == "ERR_PRISM_CONFIG"


def test_con27_mapping_coercion_by_strategy() -> None:
    single = coerce_loop_options({"strategy": "single-shot", "tool_concurrency": 4})
    assert single == SingleShotLoopOptions(tool_concurrency=4)
    gvr = coerce_loop_options(
        {"strategy": "generate-validate-revise", "validator": _ok, "max_revisions": 0}
    )
    assert isinstance(gvr, GenerateValidateReviseLoopOptions)
    assert gvr.max_revisions == 0 and gvr.validator is _ok
    assert coerce_loop_options(single) is single


def test_loop1_unknown_strategy_message() -> None:
    with pytest.raises(PrismConfigError, match="unknown agent loop strategy: tree-search"):
        coerce_loop_options({"strategy": "tree-search"})


@pytest.mark.parametrize(
    "value",
    [
        {"tool_concurrency": 2},  # no strategy
        {"strategy": "single-shot", "toolConcurrency": 2},  # unknown key
        {"strategy": "generate-validate-revise"},  # no validator
        {"strategy": "generate-validate-revise", "validator": _ok, "maxRevisions": 1},
        ["single-shot"],
    ],
)
def test_con27_bad_mappings_raise_config_error(value: Any) -> None:
    with pytest.raises(PrismConfigError):
        coerce_loop_options(value)


def test_con27_from_mapping_rejects_other_strategy() -> None:
    with pytest.raises(PrismConfigError):
        SingleShotLoopOptions.from_mapping({"strategy": "generate-validate-revise"})
    with pytest.raises(PrismConfigError):
        GenerateValidateReviseLoopOptions.from_mapping({"strategy": "single-shot", "validator": _ok})


def test_con27_single_shot_from_dict_unknown_key_is_config_error() -> None:
    with pytest.raises(PrismConfigError):
        SingleShotLoopOptions.from_dict({"tool_concurrency": 1, "nope": 2})


# ----------------------------------------------------------------------------- CON-28


CON28_MEMBERS = {
    "session_id",
    "run_id",
    "metadata",
    "signal",
    "history",
    "input",
    "input_messages",
    "max_tool_rounds",
    "tool_concurrency",
    "restored_loop_state",
    "finish_reason",
    "artifact",
    "assemble",
    "generate",
    "dispatch_tool_call",
    "charge_tool_round",
    "is_tool_call_exclusive",
    "append_message",
    "emit",
    "has_pending_steers",
    "apply_pending_steers",
}


def _protocol_members(proto: type) -> set[str]:
    names = set(getattr(proto, "__annotations__", {}))
    names |= {n for n in vars(proto) if not n.startswith("_")}
    return names


def test_con28_loop_context_declares_every_member() -> None:
    assert _protocol_members(LoopContext) == CON28_MEMBERS


def test_con28_every_member_is_documented() -> None:
    for name in CON28_MEMBERS - {"finish_reason", "artifact"}:
        member = vars(LoopContext)[name]
        doc = (member.fget if isinstance(member, property) else member).__doc__
        assert doc and doc.strip(), name


def test_module_all_lists_public_names() -> None:
    public = {
        n
        for n, v in vars(contracts).items()
        if not n.startswith("_")
        and getattr(v, "__module__", None) == contracts.__name__
        and n not in {"T"}
    }
    assert public <= set(contracts.__all__)
    assert all(hasattr(contracts, n) for n in contracts.__all__)


def test_artifact_contracts_are_re_exported_unchanged() -> None:
    for name in artifact_contracts.__all__:
        assert getattr(contracts, name) is getattr(artifact_contracts, name), name
        assert name in contracts.__all__
