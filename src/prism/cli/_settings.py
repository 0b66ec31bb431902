"""The settings a ``prism`` agent is built from, and building it.

[`RunSettings`][prism.cli._settings.RunSettings] is what ``prism run`` reads from its command line and stores per session, so
that ``prism run --session ID`` continues with the same model and tools (options given again on
the command line win) and ``prism resume RUN_ID`` rebuilds exactly the agent the run was started
with — a durable run resumes only under an agent with the same fingerprint. API
keys are never part of the settings; they are read from the environment each time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from prism.cli._host_tools import HostToolError, is_host_tool_spec, load_host_tool
from prism.cli._mcp import check_mcp_command, mcp_servers
from prism.cli._models import ModelChoice, ModelSpecError, parse_model_spec
from prism.cli._store import AGENT_ID, DEFINITION_REVISION, load_settings
from prism.cli._tools import BUILTIN_TOOLS, builtin_tool
from prism.errors import PrismConfigError, PrismError
from prism.redaction import SecretRedactor, create_secret_redactor
from prism.stores import DatabaseStore

if TYPE_CHECKING:
    from prism import Agent
    from prism.providers.base import AIProvider
    from prism.types import ToolDefinition

__all__ = [
    "BuiltAgent",
    "RunSettings",
    "UsageError",
    "build_agent",
    "check_model",
    "check_number_options",
    "command_agent",
    "command_agents",
]

_DEFAULT_TOOL_SYSTEM = "You are a helpful assistant. Use the tools when they help."

_SETTINGS_VERSION = 2
"""2: ``tool_rounds`` 0 means "answer at once" and ``False`` "unlimited" (in 1, 0 meant
unlimited; [`RunSettings.from_json()`][prism.cli._settings.RunSettings.from_json] reads it so)."""


class UsageError(Exception):
    """A command-line or configuration problem, reported with exit code 2."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSettings:
    """Everything the command builds an agent from (stored per session as JSON)."""

    model: str = "local"
    """The ``--model`` spec."""
    api_key_env: str | None = None
    """``--api-key-env`` (a variable name, never a key)."""
    max_tokens: int | None = None
    """``--max-tokens``."""
    temperature: float | None = None
    """``--temperature``."""
    tools: tuple[str, ...] = ()
    """Tools enabled with ``--tool``: built-in names and ``MODULE:ATTR`` specs."""
    tool_choice: str = "auto"
    """``--tool-choice``: ``auto``, ``required`` or ``none``."""
    tool_rounds: int | Literal[False] | None = None
    """``--tool-rounds``: tool rounds after which the model is asked for its text answer
    (``None``: 1 for the local model, else unlimited; 0: at once; ``False``: ``unlimited``,
    never forced)."""
    system: str | None = None
    """``--system``."""
    loop: str = "single-shot"
    """``--loop``: ``single-shot`` or ``gvr``."""
    schema: Any = None
    """The JSON Schema read from ``--schema`` (``--loop gvr``)."""
    max_revisions: int = 3
    """``--max-revisions``."""
    max_tool_rounds: int | None = None
    """``--max-tool-rounds``: the run limit on tool rounds (calls beyond it are not run and the
    run ends)."""
    approve_tools: bool = False
    """``--approve-tools``: every tool call waits for an approval."""
    mcp: tuple[str, ...] = ()
    """``--mcp``: MCP server command lines (stdio)."""
    mcp_urls: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    """``--mcp-url`` servers: each URL with its ``(header name, environment variable)`` pairs."""

    def to_json(self) -> dict[str, Any]:
        """The stored form (with a ``version`` key)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["tools"] = list(self.tools)
        data["mcp"] = list(self.mcp)
        data["mcp_urls"] = [[url, [list(h) for h in headers]] for url, headers in self.mcp_urls]
        return {"version": _SETTINGS_VERSION, **data}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> RunSettings:
        """Read the stored form; unknown keys are ignored, missing ones take their defaults.

        Raises:
            UsageError: the stored settings are not readable.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        data = {k: v for k, v in value.items() if k in names}
        if "tools" in data:
            data["tools"] = tuple(data["tools"] or ())
        if "mcp" in data:
            data["mcp"] = tuple(data["mcp"] or ())
        if "mcp_urls" in data:
            data["mcp_urls"] = _url_specs(data["mcp_urls"])
        rounds = data.get("tool_rounds")
        if value.get("version", 1) == 1 and type(rounds) is int and rounds == 0:
            data["tool_rounds"] = False  # version 1 stored "unlimited" as 0
        try:
            return cls(**data)
        except TypeError as exc:
            raise UsageError(f"unreadable stored settings: {exc}") from None

    @classmethod
    def from_args(
        cls,
        args: argparse.Namespace,
        environ: Mapping[str, str],
        base: RunSettings | None = None,
    ) -> RunSettings:
        """Settings from the command line over ``base`` (a session's stored settings).

        An option given on the command line wins; otherwise ``base`` supplies it; otherwise the
        default applies (``--model``: ``$PRISM_MODEL``, else ``local``).

        Raises:
            UsageError: an out-of-range number ([`check_number_options()`][prism.cli._settings.check_number_options]), ``--schema`` or
                ``--max-revisions`` without ``--loop gvr``, ``--loop gvr`` without a schema, an
                unreadable schema file, ``--api-key-env`` with a model that is not
                ``openai-compatible``, an unknown tool name or a ``--tool MODULE:ATTR`` that
                cannot be loaded.
        """
        check_number_options(args)
        start = base if base is not None else cls(model=environ.get("PRISM_MODEL") or "local")
        changes: dict[str, Any] = {}
        for name in (
            "model",
            "api_key_env",
            "max_tokens",
            "temperature",
            "tool_choice",
            "tool_rounds",
            "system",
            "loop",
            "max_revisions",
            "max_tool_rounds",
            "approve_tools",
        ):
            value = getattr(args, name, None)
            if value is not None:
                changes[name] = value
        if getattr(args, "tool", None):
            names: list[str] = []
            for name in args.tool:
                if name not in names:
                    names.append(name)
            changes["tools"] = tuple(names)
        if getattr(args, "mcp", None):
            for command in args.mcp:
                try:
                    check_mcp_command(command)
                except ValueError as exc:
                    raise UsageError(str(exc)) from None
            changes["mcp"] = tuple(args.mcp)
        if getattr(args, "mcp_url", None):
            changes["mcp_urls"] = _url_specs(args.mcp_url)
        schema_path = getattr(args, "schema", None)
        if schema_path is not None:
            try:
                with open(schema_path, encoding="utf-8") as handle:
                    changes["schema"] = json.load(handle)
            except (OSError, ValueError) as exc:
                raise UsageError(f"cannot read --schema {schema_path}: {exc}") from None
        settings = dataclasses.replace(start, **changes)
        if settings.loop == "gvr" and settings.schema is None:
            raise UsageError("--loop gvr needs --schema FILE.json")
        if settings.loop != "gvr" and schema_path is not None:
            raise UsageError("--schema needs --loop gvr")
        if settings.loop != "gvr" and getattr(args, "max_revisions", None) is not None:
            raise UsageError("--max-revisions needs --loop gvr")
        if settings.api_key_env is not None and _scheme(settings.model) != "openai-compatible":
            if getattr(args, "api_key_env", None) is not None:
                raise UsageError(
                    "--api-key-env applies to openai-compatible:MODEL@BASE_URL models only "
                    f"(--model is {settings.model})"
                )
            # inherited from the session, whose model the command line replaced
            settings = dataclasses.replace(settings, api_key_env=None)
        for name in settings.tools:
            _tool(name)  # a tool that cannot be loaded is reported before anything is stored
        for _, headers in settings.mcp_urls:
            for header, variable in headers:
                if not environ.get(variable):
                    raise UsageError(
                        f"--mcp-header {header}={variable}: environment variable {variable} "
                        "is not set"
                    )
        return settings


def _url_specs(value: Any) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """``--mcp-url`` specs as tuples (from the parsed options or the stored JSON)."""
    try:
        return tuple(
            (str(url), tuple((str(name), str(var)) for name, var in headers))
            for url, headers in value or ()
        )
    except (TypeError, ValueError):
        raise UsageError(f"unreadable MCP server settings: {value!r}") from None


def _tool(name: str) -> ToolDefinition:
    """The tool ``--tool name`` enables: a built-in one, or the host's ``MODULE:ATTR``.

    Raises:
        UsageError: an unknown built-in name, or a host tool that cannot be loaded.
    """
    if is_host_tool_spec(name):
        try:
            return load_host_tool(name)
        except HostToolError as exc:
            raise UsageError(str(exc)) from None
    if name not in BUILTIN_TOOLS:
        raise UsageError(
            f"unknown tool {name!r} (built-in tools: {', '.join(sorted(BUILTIN_TOOLS))}; "
            "or MODULE:ATTR for your own)"
        )
    return builtin_tool(name)


def _scheme(model: str) -> str:
    return model.partition(":")[0].strip().lower()


_AT_LEAST: dict[str, tuple[int, str]] = {
    "max_tokens": (1, "--max-tokens must be at least 1"),
    "max_revisions": (0, "--max-revisions must be 0 or more"),
    "max_tool_rounds": (1, "--max-tool-rounds must be at least 1"),
    "max_turns": (1, "--max-turns must be at least 1"),
}


def check_number_options(args: argparse.Namespace) -> None:
    """Reject numeric options out of range before anything is opened or stored.

    Raises:
        UsageError: ``--max-tokens``, ``--max-tool-rounds`` or ``--max-turns`` below 1,
            ``--max-revisions`` below 0, a ``--temperature`` that is not a
            finite number ≥ 0.
    """
    for name, (minimum, message) in _AT_LEAST.items():
        value = getattr(args, name, None)
        if value is not None and value < minimum:
            raise UsageError(f"{message}, got {value}")
    temperature = getattr(args, "temperature", None)
    if temperature is not None and not (math.isfinite(temperature) and temperature >= 0):
        raise UsageError(f"--temperature must be a finite number >= 0, got {temperature}")


def check_model(settings: RunSettings, environ: Mapping[str, str]) -> ModelChoice:
    """Parse the settings' model spec (key present, ``local:PATH`` a GGUF file) without building
    anything.

    Raises:
        UsageError: the spec cannot be used (the message says why).
    """
    try:
        return parse_model_spec(
            settings.model,
            parameters=_parameters(settings),
            api_key_env=settings.api_key_env,
            environ=environ,
        )
    except ModelSpecError as exc:
        raise UsageError(str(exc)) from None


def _parameters(settings: RunSettings) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if settings.max_tokens is not None:
        params["max_tokens"] = settings.max_tokens
    if settings.temperature is not None:
        params["temperature"] = settings.temperature
    return params


@dataclass(frozen=True, slots=True)
class BuiltAgent:
    """An agent built from [`RunSettings`][prism.cli._settings.RunSettings]."""

    agent: Agent
    """The ``Agent`` (durable: every-turn checkpoints in the store, its run ledger there
    too)."""
    redactor: SecretRedactor
    """Redacts the API keys read for the model."""
    choice: ModelChoice
    """The parsed model spec."""


def build_agent(
    settings: RunSettings,
    store: DatabaseStore,
    *,
    environ: Mapping[str, str],
    provider_override: Callable[[], AIProvider] | None = None,
) -> BuiltAgent:
    """Build the durable agent ``settings`` describe, over ``store`` (sessions, checkpoints and
    the run ledger, so an inspector shows each run's timeline).

    The same settings give the same agent fingerprint, which is what lets another
    process resume the agent's runs.

    Raises:
        UsageError: a bad model spec, a missing key or extra, a bad schema, an agent option the
            runtime refuses (``PrismConfigError``).
    """
    choice = check_model(settings, environ)
    tools: list[Any] = [_tool(name) for name in settings.tools]
    secrets: list[str] = []
    if settings.mcp or settings.mcp_urls:
        try:
            servers, secrets = mcp_servers(settings.mcp, settings.mcp_urls, environ)
        except (ValueError, PrismError) as exc:
            raise UsageError(str(exc)) from None
        tools.extend(servers)
    redactor = create_secret_redactor([*choice.secrets, *secrets])
    loop = _loop(settings)
    system = settings.system
    if system is None and tools:
        # chat formats of small local models describe tools inside the system message only
        system = _DEFAULT_TOOL_SYSTEM
    instructions = system
    if provider_override is not None:
        provider = provider_override()
    else:
        try:
            provider = choice.make_provider()
        except (ImportError, PrismError) as exc:
            raise UsageError(redactor.redact(str(exc))) from None
    # --tool-rounds is the public answer_after_tool_rounds option (0: answer at once; False,
    # "unlimited": never force the answer); unset, the provider's default applies (the
    # embedded model: one round, then the answer)
    answer_after = settings.tool_rounds
    # --tool-choice is the public tool_choice option: a forced choice holds until the run's first
    # tool round; one required tool is named, the form every OpenAI-compatible server accepts
    tool_choice: Any = None
    if tools and settings.tool_choice != "auto":
        tool_choice = settings.tool_choice
        if tool_choice == "required" and len(tools) == 1:
            tool_choice = {"name": tools[0].name}
    limits = None
    if settings.max_tool_rounds is not None:
        from prism.limits import RunLimits

        limits = RunLimits(max_tool_rounds=settings.max_tool_rounds)
    from prism.runtime.agents.agent import create_agent
    from prism.runtime.durable import RunStateOptions

    try:
        agent = create_agent(
            id=AGENT_ID,
            model=choice.model,
            provider=provider,
            tools=tools or None,
            instructions=instructions,
            redactor=redactor,
            loop=loop,
            limits=limits,
            tool_choice=tool_choice,
            answer_after_tool_rounds=answer_after,
            store=store,
            run_ledger=store,
            run_state=RunStateOptions(
                store,
                DEFINITION_REVISION,
                checkpoint_policy="every-turn",
                interrupt_before_tool=settings.approve_tools,
            ),
        )
    except PrismError as exc:
        raise UsageError(redactor.redact(str(exc))) from None
    return BuiltAgent(agent, redactor, choice)


def _loop(settings: RunSettings) -> Any:
    """The ``--loop gvr`` strategy: the runtime shows the model the schema (natively where the
    model supports it — a grammar on the embedded model — else in the instructions)."""
    if settings.loop != "gvr":
        return None
    from prism.artifacts import json_schema_artifact
    from prism.loops.gvr import generate_validate_revise_loop

    try:
        callbacks = json_schema_artifact(settings.schema)
        return generate_validate_revise_loop(**callbacks, max_revisions=settings.max_revisions)
    except PrismError as exc:
        raise UsageError(str(exc)) from None


async def command_agent(
    store: DatabaseStore,
    session_id: str,
    *,
    environ: Mapping[str, str],
    provider_override: Callable[[], AIProvider] | None = None,
) -> BuiltAgent | None:
    """The agent ``prism resume`` rebuilds for the runs of session ``session_id``: the one its
    stored settings describe, over ``store`` (same settings, same fingerprint, so the stored
    runs resume under it); ``None`` when the session has no stored settings (its runs were not
    started by the ``prism`` command).

    Raises:
        UsageError: unreadable stored settings, or settings that cannot build an agent here (a
            missing API key in ``environ``, an extra that is not installed, a host tool that
            does not import).
    """
    stored = await load_settings(store, session_id)
    if stored is None:
        return None
    return build_agent(
        RunSettings.from_json(stored), store, environ=environ, provider_override=provider_override
    )


def command_agents(
    store: DatabaseStore,
    *,
    environ: Mapping[str, str],
    provider_override: Callable[[], AIProvider] | None = None,
) -> Callable[[str], Awaitable[Agent | None]]:
    """[`command_agent()`][prism.cli._settings.command_agent] as a function of the session id, for a host that resumes the
    command's runs itself (``prism serve``): it returns the ``Agent``, or ``None`` for a
    session the command did not start, and raises ``PrismConfigError`` (``ERR_PRISM_CONFIG``,
    the message says why) where [`command_agent()`][prism.cli._settings.command_agent] raises ``UsageError``."""

    async def agent_of(session_id: str) -> Agent | None:
        try:
            built = await command_agent(
                store, session_id, environ=environ, provider_override=provider_override
            )
        except UsageError as exc:
            raise PrismConfigError(str(exc)) from None
        return None if built is None else built.agent

    return agent_of
