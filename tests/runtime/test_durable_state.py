"""Durable-run building blocks without a run: options, preflight, fingerprint, envelope checks,
operator load/save (DUR-1..DUR-6, DUR-10, DUR-24)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from prism.errors import (
    AgentLoopStateError,
    AgentRunStateError,
    CheckpointConflictError,
    PrismConfigError,
)
from prism.guardrails import Guardrail, Guardrails
from prism.loops.contracts import GenerateValidateReviseLoopOptions, SingleShotLoopOptions
from prism.loops.gvr import generate_validate_revise_loop
from prism.loops.single_shot import single_shot_loop
from prism.redaction import create_secret_redactor
from prism.runtime.agent import create_agent
from prism.runtime.checkpoints import AGENT_RUN_NAMESPACE, MemoryCheckpointStore
from prism.runtime.durable import (
    AgentRunInterruption,
    AgentRunState,
    DecisionScope,
    DurableRun,
    PendingDecision,
    RunStateOptions,
    agent_fingerprint,
    arguments_hash,
    check_durable_run,
    coerce_run_state_options,
    load_agent_run_state,
    loop_state_of,
    save_agent_run_state,
)
from prism.tools import ToolFilter
from prism.types import ModelConfig, ToolDefinition, canonical_json, user_message

MODEL = ModelConfig(provider="mock", model="demo")
STORE = MemoryCheckpointStore()


def opts(**kw: Any) -> RunStateOptions:
    return RunStateOptions(STORE, kw.pop("definition_revision", "v1"), **kw)


class Hooked:
    name = "hooked"
    revision = "7"

    def __init__(self, snap: Any = None) -> None:
        self.snap = snap if snap is not None else {"n": 1}

    async def run(self, ctx: Any) -> None:
        return None

    def snapshot(self) -> Any:
        return self.snap

    def restore(self, snapshot: Any) -> None:
        pass


class Hookless:
    name = "hookless"

    async def run(self, ctx: Any) -> None:
        return None


# --------------------------------------------------------------------------- DUR-1 / DUR-2


def test_dur1_defaults_and_positional_store_and_revision() -> None:
    """DUR-1: defaults on-suspend / no gating / 256 KiB / no fencing."""
    o = RunStateOptions(STORE, "v1")
    assert (o.checkpoint_policy, o.interrupt_before_tool, o.max_state_bytes, o.fencing_token) == (
        "on-suspend",
        False,
        262_144,
        None,
    )


def test_run7_run_state_mapping_coercion() -> None:
    """RUN-7 step 1: mappings convert; unknown/camelCase keys raise ``PrismConfigError``."""
    o = coerce_run_state_options(
        {"checkpoints": STORE, "definition_revision": "v1", "checkpoint_policy": "every-turn"}
    )
    assert o == RunStateOptions(STORE, "v1", checkpoint_policy="every-turn")
    with pytest.raises(PrismConfigError, match=r"maxStateBytes \(use max_state_bytes\)"):
        coerce_run_state_options({"checkpoints": STORE, "definition_revision": "v", "maxStateBytes": 1})
    with pytest.raises(PrismConfigError, match="requires definition_revision"):
        coerce_run_state_options({"checkpoints": STORE})
    with pytest.raises(PrismConfigError):
        coerce_run_state_options(3)


def agent(**kw: Any) -> Any:
    kw.setdefault("id", "desk")
    return create_agent(model=MODEL, **kw).config


def test_dur2_step1_run_value_must_equal_agent_value() -> None:
    """DUR-2 (1): a run-level ``run_state`` unequal to the agent's raises."""
    config = agent(run_state=opts())
    assert check_durable_run(config, opts()) == opts()
    with pytest.raises(AgentRunStateError, match="differs"):
        check_durable_run(config, opts(definition_revision="v2"))


@pytest.mark.parametrize(
    "bad",
    [
        {"definition_revision": "  "},
        {"definition_revision": 3},
        {"max_state_bytes": 0},
        {"max_state_bytes": 1_048_577},
        {"max_state_bytes": True},
        {"max_state_bytes": 10.0},
        {"checkpoint_policy": "always"},
        {"interrupt_before_tool": "yes"},
        {"fencing_token": "1"},
    ],
)
def test_dur2_step2_invalid_values(bad: dict[str, Any]) -> None:
    """DUR-2 (2): blank revision, size outside 1..1 MiB, unknown policy → AgentRunStateError."""
    revision = bad.pop("definition_revision", "v1")
    with pytest.raises(AgentRunStateError) as info:
        check_durable_run(agent(), RunStateOptions(STORE, revision, **bad))
    assert info.value.code == "ERR_PRISM_AGENT_RUN_STATE"


def test_dur2_step2_checkpoints_must_be_a_store() -> None:
    """DUR-2 (2): the checkpoints object needs save/load methods."""
    with pytest.raises(AgentRunStateError):
        check_durable_run(agent(), RunStateOptions(object(), "v1"))  # type: ignore[arg-type]


def test_dur2_step3_agent_needs_id_or_name() -> None:
    """DUR-2 (3): no id and no name raises; a name alone is enough."""
    with pytest.raises(AgentRunStateError, match="id or a name"):
        check_durable_run(create_agent(model=MODEL).config, opts())
    assert check_durable_run(create_agent(model=MODEL, name="n").config, opts()) is not None


def test_dur2_step4_custom_loop_needs_both_hooks() -> None:
    """DUR-2 (4): a hookless strategy raises ERR_PRISM_LOOP_NOT_DURABLE; others pass."""
    with pytest.raises(AgentLoopStateError) as info:
        check_durable_run(agent(loop=Hookless()), opts())
    assert info.value.code == "ERR_PRISM_LOOP_NOT_DURABLE"
    for loop in (
        None,
        single_shot_loop,
        SingleShotLoopOptions(tool_concurrency=2),
        {"strategy": "single-shot"},
        GenerateValidateReviseLoopOptions(validator=lambda v, c: {"ok": True}),
        generate_validate_revise_loop(validator=lambda v, c: {"ok": True}),
        Hooked(),
    ):
        assert check_durable_run(agent(loop=loop), opts()) is not None


def test_dur2_order_checks_loop_before_run_level_options() -> None:
    """DUR-2: check 4 precedes check 5; the run loop is the effective loop."""
    with pytest.raises(AgentLoopStateError):
        check_durable_run(agent(), opts(), run_loop=Hookless())
    with pytest.raises(AgentRunStateError, match="run-level loop"):
        check_durable_run(agent(), opts(), run_loop=single_shot_loop)


@pytest.mark.parametrize("name", ["run_model", "run_guardrails", "run_tool_filter"])
def test_dur2_step5_run_level_options_are_rejected(name: str) -> None:
    """DUR-2 (5): run-level model/guardrails/tool_filter must live on the agent."""
    with pytest.raises(AgentRunStateError, match="not allowed on a durable run"):
        check_durable_run(agent(), opts(), **{name: object()})


def test_dur2_not_durable_without_any_run_state() -> None:
    """DUR-1: neither layer set → not durable."""
    assert check_durable_run(agent(), None, run_loop=Hookless()) is None


# --------------------------------------------------------------------------- DUR-5


def test_dur5_fingerprint_is_sha256_of_the_canonical_definition() -> None:
    """DUR-5: exact composition of ``F`` for a minimal agent."""
    config = agent()
    expected = {
        "id": "desk",
        "revision": "v1",
        "model": MODEL.to_dict(),
        "instructions": None,
        "system_prompt": None,
        "skills": [],
        "tools": [],
        "guardrails": [],
        "loop": {"name": "single-shot", "revision": "1"},
    }
    import hashlib

    digest = hashlib.sha256(canonical_json(expected).encode()).hexdigest()
    assert agent_fingerprint(config, "v1") == digest
    assert agent_fingerprint(create_agent(model=MODEL, id="desk"), "v1") == digest


def test_dur5_equal_configuration_equal_fingerprint_and_drift_changes_it() -> None:
    """DUR-5: equal configs match; tools, loop revision, guardrails, filters change it."""
    tool = ToolDefinition(name="t", execute=lambda a, c: 1, parameters={"type": "object"})
    base = agent(tools=[tool], loop=Hooked())
    same = agent(tools=[ToolDefinition(name="t", execute=lambda a, c: 2,
                                       parameters={"type": "object"})], loop=Hooked())
    fp = agent_fingerprint(base, "v1")
    assert fp == agent_fingerprint(same, "v1")
    assert fp != agent_fingerprint(base, "v2")
    revised = Hooked()
    revised.revision = "8"
    assert fp != agent_fingerprint(agent(tools=[tool], loop=revised), "v1")
    assert fp != agent_fingerprint(agent(tools=[tool]), "v1")  # loop removed
    guard = Guardrail(name="g", stage="input", evaluate=lambda c: None, revision="2")
    assert fp != agent_fingerprint(
        agent(tools=[tool], loop=Hooked(), guardrails=Guardrails(input=(guard,))), "v1"
    )
    assert fp != agent_fingerprint(
        agent(tools=[tool], loop=Hooked(), tool_filter=ToolFilter(deny=("x",))), "v1"
    )


def test_dur5_loop_identity_of_options_and_strategies() -> None:
    """DUR-5: options → (strategy, "1"); no loop → single-shot; the exported strategy matches."""
    no_loop = agent_fingerprint(agent(), "v1")
    assert agent_fingerprint(agent(loop=SingleShotLoopOptions()), "v1") == no_loop
    assert agent_fingerprint(agent(loop={"strategy": "single-shot"}), "v1") == no_loop
    assert agent_fingerprint(agent(loop=single_shot_loop), "v1") == no_loop
    gvr_opts = agent_fingerprint(
        agent(loop=GenerateValidateReviseLoopOptions(validator=lambda v, c: {"ok": True})), "v1"
    )
    gvr_obj = agent_fingerprint(
        agent(loop=generate_validate_revise_loop(validator=lambda v, c: {"ok": True})), "v1"
    )
    assert gvr_opts == gvr_obj != no_loop


def test_dur5_fingerprint_requires_identity() -> None:
    """DUR-5: an agent without id/name has no fingerprint."""
    with pytest.raises(AgentRunStateError):
        agent_fingerprint(create_agent(model=MODEL), "v1")


def test_apr2_arguments_hash() -> None:
    """APR-2: ``sha256(canonical_json(arguments))``, key-order independent."""
    import hashlib

    assert arguments_hash({"b": 1, "a": "é"}) == hashlib.sha256(
        '{"a":"é","b":1}'.encode()
    ).hexdigest()
    assert arguments_hash({"a": 1, "b": 2}) == arguments_hash({"b": 2, "a": 1})


# --------------------------------------------------------------------------- DUR-4 / DUR-6


def durable(options: RunStateOptions | None = None, redactor: Any = None) -> DurableRun:
    return DurableRun(
        options or RunStateOptions(MemoryCheckpointStore(), "v1"),
        config=agent(),
        run_id="run_1",
        session_id="session_1",
        redactor=redactor,
        ownership=None,
    )


COUNTERS = {"turns": 1, "wall_time_ms": 5}


async def test_dur4_envelope_keys_and_public_view() -> None:
    """DUR-4/DUR-24: stored keys (absent fields absent) and the public view without internals."""
    d = durable()
    interruption = AgentRunInterruption(
        kind="tool_approval",
        reason="r",
        tool_call_id="c1",
        tool_name="t",
        pending_decisions=(
            PendingDecision(
                approval_id="approval_1",
                tool_call_id="c1",
                scope=DecisionScope(tool_name="t", arguments_hash="h"),
            ),
        ),
    )
    state = await d.write(
        "suspended",
        leaf_id="e1",
        counters=COUNTERS,
        deadline_at="2030-01-01T00:00:00.000Z",
        loop_state={"name": "x", "revision": "1", "snapshot": None},
        interruption=interruption,
        input=[user_message("hi")],
        pending_calls=[{"call": {"id": "c1", "name": "t", "arguments": {}}, "status": "ready",
                        "approval_id": "approval_1"}],
    )
    loaded = await load_agent_run_state(d.checkpoints, run_id="run_1", session_id="session_1")
    assert loaded.record.version == 1 == state.version
    assert set(loaded.state) == {
        "schema_version", "agent_id", "definition_revision", "fingerprint", "run_id",
        "session_id", "leaf_id", "model", "status", "interruption", "input", "pending_calls",
        "sticky_decisions", "interrupt_before_tool", "checkpoint_policy", "counters",
        "deadline_at", "loop_state",
    }
    assert loaded.state["agent_id"] == "desk"
    assert loaded.state["fingerprint"] == agent_fingerprint(agent(), "v1")
    view = state.to_dict()
    assert set(view) == {
        "schema_version", "agent_id", "definition_revision", "fingerprint", "run_id",
        "session_id", "leaf_id", "model", "status", "interruption", "version",
    }
    assert "\"arguments\"" not in json.dumps(view)
    assert AgentRunState.from_dict(json.loads(json.dumps(view))) == state
    # a terminal-style write: no loop_state, no stop_reason, no input
    await d.write("failed", leaf_id="e1", counters=COUNTERS, deadline_at=None, loop_state=None,
                  keep_sticky=False)
    again = await load_agent_run_state(d.checkpoints, run_id="run_1")
    assert "loop_state" not in again.state and "stop_reason" not in again.state
    assert "input" not in again.state and again.record.version == 2


async def test_dur6_envelope_is_redacted_and_bounded() -> None:
    """DUR-6: redaction before the size check; too large → AgentRunStateError, nothing stored."""
    store = MemoryCheckpointStore()
    d = durable(RunStateOptions(store, "v1", max_state_bytes=2000),
                redactor=create_secret_redactor(["sk-1"]))
    await d.write("running", leaf_id=None, counters=COUNTERS, deadline_at=None,
                  loop_state={"name": "x", "revision": "1", "snapshot": "sk-1"})
    loaded = await load_agent_run_state(store, run_id="run_1")
    assert loaded.state["loop_state"] == {"name": "x", "revision": "1", "snapshot": "[REDACTED]"}
    with pytest.raises(AgentRunStateError, match="more than the 2000 allowed"):
        await d.write("running", leaf_id=None, counters=COUNTERS, deadline_at=None,
                      loop_state={"name": "x", "revision": "1", "snapshot": "y" * 3000})
    assert (await load_agent_run_state(store, run_id="run_1")).record.version == 1


@pytest.mark.parametrize(
    "snapshot",
    [{"k": {str(i): i for i in range(257)}}, [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
)
async def test_dur6_depth_and_key_count_are_bounded(snapshot: Any) -> None:
    """DUR-6: at most 256 keys per object; depth ≤ 32 for the whole envelope."""
    with pytest.raises(AgentRunStateError):
        await durable().write("running", leaf_id=None, counters=COUNTERS, deadline_at=None,
                              loop_state={"name": "x", "revision": "1", "snapshot": snapshot})


async def test_dur6_cas_versions() -> None:
    """DUR-6/DUR-3: each write is version = current + 1 with expected = current."""
    store = MemoryCheckpointStore()
    first = durable(RunStateOptions(store, "v1"))
    second = durable(RunStateOptions(store, "v1"))
    await first.write("running", leaf_id=None, counters=COUNTERS, deadline_at=None, loop_state=None)
    with pytest.raises(CheckpointConflictError):
        await second.write("running", leaf_id=None, counters=COUNTERS, deadline_at=None,
                           loop_state=None)
    await first.write("running", leaf_id=None, counters=COUNTERS, deadline_at=None, loop_state=None)
    assert first.version == 2


async def test_dur6_load_checks() -> None:
    """DUR-6/DUR-24: missing, malformed, oversized or another session's state raise."""
    store = MemoryCheckpointStore()
    with pytest.raises(AgentRunStateError, match="no run state"):
        await load_agent_run_state(store, run_id="run_1")
    await store.save_checkpoint(namespace=AGENT_RUN_NAMESPACE, key="run_1",
                                value={"schema_version": 1}, version=1, expected_version=0)
    with pytest.raises(AgentRunStateError, match="malformed"):
        await load_agent_run_state(store, run_id="run_1")
    d = durable(RunStateOptions(store, "v1"))
    d.version = 1
    await d.write("running", leaf_id=None, counters=COUNTERS, deadline_at=None, loop_state=None)
    with pytest.raises(AgentRunStateError, match="another session"):
        await load_agent_run_state(store, run_id="run_1", session_id="session_other")
    big = MemoryCheckpointStore()
    await big.save_checkpoint(namespace=AGENT_RUN_NAMESPACE, key="run_1",
                              value={"x": "y" * 1_048_577}, version=1, expected_version=0)
    with pytest.raises(AgentRunStateError, match="more than the 1048576"):
        await load_agent_run_state(big, run_id="run_1")


async def test_dur24_save_edited_state() -> None:
    """DUR-24: write back with version = expected + 1 and CAS; shape-checked; recomputes nothing."""
    store = MemoryCheckpointStore()
    d = durable(RunStateOptions(store, "v1"))
    await d.write("running", leaf_id="e1", counters=COUNTERS, deadline_at=None,
                  loop_state={"name": "x", "revision": "1", "snapshot": 1})
    loaded = await load_agent_run_state(store, run_id="run_1")
    edited = dict(loaded.state)
    edited["loop_state"] = {"name": "x", "revision": "0", "snapshot": 1}
    saved = await save_agent_run_state(checkpoints=store, state=edited, expected_version=1)
    assert saved.record.version == 2
    assert saved.state["loop_state"] == {"name": "x", "revision": "0", "snapshot": 1}
    assert saved.state["fingerprint"] == loaded.state["fingerprint"]
    with pytest.raises(CheckpointConflictError):
        await save_agent_run_state(checkpoints=store, state=edited, expected_version=1)
    with pytest.raises(AgentRunStateError):
        await save_agent_run_state(checkpoints=store, state={**edited, "status": "odd"},
                                   expected_version=2)
    with pytest.raises(AgentRunStateError):
        await save_agent_run_state(checkpoints=store, state={**edited, "x": object()},
                                   expected_version=2)


# --------------------------------------------------------------------------- DUR-10


def test_dur10_loop_state_of() -> None:
    """DUR-10: ``{name, revision, snapshot}``; non-JSON → ERR_PRISM_LOOP_SNAPSHOT; no hook → None."""
    assert loop_state_of(Hooked({"a": [1]})) == {"name": "hooked", "revision": "7",
                                                 "snapshot": {"a": [1]}}
    assert loop_state_of(single_shot_loop) is None
    for bad in ({"a": object()}, {"a": float("nan")}, {"a": {1: 2}}):
        with pytest.raises(AgentLoopStateError) as info:
            loop_state_of(Hooked(bad))
        assert info.value.code == "ERR_PRISM_LOOP_SNAPSHOT"
    deep: Any = 1
    for _ in range(33):
        deep = [deep]
    with pytest.raises(AgentLoopStateError):
        loop_state_of(Hooked(deep))


def test_dur11_gvr_snapshot_shape() -> None:
    """DUR-11/GVR-9: the generate-validate-revise loop state at revision "1"."""
    loop = generate_validate_revise_loop(validator=lambda v, c: {"ok": True})
    state = loop_state_of(loop)
    assert state == {
        "name": "generate-validate-revise",
        "revision": "1",
        "snapshot": {"attempts": 0, "artifact_phase": True, "saved_schema": None,
                     "pending_history": []},
    }
