"""The JUnit XML of an eval report validates against the Jenkins xunit plugin's ``junit-10.xsd``
(vendored in tests/fixtures/junit) and shows each case: passing, failed, flaky and erred ones."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from eval_support import scripted_agent, text_turn

from prism.evals import Case, Dataset, EvalReport, contains, junit_xml, max_cost, run_eval

xmlschema = pytest.importorskip("xmlschema")

XSD = Path(__file__).resolve().parents[1] / "fixtures" / "junit" / "junit-10.xsd"


async def mixed_report() -> EvalReport:
    """Four cases, two repeats each: pass, fail, flaky, error; one answer holds characters XML
    cannot carry."""
    answers = {
        "passes": ["approved", "approved"],
        "fails": ["denied \x00\x1b<&>", "denied"],
        "flaky": ["approved", "denied"],
        "errs": ["approved", "approved"],
    }
    cases = [
        Case(name=name, input=f"Question {name}?",
             evaluators=[max_cost(1.0)] if name == "errs" else [contains("approved")])
        for name in answers
    ]

    def provider_for(case: Case, repeat: int) -> object:
        from prism.testing import create_mock_provider

        return create_mock_provider(turns=[text_turn(answers[case.name][repeat - 1])])

    return await run_eval(
        scripted_agent(), Dataset(name="support <suite>", cases=cases), repeat=2,
        provider_for=provider_for,  # type: ignore[arg-type]
    )


async def test_the_junit_xml_validates_against_junit_10_xsd() -> None:
    report = await mixed_report()
    document = junit_xml(report)
    schema = xmlschema.XMLSchema(str(XSD))
    schema.validate(document)  # raises XMLSchemaValidationError with the reason
    assert schema.is_valid(document)


async def test_each_case_is_a_testcase_with_its_failure_or_error() -> None:
    report = await mixed_report()
    root = ET.fromstring(junit_xml(report).encode("utf-8"))
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "support <suite>"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "2", "1")
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert list(cases) == ["passes", "fails", "flaky", "errs"]
    assert list(cases["passes"]) == []
    failure = cases["fails"].find("failure")
    assert failure is not None and failure.get("type") == "fail"
    assert failure.get("message", "").startswith("fail (0% (0/2)")
    assert "does not contain 'approved'" in (failure.text or "")
    out = cases["fails"].find("system-out")
    assert out is not None and "assistant: denied \ufffd\ufffd<&>" in (out.text or "")
    flaky = cases["flaky"].find("failure")
    assert flaky is not None and flaky.get("type") == "flaky"
    assert "50% (1/2)" in flaky.get("message", "")
    error = cases["errs"].find("error")
    assert error is not None and "the run reported no cost" in error.get("message", "")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["prism.eval.eval_run_id"] == report.eval_run_id
    assert properties["prism.eval.pass_rate.flaky"] == "50% (1/2) [9%–91%]"


async def test_a_report_of_passing_cases_has_no_failures() -> None:
    agent = scripted_agent(text_turn("approved"))
    report = await run_eval(agent, Dataset(cases=[Case(name="ok", input="x",
                                                       evaluators=[contains("approved")])]))
    document = junit_xml(report)
    xmlschema.XMLSchema(str(XSD)).validate(document)
    root = ET.fromstring(document.encode("utf-8"))
    assert root.get("failures") == "0" and root.get("errors") == "0"
