"""Cassettes: the recorded provider traffic and tool calls of one run, as a case keeps them.

A [`Cassette`][prism.evals._cassette.Cassette] is what ``prism eval capture`` stores in a case's ``cassette`` (its
``to_json()``), and what a replay serves back:

* ``attempts`` — every provider attempt of the run in order ([`RecordedAttempt`][prism.evals._cassette.RecordedAttempt]): its
  turn and attempt numbers, the provider and model that served it, the hashes of its request
  (``request_hash``, ``head_hash``: [`prism.request_hash`][prism.request_hash]; ``None`` for a run captured
  without request rows), how many conversation messages the request held, and the events the
  provider streamed (text and tool-call deltas as they came, then ``done`` with the usage, stop
  reason and response model — or the ``error`` of a failed attempt);
* ``heads`` — each distinct request head by its hash (system prompt, tool schemas, model,
  options), so that a replay names the field that changed;
* ``transcript`` — the conversation the run saw and wrote (``{"role", "content"}`` per message),
  so that a replay names the message that changed;
* ``calls`` — each host tool call that ran ([`RecordedCall`][prism.evals._cassette.RecordedCall]): its arguments and result;
* ``children`` — the cassette of each agent-tool child run, by the calling tool call's id;
* ``tools`` — ``"recorded"`` (default: a call's arguments must equal the recorded ones and the
  recorded result is served) or ``"real"`` (the tool runs; its result must equal the recorded
  one outside ``ignore_paths``, per tool, and the recorded result is what the model reads);
* ``approvals`` — the decisions a durable run over several legs was resumed with, one per
  pending approval in order: ``{"tool_call_id", "outcome", "reason"?, "modified_arguments"?}``
  with ``outcome`` ``allow_once``, ``reject_once``, ``deny``, ``approve`` (an approval that is
  not a tool call's) or ``pending`` (the run ended waiting).

``matching`` is ``"requests"`` when every attempt has a request hash, else ``"messages"``: a
run captured without request rows is replayed by comparing messages only, so a change of its
system prompt, tool schemas or options cannot be detected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, TypeAlias

from prism._keys import reject_unknown_keys
from prism.errors import PrismConfigError
from prism.types import (
    JsonValue,
    ProviderEvent,
    ToolResult,
    provider_event_from_dict,
)

__all__ = [
    "CASSETTE_VERSION",
    "Cassette",
    "CassetteMatching",
    "RecordedAttempt",
    "RecordedCall",
    "ReplayTools",
]

CASSETTE_VERSION: Final = 1
"""The cassette format version written (``"version"`` of its JSON form)."""

CassetteMatching: TypeAlias = Literal["requests", "messages"]
"""How a replay matches requests: by request hash (``"requests"``) or by messages only."""

ReplayTools: TypeAlias = Literal["recorded", "real"]
"""How a replay answers tool calls: the recorded results, or the real tools checked against
them."""

_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})

_KEYS: Final = (
    "version",
    "hash_version",
    "run_id",
    "session_id",
    "matching",
    "attempts",
    "heads",
    "transcript",
    "calls",
    "children",
    "tools",
    "ignore_paths",
    "approvals",
)
_ATTEMPT_KEYS: Final = (
    "turn",
    "attempt",
    "provider_id",
    "model",
    "request_hash",
    "head_hash",
    "messages",
    "events",
)
_CALL_KEYS: Final = ("name", "arguments", "result")


def _bad(label: str, what: str) -> PrismConfigError:
    return PrismConfigError(f"cassette{label}: {what}")


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedAttempt:
    """One recorded provider attempt."""

    turn: int
    """Provider turn (1-based)."""
    attempt: int
    """Attempt of the turn (1-based)."""
    provider_id: str
    """The provider that served it."""
    model: str
    """The model asked."""
    request_hash: str | None
    """Hash of its request (``None``: captured without request rows)."""
    head_hash: str | None
    """Hash of its request's head."""
    messages: int | None
    """Conversation messages of its request (``None`` when unknown)."""
    events: tuple[ProviderEvent, ...]
    """What the provider streamed, in order; the last one is ``done`` or ``error``."""

    def to_json(self) -> dict[str, JsonValue]:
        """The JSON form."""
        return {
            "turn": self.turn,
            "attempt": self.attempt,
            "provider_id": self.provider_id,
            "model": self.model,
            "request_hash": self.request_hash,
            "head_hash": self.head_hash,
            "messages": self.messages,
            "events": [event.to_dict() for event in self.events],
        }

    @classmethod
    def from_json(cls, value: object, label: str = "") -> RecordedAttempt:
        """Read the JSON form.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — not the form [`to_json()`][prism.evals._cassette.RecordedAttempt.to_json] writes.
        """
        if not isinstance(value, Mapping):
            raise _bad(label, "an attempt is an object")
        reject_unknown_keys(f"cassette{label}", value, _ATTEMPT_KEYS)
        turn, attempt = value.get("turn"), value.get("attempt")
        if type(turn) is not int or type(attempt) is not int:
            raise _bad(label, "turn and attempt must be ints")
        events = value.get("events")
        if not isinstance(events, list):
            raise _bad(label, "events must be a list")
        try:
            parsed = tuple(provider_event_from_dict(e) for e in events)
        except (TypeError, ValueError) as exc:
            raise _bad(label, f"invalid provider event: {exc}") from None
        messages = value.get("messages")
        return cls(
            turn=turn,
            attempt=attempt,
            provider_id=str(value.get("provider_id") or ""),
            model=str(value.get("model") or ""),
            request_hash=_optional_str(value.get("request_hash"), label),
            head_hash=_optional_str(value.get("head_hash"), label),
            messages=messages if type(messages) is int else None,
            events=parsed,
        )


def _optional_str(value: object, label: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _bad(label, f"expected a string, got {type(value).__name__}")


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedCall:
    """One host tool call that ran in the recorded run."""

    call_id: str
    """The call's id."""
    name: str
    """The tool."""
    arguments: Mapping[str, JsonValue]
    """The arguments the tool ran with (after the ``tool_call`` middleware hook)."""
    result: ToolResult
    """What it returned (an error result included)."""

    def to_json(self) -> dict[str, JsonValue]:
        """The JSON form (without the id: it is the key in ``calls``)."""
        return {
            "name": self.name,
            "arguments": dict(self.arguments),
            "result": self.result.to_dict(),
        }

    @classmethod
    def from_json(cls, call_id: str, value: object, label: str = "") -> RecordedCall:
        """Read the JSON form.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — not the form [`to_json()`][prism.evals._cassette.RecordedAttempt.to_json] writes.
        """
        if not isinstance(value, Mapping):
            raise _bad(label, f"call {call_id} is not an object")
        reject_unknown_keys(f"cassette{label}, call {call_id}", value, _CALL_KEYS)
        arguments = value.get("arguments")
        if not isinstance(arguments, Mapping):
            raise _bad(label, f"call {call_id}: arguments must be an object")
        try:
            result = ToolResult.from_dict(value.get("result"))  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise _bad(label, f"call {call_id}: invalid result: {exc}") from None
        return cls(call_id=call_id, name=str(value.get("name")), arguments=arguments, result=result)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cassette:
    """The recorded traffic of one run (see the module docstring). Read one from a case with
    [`from_json()`][prism.evals._cassette.RecordedAttempt.from_json]; ``prism.evals.capture_run`` builds them."""

    run_id: str
    """The recorded run."""
    session_id: str
    """Its session."""
    matching: CassetteMatching
    """``"requests"`` (by request hash) or ``"messages"`` (messages only)."""
    attempts: tuple[RecordedAttempt, ...]
    """Every provider attempt, in order."""
    heads: Mapping[str, Mapping[str, JsonValue]] = field(default_factory=lambda: _EMPTY)
    """Request heads by hash."""
    transcript: tuple[Mapping[str, JsonValue], ...] = ()
    """The conversation: ``{"role", "content"}`` per message."""
    calls: Mapping[str, RecordedCall] = field(default_factory=lambda: _EMPTY)
    """Host tool calls that ran, by call id."""
    children: Mapping[str, Cassette] = field(default_factory=lambda: _EMPTY)
    """Agent-tool child runs, by the calling tool call's id."""
    tools: ReplayTools = "recorded"
    """How tool calls are answered on replay ([`ReplayTools`][prism.evals._cassette.ReplayTools])."""
    ignore_paths: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _EMPTY)
    """Per tool, the result paths a real tool may change (``tools="real"``)."""
    approvals: tuple[Mapping[str, JsonValue], ...] = ()
    """The decisions the run was resumed with, in order (see the module docstring)."""
    hash_version: int = 1
    """The request-hash definition of ``request_hash`` (``prism.request_hash``)."""

    def to_json(self) -> dict[str, JsonValue]:
        """The JSON form a case file keeps."""
        out: dict[str, JsonValue] = {
            "version": CASSETTE_VERSION,
            "hash_version": self.hash_version,
            "run_id": self.run_id,
            "session_id": self.session_id,
            "matching": self.matching,
            "attempts": [a.to_json() for a in self.attempts],
            "heads": {k: dict(v) for k, v in self.heads.items()},
            "transcript": [dict(m) for m in self.transcript],
            "calls": {k: c.to_json() for k, c in self.calls.items()},
        }
        if self.children:
            out["children"] = {k: c.to_json() for k, c in self.children.items()}
        if self.tools != "recorded":
            out["tools"] = self.tools
        if self.ignore_paths:
            out["ignore_paths"] = {k: list(v) for k, v in self.ignore_paths.items()}
        if self.approvals:
            out["approvals"] = [dict(a) for a in self.approvals]
        return out

    @classmethod
    def from_json(cls, value: object, label: str = "") -> Cassette:
        """Read the JSON form.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown format version or key, or a
                value of the wrong shape (the message names it).
        """
        if not isinstance(value, Mapping):
            raise _bad(label, "a cassette is an object")
        reject_unknown_keys(f"cassette{label}", value, _KEYS)
        version = value.get("version")
        if version != CASSETTE_VERSION:
            raise _bad(
                label, f"format version {version!r} is not {CASSETTE_VERSION} (capture it again)"
            )
        matching = value.get("matching")
        if matching not in ("requests", "messages"):
            raise _bad(label, f"matching must be 'requests' or 'messages', got {matching!r}")
        tools = value.get("tools", "recorded")
        if tools not in ("recorded", "real"):
            raise _bad(label, f"tools must be 'recorded' or 'real', got {tools!r}")
        attempts = value.get("attempts")
        if not isinstance(attempts, list):
            raise _bad(label, "attempts must be a list")
        heads = _mapping(value.get("heads"), label, "heads")
        calls = _mapping(value.get("calls"), label, "calls")
        children = _mapping(value.get("children"), label, "children")
        ignore = _mapping(value.get("ignore_paths"), label, "ignore_paths")
        transcript = value.get("transcript", [])
        approvals = value.get("approvals", [])
        if not isinstance(transcript, list) or not isinstance(approvals, list):
            raise _bad(label, "transcript and approvals must be lists")
        for tool, paths in ignore.items():
            if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
                raise _bad(label, f"ignore_paths of {tool!r} must be a list of paths")
        return cls(
            run_id=str(value.get("run_id") or ""),
            session_id=str(value.get("session_id") or ""),
            matching=matching,
            attempts=tuple(
                RecordedAttempt.from_json(a, f"{label}, attempt {i + 1}")
                for i, a in enumerate(attempts)
            ),
            heads=MappingProxyType({str(k): dict(v) for k, v in heads.items()}),
            transcript=tuple(dict(m) for m in transcript if isinstance(m, Mapping)),
            calls=MappingProxyType(
                {str(k): RecordedCall.from_json(str(k), v, label) for k, v in calls.items()}
            ),
            children=MappingProxyType(
                {
                    str(k): Cassette.from_json(v, f"{label}, child of call {k}")
                    for k, v in children.items()
                }
            ),
            tools=tools,
            ignore_paths=MappingProxyType({str(k): tuple(v) for k, v in ignore.items()}),
            approvals=tuple(dict(a) for a in approvals if isinstance(a, Mapping)),
            hash_version=int(value.get("hash_version") or 1),
        )

    @property
    def turns(self) -> int:
        """Provider turns of the recorded run (attempts of one turn count once)."""
        return len({a.turn for a in self.attempts})


def _mapping(value: object, label: str, key: str) -> Mapping[str, Any]:
    if value is None:
        return _EMPTY
    if not isinstance(value, Mapping):
        raise _bad(label, f"{key} must be an object")
    return value
