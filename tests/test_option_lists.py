"""Each option list has one definition (issue 10 point 5): the typed keyword mirror of
``RunOptions`` and the parameters of ``create_agent`` repeat their dataclass exactly, names and
types, so a new option cannot be added to one list and forgotten in the other."""

from __future__ import annotations

import dataclasses
import inspect
from typing import ForwardRef

from prism.runtime.agent import create_agent
from prism.runtime.config import AgentConfig
from prism.runtime.options import RUN_OPTION_NAMES, RunOptionKeywords, RunOptions


def _text(annotation: object) -> str:
    return annotation.__forward_arg__ if isinstance(annotation, ForwardRef) else str(annotation)


def test_run_option_keywords_mirror_run_options() -> None:
    fields = {f.name: str(f.type) for f in dataclasses.fields(RunOptions)}
    keywords = {k: _text(v) for k, v in RunOptionKeywords.__annotations__.items()}
    assert keywords == fields
    assert set(fields) == RUN_OPTION_NAMES


def test_create_agent_parameters_mirror_agent_config() -> None:
    fields = {f.name: str(f.type) for f in dataclasses.fields(AgentConfig)}
    params = {
        name: str(p.annotation)
        for name, p in inspect.signature(create_agent).parameters.items()
    }
    for name in DERIVED:
        del fields[name]
    assert list(params) == list(fields)
    differing = {n: (params[n], fields[n]) for n in fields if params[n] != fields[n]}
    # the config stores what create_agent was given, except where it normalises the value
    assert set(differing) <= NORMALISED, differing


DERIVED = {
    "tool_sources",  # the ToolSource items of ``tools``, kept apart from its definitions
    "run_defaults",  # resolved from the other fields on the first run, not an option
}

NORMALISED = {
    "model",  # a mapping becomes ModelConfig
    "tools",  # a sequence becomes a ToolRegistry
    "tool_filter",  # a single filter becomes a tuple
    "system_prompt",
    "context",
    "skills",
    "provider_request_policies",
    "metadata",
    "limits",
    "retry",
    "compaction",
    "guardrails",
    "provider_options",
    "ownership",
    "run_state",  # typed as object on the config: the durable types sit above it
}
