"""Evaluations: datasets of cases, evaluators, eval runs and their reports.

::

    from prism.evals import Case, Dataset, contains, max_turns, run_eval

    dataset = Dataset(name="smoke", cases=[
        Case(name="greets", input="Say hello.", evaluators=[contains("hello")]),
    ], evaluators=[max_turns(2)])
    report = await run_eval(agent, dataset, concurrency=4, repeat=3)
    print(report.format_text())

* data: [`Case`][prism.evals.Case], [`Dataset`][prism.evals.Dataset], [`ExpectedTools`][prism.evals.ExpectedTools] / [`ExpectedToolCall`][prism.evals.ExpectedToolCall] and
  the argument matchers; [`load_dataset()`][prism.evals.load_dataset] / [`save_dataset()`][prism.evals.save_dataset] (YAML with the ``evals``
  extra, JSONL and JSON with nothing);
* evaluators (each returns an [`EvalScore`][prism.evals.EvalScore]: pass, fail or error, a score and a reason):
  [`exact()`][prism.evals.exact], [`contains()`][prism.evals.contains], [`regex()`][prism.evals.regex] on the answer; [`json_schema()`][prism.evals.json_schema],
  [`pydantic_model()`][prism.evals.pydantic_model], [`artifact_equals()`][prism.evals.artifact_equals] on the artifact; [`tool_trajectory()`][prism.evals.tool_trajectory]
  (``exact``, ``in_order``, ``any_order``); the limits [`max_cost()`][prism.evals.max_cost], [`max_tokens()`][prism.evals.max_tokens],
  [`max_turns()`][prism.evals.max_turns], [`max_latency()`][prism.evals.max_latency], [`no_denied_or_ambiguous_calls()`][prism.evals.no_denied_or_ambiguous_calls];
  [`python_evaluator()`][prism.evals.python_evaluator]; [`llm_judge()`][prism.evals.llm_judge];
* running: [`run_eval()`][prism.evals.run_eval], [`run_case()`][prism.evals.run_case] → [`EvalReport`][prism.evals.EvalReport] / [`CaseReport`][prism.evals.CaseReport]
  (pass rates with their Wilson interval, flaky cases, usage, failures with transcripts), and
  [`junit_xml()`][prism.evals.junit_xml];
* pytest: [`pytest_cases()`][prism.evals.pytest_cases];
* record and replay: [`capture_run()`][prism.evals.capture_run] turns a stored run into a case with its
  [`Cassette`][prism.evals.Cassette] (the recorded provider attempts and tool calls); ``run_eval(replay=True)``
  runs cases against their recordings ([`replay_agent()`][prism.evals.replay_agent], [`ReplayProvider`][prism.evals.ReplayProvider]), inside
  [`no_network()`][prism.evals.no_network]; [`event_stream_diff()`][prism.evals.event_stream_diff] compares two runs' ledger events.

The ``prism eval run`` command runs a dataset file against an agent of a registry, ``prism eval
capture`` stores a run as a case (``docs/operations/evals.md``). Importing this package imports neither PyYAML, pytest nor a provider SDK.
"""

from prism.evals._capture import CapturedRun as CapturedRun
from prism.evals._capture import capture_run as capture_run
from prism.evals._cassette import CASSETTE_VERSION as CASSETTE_VERSION
from prism.evals._cassette import Cassette as Cassette
from prism.evals._cassette import CassetteMatching as CassetteMatching
from prism.evals._cassette import RecordedAttempt as RecordedAttempt
from prism.evals._cassette import RecordedCall as RecordedCall
from prism.evals._cassette import ReplayTools as ReplayTools
from prism.evals._diff import event_stream_diff as event_stream_diff
from prism.evals._evaluators import DENIED_CALL_CODES as DENIED_CALL_CODES
from prism.evals._evaluators import PythonCheckFunction as PythonCheckFunction
from prism.evals._evaluators import artifact_equals as artifact_equals
from prism.evals._evaluators import contains as contains
from prism.evals._evaluators import exact as exact
from prism.evals._evaluators import json_schema as json_schema
from prism.evals._evaluators import max_cost as max_cost
from prism.evals._evaluators import max_latency as max_latency
from prism.evals._evaluators import max_tokens as max_tokens
from prism.evals._evaluators import max_turns as max_turns
from prism.evals._evaluators import no_denied_or_ambiguous_calls as no_denied_or_ambiguous_calls
from prism.evals._evaluators import pydantic_model as pydantic_model
from prism.evals._evaluators import python_evaluator as python_evaluator
from prism.evals._evaluators import regex as regex
from prism.evals._files import EVALUATOR_KINDS as EVALUATOR_KINDS
from prism.evals._files import dataset_from_dict as dataset_from_dict
from prism.evals._files import dataset_to_dict as dataset_to_dict
from prism.evals._files import evaluator_from_spec as evaluator_from_spec
from prism.evals._files import load_dataset as load_dataset
from prism.evals._files import save_dataset as save_dataset
from prism.evals._judge import JUDGE_SCHEMA as JUDGE_SCHEMA
from prism.evals._judge import LLMJudge as LLMJudge
from prism.evals._judge import llm_judge as llm_judge
from prism.evals._junit import junit_xml as junit_xml
from prism.evals._model import ArgumentMatcher as ArgumentMatcher
from prism.evals._model import Case as Case
from prism.evals._model import Dataset as Dataset
from prism.evals._model import EvalContext as EvalContext
from prism.evals._model import EvalScore as EvalScore
from prism.evals._model import Evaluator as Evaluator
from prism.evals._model import ExpectedToolCall as ExpectedToolCall
from prism.evals._model import ExpectedTools as ExpectedTools
from prism.evals._model import ScoreOutcome as ScoreOutcome
from prism.evals._model import TrajectoryMode as TrajectoryMode
from prism.evals._model import arg_any as arg_any
from prism.evals._model import arg_contains as arg_contains
from prism.evals._model import arg_regex as arg_regex
from prism.evals._pytest import pytest_cases as pytest_cases
from prism.evals._replay import REPLAY_MISMATCH as REPLAY_MISMATCH
from prism.evals._replay import NetworkRefusedError as NetworkRefusedError
from prism.evals._replay import ReplayProvider as ReplayProvider
from prism.evals._replay import ReplaySession as ReplaySession
from prism.evals._replay import no_network as no_network
from prism.evals._replay import replay_agent as replay_agent
from prism.evals._report import AttemptOutcome as AttemptOutcome
from prism.evals._report import AttemptReport as AttemptReport
from prism.evals._report import CaseOutcome as CaseOutcome
from prism.evals._report import CaseReport as CaseReport
from prism.evals._report import EvalReport as EvalReport
from prism.evals._report import PassRate as PassRate
from prism.evals._report import wilson_interval as wilson_interval
from prism.evals._runner import EVAL_METADATA_KEY as EVAL_METADATA_KEY
from prism.evals._runner import ProgressCallback as ProgressCallback
from prism.evals._runner import ProviderFor as ProviderFor
from prism.evals._runner import case_evaluators as case_evaluators
from prism.evals._runner import run_case as run_case
from prism.evals._runner import run_eval as run_eval
from prism.evals._trajectory import tool_trajectory as tool_trajectory

__all__ = [
    "CASSETTE_VERSION",
    "DENIED_CALL_CODES",
    "EVALUATOR_KINDS",
    "EVAL_METADATA_KEY",
    "JUDGE_SCHEMA",
    "LLMJudge",
    "REPLAY_MISMATCH",
    "ArgumentMatcher",
    "AttemptOutcome",
    "AttemptReport",
    "CapturedRun",
    "Case",
    "CaseOutcome",
    "CaseReport",
    "Cassette",
    "CassetteMatching",
    "Dataset",
    "EvalContext",
    "EvalReport",
    "EvalScore",
    "Evaluator",
    "ExpectedToolCall",
    "ExpectedTools",
    "NetworkRefusedError",
    "PassRate",
    "ProgressCallback",
    "ProviderFor",
    "PythonCheckFunction",
    "RecordedAttempt",
    "RecordedCall",
    "ReplayProvider",
    "ReplaySession",
    "ReplayTools",
    "ScoreOutcome",
    "TrajectoryMode",
    "arg_any",
    "arg_contains",
    "arg_regex",
    "artifact_equals",
    "capture_run",
    "case_evaluators",
    "contains",
    "dataset_from_dict",
    "dataset_to_dict",
    "evaluator_from_spec",
    "event_stream_diff",
    "exact",
    "json_schema",
    "junit_xml",
    "llm_judge",
    "load_dataset",
    "max_cost",
    "max_latency",
    "max_tokens",
    "max_turns",
    "no_network",
    "no_denied_or_ambiguous_calls",
    "pydantic_model",
    "pytest_cases",
    "python_evaluator",
    "regex",
    "replay_agent",
    "run_case",
    "run_eval",
    "save_dataset",
    "tool_trajectory",
    "wilson_interval",
]
