"""Public signatures name their types (issue 10 point 5): a public function or method of a public
module takes and returns real types; ``object`` where anything is accepted.

``Mapping[str, Any]``/``dict[str, Any]`` stay for snake_case option mappings and JSON metadata
(each mapping is checked at run time by the dataclass it becomes). The remaining bare ``Any`` are
listed below with their reason; a new one fails this test.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re

import prism

ANY = re.compile(r"\bAny\b")
MAPPING_OF_ANY = re.compile(r"(Mapping|dict)\[str, Any\]")

ALLOWED = {
    # The artifact value is the host's own type T; the loop and the helpers do not constrain it.
    "prism.artifact_contracts.ArtifactParseResult.coerce",
    "prism.artifacts.json_schema_artifact",
    "prism.artifacts.pydantic_artifact",
    "prism.generate_validate_revise_loop",
    "prism.loops.gvr.GenerateValidateReviseLoop.__init__",
    "prism.structured_output.json_artifact_parser",
    "prism.structured_output.json_schema_artifact_validator",
    # The guarded value is whatever the stage checks (input messages, a call, a result).
    "prism.guardrails.run_guardrails",
    # Objects of optional SDKs (anthropic, openai, httpx, llama-cpp-python, psycopg_pool),
    # imported only when used, so their types are not importable here.
    "prism.providers.anthropic.AnthropicProvider.__init__",
    "prism.providers.anthropic.create_anthropic_provider",
    "prism.providers.llama_cpp.LocalChatModel.create_chat_completion",
    "prism.providers.openai.create_openai_chat_provider",
    "prism.providers.openai.create_openai_compatible_provider",
    "prism.stores.PostgresStore.__init__",
    # Keyword arguments forwarded to the store the URL selects; their types depend on the URL.
    "prism.stores.open_store",
    # A host tool's function has any signature; its return value is the host's.
    "prism.tool",
    "prism.tools.dispatch_tool_call",
    "prism.tools.execution.run_execute",
    "prism.tools.abort_grace.run_with_grace",
    # A compiled jsonschema validator (optional dependency); opaque to prism.
    "prism.tools.schema.compile_schema",
    "prism.tools.schema.schema_errors",
    # Copies a JSON value of any shape and returns the same shape.
    "prism.checkpoints.clone_json",
    # The seam between the run path and durable runs: the hooks take the run path's agent config,
    # run options and loop context, and return durable run state, whose types live in
    # prism.runtime.durable — which the run path may not import.
    "prism.runtime.run.seam.DurableHooks.preflight",
    "prism.runtime.run.seam.DurableHooks.open_leg",
    "prism.runtime.run.seam.LegHooks.state",
    "prism.runtime.run.seam.LegHooks.restore_loop",
    "prism.runtime.run.seam.LegHooks.replay",
    "prism.runtime.run.seam.LegHooks.write_success",
    "prism.runtime.run.seam.LegHooks.write_failure",
}


def _public_modules() -> list[str]:
    names = ["prism"]
    for info in pkgutil.walk_packages(prism.__path__, "prism."):
        if not any(part.startswith("_") for part in info.name.split(".")[1:]):
            names.append(info.name)
    return names


def _annotated_any() -> dict[str, dict[str, str]]:
    seen: set[int] = set()
    found: dict[str, dict[str, str]] = {}

    def check(qualname: str, fn: object) -> None:
        annotations = getattr(fn, "__annotations__", {})
        bad = {
            k: str(v)
            for k, v in annotations.items()
            if ANY.search(MAPPING_OF_ANY.sub("", str(v)))
        }
        if bad:
            found[qualname] = bad

    for name in _public_modules():
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional dependency is missing
            continue
        for export in getattr(module, "__all__", []):
            obj = getattr(module, export, None)
            if obj is None or id(obj) in seen:
                continue
            seen.add(id(obj))
            if inspect.isfunction(obj):
                check(f"{name}.{export}", obj)
            elif inspect.isclass(obj):
                for attr, value in vars(obj).items():
                    if attr.startswith("_") and attr != "__init__":
                        continue
                    if attr == "__init__" and dataclasses.is_dataclass(obj):
                        continue
                    fn = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
                    fn = fn.fget if isinstance(fn, property) else fn
                    if inspect.isfunction(fn):
                        check(f"{name}.{export}.{attr}", fn)
    return found


def test_public_signatures_have_no_bare_any_beyond_the_listed_reasons() -> None:
    found = _annotated_any()
    unexpected = {k: v for k, v in found.items() if k not in ALLOWED}
    assert not unexpected, f"public signatures with Any: {unexpected}"


def test_the_allow_list_has_no_stale_entries() -> None:
    found = _annotated_any()
    assert sorted(ALLOWED - set(found)) == []
