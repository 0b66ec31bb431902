"""Datasets in files: YAML (the ``evals`` extra, PyYAML), JSONL and JSON, read and written.

A YAML or JSON dataset is one object (or a list of cases)::

    name: refunds
    description: Refund questions the support agent must get right
    evaluators:                       # added to every case
      - max_turns: 4
      - no_denied_or_ambiguous_calls
    cases:
      - name: refund-status
        input: Check the refund for order 17.
        expected_output: Refund 4417 is approved.
        expected_tools: {mode: in_order, calls: [{name: refund_status, arguments: {order: "17"}}]}
        evaluators:
          - contains: approved
          - judge: {rubric: "The answer says the refund is approved.", threshold: 0.5}

A JSONL dataset is one case per line; an optional line ``{"dataset": {"name", "description",
"metadata", "evaluators"}}`` holds the rest. A case's ``input`` is text or a list of messages
(``{"role", "content"}``, the content text or a list of content parts). An evaluator is a one-key
object ``{KIND: VALUE}`` (plus an optional ``"name"``), or just ``KIND`` where it needs no value;
the kinds are [`EVALUATOR_KINDS`][prism.evals._files.EVALUATOR_KINDS].
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

from prism._keys import reject_unknown_keys
from prism.errors import PrismConfigError
from prism.evals._evaluators import (
    ArtifactEquals,
    Contains,
    ExactMatch,
    JsonSchemaCheck,
    LimitCheck,
    NoDeniedOrAmbiguousCalls,
    PydanticCheck,
    PythonCheck,
    RegexMatch,
)
from prism.evals._judge import LLMJudge
from prism.evals._model import Case, Dataset, Evaluator
from prism.evals._trajectory import (
    ToolTrajectory,
    expected_tools_from_json,
    expected_tools_to_json,
)
from prism.types import JsonValue, Message, TextContent, is_json_value

__all__ = [
    "CASE_KEYS",
    "EVALUATOR_KINDS",
    "case_from_dict",
    "case_to_dict",
    "dataset_from_dict",
    "dataset_to_dict",
    "evaluator_from_spec",
    "evaluator_to_spec",
    "load_dataset",
    "save_dataset",
]

_Reader = Callable[[object, "str | None"], Evaluator]


def _limit(kind: str) -> _Reader:
    return lambda value, name: LimitCheck.from_spec(kind, value, name)


_READERS: Final[Mapping[str, _Reader]] = {
    "exact": ExactMatch.from_spec,
    "contains": Contains.from_spec,
    "regex": RegexMatch.from_spec,
    "json_schema": JsonSchemaCheck.from_spec,
    "pydantic": PydanticCheck.from_spec,
    "artifact_equals": ArtifactEquals.from_spec,
    "tool_trajectory": ToolTrajectory.from_spec,
    "max_cost": _limit("max_cost"),
    "max_tokens": _limit("max_tokens"),
    "max_turns": _limit("max_turns"),
    "max_latency_s": _limit("max_latency_s"),
    "no_denied_or_ambiguous_calls": NoDeniedOrAmbiguousCalls.from_spec,
    "python": PythonCheck.from_spec,
    "judge": LLMJudge.from_spec,
}

EVALUATOR_KINDS: Final = tuple(_READERS)
"""The evaluator kinds a dataset file may name."""

CASE_KEYS: Final = (
    "name",
    "input",
    "expected_output",
    "expected_artifact",
    "expected_tools",
    "expected_status",
    "metadata",
    "evaluators",
    "cassette",
)
"""The keys of a case in a dataset file."""

_DATASET_KEYS: Final = ("name", "description", "metadata", "evaluators", "cases")


def evaluator_from_spec(spec: object) -> Evaluator:
    """The evaluator a file names: ``{KIND: VALUE, "name"?: LABEL}`` or ``"KIND"``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown kind (the message lists the kinds),
            more than one kind, or a value the kind does not accept.
    """
    if isinstance(spec, str):
        spec = {spec: None}
    if not isinstance(spec, Mapping):
        raise PrismConfigError(f"an evaluator is {{KIND: VALUE}} or KIND, got {spec!r}")
    name = spec.get("name")
    if name is not None and not isinstance(name, str):
        raise PrismConfigError(f"an evaluator's name must be a str, got {name!r}")
    kinds = [key for key in spec if key != "name"]
    if len(kinds) != 1 or kinds[0] not in _READERS:
        raise PrismConfigError(
            f"an evaluator names one kind of {', '.join(EVALUATOR_KINDS)}; got "
            f"{', '.join(map(str, kinds)) or 'none'}"
        )
    return _READERS[kinds[0]](spec[kinds[0]], name)


def evaluator_to_spec(evaluator: Evaluator) -> dict[str, JsonValue]:
    """The file form of a built-in evaluator (its ``to_spec()``).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an evaluator without ``to_spec`` (one written in
            Python), or one holding what a file cannot (a Python function, a provider).
    """
    to_spec = getattr(evaluator, "to_spec", None)
    if not callable(to_spec):
        raise PrismConfigError(
            f"evaluator {evaluator.name!r} ({type(evaluator).__name__}) cannot be saved: it has "
            "no to_spec(); give it as python_evaluator('module:function') to keep it in a file"
        )
    spec: object = to_spec()
    if not is_json_value(spec) or not isinstance(spec, dict):
        raise PrismConfigError(f"evaluator {evaluator.name!r}: to_spec() must return a JSON object")
    return spec


def _evaluators(value: object, label: str) -> list[Evaluator]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise PrismConfigError(f"{label}: evaluators must be a list")
    out = []
    for index, spec in enumerate(value):
        try:
            out.append(evaluator_from_spec(spec))
        except PrismConfigError as exc:
            raise PrismConfigError(f"{label}, evaluator {index + 1}: {exc}") from None
    return out


def _message(value: object, label: str) -> Message:
    if not isinstance(value, Mapping):
        raise PrismConfigError(f"{label}: a message is {{role, content}}, got {value!r}")
    content = value.get("content")
    try:
        if not isinstance(content, str):
            return Message.from_dict(value)
        reject_unknown_keys("message", value, ("role", "content", "id", "metadata"))
        role, message_id, metadata = value.get("role"), value.get("id"), value.get("metadata")
        return Message(role, content, message_id, metadata)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise PrismConfigError(f"{label}: invalid message: {exc}") from None


def case_from_dict(data: object) -> Case:
    """A case from its file form (keys [`CASE_KEYS`][prism.evals._files.CASE_KEYS]).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown key, or a value the case rejects
            (the message names the case).
    """
    if not isinstance(data, Mapping):
        raise PrismConfigError(f"a case is an object, got {type(data).__name__}")
    label = f"case {data.get('name')!r}"
    reject_unknown_keys(label, data, CASE_KEYS)
    raw_input = data.get("input")
    run_input: object = raw_input
    if isinstance(raw_input, list):
        run_input = [_message(m, label) for m in raw_input]
    elif not isinstance(raw_input, str):
        raise PrismConfigError(f"{label}: input must be text or a list of messages")
    expected_tools = data.get("expected_tools")
    artifact = data.get("expected_artifact")
    if not is_json_value(artifact):
        raise PrismConfigError(f"{label}: expected_artifact must be JSON")
    cassette = data.get("cassette")
    return Case(
        name=data.get("name"),  # type: ignore[arg-type]
        input=run_input,  # type: ignore[arg-type]
        expected_output=data.get("expected_output"),
        expected_artifact=artifact,
        expected_tools=None
        if expected_tools is None
        else expected_tools_from_json(expected_tools, f"{label}: expected_tools"),
        expected_status=data.get("expected_status", "succeeded"),
        metadata=data.get("metadata"),
        evaluators=_evaluators(data.get("evaluators"), label),
        cassette=cassette,
    )


def _message_to_json(message: Message) -> dict[str, JsonValue]:
    if (
        len(message.content) == 1
        and isinstance(message.content[0], TextContent)
        and message.id is None
        and message.metadata is None
    ):
        return {"role": message.role, "content": message.content[0].text}
    out: dict[str, JsonValue] = message.to_dict()
    return out


def case_to_dict(case: Case) -> dict[str, JsonValue]:
    """The file form of a case; keys with default values are left out.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an evaluator or expected argument a file
            cannot hold.
    """
    out: dict[str, JsonValue] = {"name": case.name}
    out["input"] = (
        case.input if isinstance(case.input, str) else [_message_to_json(m) for m in case.input]
    )
    if case.expected_output is not None:
        out["expected_output"] = case.expected_output
    if case.expected_artifact is not None:
        out["expected_artifact"] = case.expected_artifact
    if case.expected_tools is not None:
        out["expected_tools"] = expected_tools_to_json(case.expected_tools)
    if case.expected_status != "succeeded":
        out["expected_status"] = case.expected_status
    if case.metadata:
        out["metadata"] = dict(case.metadata)
    if case.evaluators:
        out["evaluators"] = [evaluator_to_spec(e) for e in case.evaluators]
    if case.cassette is not None:
        out["cassette"] = dict(case.cassette)
    return out


def dataset_from_dict(data: object, *, name: str | None = None) -> Dataset:
    """A dataset from its file form: ``{"name", "description", "metadata", "evaluators",
    "cases"}``, or a list of cases (named ``name``).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown key or an invalid case or evaluator.
    """
    if isinstance(data, list):
        data = {"cases": data}
    if not isinstance(data, Mapping):
        raise PrismConfigError(
            f"a dataset is an object or a list of cases, got {type(data).__name__}"
        )
    reject_unknown_keys("dataset", data, _DATASET_KEYS)
    cases = data.get("cases")
    if not isinstance(cases, list):
        raise PrismConfigError("dataset: cases must be a list")
    label = str(data.get("name") or name or "dataset")
    return Dataset(
        name=label,
        description=data.get("description"),
        metadata=data.get("metadata"),
        evaluators=_evaluators(data.get("evaluators"), f"dataset {label!r}"),
        cases=[case_from_dict(case) for case in cases],
    )


def dataset_to_dict(dataset: Dataset) -> dict[str, JsonValue]:
    """The file form of a dataset.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an evaluator or expectation a file cannot hold.
    """
    out: dict[str, JsonValue] = {"name": dataset.name}
    if dataset.description is not None:
        out["description"] = dataset.description
    if dataset.metadata:
        out["metadata"] = dict(dataset.metadata)
    if dataset.evaluators:
        out["evaluators"] = [evaluator_to_spec(e) for e in dataset.evaluators]
    out["cases"] = [case_to_dict(case) for case in dataset.cases]
    return out


def _yaml() -> object:
    try:
        import yaml
    except ImportError:
        raise ImportError(
            "YAML datasets need PyYAML: pip install 'prism-runtime[evals]' (JSONL needs nothing)"
        ) from None
    return yaml


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return "yaml"
    if suffix in (".jsonl", ".json"):
        return suffix[1:]
    raise PrismConfigError(f"dataset {path}: expected a .yaml, .yml, .jsonl or .json file")


def _jsonl(text: str, path: Path) -> Dataset:
    header: dict[str, object] = {}
    cases: list[object] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise PrismConfigError(f"dataset {path}, line {number}: not JSON: {exc}") from None
        if isinstance(item, dict) and list(item) == ["dataset"]:
            if header or not isinstance(item["dataset"], dict):
                raise PrismConfigError(f"dataset {path}, line {number}: one dataset object only")
            header = item["dataset"]
            if "cases" in header:
                raise PrismConfigError(f"dataset {path}, line {number}: cases go one per line")
            continue
        cases.append(item)
    return dataset_from_dict({**header, "cases": cases}, name=path.stem)


def load_dataset(path: str | Path) -> Dataset:
    """Read a dataset file: ``.yaml``/``.yml`` (needs the ``evals`` extra), ``.jsonl`` or
    ``.json``. A dataset without a name is named after the file.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown suffix, unparsable text, or an invalid
            case or evaluator (the message names the file).
        OSError: the file cannot be read.
        ImportError: a YAML file without PyYAML installed.
        OSError: the file or its directory cannot be written.
    """
    path = Path(path)
    kind = _format(path)
    text = path.read_text(encoding="utf-8")
    try:
        if kind == "jsonl":
            return _jsonl(text, path)
        if kind == "json":
            data = json.loads(text)
        else:
            yaml = _yaml()
            data = yaml.safe_load(text)  # type: ignore[attr-defined]
    except PrismConfigError:
        raise
    except ValueError as exc:  # json.JSONDecodeError, yaml.YAMLError is not one
        raise PrismConfigError(f"dataset {path}: not valid {kind.upper()}: {exc}") from None
    except Exception as exc:
        if type(exc).__module__.startswith("yaml"):
            raise PrismConfigError(f"dataset {path}: not valid YAML: {exc}") from None
        raise
    try:
        return dataset_from_dict(data, name=path.stem)
    except PrismConfigError as exc:
        raise PrismConfigError(f"dataset {path}: {exc}") from None


def save_dataset(dataset: Dataset, path: str | Path) -> None:
    """Write ``dataset`` to ``path`` as YAML, JSONL (a ``{"dataset": …}`` line, then one case per
    line) or JSON, by its suffix; missing parent directories are created.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown suffix, or an evaluator or expectation
            a file cannot hold (a Python function, a judge with its own provider).
        ImportError: a YAML file without PyYAML installed.
        OSError: the file or its directory cannot be written.
    """
    path = Path(path)
    kind = _format(path)
    data = dataset_to_dict(dataset)
    if kind == "jsonl":
        cases = data.pop("cases")
        assert isinstance(cases, Sequence)
        lines = [json.dumps({"dataset": data}, ensure_ascii=False)]
        lines.extend(json.dumps(case, ensure_ascii=False) for case in cases)
        text = "\n".join(lines) + "\n"
    elif kind == "json":
        text = json.dumps(data, ensure_ascii=False, indent=2) + "\n"
    else:
        yaml = _yaml()
        text = yaml.safe_dump(  # type: ignore[attr-defined]
            data, sort_keys=False, allow_unicode=True, width=100
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
