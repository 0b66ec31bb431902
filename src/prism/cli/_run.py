"""``prism run PROMPT``: build an agent from the command line and stream one run."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from typing import IO, Any

from prism.cli._models import ModelChoice, ModelSpecError, parse_model_spec
from prism.cli._render import JsonRenderer, LiveRenderer, PlainRenderer, Renderer
from prism.cli._tools import builtin_tool
from prism.errors import AgentRunError, PrismError
from prism.redaction import SecretRedactor, create_secret_redactor

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "RunCommand",
    "UsageError",
    "tool_choice_policy",
]

EXIT_OK = 0
"""The run succeeded."""
EXIT_FAILED = 1
"""The run failed or was aborted."""
EXIT_USAGE = 2
"""Invalid command line or configuration (bad ``--model``, missing key or extra, bad schema)."""

_DEFAULT_TOOL_SYSTEM = "You are a helpful assistant. Use the tools when they help."

_GVR_INSTRUCTIONS = (
    "Answer with only a JSON value (no prose, no code fence) that validates against this "
    "JSON Schema:\n{schema}"
)


def _tool_choice_value(provider: str, choice: str, tool_names: list[str]) -> Any:
    """``auto``/``required``/``none`` in the wire form of the model's provider.

    ``required`` with a single tool names that tool, the form every server understands
    (llama-cpp-python's server rejects the string ``"required"``).
    """
    only = tool_names[0] if choice == "required" and len(tool_names) == 1 else None
    if provider == "anthropic":
        if only is not None:
            return {"type": "tool", "name": only}
        return {"type": {"required": "any"}.get(choice, choice)}
    if only is not None:
        return {"type": "function", "function": {"name": only}}
    return choice


def tool_choice_policy(
    provider: str, *, first: str, rounds_before_answer: int | None
) -> Callable[[Any], Any]:
    """Provider-request policy that sets ``tool_choice`` per turn (RUN-14 step 2).

    Turns that answer the user's latest message directly get ``first``; once
    ``rounds_before_answer`` tool rounds have been answered since that message, later turns get
    ``none``, so the model has to answer in text. ``None`` never forces the answer.

    Args:
        provider: ``ModelConfig.provider`` (the wire form differs for Anthropic).
        first: ``auto``, ``required`` or ``none``.
        rounds_before_answer: Tool rounds allowed before the text answer, or ``None``.
    """
    from prism.runtime.provider_turn import ProviderRequestPolicyResult
    from prism.types import ProviderRequestOptions

    def policy(ctx: Any) -> Any:
        request = ctx.request
        if not request.tools:
            return None
        rounds = 0
        for message in reversed(request.messages):
            if message.role == "user":
                break
            if message.role == "assistant" and any(
                part.type == "tool_call" for part in message.content
            ):
                rounds += 1
        choice = first
        if rounds and rounds_before_answer is not None and rounds >= rounds_before_answer:
            choice = "none"
        elif rounds:
            choice = "auto"
        if choice == "auto" and first == "auto":
            return None
        value = _tool_choice_value(provider, choice, [tool.name for tool in request.tools])
        return ProviderRequestPolicyResult(
            options=ProviderRequestOptions(extra={"tool_choice": value})
        )

    return policy


class UsageError(Exception):
    """A command-line or configuration problem, reported with exit code 2."""


class RunCommand:
    """One ``prism run`` invocation.

    Args:
        args: Parsed arguments (see ``prism.cli.build_parser``).
        out: Standard output.
        err: Standard error.
        live: Use the live terminal view (otherwise plain text); ignored with ``--json``.
        environ: Environment for API keys and ``PRISM_MODEL``.
        provider_override: Test seam: a callable returning the provider to use instead of the
            one the model spec builds.
    """

    def __init__(
        self,
        args: argparse.Namespace,
        *,
        out: IO[str],
        err: IO[str],
        live: bool,
        environ: dict[str, str] | None = None,
        provider_override: Callable[[], Any] | None = None,
    ) -> None:
        self.args = args
        self.out = out
        self.err = err
        self.live = live
        self.environ = dict(os.environ if environ is None else environ)
        self.provider_override = provider_override
        self.redactor: SecretRedactor = create_secret_redactor([])

    # ------------------------------------------------------------------ setup

    def _parameters(self) -> dict[str, Any]:
        params: dict[str, Any] = {}
        if self.args.max_tokens is not None:
            params["max_tokens"] = self.args.max_tokens
        if self.args.temperature is not None:
            params["temperature"] = self.args.temperature
        return params

    def _model(self) -> ModelChoice:
        spec = self.args.model or self.environ.get("PRISM_MODEL") or "local"
        try:
            return parse_model_spec(
                spec,
                parameters=self._parameters(),
                api_key_env=self.args.api_key_env,
                environ=self.environ,
            )
        except ModelSpecError as exc:
            raise UsageError(str(exc)) from None

    def _tools(self) -> list[Any]:
        names: list[str] = []
        for name in self.args.tool or ():
            if name not in names:
                names.append(name)
        try:
            return [builtin_tool(name) for name in names]
        except KeyError as exc:
            raise UsageError(str(exc.args[0])) from None

    def _loop(self, choice: ModelChoice) -> tuple[Any, str | None]:
        if self.args.loop != "gvr":
            if self.args.schema is not None:
                raise UsageError("--schema needs --loop gvr")
            return None, None
        if self.args.schema is None:
            raise UsageError("--loop gvr needs --schema FILE.json")
        try:
            with open(self.args.schema, encoding="utf-8") as handle:
                schema = json.load(handle)
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read --schema {self.args.schema}: {exc}") from None
        from prism.artifacts import json_schema_artifact
        from prism.loops.gvr import generate_validate_revise_loop

        try:
            callbacks = json_schema_artifact(
                schema,
                structured_output_name="artifact" if choice.native_structured_output else None,
            )
            loop = generate_validate_revise_loop(
                **callbacks, max_revisions=self.args.max_revisions
            )
        except PrismError as exc:
            raise UsageError(str(exc)) from None
        return loop, _GVR_INSTRUCTIONS.format(schema=json.dumps(schema, ensure_ascii=False))

    def _provider(self, choice: ModelChoice) -> Any:
        if self.provider_override is not None:
            return self.provider_override()
        try:
            return choice.make_provider()
        except (ImportError, PrismError) as exc:
            raise UsageError(self._redact(str(exc))) from None

    def _redact(self, text: str) -> str:
        redacted: str = self.redactor.redact(text)
        return redacted

    def _renderer(self) -> Renderer:
        if self.args.json:
            return JsonRenderer(self.out, self.err)
        if self.live:
            try:
                return LiveRenderer()
            except ImportError as exc:
                raise UsageError(str(exc)) from None
        return PlainRenderer(self.out, self.err)

    def _agent(self) -> tuple[Any, Renderer]:
        from prism.limits import RunLimits
        from prism.runtime.agent import create_agent

        choice = self._model()
        self.redactor = create_secret_redactor(choice.secrets)
        tools = self._tools()
        loop, loop_instructions = self._loop(choice)
        system = self.args.system
        if system is None and tools:
            # chat formats of small local models describe tools inside the system message only
            system = _DEFAULT_TOOL_SYSTEM
        instructions = "\n\n".join(text for text in (system, loop_instructions) if text) or None
        provider = self._provider(choice)
        renderer = self._renderer()
        limits = RunLimits(max_turns=self.args.max_turns, max_tool_rounds=self.args.max_tool_rounds)
        rounds = self.args.tool_rounds
        if rounds is None and choice.model.provider == "local":
            rounds = 1  # a 135M-parameter model cannot tell when to stop calling tools
        policies = []
        if tools and (rounds is not None or self.args.tool_choice != "auto"):
            policies.append(
                tool_choice_policy(
                    choice.model.provider,
                    first=self.args.tool_choice,
                    rounds_before_answer=rounds if rounds and rounds > 0 else None,
                )
            )
        agent = create_agent(
            model=choice.model,
            provider=provider,
            tools=tools or None,
            instructions=instructions,
            redactor=self.redactor,
            loop=loop,
            limits=limits,
            provider_request_policies=policies or None,
        )
        return agent, renderer

    # ------------------------------------------------------------------ run

    async def run(self) -> int:
        """Run the command; returns the process exit code (0, 1 or 2)."""
        try:
            agent, renderer = self._agent()
        except UsageError as exc:
            self.err.write(f"prism: {exc}\n")
            return EXIT_USAGE
        session = agent.create_session()
        with renderer:
            try:
                stream = session.stream(self.args.prompt)
                async with stream as events:
                    async for event in events:
                        renderer.event(event)
            except AgentRunError as exc:
                renderer.failed(self._redact(str(exc)))
                return EXIT_FAILED
            except PrismError as exc:
                renderer.failed(self._redact(str(exc)))
                return EXIT_USAGE if getattr(exc, "code", "") == "ERR_PRISM_CONFIG" else EXIT_FAILED
            result = stream.result
            usage = result.usage if result is not None else renderer.stats.usage
            artifact = result.artifact if result is not None else None
            renderer.succeeded(usage, artifact)
        return EXIT_OK
