"""Loop resolution: which strategy a run uses, and its tool concurrency.

Precedence is the same for both functions: the run's ``loop`` wins when it is not ``None``, else
the agent's ``loop``; when both are ``None`` the run uses [`single_shot_loop`][prism.loops.single_shot_loop].
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from prism.errors import PrismConfigError
from prism.loops.contracts import (
    AgentLoopStrategy,
    GenerateValidateReviseLoopOptions,
    SingleShotLoopOptions,
    coerce_loop_options,
)
from prism.loops.single_shot import single_shot_loop

__all__ = ["loop_name", "resolve_loop", "resolve_tool_concurrency"]


def _effective(run_loop: object, config_loop: object) -> object:
    return run_loop if run_loop is not None else config_loop


def resolve_loop(run_loop: object, config_loop: object) -> AgentLoopStrategy:
    """Resolve the loop strategy of a run.

    Args:
        run_loop: ``RunOptions.loop`` — ``None``, loop options (dataclass or mapping with a
            ``"strategy"`` key) or a strategy instance. Wins when not ``None``.
        config_loop: ``AgentConfig.loop``, same forms.

    Returns:
        ``single_shot_loop`` for ``None`` and for single-shot options (always the same object); a
        fresh ``generate_validate_revise_loop(...)`` for generate-validate-revise options; a
        custom strategy instance unchanged.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` for an unknown strategy (message ``unknown agent
            loop strategy: <value>``), a mapping without ``"strategy"`` or with unknown keys, an
            invalid generate-validate-revise option, a strategy *class* (message asks for an
            instance), or any other value.
    """
    loop = _effective(run_loop, config_loop)
    if loop is None:
        return single_shot_loop
    if isinstance(loop, Mapping):
        loop = coerce_loop_options(loop)
    if isinstance(loop, SingleShotLoopOptions):
        return single_shot_loop
    if isinstance(loop, GenerateValidateReviseLoopOptions):
        from prism.loops.gvr import GenerateValidateReviseLoop

        # The options were checked when they were built (they are frozen): the strategy is made
        # from them without checking the callbacks' signatures again on every run.
        return GenerateValidateReviseLoop(
            validator=loop.validator,
            parser=loop.parser,
            repairer=loop.repairer,
            max_revisions=loop.max_revisions,
            tool_calls=loop.tool_calls,
            structured_output=loop.structured_output,
            structured_output_mode=loop.structured_output_mode,
            structured_output_timing=loop.structured_output_timing,
        )
    if isinstance(loop, type):
        if callable(getattr(loop, "run", None)):
            raise PrismConfigError(
                f"loop must be a strategy instance, not the class {loop.__name__}; "
                f"pass {loop.__name__}() instead"
            )
        raise PrismConfigError(f"invalid loop: {loop!r}")
    if isinstance(getattr(loop, "name", None), str) and callable(getattr(loop, "run", None)):
        strategy: AgentLoopStrategy = loop  # type: ignore[assignment]
        return strategy
    raise PrismConfigError(
        "loop must be None, SingleShotLoopOptions, GenerateValidateReviseLoopOptions, a mapping "
        f"with a 'strategy' key, or an object with a str 'name' and a callable 'run'; got "
        f"{type(loop).__name__}"
    )


def loop_name(run_loop: object, config_loop: object) -> str:
    """The ``name`` of the loop [`resolve_loop()`][prism.loops.resolve.resolve_loop] gives for the same arguments, without building
    it: ``"single-shot"`` for ``None``, the options' ``strategy``, a strategy's ``name``, else the
    type name of the value. Never raises."""
    loop = _effective(run_loop, config_loop)
    if loop is None:
        return "single-shot"
    named = loop.get("strategy") if isinstance(loop, Mapping) else getattr(loop, "strategy", None)
    if not isinstance(named, str):
        named = getattr(loop, "name", None)
    return named if isinstance(named, str) else type(loop).__name__


def resolve_tool_concurrency(run_loop: object, config_loop: object) -> int:
    """Return the per-round parallel tool dispatch limit of a run.

    Args:
        run_loop: ``RunOptions.loop`` (wins when not ``None``).
        config_loop: ``AgentConfig.loop``.

    Returns:
        ``tool_concurrency`` (floats floored) when the effective loop is single-shot *options*
        (dataclass or mapping) and the value is a finite number ≥ 1; otherwise 1 — including for
        every strategy instance, ``single_shot_loop`` itself too. Never raises.
    """
    loop = _effective(run_loop, config_loop)
    value: Any
    if isinstance(loop, SingleShotLoopOptions):
        value = loop.tool_concurrency
    elif isinstance(loop, Mapping) and loop.get("strategy") == "single-shot":
        value = loop.get("tool_concurrency")
    else:
        return 1
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 1
    if isinstance(value, float) and not math.isfinite(value):
        return 1
    if value < 1:
        return 1
    return int(math.floor(value))
