"""Datasets and cases: built in Python, read from and written to YAML, JSONL and JSON, with
every evaluator kind in its file form; and the errors bad input gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prism.errors import PrismConfigError
from prism.evals import (
    EVALUATOR_KINDS,
    Case,
    Dataset,
    EvalContext,
    ExpectedToolCall,
    ExpectedTools,
    arg_any,
    arg_contains,
    arg_regex,
    artifact_equals,
    contains,
    dataset_from_dict,
    dataset_to_dict,
    evaluator_from_spec,
    exact,
    json_schema,
    llm_judge,
    load_dataset,
    max_cost,
    max_latency,
    max_tokens,
    max_turns,
    no_denied_or_ambiguous_calls,
    pydantic_model,
    python_evaluator,
    regex,
    save_dataset,
    tool_trajectory,
)
from prism.testing import create_mock_provider
from prism.types import Message, user_message

CHECKS_MODULE = '''
import pydantic


class Refund(pydantic.BaseModel):
    order: str


def polite(ctx):
    return "please" in ctx.text
'''


@pytest.fixture
def checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module with a pydantic model and a check function, importable from the cwd."""
    name = f"evalchecks_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(CHECKS_MODULE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return name


def full_dataset(checks: str) -> Dataset:
    schema = {"type": "object", "required": ["order"]}
    return Dataset(
        name="refunds",
        description="Refund questions",
        metadata={"owner": "support"},
        evaluators=[max_turns(4), no_denied_or_ambiguous_calls(), max_latency(30.5)],
        cases=[
            Case(
                name="status",
                input="Is refund 17 approved?",
                expected_output="Approved.",
                expected_artifact={"order": "17"},
                expected_tools=ExpectedTools(
                    calls=[
                        ExpectedToolCall("lookup", {"order": arg_regex("^1"), "note": arg_any()}),
                        ExpectedToolCall("notify", {"tags": arg_contains("email"), "n": [1, 2]}),
                        ExpectedToolCall("close"),
                    ],
                    mode="any_order",
                ),
                metadata={"ticket": 9},
                evaluators=[
                    exact(), exact("x", case_sensitive=False), contains("approved"),
                    contains(), regex(r"\b17\b"), json_schema(schema),
                    pydantic_model(f"{checks}:Refund"), artifact_equals(),
                    artifact_equals({"order": "18"}), tool_trajectory(),
                    tool_trajectory(mode="in_order"),
                    tool_trajectory([ExpectedToolCall("lookup")], mode="exact", name="one"),
                    max_cost(0.5), max_cost(1, currency="EUR"), max_tokens(900),
                    python_evaluator(f"{checks}:polite"),
                    llm_judge("Says approved.", threshold=0.7, name="judged"),
                ],
            ),
            Case(
                name="conversation",
                input=[
                    Message("system", "Be brief."),
                    user_message("Hi", metadata={"k": "v"}),
                ],
                expected_status="failed",
                cassette={"interactions": []},
            ),
        ],
    )


@pytest.mark.parametrize("suffix", [".yaml", ".jsonl", ".json"])
def test_a_dataset_round_trips_through_each_file_format(
    tmp_path: Path, checks: str, suffix: str
) -> None:
    dataset = full_dataset(checks)
    path = tmp_path / f"refunds{suffix}"
    save_dataset(dataset, path)
    loaded = load_dataset(path)
    assert dataset_to_dict(loaded) == dataset_to_dict(dataset)
    assert [e.name for e in loaded.cases[0].evaluators] == [
        e.name for e in dataset.cases[0].evaluators
    ]
    assert loaded.cases[1].input == dataset.cases[1].input
    if suffix == ".jsonl":
        first, *cases = path.read_text(encoding="utf-8").splitlines()
        assert list(json.loads(first)) == ["dataset"] and len(cases) == 2


def test_saving_into_a_missing_folder_creates_it(tmp_path: Path) -> None:
    dataset = Dataset(name="smoke", cases=[Case(name="a", input="hi", expected_output="hello")])
    path = tmp_path / "evals" / "nested" / "smoke.jsonl"
    save_dataset(dataset, path)
    assert load_dataset(path).cases[0].name == "a"


def test_the_file_form_is_what_the_docs_show(checks: str) -> None:
    data = dataset_to_dict(full_dataset(checks))
    case = data["cases"][0]  # type: ignore[index]
    assert case["expected_tools"]["calls"][0] == {  # type: ignore[index]
        "name": "lookup", "arguments": {"order": {"$regex": "^1"}, "note": {"$any": True}},
    }
    assert case["evaluators"][:5] == [  # type: ignore[index]
        {"exact": True},
        {"exact": {"expected": "x", "strip": True, "case_sensitive": False}},
        {"contains": "approved"},
        {"contains": True},
        {"regex": r"\b17\b"},
    ]
    assert {"judge": {"rubric": "Says approved.", "threshold": 0.7}, "name": "judged"} in case[
        "evaluators"
    ]  # type: ignore[operator]
    assert data["evaluators"] == [  # type: ignore[index]
        {"max_turns": 4}, {"no_denied_or_ambiguous_calls": True}, {"max_latency_s": 30.5},
    ]
    assert data["cases"][1]["input"] == [  # type: ignore[index]
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hi"}], "metadata": {"k": "v"}},
    ]


def test_every_evaluator_kind_reads_from_its_short_form(checks: str) -> None:
    values: dict[str, object] = {
        "exact": None, "contains": "a", "regex": "a", "json_schema": {"type": "object"},
        "pydantic": f"{checks}:Refund", "artifact_equals": None, "tool_trajectory": "in_order",
        "max_cost": 1, "max_tokens": 10, "max_turns": 2, "max_latency_s": 1.5,
        "no_denied_or_ambiguous_calls": None, "python": f"{checks}:polite",
        "judge": "Be right.",
    }
    assert set(values) == set(EVALUATOR_KINDS)
    for kind, value in values.items():
        evaluator = evaluator_from_spec({kind: value})
        assert evaluator.name
    assert evaluator_from_spec("no_denied_or_ambiguous_calls").name == (
        "no_denied_or_ambiguous_calls"
    )
    assert evaluator_from_spec({"contains": "a", "name": "has a"}).name == "has a"


def test_a_yaml_list_of_cases_is_a_dataset_named_after_its_file(tmp_path: Path) -> None:
    path = tmp_path / "smoke.yml"
    path.write_text("- name: a\n  input: hi\n  expected_output: hello\n", encoding="utf-8")
    dataset = load_dataset(path)
    assert dataset.name == "smoke" and dataset.cases[0].expected_output == "hello"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cases:\n  - name: a\n    input: x\n    colour: red\n", "unknown case 'a' key(s): colour"),
        ("cases:\n  - name: a\n", "case 'a': input must be text or a list of messages"),
        ("cases:\n  - {name: a, input: x}\n  - {name: a, input: y}\n", "two cases are named 'a'"),
        ("cases: []\n", "cases must be a non-empty sequence"),
        ("cases:\n  - {name: a, input: x, expected_status: done}\n", "expected_status must be"),
        ("cases:\n  - {name: a, input: x, evaluators: [{max_turns: -1}]}\n", "evaluator 1"),
        ("cases:\n  - {name: a, input: x, evaluators: [{exact: 1, contains: 2}]}\n",
         "an evaluator names one kind"),
        ("cases:\n  - name: a\n    input: x\n    expected_tools: {mode: sideways, calls: []}\n",
         "trajectory mode must be one of exact, in_order, any_order"),
        ("cases:\n  - name: a\n    input: x\n    expected_tools: [{name: t, arguments: {a: {$near: 1}}}]\n",
         "unknown argument matcher '$near'"),
        ("name: [\n", "not valid YAML"),
        ("surprise: 1\ncases: []\n", "unknown dataset key(s): surprise"),
    ],
)
def test_invalid_dataset_files_are_config_errors_naming_the_problem(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PrismConfigError, match="bad.yaml") as raised:
        load_dataset(path)
    assert message in str(raised.value)


def test_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"name": "a", "input": "x"}\n\n{"name": oops}\n', encoding="utf-8")
    with pytest.raises(PrismConfigError, match="line 3: not JSON"):
        load_dataset(path)


def test_an_unknown_suffix_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(PrismConfigError, match=r"expected a \.yaml, \.yml, \.jsonl or \.json"):
        load_dataset(tmp_path / "cases.csv")


def test_what_a_file_cannot_hold_is_refused_when_saving(tmp_path: Path) -> None:
    def inline(ctx: EvalContext) -> bool:
        return True

    provider = create_mock_provider()
    for evaluator, message in [
        (python_evaluator(inline), "a Python function cannot be saved"),
        (llm_judge("r", provider=provider), "a judge with its own provider"),
        (pydantic_model(type("M", (), {"model_validate": classmethod(lambda c, v: v)})),
         "a pydantic model given as a class cannot be saved"),
    ]:
        dataset = Dataset(cases=[Case(name="a", input="x", evaluators=[evaluator])])
        with pytest.raises(PrismConfigError, match=message):
            save_dataset(dataset, tmp_path / "out.jsonl")
    callable_matcher = ExpectedTools(calls=[ExpectedToolCall("t", {"a": lambda v: True})])
    dataset = Dataset(cases=[Case(name="a", input="x", expected_tools=callable_matcher)])
    with pytest.raises(PrismConfigError, match="cannot be saved"):
        save_dataset(dataset, tmp_path / "out.jsonl")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Case(name="", input="x"), "a case needs a non-empty name"),
        (lambda: Case(name="a", input=""), "input is empty"),
        (lambda: Case(name="a", input=[1]), "input must be a str or a sequence of Message"),
        (lambda: Case(name="a", input="x", evaluators=["exact"]), "is not an evaluator"),
        (lambda: Dataset(cases=[]), "cases must be a non-empty sequence"),
        (lambda: ExpectedToolCall(""), "non-empty tool name"),
        (lambda: ExpectedTools(calls=[], mode="random"), "trajectory mode"),  # type: ignore[arg-type]
        (lambda: arg_regex("("), "invalid pattern"),
    ],
)
def test_invalid_cases_are_config_errors(build: object, message: str) -> None:
    with pytest.raises(PrismConfigError, match=message):
        build()  # type: ignore[operator]


def test_a_case_built_in_python_normalises_its_input_and_expectations() -> None:
    case = Case(name="a", input=user_message("hi"), expected_tools=[ExpectedToolCall("t")])
    assert isinstance(case.input, tuple) and case.input_text == "hi"
    assert case.expected_tools == ExpectedTools(calls=[ExpectedToolCall("t")], mode="exact")
    assert dataset_from_dict([{"name": "a", "input": "x"}], name="n").name == "n"
