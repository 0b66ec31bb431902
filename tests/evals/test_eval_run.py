"""``run_eval``: repeats and their pass rate with a Wilson interval, flaky cases, bounded
concurrency that does not change the results, the runs' store and metadata, per-run providers,
the LLM judge's errors and usage, and the report's forms."""

from __future__ import annotations

import asyncio
import json
import math

import pytest
from eval_support import MODEL, call_turn, scripted_agent, text_turn, usage

import prism
from prism.errors import PrismConfigError
from prism.evals import (
    EVAL_METADATA_KEY,
    AttemptReport,
    Case,
    Dataset,
    ExpectedToolCall,
    ExpectedTools,
    contains,
    llm_judge,
    max_turns,
    run_eval,
    tool_trajectory,
    wilson_interval,
)
from prism.providers.base import AIProvider
from prism.stores import open_store
from prism.testing import create_mock_provider, provider_done, provider_text_delta

CASE = Case(name="refund", input="Is refund 17 approved?", evaluators=[contains("approved")])


async def test_repeat_5_with_2_failing_runs_reports_60_percent_and_flags_flakiness() -> None:
    """The provider answers right 3 times of 5, whatever order the runs go in."""
    turns = [text_turn("Refund approved.")] * 3 + [text_turn("I do not know.")] * 2
    agent = scripted_agent(*turns)
    report = await run_eval(agent, Dataset(name="flaky", cases=[CASE]), repeat=5, concurrency=3)
    (case,) = report.cases
    rate = case.pass_rate
    assert (rate.passes, rate.failures, rate.errors) == (3, 2, 0)
    assert rate.rate == pytest.approx(0.6)
    assert rate.flaky and case.outcome == "flaky" and not report.passed
    low, high = rate.interval  # type: ignore[misc]
    assert low == pytest.approx(0.2307, abs=1e-4) and high == pytest.approx(0.8824, abs=1e-4)
    assert rate.format(interval=True) == "60% (3/5) [23%–88%]"
    assert [a.repeat for a in case.attempts] == [1, 2, 3, 4, 5]
    assert case.evaluators["contains('approved')"].rate == pytest.approx(0.6)
    assert report.evaluators["status"].rate == 1.0
    assert len(report.failures) == 2
    assert all("does not contain 'approved'" in f.problems[0] for f in report.failures)
    assert report.counts == {"pass": 0, "fail": 0, "flaky": 1, "error": 0}


async def test_a_case_passing_every_repeat_is_not_flaky() -> None:
    agent = scripted_agent(*[text_turn("approved")] * 3)
    report = await run_eval(agent, Dataset(cases=[CASE]), repeat=3)
    (case,) = report.cases
    assert case.outcome == "pass" and not case.pass_rate.flaky and report.passed
    assert case.pass_rate.interval == pytest.approx(wilson_interval(3, 3))


def test_wilson_interval() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(5, 5)
    assert high == 1.0 and low == pytest.approx(0.5655, abs=1e-4)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson_interval(50, 100)
    assert low == pytest.approx(1 - high) and math.isclose(low, 0.4038, abs_tol=1e-4)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def _cases(count: int) -> list[Case]:
    trajectory = ExpectedTools(calls=[ExpectedToolCall("lookup")], mode="in_order")
    return [
        Case(
            name=f"case-{i:02d}",
            input=f"Question {i}",
            expected_tools=trajectory if i % 3 == 0 else None,
            evaluators=[contains("ok"), max_turns(2)]
            + ([tool_trajectory()] if i % 3 == 0 else []),
        )
        for i in range(count)
    ]


def _script(case: Case, repeat: int) -> AIProvider:
    """Per case: a tool call then a right answer, a wrong answer, or a right answer (every
    second repeat of case-04 answers wrong: a flaky case)."""
    i = int(case.name.split("-")[1])
    if i % 3 == 0:
        turns = [call_turn((f"c{i}", "lookup", {"order": str(i)})), text_turn(f"ok {i}")]
    elif i % 3 == 1 and not (i == 4 and repeat == 1):
        turns = [text_turn(f"wrong {i}")]
    else:
        turns = [text_turn(f"ok {i}")]
    return create_mock_provider(turns=turns, delay_s=0.001)


def _signature(report: prism.evals.EvalReport) -> list[object]:
    return [
        (
            case.name,
            case.outcome,
            case.pass_rate,
            [
                (a.repeat, a.outcome, a.status, [(s.evaluator, s.outcome, s.reason) for s in a.scores])
                for a in case.attempts
            ],
        )
        for case in report.cases
    ]


async def test_concurrency_8_gives_the_same_results_as_concurrency_1() -> None:
    active = peak = 0

    @prism.tool
    async def lookup(order: str) -> str:
        """Look up an order."""
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return f"order {order}"

    agent = prism.create_agent(
        provider=create_mock_provider(), model=MODEL, name="support", tools=[lookup]
    )
    dataset = Dataset(name="many", cases=_cases(24))
    serial = await run_eval(agent, dataset, concurrency=1, repeat=2, provider_for=_script)
    assert peak == 1
    peak = 0
    parallel = await run_eval(agent, dataset, concurrency=8, repeat=2, provider_for=_script)
    assert 1 < peak <= 8
    assert _signature(parallel) == _signature(serial)
    assert parallel.counts == serial.counts == {"pass": 16, "fail": 7, "flaky": 1, "error": 0}


async def test_runs_go_to_the_store_tagged_with_the_eval_run() -> None:
    store = await open_store("sqlite://:memory:")
    try:
        agent = scripted_agent(text_turn("approved"), text_turn("approved"))
        report = await run_eval(
            agent, Dataset(cases=[CASE]), repeat=2, store=store, eval_run_id="eval_fixed"
        )
        assert report.eval_run_id == "eval_fixed"
        for attempt in report.cases[0].attempts:
            assert attempt.run_id is not None and attempt.session_id is not None
            (record, *_) = await store.list_runs(run_id=attempt.run_id)
            assert record.metadata is not None
            assert record.metadata[EVAL_METADATA_KEY] == {
                "eval_run_id": "eval_fixed", "case": "refund", "repeat": attempt.repeat,
            }
            entries = await store.list(attempt.session_id)
            assert entries  # the conversation is stored
    finally:
        await store.aclose()


async def test_run_options_apply_to_every_run_and_keep_their_metadata() -> None:
    ledger = prism.testing.MemoryRunLedger()
    agent = scripted_agent(text_turn("approved"), run_ledger=ledger)
    await run_eval(agent, Dataset(cases=[CASE]), options={"metadata": {"team": "support"}})
    (record, *_) = ledger.runs
    assert record.metadata["team"] == "support"
    assert record.metadata[EVAL_METADATA_KEY]["case"] == "refund"


async def test_provider_for_gives_a_run_its_own_provider() -> None:
    agent = scripted_agent()  # its own provider has no turn scripted
    seen: list[tuple[str, int]] = []

    def provider_for(case: Case, repeat: int) -> AIProvider | None:
        seen.append((case.name, repeat))
        return create_mock_provider(turns=[text_turn("approved")])

    report = await run_eval(agent, Dataset(cases=[CASE]), repeat=2, provider_for=provider_for)
    assert report.passed and sorted(seen) == [("refund", 1), ("refund", 2)]


async def test_replay_refuses_a_case_without_a_cassette() -> None:
    with pytest.raises(PrismConfigError, match="case 'refund' has no cassette to replay"):
        await run_eval(scripted_agent(), Dataset(cases=[CASE]), replay=True)


@pytest.mark.parametrize(("field", "value"), [("concurrency", 0), ("repeat", 0), ("repeat", 1.5)])
async def test_invalid_counts_are_config_errors(field: str, value: object) -> None:
    with pytest.raises(PrismConfigError, match=field):
        await run_eval(scripted_agent(), Dataset(cases=[CASE]), **{field: value})  # type: ignore[arg-type]


async def test_progress_is_reported_after_each_attempt() -> None:
    calls: list[tuple[int, int, str]] = []

    async def on_progress(done: int, total: int, attempt: AttemptReport) -> None:
        calls.append((done, total, attempt.case))

    agent = scripted_agent(*[text_turn("approved")] * 3)
    await run_eval(agent, Dataset(cases=[CASE]), repeat=3, on_progress=on_progress)
    assert [(d, t) for d, t, _ in calls] == [(1, 3), (2, 3), (3, 3)]


async def test_a_run_that_raises_is_an_error_attempt() -> None:
    def provider_for(case: Case, repeat: int) -> AIProvider | None:
        raise RuntimeError("no provider today")

    report = await run_eval(scripted_agent(), Dataset(cases=[CASE]), provider_for=provider_for)
    (attempt,) = report.cases[0].attempts
    assert attempt.outcome == "error" and attempt.error == "RuntimeError: no provider today"
    assert report.cases[0].outcome == "error"


def judge_provider(*answers: str) -> AIProvider:
    return create_mock_provider(
        turns=[[provider_text_delta(a), provider_done(usage(100))] for a in answers]
    )


JUDGE_MODEL = {**MODEL, "capabilities": {"structured_output": True}}


async def test_the_llm_judge_scores_with_its_usage_apart() -> None:
    verdict = json.dumps({"score": 0.9, "pass": True, "reason": "says it is approved"})
    agent = scripted_agent(text_turn("Refund approved."))
    case = Case(name="judged", input="Is refund 17 approved?",
                evaluators=[llm_judge("The answer says whether the refund is approved.")])
    report = await run_eval(
        agent, Dataset(cases=[case]), judge_provider=judge_provider(verdict),
        judge_model=JUDGE_MODEL,
    )
    (attempt,) = report.cases[0].attempts
    judged = attempt.scores[-1]
    assert (judged.outcome, judged.score, judged.reason) == ("pass", 0.9, "says it is approved")
    assert report.usage is not None and report.usage.total_tokens == 15  # the agent's only
    assert report.judge_usage is not None and report.judge_usage.total_tokens == 100
    assert report.to_dict()["judge_usage"]["total_tokens"] == 100  # type: ignore[index]


async def test_a_judge_answer_that_does_not_parse_is_a_judge_error_not_a_failure() -> None:
    agent = scripted_agent(text_turn("Refund approved."), text_turn("Refund approved."))
    case = Case(name="judged", input="Is refund 17 approved?",
                evaluators=[contains("approved"), llm_judge("Says approved.")])
    bad = ["I think it passes.", json.dumps({"score": 7, "pass": True, "reason": "r"})]
    report = await run_eval(
        agent, Dataset(cases=[case]), repeat=2, concurrency=1,
        judge_provider=judge_provider(*bad), judge_model=JUDGE_MODEL,
    )
    case_report = report.cases[0]
    assert case_report.outcome == "error" and case_report.pass_rate.failures == 0
    assert case_report.pass_rate.errors == 2
    for attempt in case_report.attempts:
        judged = attempt.scores[-1]
        assert judged.outcome == "judge_error"
        assert judged.reason.startswith("the judge's answer does not parse")
        assert judged.usage is not None  # the judge's usage is still reported
    assert "(judge error)" in case_report.summary()


async def test_a_judge_without_a_provider_is_an_error() -> None:
    case = Case(name="judged", input="x", evaluators=[llm_judge("Says approved.")])
    report = await run_eval(scripted_agent(text_turn("approved")), Dataset(cases=[case]))
    (attempt,) = report.cases[0].attempts
    assert attempt.scores[-1].outcome == "error"
    assert "the LLM judge has no provider" in attempt.scores[-1].reason


async def test_the_report_as_json_and_text_names_failures_with_their_transcript() -> None:
    agent = scripted_agent(call_turn(("c1", "lookup", {"order": "17"})), text_turn("No idea."))
    report = await run_eval(agent, Dataset(name="d", cases=[CASE]))
    data = json.loads(report.to_json())
    assert data["dataset"] == "d" and data["passed"] is False
    (attempt,) = data["cases"][0]["attempts"]
    assert attempt["outcome"] == "fail"
    assert [m["role"] for m in attempt["transcript"]] == ["user", "assistant", "tool", "assistant"]
    text = report.format_text()
    assert "FAIL refund (repeat 1" in text
    assert "assistant: → lookup({\"order\":\"17\"})" in text
    assert "tool: ← lookup: \"order 17: refund approved\"" in text
