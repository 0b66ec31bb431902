"""Tool trajectories in their three modes, each with a pass and a fail, on real runs of an agent
on the scripted mock provider; argument matchers; and the one-to-one matching of ``any_order``."""

from __future__ import annotations

import pytest
from eval_support import call_turn, scripted_agent, text_turn

from prism.evals import (
    Case,
    ExpectedToolCall,
    ExpectedTools,
    TrajectoryMode,
    arg_any,
    arg_contains,
    arg_regex,
    run_case,
    tool_trajectory,
)


def two_call_agent() -> object:
    """Calls lookup(order="17"), then notify(channel="email"), then answers."""
    return scripted_agent(
        call_turn(("c1", "lookup", {"order": "17"})),
        call_turn(("c2", "notify", {"channel": "email"})),
        text_turn("Refund approved; the customer was told."),
    )


LOOKUP = ExpectedToolCall("lookup", {"order": "17"})
NOTIFY = ExpectedToolCall("notify")
REFUND = ExpectedToolCall("refund")


@pytest.mark.parametrize(
    ("mode", "calls", "passes"),
    [
        ("exact", [LOOKUP, NOTIFY], True),
        ("exact", [NOTIFY, LOOKUP], False),  # the right calls in the wrong order
        ("exact", [LOOKUP], False),  # a call the case does not expect
        ("in_order", [LOOKUP, NOTIFY], True),
        ("in_order", [NOTIFY], True),  # other calls may come before
        ("in_order", [NOTIFY, LOOKUP], False),
        ("any_order", [NOTIFY, LOOKUP], True),
        ("any_order", [NOTIFY, REFUND], False),  # refund was never called
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
async def test_each_trajectory_mode_passes_and_fails(
    mode: TrajectoryMode, calls: list[ExpectedToolCall], passes: bool
) -> None:
    case = Case(
        name="refund",
        input="Refund order 17 and tell the customer.",
        expected_tools=ExpectedTools(calls=calls, mode=mode),
    )
    report = await run_case(two_call_agent(), case)  # type: ignore[arg-type]
    (attempt,) = report.attempts
    trajectory = next(s for s in attempt.scores if s.evaluator == "tool_trajectory")
    assert trajectory.passed is passes, trajectory.reason
    assert report.outcome == ("pass" if passes else "fail")
    if not passes:
        assert trajectory.reason.startswith(f"{mode}: ")
        assert "calls: [lookup, notify]" in trajectory.reason


@pytest.mark.parametrize(
    ("arguments", "passes"),
    [
        ({"order": "17"}, True),
        ({"order": arg_regex(r"^1\d$")}, True),
        ({"order": arg_any()}, True),
        ({"order": arg_contains("7")}, True),
        ({}, True),  # no argument checked, the call's name is enough
        ({"order": "18"}, False),
        ({"order": arg_regex(r"^2")}, False),
        ({"reason": arg_any()}, False),  # an argument the call does not have
        ({"order": lambda v: isinstance(v, str) and int(v) > 10}, True),
    ],
)
async def test_argument_matchers(arguments: dict[str, object], passes: bool) -> None:
    case = Case(
        name="args",
        input="Refund order 17.",
        evaluators=[tool_trajectory([ExpectedToolCall("lookup", arguments)], mode="in_order")],
    )
    report = await run_case(two_call_agent(), case)  # type: ignore[arg-type]
    assert report.passed is passes, report.summary()


async def test_any_order_matches_each_expected_call_to_a_distinct_call() -> None:
    """A loose expectation listed first does not take the only call a stricter one matches."""
    agent = scripted_agent(
        call_turn(("c1", "lookup", {"order": "17"}), ("c2", "lookup", {"order": "18"})),
        text_turn("Both looked up."),
    )
    loose_first = [ExpectedToolCall("lookup"), ExpectedToolCall("lookup", {"order": "17"})]
    case = Case(
        name="two-lookups",
        input="Look up 17 and 18.",
        evaluators=[tool_trajectory(loose_first, mode="any_order")],
    )
    assert (await run_case(agent, case)).passed
    three = [*loose_first, ExpectedToolCall("lookup")]
    again = scripted_agent(
        call_turn(("c1", "lookup", {"order": "17"}), ("c2", "lookup", {"order": "18"})),
        text_turn("Both looked up."),
    )
    failed = await run_case(
        again, Case(name="three", input="x", evaluators=[tool_trajectory(three, mode="any_order")])
    )
    assert not failed.passed
    assert "expected call(s) not made: lookup" in failed.summary()


async def test_a_case_without_expected_tools_makes_the_trajectory_check_an_error() -> None:
    agent = scripted_agent(text_turn("hi"))
    report = await run_case(agent, Case(name="none", input="hi", evaluators=[tool_trajectory()]))
    assert report.outcome == "error"
    assert "no expected tool calls" in report.summary()
