"""An eval report as JUnit XML, so CI shows each case as a test.

[`junit_xml()`][prism.evals._junit.junit_xml] writes one ``<testsuite>`` (the dataset) inside ``<testsuites>``, with one
``<testcase>`` per case (``classname`` the dataset, ``time`` the seconds of its runs). A case that
failed or was flaky gets a ``<failure>``, one that erred an ``<error>``: its ``message`` is the
case summary's first problem, its text every problem, and ``<system-out>`` holds the transcript
of the first attempt that did not pass. The suite's ``<properties>`` name the eval run, the agent
and the repeat count, and each pass rate is a property too. The output validates against the
Jenkins xunit plugin's ``junit-10.xsd``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Final

from prism.evals._report import CaseReport, EvalReport

__all__ = ["junit_xml"]

_XML_ILLEGAL: Final = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot hold."""
    return _XML_ILLEGAL.sub("\ufffd", text)


def _seconds(value: float) -> str:
    return f"{max(value, 0.0):.3f}"


def _testcase(suite: ET.Element, case: CaseReport, dataset: str, repeat: int) -> None:
    element = ET.SubElement(
        suite,
        "testcase",
        name=_clean(case.name),
        classname=_clean(dataset),
        time=_seconds(case.latency_s),
    )
    outcome = case.outcome
    if outcome == "pass":
        return
    failing = [a for a in case.attempts if a.outcome != "pass"]
    problems = [p for attempt in failing for p in attempt.problems]
    rate = case.pass_rate.format(interval=repeat > 1)
    first = problems[0] if problems else outcome
    message = f"{outcome}: {first}" if repeat == 1 else f"{outcome} ({rate}): {first}"
    tag = "error" if outcome == "error" else "failure"
    detail = ET.SubElement(element, tag, type=outcome, message=_clean(message[:1000]))
    detail.text = _clean(case.summary())
    transcript = next((a for a in failing if a.messages), None)
    if transcript is not None:
        out = ET.SubElement(element, "system-out")
        out.text = _clean(
            f"run {transcript.run_id} (repeat {transcript.repeat})\n" + transcript.transcript()
        )


def junit_xml(report: EvalReport) -> str:
    """``report`` as a JUnit XML document (UTF-8 text with its XML declaration).

    Cases that are ``"fail"`` or ``"flaky"`` count as failures, ``"error"`` ones as errors.
    """
    counts = report.counts
    tests, failures, errors = len(report.cases), counts["fail"] + counts["flaky"], counts["error"]
    root = ET.Element(
        "testsuites",
        name="prism eval",
        tests=str(tests),
        failures=str(failures),
        errors=str(errors),
        time=_seconds(report.duration_s),
    )
    suite = ET.SubElement(
        root,
        "testsuite",
        name=_clean(report.dataset),
        tests=str(tests),
        failures=str(failures),
        errors=str(errors),
        skipped="0",
        time=_seconds(report.duration_s),
        timestamp=report.started_at,
        id=report.eval_run_id,
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("prism.eval.eval_run_id", report.eval_run_id),
        ("prism.eval.agent", report.agent),
        ("prism.eval.repeat", str(report.repeat)),
        ("prism.eval.totals", report.summary_line()),
        *(
            (f"prism.eval.pass_rate.{c.name}", c.pass_rate.format(interval=report.repeat > 1))
            for c in report.cases
        ),
    ):
        ET.SubElement(properties, "property", name=_clean(name), value=_clean(value))
    for case in report.cases:
        _testcase(suite, case, report.dataset, report.repeat)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
