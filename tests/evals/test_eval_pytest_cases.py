"""``pytest_cases``: a dataset as parametrized tests — the tests below are built from a dataset —
and ``CaseReport.assert_passed``, which fails with the evaluators' reasons."""

from __future__ import annotations

import pytest
from eval_support import call_turn, scripted_agent, text_turn

from prism.evals import Case, Dataset, contains, max_turns, pytest_cases, run_case

DATASET = Dataset(
    name="smoke",
    evaluators=[max_turns(3)],
    cases=[
        Case(name="greets", input="Say hello.", evaluators=[contains("hello")]),
        Case(name="answers", input="What is 2+2?", expected_output="hello 4"),
    ],
)


@pytest.mark.parametrize("case", pytest_cases(DATASET))
async def test_the_dataset_cases_run_as_parametrized_tests(case: Case) -> None:
    agent = scripted_agent(text_turn("hello 4"))
    (await run_case(agent, case)).assert_passed()


def test_each_case_is_one_param_named_after_it_with_the_dataset_evaluators() -> None:
    params = pytest_cases(DATASET, marks=[pytest.mark.local_model])
    assert [p.id for p in params] == ["greets", "answers"]  # type: ignore[attr-defined]
    greets, answers = (p.values[0] for p in params)  # type: ignore[attr-defined]
    assert [e.name for e in greets.evaluators] == ["contains('hello')", "max_turns(3)"]
    assert [e.name for e in answers.evaluators] == ["exact", "max_turns(3)"]
    assert all(p.marks[0].name == "local_model" for p in params)  # type: ignore[attr-defined]


async def test_a_failing_case_fails_with_the_evaluators_reasons() -> None:
    agent = scripted_agent(
        call_turn(("c1", "lookup", {"order": "17"})),
        call_turn(("c2", "lookup", {"order": "18"})),
        call_turn(("c3", "lookup", {"order": "19"})),
        text_turn("goodbye"),
    )
    case = pytest_cases(DATASET)[0].values[0]  # type: ignore[attr-defined]
    report = await run_case(agent, case)
    with pytest.raises(AssertionError) as raised:
        report.assert_passed()
    message = str(raised.value)
    assert message.startswith("case 'greets': fail, 0% (0/1)")
    assert "contains('hello'): the answer does not contain 'hello': 'goodbye'" in message
    assert "max_turns(3): 4 turns > 3" in message
    assert "transcript:\nuser: Say hello." in message


async def test_run_case_adds_the_dataset_evaluators_when_given() -> None:
    agent = scripted_agent(*[call_turn((f"c{i}", "lookup", {"order": "1"})) for i in range(3)],
                           text_turn("hello"))
    report = await run_case(agent, DATASET.cases[0], dataset=DATASET)
    assert report.outcome == "fail" and "max_turns(3)" in report.summary()
