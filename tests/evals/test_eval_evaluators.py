"""The built-in evaluators on real runs of agents on the scripted mock provider: answers,
artifacts, limits (a limit that cannot be measured is an error, never a pass), denied calls,
Python functions, and evaluators that raise."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pydantic
import pytest
from eval_support import call_turn, scripted_agent, text_turn

from prism.artifacts import json_schema_artifact, pydantic_artifact
from prism.evals import (
    Case,
    CaseReport,
    EvalContext,
    EvalScore,
    Evaluator,
    artifact_equals,
    contains,
    exact,
    json_schema,
    max_cost,
    max_latency,
    max_tokens,
    max_turns,
    no_denied_or_ambiguous_calls,
    pydantic_model,
    python_evaluator,
    regex,
    run_case,
)
from prism.providers.mock import MockScriptItem

SCHEMA = {
    "type": "object",
    "properties": {"order": {"type": "string"}, "approved": {"type": "boolean"}},
    "required": ["order", "approved"],
}


class Refund(pydantic.BaseModel):
    order: str
    approved: bool


async def evaluate(
    evaluators: Sequence[Evaluator], *turns: Sequence[MockScriptItem], **agent_options: object
) -> CaseReport:
    agent = scripted_agent(*turns, **agent_options)  # type: ignore[arg-type]
    case = Case(
        name="case",
        input="Is the refund for order 17 approved?",
        expected_output="Refund approved.",
        expected_artifact={"order": "17", "approved": True},
        evaluators=evaluators,
    )
    return await run_case(agent, case)


def outcomes(report: CaseReport) -> dict[str, str]:
    (attempt,) = report.attempts
    return {score.evaluator: score.outcome for score in attempt.scores}


@pytest.mark.parametrize(
    ("evaluator", "answer", "outcome"),
    [
        (exact(), "  Refund approved.\n", "pass"),  # the case's expected_output, stripped
        (exact(), "Refund approved!", "fail"),
        (exact("refund APPROVED.", case_sensitive=False), "Refund approved.", "pass"),
        (contains("approved"), "Yes, the refund is approved.", "pass"),
        (contains("denied"), "Yes, the refund is approved.", "fail"),
        (contains(), "Refund approved. Anything else?", "pass"),
        (regex(r"(?i)\bapproved\b"), "APPROVED", "pass"),
        (regex(r"\d{4}"), "refund 17", "fail"),
    ],
)
async def test_answer_evaluators(evaluator: Evaluator, answer: str, outcome: str) -> None:
    report = await evaluate([evaluator], text_turn(answer))
    assert outcomes(report)[evaluator.name] == outcome
    assert report.outcome == outcome


async def test_a_failing_answer_check_gives_its_reason() -> None:
    report = await evaluate([exact()], text_turn("No."))
    (attempt,) = report.attempts
    assert attempt.problems == ("exact: expected 'Refund approved.', got 'No.'",)


@pytest.mark.parametrize(
    ("evaluator", "answer", "outcome"),
    [
        (json_schema(SCHEMA), '{"order": "17", "approved": true}', "pass"),
        (json_schema(SCHEMA), '{"order": 17}', "fail"),
        (json_schema(SCHEMA), "approved", "fail"),  # neither an artifact nor JSON
        (pydantic_model(Refund), '{"order": "17", "approved": true}', "pass"),
        (pydantic_model(Refund), '{"order": "17"}', "fail"),
        (artifact_equals(), '{"approved": true, "order": "17"}', "pass"),
        (artifact_equals({"order": "18", "approved": True}), '{"order": "17", "approved": true}',
         "fail"),
    ],
)
async def test_artifact_evaluators_on_a_json_answer(
    evaluator: Evaluator, answer: str, outcome: str
) -> None:
    report = await evaluate([evaluator], text_turn(answer))
    assert outcomes(report)[evaluator.name] == outcome, report.summary()


async def test_artifact_evaluators_read_the_run_artifact() -> None:
    """A generate-validate-revise run's accepted artifact is what they check."""
    text = json.dumps({"order": "17", "approved": True})
    answer = text_turn(text)
    loop = {"strategy": "generate-validate-revise", **json_schema_artifact(SCHEMA)}
    report = await evaluate([json_schema(SCHEMA), artifact_equals()], answer, loop=loop)
    assert report.passed, report.summary()
    model_loop = {"strategy": "generate-validate-revise", **pydantic_artifact(Refund)}
    report = await evaluate(
        [pydantic_model(Refund), artifact_equals()], text_turn(text), loop=model_loop
    )
    assert report.passed, report.summary()
    (attempt,) = report.attempts
    assert "the artifact is a Refund" in [s.reason for s in attempt.scores]


async def test_limits_pass_and_fail_on_what_the_run_reported() -> None:
    turns = [call_turn(("c1", "lookup", {"order": "17"})), text_turn("Refund approved.", cost=0.02)]
    report = await evaluate(
        [max_turns(2), max_turns(1), max_tokens(30), max_tokens(20), max_cost(0.05),
         max_cost(0.01), max_latency(60)],
        *turns,
    )
    assert outcomes(report) == {
        "status": "pass",
        "max_turns(2)": "pass",
        "max_turns(1)": "fail",
        "max_tokens(30)": "pass",  # 15 + 15 tokens
        "max_tokens(20)": "fail",
        "max_cost(0.05)": "pass",
        "max_cost(0.01)": "fail",
        "max_latency_s(60)": "pass",
    }
    assert report.outcome == "fail"


async def test_a_cost_limit_on_a_run_without_reported_cost_is_an_error_not_a_pass() -> None:
    report = await evaluate([max_cost(100.0)], text_turn("Refund approved."))
    (attempt,) = report.attempts
    (score,) = [s for s in attempt.scores if s.evaluator == "max_cost(100)"]
    assert score.outcome == "error"
    assert score.reason == "the run reported no cost: a cost limit cannot be checked"
    assert report.outcome == "error" and not report.passed
    assert report.pass_rate.errors == 1 and report.pass_rate.rate is None


async def test_a_cost_in_another_currency_is_an_error() -> None:
    report = await evaluate([max_cost(1.0, currency="EUR")], text_turn("x", cost=0.5))
    assert outcomes(report)["max_cost(1)"] == "error"
    assert "in USD, the limit in EUR" in report.summary()


async def test_a_denied_tool_call_fails_the_denied_or_ambiguous_check() -> None:
    turns = [call_turn(("c1", "notify", {"channel": "sms"})), text_turn("I could not notify.")]
    report = await evaluate(
        [no_denied_or_ambiguous_calls()], *turns, permission=lambda request: False
    )
    assert outcomes(report)["no_denied_or_ambiguous_calls"] == "fail"
    assert "call c1 (notify) was denied: permission_denied" in report.summary()
    allowed = await evaluate(
        [no_denied_or_ambiguous_calls()], call_turn(("c1", "lookup", {"order": "17"})),
        text_turn("ok"),
    )
    assert allowed.passed, allowed.summary()


async def test_a_failed_run_fails_the_status_check_and_is_still_evaluated() -> None:
    """The mock has no second turn: the run fails; the case fails on its status."""
    report = await evaluate([max_turns(5)], call_turn(("c1", "lookup", {"order": "17"})))
    (attempt,) = report.attempts
    assert attempt.status == "failed"
    assert outcomes(report) == {"status": "fail", "max_turns(5)": "pass"}
    assert "expected the run to end succeeded, it ended failed" in attempt.problems[0]
    assert attempt.messages  # the transcript so far


async def test_a_case_may_expect_a_run_to_fail() -> None:
    agent = scripted_agent(call_turn(("c1", "lookup", {"order": "17"})))
    case = Case(name="fails", input="x", expected_status="failed", evaluators=[max_turns(5)])
    assert (await run_case(agent, case)).passed


async def test_python_evaluators_return_any_of_their_forms() -> None:
    async def mentions_order(ctx: EvalContext) -> bool:
        return "17" in ctx.text

    def polite(ctx: EvalContext) -> tuple[bool, str]:
        return ("please" in ctx.text, "says please")

    def scored(ctx: EvalContext) -> float:
        return 0.25

    def as_mapping(ctx: EvalContext) -> dict[str, object]:
        return {"pass": True, "score": 0.9, "reason": "fine"}

    def asserting(ctx: EvalContext) -> None:
        assert ctx.turns == 3, f"expected 3 turns, got {ctx.turns}"

    def raising(ctx: EvalContext) -> bool:
        raise RuntimeError("boom")

    def wrong(ctx: EvalContext) -> str:
        return "yes"

    evaluators = [python_evaluator(f) for f in
                  (mentions_order, polite, scored, as_mapping, asserting, raising, wrong)]
    report = await evaluate(evaluators, text_turn("Order 17 is approved."))
    assert outcomes(report) == {
        "status": "pass", "mentions_order": "pass", "polite": "fail", "scored": "fail",
        "as_mapping": "pass", "asserting": "fail", "raising": "error", "wrong": "error",
    }
    (attempt,) = report.attempts
    reasons = {s.evaluator: s.reason for s in attempt.scores}
    assert reasons["asserting"].startswith("expected 3 turns, got 1")
    assert reasons["scored"] == "score 0.25 < 0.5"
    assert reasons["raising"] == "the evaluator raised RuntimeError: boom"


async def test_an_evaluator_that_raises_is_an_error_score() -> None:
    class Broken:
        name = "broken"

        async def evaluate(self, ctx: EvalContext, /) -> EvalScore:
            raise ValueError("no")

    report = await evaluate([Broken()], text_turn("x"))
    (attempt,) = report.attempts
    assert attempt.scores[-1] == EvalScore.error("broken", "the evaluator raised ValueError: no")


async def test_evaluators_with_one_name_get_numbered() -> None:
    report = await evaluate([contains("Refund"), contains("Refund")], text_turn("Refund approved."))
    assert list(outcomes(report)) == ["status", "contains('Refund')", "contains('Refund') #2"]


@pytest.mark.parametrize(
    "build",
    [
        lambda: regex("("),
        lambda: max_turns(-1),
        lambda: max_cost(float("nan")),
        lambda: json_schema({"type": "nonsense"}),
        lambda: pydantic_model(dict),
        lambda: python_evaluator(42),  # type: ignore[arg-type]
    ],
)
def test_invalid_evaluators_are_config_errors(build: object) -> None:
    from prism.errors import PrismConfigError

    with pytest.raises(PrismConfigError):
        build()  # type: ignore[operator]
