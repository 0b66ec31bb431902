"""The canonical hash of a provider request: what the model would see, and nothing else.

A run with a ledger records, for every provider attempt, the hash of the request it sent
([`RequestRecord`][prism.ledger_records.RequestRecord]); a replay ([`prism.evals`][prism.evals]) hashes each request
the same way and matches it with the recorded one. Two requests hash alike exactly when they
agree on what reaches the model:

* the **head** ([`request_head()`][prism.request_hash.request_head]) — what usually stays the same from turn to turn of a run:

  - ``model``: the provider, the model name, its ``compat`` switches and ``parameters``
    (temperature …); not its display name, capabilities, limits, pricing or metadata;
  - ``system``: the content of the leading ``system`` messages (the system prompt, context
    blocks, skills and compaction summaries the assembler puts first), in order;
  - ``tools``: each offered tool's ``name``, ``description`` and ``parameters`` (its JSON
    Schema), in order;
  - ``options``: the provider options the model acts on — ``tool_choice``,
    ``structured_output``, ``max_tokens``, ``compat``, ``extra`` (not the session id nor the
    HTTP headers);
  - ``context``: the request's context blocks (content and title);

* the **conversation**: every message after the leading system ones, each reduced to its role
  and content (not its id nor its metadata, which the model never sees; nor the run metadata and
  the abort signal of the request).

The hashes:

* ``head_hash`` — SHA-256 (hex) of ``canonical_json(head)``;
* [`message_digest()`][prism.request_hash.message_digest] — SHA-256 (32 bytes) of ``canonical_json({"content", "role"})`` of one
  message;
* ``request_hash`` — SHA-256 (hex) of the ASCII ``head_hash`` followed by the SHA-256 of the
  concatenated digests of the conversation's messages ([`combine_hashes()`][prism.request_hash.combine_hashes]).

So a run path that keeps each message's digest (messages are frozen) hashes a turn's request in
O(new messages): the run path does that ([`prism.runtime.run._request_codec`][prism.runtime.run._request_codec]);
[`fingerprint_request()`][prism.request_hash.fingerprint_request] hashes a request from scratch. Both give the same hashes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from prism._json import canonical_json
from prism._serde import to_json_value
from prism.types import (
    JsonValue,
    Message,
    ProviderRequest,
    TextContent,
    ToolCallContent,
    ToolResultContent,
)

__all__ = [
    "REQUEST_HASH_VERSION",
    "RequestFingerprint",
    "RunningHash",
    "new_hash",
    "combine_hashes",
    "conversation_digest",
    "fingerprint_request",
    "head_hash",
    "leading_system_count",
    "message_digest",
    "message_json",
    "request_head",
]

REQUEST_HASH_VERSION: Final = 1
"""Version of the hash definition above (kept with recordings, so that a later definition can
tell its own hashes from these)."""

_OPTION_FIELDS: Final = ("tool_choice", "structured_output", "max_tokens", "compat", "extra")
"""The provider options that reach the model."""


@dataclass(frozen=True, slots=True)
class RequestFingerprint:
    """The hashes of one request ([`fingerprint_request()`][prism.request_hash.fingerprint_request])."""

    request_hash: str
    """SHA-256 hex of the whole request as the model sees it."""
    head_hash: str
    """SHA-256 hex of [`head`][prism.request_hash.RequestFingerprint.head]."""
    head: dict[str, JsonValue]
    """The request's head ([`request_head()`][prism.request_hash.request_head])."""
    messages: int
    """Messages of the conversation (after the leading system messages)."""


class RunningHash(Protocol):
    """What [`new_hash()`][prism.request_hash.new_hash] returns: a ``hashlib.sha256`` object."""

    def update(self, data: bytes, /) -> None:
        """Add ``data``."""
        ...

    def digest(self) -> bytes:
        """The 32-byte digest so far."""
        ...

    def hexdigest(self) -> str:
        """The digest so far, as 64 hex digits."""
        ...

    def copy(self) -> RunningHash:
        """An independent copy of the state."""
        ...


def new_hash(data: bytes = b"") -> RunningHash:
    """A new ``hashlib.sha256`` object over ``data`` (``hashlib`` is imported on first use: only
    runs that hash their requests load it)."""
    import hashlib

    return hashlib.sha256(data)


def leading_system_count(messages: Sequence[Message]) -> int:
    """How many of ``messages`` are ``system`` messages before the first other one."""
    count = 0
    for message in messages:
        if message.role != "system":
            break
        count += 1
    return count


def message_json(message: Message) -> dict[str, JsonValue]:
    """What the model sees of one message: ``{"role", "content"}`` (content parts as JSON)."""
    return {"role": message.role, "content": [part.to_dict() for part in message.content]}


def _digest_text(value: object) -> bytes:
    try:
        text = canonical_json(value)
    except (TypeError, ValueError):  # a value outside JSON: hashed by its repr, still stable
        text = repr(value)
    return new_hash(text.encode("utf-8", "surrogatepass")).digest()


_encode: Callable[[object], str] = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode
"""``canonical_json``'s encoder, built once."""


def _part_text(part: object) -> str:
    """``canonical_json(part.to_dict())`` of one content part, written directly for the common
    parts: a tool call's arguments and a tool result's value go to the C encoder as they are
    (``to_dict`` would copy them first); the keys are in sorted order."""
    kind = type(part)
    if kind is TextContent:
        return '{"text":' + _encode(part.text) + ',"type":"text"}'  # type: ignore[attr-defined]
    if kind is ToolResultContent and part.error is None:  # type: ignore[attr-defined]
        text = '{"name":' + _encode(part.name)  # type: ignore[attr-defined]
        if part.result is not None:  # type: ignore[attr-defined]
            text += ',"result":' + _encode(part.result)  # type: ignore[attr-defined]
        return text + ',"tool_call_id":' + _encode(part.tool_call_id) + ',"type":"tool_result"}'  # type: ignore[attr-defined]
    if kind is ToolCallContent and part.arguments_error is None and part.authority is None:  # type: ignore[attr-defined]
        return (
            '{"arguments":'
            + _encode(part.arguments)  # type: ignore[attr-defined]
            + ',"id":'
            + _encode(part.id)  # type: ignore[attr-defined]
            + ',"name":'
            + _encode(part.name)  # type: ignore[attr-defined]
            + ',"type":"tool_call"}'
        )
    return _encode(part.to_dict())  # type: ignore[attr-defined]


def message_digest(message: Message) -> bytes:
    """SHA-256 (32 bytes) of ``canonical_json(message_json(message))``: one serialisation of
    the message (the text is built part by part, equal to that one)."""
    try:
        text = (
            '{"content":['
            + ",".join([_part_text(part) for part in message.content])
            + '],"role":'
            + _encode(message.role)
            + "}"
        )
    except (TypeError, ValueError):  # not plain JSON inside: the general path decides
        return _digest_text(message_json(message))
    return new_hash(text.encode("utf-8", "surrogatepass")).digest()


def conversation_digest(digests: Iterable[bytes]) -> bytes:
    """SHA-256 (32 bytes) of the concatenated message digests, in order."""
    hasher = new_hash()
    for digest in digests:
        hasher.update(digest)
    return hasher.digest()


def combine_hashes(head_hash: str, conversation: bytes) -> str:
    """The request hash: SHA-256 hex of the ASCII ``head_hash`` and the conversation digest."""
    return new_hash(head_hash.encode("ascii") + conversation).hexdigest()


def head_hash(head: dict[str, JsonValue]) -> str:
    """SHA-256 hex of ``canonical_json(head)``."""
    return _digest_text(head).hex()


def _mapping(value: Any) -> JsonValue:
    converted: JsonValue = to_json_value(dict(value))
    return converted


def request_head(request: ProviderRequest) -> dict[str, JsonValue]:
    """The head of ``request``: ``{"model", "system", "tools", "options", "context"}`` (see the
    module docstring); ``options`` and ``context`` only when the request has some."""
    model = request.model
    model_part: dict[str, JsonValue] = {"provider": model.provider, "model": model.model}
    if model.compat:
        model_part["compat"] = _mapping(model.compat)
    if model.parameters:
        model_part["parameters"] = _mapping(model.parameters)
    messages = request.messages
    system: list[JsonValue] = [
        [part.to_dict() for part in messages[i].content]
        for i in range(leading_system_count(messages))
    ]
    tools: list[JsonValue] = []
    for tool in request.tools or ():
        entry: dict[str, JsonValue] = {"name": tool.name}
        if tool.description is not None:
            entry["description"] = tool.description
        if tool.parameters is not None:
            entry["parameters"] = _mapping(tool.parameters)
        tools.append(entry)
    head: dict[str, JsonValue] = {"model": model_part, "system": system, "tools": tools}
    options = request.options
    if options is not None:
        chosen: dict[str, JsonValue] = {}
        for name in _OPTION_FIELDS:
            value = getattr(options, name)
            if value is not None:
                chosen[name] = to_json_value(value)
        if chosen:
            head["options"] = chosen
    if request.context:
        head["context"] = [
            {"content": to_json_value(block.content), "title": block.title}
            for block in request.context
        ]
    return head


def fingerprint_request(request: ProviderRequest) -> RequestFingerprint:
    """Hash ``request`` from scratch (every message digested once).

    Returns:
        Its [`RequestFingerprint`][prism.request_hash.RequestFingerprint].
    """
    head = request_head(request)
    head_digest = head_hash(head)
    messages = request.messages
    skip = leading_system_count(messages)
    body = conversation_digest(message_digest(m) for m in messages[skip:])
    return RequestFingerprint(
        request_hash=combine_hashes(head_digest, body),
        head_hash=head_digest,
        head=head,
        messages=len(messages) - skip,
    )
