"""``prism eval run``: a dataset file against an agent of a ``--agents`` registry, its table,
JSON and JUnit XML, and its exit codes (a CI run with one failing case exits non-zero)."""

from __future__ import annotations

import io
import json
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from prism.cli import main

XSD = Path(__file__).resolve().parents[1] / "fixtures" / "junit" / "junit-10.xsd"

REGISTRY = '''
import prism
from prism.testing import create_mock_provider, provider_done, provider_text_delta
from prism.types import Usage


def build_support(store):
    provider = create_mock_provider(
        events=[provider_text_delta("Refund 4417 is approved."),
                provider_done(Usage(input_tokens=12, output_tokens=6))]
    )
    return prism.create_agent(
        provider=provider, model={"provider": "mock", "model": "scripted"}, name="support",
        store=store,
    )


REGISTRY = {"support": build_support}
TWO = {"support": build_support, "billing": build_support}
'''

DATASET = """\
name: refunds
evaluators:
  - max_turns: 2
cases:
  - name: approved
    input: Is refund 4417 approved?
    evaluators:
      - contains: approved
      - regex: "\\\\b4417\\\\b"
  - name: denied
    input: Is refund 17 denied?
    expected_output: Refund 17 is denied.
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A folder with a registry module (a fresh name per test) and the dataset; the current
    directory, as a CI job has it."""
    module = f"evalagents_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(REGISTRY, encoding="utf-8")
    (tmp_path / "refunds.yaml").write_text(DATASET, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path, module


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["eval", "run", *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_a_ci_run_with_one_failing_case_exits_non_zero_and_writes_valid_junit(
    project: tuple[Path, str],
) -> None:
    folder, module = project
    code, out, err = run("refunds.yaml", "--agents", f"{module}:REGISTRY", "--junit", "out.xml")
    assert code == 1, err
    assert "approved" in out and "denied" in out and "fail" in out
    assert "exact: expected 'Refund 17 is denied.', got 'Refund 4417 is approved.'" in out
    assert "user: Is refund 17 denied?" in out  # the failure's transcript
    document = (folder / "out.xml").read_text(encoding="utf-8")
    xmlschema = pytest.importorskip("xmlschema")
    xmlschema.XMLSchema(str(XSD)).validate(document)
    suite = ET.fromstring(document.encode("utf-8")).find("testsuite")
    assert suite is not None
    assert [c.get("name") for c in suite.findall("testcase")] == ["approved", "denied"]
    assert suite.get("failures") == "1"


def test_every_case_passing_exits_0_and_json_is_the_report(project: tuple[Path, str]) -> None:
    folder, module = project
    dataset = folder / "pass.jsonl"
    dataset.write_text(
        json.dumps({"dataset": {"name": "smoke"}}) + "\n"
        + json.dumps({"name": "a", "input": "hi", "evaluators": [{"contains": "approved"}]})
        + "\n",
        encoding="utf-8",
    )
    code, out, err = run(str(dataset), "--agents", f"{module}:REGISTRY", "--json",
                         "--repeat", "3", "--concurrency", "2")
    assert code == 0, err
    report = json.loads(out)
    assert report["dataset"] == "smoke" and report["passed"] is True
    assert report["repeat"] == 3 and report["agent"] == "support"
    assert report["cases"][0]["pass_rate"]["passes"] == 3
    assert report["usage"]["total_tokens"] == 54


def test_junit_into_a_missing_folder_creates_it(project: tuple[Path, str]) -> None:
    folder, module = project
    code, _, err = run("refunds.yaml", "--agents", f"{module}:REGISTRY", "--junit",
                       "reports/ci/eval-results.xml")
    assert code == 1, err
    document = (folder / "reports" / "ci" / "eval-results.xml").read_text(encoding="utf-8")
    assert "<testsuite" in document


def test_the_summary_line_counts_one_case_in_the_singular(project: tuple[Path, str]) -> None:
    folder, module = project
    (folder / "one.yaml").write_text(
        "cases:\n  - name: a\n    input: hi\n    evaluators: [{contains: approved}]\n",
        encoding="utf-8",
    )
    code, out, err = run("one.yaml", "--agents", f"{module}:REGISTRY")
    assert code == 0, err
    assert "1 case: 1 pass, 0 fail, 0 flaky, 0 error;" in out
    code, out, _ = run("refunds.yaml", "--agents", f"{module}:REGISTRY")
    assert "2 cases: 1 pass, 1 fail, 0 flaky, 0 error;" in out


def test_runs_go_to_the_store_given(project: tuple[Path, str]) -> None:
    folder, module = project
    url = f"sqlite:///{folder / 'evals.db'}"
    code, out, _ = run("refunds.yaml", "--agents", f"{module}:REGISTRY", "--store", url)
    assert code == 1
    assert "runs stored in sqlite:///" in out
    assert (folder / "evals.db").is_file()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--replay"], "case 'approved' has no cassette to replay"),
        (["--agent", "nobody"], "--agent nobody: not in"),
        (["--repeat", "0"], "--concurrency and --repeat must be 1 or more"),
    ],
)
def test_usage_errors_exit_2(project: tuple[Path, str], extra: list[str], message: str) -> None:
    _, module = project
    code, _, err = run("refunds.yaml", "--agents", f"{module}:REGISTRY", *extra)
    assert code == 2 and message in err


def test_a_registry_with_several_agents_needs_agent(project: tuple[Path, str]) -> None:
    _, module = project
    code, _, err = run("refunds.yaml", "--agents", f"{module}:TWO")
    assert code == 2 and "choose one with --agent (billing, support)" in err
    code, _, err = run("refunds.yaml", "--agents", f"{module}:TWO", "--agent", "billing")
    assert code == 1, err


@pytest.mark.parametrize(
    ("dataset", "agents", "message"),
    [
        ("missing.yaml", "REG:REGISTRY", "No such file"),
        ("refunds.yaml", "no_such_module_here:REGISTRY", "importing no_such_module_here failed"),
        ("refunds.yaml", "not a spec", "expected MODULE:ATTR"),
    ],
)
def test_bad_datasets_and_registries_exit_2(
    project: tuple[Path, str], dataset: str, agents: str, message: str
) -> None:
    _, module = project
    code, _, err = run(dataset, "--agents", agents.replace("REG", module))
    assert code == 2 and message in err


def test_an_invalid_dataset_names_the_file_and_the_problem(project: tuple[Path, str]) -> None:
    folder, module = project
    (folder / "bad.yaml").write_text(
        "cases:\n  - name: a\n    input: x\n    evaluators: [{nonsense: 1}]\n", encoding="utf-8"
    )
    code, _, err = run("bad.yaml", "--agents", f"{module}:REGISTRY")
    assert code == 2
    assert "bad.yaml" in err and "case 'a', evaluator 1: an evaluator names one kind" in err


def test_eval_without_a_subcommand_is_a_usage_error() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main(["eval"], out=out, err=err) == 2
    assert "eval needs a subcommand" in err.getvalue()
