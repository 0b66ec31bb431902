"""Every public module path under ``prism.runtime`` keeps the names it offers today.

``prism.runtime`` is a flat package of public modules and private ``_`` modules. When it is
reorganised, code that imports ``from prism.runtime.<module> import <name>`` must keep working:
the lists below are the ``__all__`` of each public module as of commit 4590fce, plus the names
other code imports from a public path without them being listed there. They are literals on
purpose: a name may move, but its old path must keep answering.
"""

from __future__ import annotations

import importlib

import pytest

RUNTIME_NAMES: dict[str, list[str]] = {
    "prism.runtime": [
        "Agent",
        "AgentConfig",
        "AgentSession",
        "PolicyContext",
        "ProviderRequestPolicy",
        "ProviderRequestPolicyResult",
        "ProviderSource",
        "RunOptions",
        "RunStream",
        "create_agent",
    ],
    "prism.runtime.agent": ["Agent", "AgentConfig", "ProviderSource", "create_agent"],
    "prism.runtime.agent_tool": ["DEFAULT_AGENT_TOOL_INPUT", "SUBAGENT_KEY", "agent_tool"],
    "prism.runtime.attempts": ["ProviderAttempts"],
    "prism.runtime.checkpoints": [
        "AGENT_RUN_NAMESPACE",
        "RESUMABLE",
        "AgentRunIndex",
        "CheckpointRecord",
        "CheckpointStore",
        "EntryCheckpointStore",
        "MemoryCheckpointStore",
        "SessionAppend",
        "check_checkpoint_write",
        "check_run_listing",
        "clone_json",
        "is_resumable",
    ],
    "prism.runtime.config": [
        "AgentConfig",
        "ConfiguredAgent",
        "ProviderSource",
        "check_answer_after_tool_rounds",
        "with_max_tokens",
    ],
    "prism.runtime.context": ["INTERRUPTED_MESSAGE", "RunContext"],
    "prism.runtime.durable": [
        "DENIED_MESSAGE",
        "MAX_LOADED_STATE_BYTES",
        "RELEASE_KEY",
        "AgentRunInterruption",
        "AgentRunState",
        "CheckpointPolicy",
        "DecisionOutcome",
        "DecisionScope",
        "DurableRun",
        "InterruptionKind",
        "LoadedRunState",
        "PendingDecision",
        "ResumePoint",
        "RunDecision",
        "RunStateOptions",
        "RunStateStatus",
        "StickyDecision",
        "agent_fingerprint",
        "arguments_hash",
        "check_durable_run",
        "coerce_run_state_options",
        "list_agent_runs",
        "load_agent_run_state",
        "loop_state_of",
        "rejection_result",
        "resolve_ambiguous_call",
        "resume_agent_run",
        "save_agent_run_state",
    ],
    "prism.runtime.leg": ["RunLeg", "resume_leg", "start_leg"],
    "prism.runtime.options": ["RUN_OPTION_NAMES", "RunOptionKeywords", "RunOptions"],
    "prism.runtime.plan": ["RunDefaults", "RunPlan", "plan_run", "run_defaults"],
    "prism.runtime.policies": [
        "PolicyContext",
        "ProviderRequestPolicy",
        "ProviderRequestPolicyResult",
        "apply_request_policies",
    ],
    "prism.runtime.provider_turn": [
        "EMPTY_TURN_RESULT",
        "PolicyContext",
        "ProviderAttempts",
        "ProviderRequestPolicy",
        "ProviderRequestPolicyResult",
        "ProviderTurnRunner",
        "SoftInterrupt",
        "generate_with_retry",
    ],
    "prism.runtime.session": [
        "MAX_STEER_BYTES",
        "MAX_STEER_MESSAGES",
        "AgentSession",
        "RunOptions",
        "RunStream",
    ],
    "prism.runtime.state": ["MAX_STEER_BYTES", "MAX_STEER_MESSAGES", "ActiveRun", "SessionState"],
    "prism.runtime.stream": ["RunStream"],
    "prism.runtime.turn_policy": [
        "MAX_STOP_DETAIL_BYTES",
        "Continue",
        "Stop",
        "TurnBoundaryContext",
        "TurnDecision",
        "TurnPolicy",
        "TurnPolicyStop",
        "TurnStopCallback",
        "coerce_turn_policy",
        "evaluate_turn_policy",
        "resolve_turn_policy",
    ],
}
"""The ``__all__`` of each public module under ``prism.runtime`` as of commit 4590fce."""

ALSO_IMPORTED: dict[str, list[str]] = {
    # the CLI's `prism runs` commands word a run that cannot be resumed with it
    "prism.runtime.durable": ["not_resumable_message"],
}
"""Names imported from a public path that its ``__all__`` does not list (commit 4590fce)."""


def _pairs(names: dict[str, list[str]]) -> list[tuple[str, str]]:
    return [(module, name) for module, listed in names.items() for name in listed]


@pytest.mark.parametrize("module", sorted(RUNTIME_NAMES))
def test_every_public_runtime_module_path_still_imports(module: str) -> None:
    importlib.import_module(module)


IMPORTED_NAMES = _pairs(RUNTIME_NAMES) + _pairs(ALSO_IMPORTED)


@pytest.mark.parametrize(
    ("module", "name"), IMPORTED_NAMES, ids=[f"{m}:{n}" for m, n in IMPORTED_NAMES]
)
def test_every_public_runtime_name_still_imports_from_its_path(module: str, name: str) -> None:
    assert hasattr(importlib.import_module(module), name), f"from {module} import {name} fails"


def test_a_name_offered_by_several_runtime_paths_is_one_object() -> None:
    """``prism.runtime.session.RunOptions`` and ``prism.runtime.options.RunOptions`` (and every
    other name two paths offer) are the same object, so ``isinstance`` and identity checks do not
    depend on the path a caller imported it from."""
    seen: dict[str, tuple[str, object]] = {}
    for module, name in _pairs(RUNTIME_NAMES):
        value = getattr(importlib.import_module(module), name)
        if name in seen:
            first, other = seen[name]
            assert value is other, f"{module}.{name} is not {first}.{name}"
        else:
            seen[name] = (module, value)


@pytest.mark.parametrize("module", ["prism.runtime.durable", "prism.runtime.checkpoints"])
def test_durable_and_checkpoints_all_is_exactly_todays(module: str) -> None:
    """The durable-run and checkpoint surface is listed exactly: a name added to or dropped from
    it is a deliberate change of this list."""
    assert list(importlib.import_module(module).__all__) == RUNTIME_NAMES[module]
