"""The LLM judge: a rubric graded by a model on any prism provider.

[`llm_judge()`][prism.evals._judge.llm_judge] runs a small agent of its own — the embedded model for smoke runs, a real one
where configured — on the case's input, the expected answer and the run's answer, and asks for
``{"score", "pass", "reason"}`` through structured output (natively where the model supports it,
else as instructions). Its usage is reported on its score (``EvalScore.usage``), apart from the
agent's. An answer that is not that object, or a judge run that fails, is a ``"judge_error"``
score: the case is reported as an error, not as failed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Final

from prism._keys import reject_unknown_keys
from prism.errors import AgentRunError, PrismConfigError, PrismError
from prism.evals._model import EvalContext, EvalScore
from prism.providers.base import AIProvider
from prism.runtime import create_agent
from prism.tools.schema import compile_schema, schema_errors
from prism.types import JsonValue, ModelConfig, RunResult, canonical_json

__all__ = ["JUDGE_INSTRUCTIONS", "JUDGE_SCHEMA", "LLMJudge", "llm_judge"]

JUDGE_SCHEMA: Final[dict[str, JsonValue]] = {
    "type": "object",
    "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "pass": {"type": "boolean"},
        "reason": {"type": "string"},
    },
    "required": ["score", "pass", "reason"],
    "additionalProperties": False,
}
"""The judge's answer: a score from 0 to 1, whether the answer passes, and why."""

JUDGE_INSTRUCTIONS: Final = (
    "You grade the answer an AI assistant gave to a task, following the rubric below. "
    "Reply with one JSON object and nothing else: "
    '{"score": a number from 0 to 1, "pass": true or false, "reason": one short sentence}.'
    "\n\nRubric:\n"
)
"""The judge's system instructions; the rubric follows them."""

_MAX_PART_CHARS: Final = 4000


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_PART_CHARS else text[: _MAX_PART_CHARS - 1] + "…"


def judge_prompt(ctx: EvalContext) -> str:
    """The judge's user message: the task, the expected answer, the answer, and the artifact and
    tool calls when there are any."""
    parts = [f"Task given to the assistant:\n{_clip(ctx.case.input_text)}"]
    if ctx.case.expected_output is not None:
        parts.append(f"Expected answer:\n{_clip(ctx.case.expected_output)}")
    parts.append(f"The assistant's answer:\n{_clip(ctx.text) or '(no answer)'}")
    artifact = ctx.result.artifact
    if artifact is not None:
        try:
            shown = canonical_json(artifact)
        except (TypeError, ValueError):
            shown = repr(artifact)
        parts.append(f"The assistant's artifact:\n{_clip(shown)}")
    if ctx.tool_calls:
        calls = "\n".join(
            f"- {call.name}({canonical_json(call.arguments)})" for call in ctx.tool_calls
        )
        parts.append(f"Tools the assistant called:\n{_clip(calls)}")
    return "\n\n".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class LLMJudge:
    """A rubric graded by a model; see [`llm_judge()`][prism.evals._judge.llm_judge]."""

    kind: ClassVar[str] = "judge"
    rubric: str
    provider: AIProvider | None = None
    model: ModelConfig | None = None
    threshold: float | None = None
    max_tokens: int = 256
    name: str = "judge"

    async def evaluate(self, ctx: EvalContext, /) -> EvalScore:
        provider = self.provider if self.provider is not None else ctx.judge_provider
        model = self.model if self.model is not None else ctx.judge_model
        if provider is None:
            return EvalScore.error(
                self.name,
                "the LLM judge has no provider: give llm_judge(provider=...) or "
                "run_eval(judge_provider=...)",
            )
        try:
            agent = create_agent(
                provider=provider,
                model=model,
                name="prism-eval-judge",
                instructions=JUDGE_INSTRUCTIONS + self.rubric,
                max_tokens=self.max_tokens,
            )
        except PrismConfigError as exc:
            return EvalScore.error(self.name, f"the LLM judge cannot be built: {exc}")
        capabilities = agent.config.model.capabilities
        native = capabilities is not None and bool(capabilities.structured_output)
        structured = {"name": "judgement", "schema": JUDGE_SCHEMA} if native else None
        try:
            result = await agent.create_session().run(
                judge_prompt(ctx), structured_output=structured
            )
        except AgentRunError as exc:
            usage = exc.result.usage if isinstance(exc.result, RunResult) else None
            return EvalScore(
                evaluator=self.name,
                outcome="judge_error",
                usage=usage,
                reason=f"the judge's run failed: {exc}",
            )
        except PrismError as exc:
            return EvalScore(
                evaluator=self.name, outcome="judge_error", reason=f"the judge's run failed: {exc}"
            )
        return self._verdict(result)

    def _verdict(self, result: RunResult) -> EvalScore:
        text = result.text.strip()
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        problems = (
            schema_errors(compile_schema(JUDGE_SCHEMA), value)
            if isinstance(value, Mapping)
            else [("", "not a JSON object")]
        )
        if problems or not isinstance(value, Mapping):
            shown = text if len(text) <= 200 else text[:199] + "…"
            listed = "; ".join(f"{p or '/'}: {m}" for p, m in problems[:3])
            return EvalScore(
                evaluator=self.name,
                outcome="judge_error",
                usage=result.usage,
                reason=f"the judge's answer does not parse ({listed}): {shown!r}",
            )
        score = float(value["score"])
        passed = bool(value["pass"]) if self.threshold is None else score >= self.threshold
        return EvalScore(
            evaluator=self.name,
            outcome="pass" if passed else "fail",
            score=score,
            reason=str(value["reason"]),
            usage=result.usage,
        )

    def to_spec(self) -> dict[str, JsonValue]:
        if self.provider is not None or self.model is not None:
            raise PrismConfigError(
                f"evaluator {self.name!r}: a judge with its own provider or model cannot be "
                "saved; save it without them and give run_eval(judge_provider=...) (prism eval "
                "run --judge-model)"
            )
        value: dict[str, JsonValue] = {"rubric": self.rubric}
        if self.threshold is not None:
            value["threshold"] = self.threshold
        if self.max_tokens != 256:
            value["max_tokens"] = self.max_tokens
        out: dict[str, JsonValue] = {self.kind: value}
        if self.name != "judge":
            out["name"] = self.name
        return out

    @classmethod
    def from_spec(cls, value: object, name: str | None) -> LLMJudge:
        if isinstance(value, str):
            return llm_judge(value, name=name)
        if not isinstance(value, Mapping) or not isinstance(value.get("rubric"), str):
            raise PrismConfigError(
                "evaluator judge: expected a rubric, or {rubric, threshold?, max_tokens?}"
            )
        reject_unknown_keys("evaluator judge", value, ("rubric", "threshold", "max_tokens"))
        threshold = value.get("threshold")
        if threshold is not None and (
            isinstance(threshold, bool) or not isinstance(threshold, (int, float))
        ):
            raise PrismConfigError("evaluator judge: threshold must be a number")
        max_tokens = value.get("max_tokens", 256)
        if type(max_tokens) is not int:
            raise PrismConfigError("evaluator judge: max_tokens must be an int")
        return llm_judge(value["rubric"], threshold=threshold, max_tokens=max_tokens, name=name)


def llm_judge(
    rubric: str,
    *,
    provider: AIProvider | None = None,
    model: ModelConfig | None = None,
    threshold: float | None = None,
    max_tokens: int = 256,
    name: str | None = None,
) -> LLMJudge:
    """An evaluator: a model grades the run's answer against ``rubric``.

    The judge is a prism agent of its own on ``provider`` (else ``run_eval(judge_provider=...)``),
    asked for ``{"score": 0..1, "pass": bool, "reason": str}`` ([`JUDGE_SCHEMA`][prism.evals._judge.JUDGE_SCHEMA]) through
    structured output. Its answer becomes a ``"pass"`` or ``"fail"`` score with the judge's score
    and reason, and its usage is kept on the score (``EvalScore.usage``). An answer that does not
    parse as that object, or a failed judge run, is a ``"judge_error"`` score.

    Args:
        rubric: What a good answer does, in words.
        provider: The judge's provider (e.g. ``create_local_provider()`` for smoke runs).
        model: The judge's model; default the provider's default model (or
            ``run_eval(judge_model=...)``).
        threshold: When given, the answer passes when the judge's score is at least this,
            whatever the judge's ``pass``.
        max_tokens: Cap on the judge's reply, in tokens.
        name: Label in reports (default ``"judge"``).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an empty rubric, a threshold outside 0–1 or
            ``max_tokens`` < 1.
    """
    if not isinstance(rubric, str) or not rubric.strip():
        raise PrismConfigError("llm_judge: the rubric must be a non-empty str")
    if threshold is not None and not 0 <= threshold <= 1:
        raise PrismConfigError(f"llm_judge: threshold must be from 0 to 1, got {threshold!r}")
    if type(max_tokens) is not int or max_tokens < 1:
        raise PrismConfigError(f"llm_judge: max_tokens must be an int >= 1, got {max_tokens!r}")
    if provider is not None and not callable(getattr(provider, "generate", None)):
        raise PrismConfigError("llm_judge: provider must have a callable generate(request)")
    return LLMJudge(
        rubric=rubric,
        provider=provider,
        model=model,
        threshold=threshold,
        max_tokens=max_tokens,
        name=name or "judge",
    )
