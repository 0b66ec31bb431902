"""Request mapping of the local provider: a ``ProviderRequest`` as ``create_chat_completion`` args.

The OpenAI chat shapes (as the OpenAI-compatible provider sends them), with the quirks of
llama-cpp-python's chat formats:

* all ``system`` messages become one leading system message (joined with ``"\\n\\n"``); when the
  request has tools but no system text, ``"You are a helpful assistant."`` is used, because the
  chat format lists the tools inside the system message only;
* ``user`` text → ``{"role": "user", "content": text}`` (images → ``invalid_request``);
* ``assistant`` → text plus ``tool_calls`` for host calls; thinking parts are dropped;
* ``tool`` results carry the tool-result payload text every provider sends (the result, or the
  error text, or a fixed "no output" text). ``chatml-function-calling`` (and prism's
  [`PRISM_CHAT_FORMAT`][prism.providers.llama_cpp._wire.PRISM_CHAT_FORMAT]) renders only system, user and assistant turns, so there a result is
  sent as a user turn ``"Result of <name>: <payload>"`` (the phrasing the bundled model answers
  best from; [`function_calling_messages()`][prism.providers.llama_cpp._wire.function_calling_messages]); other chat formats get ``{"role": "tool",
  ...}``. Message text is passed verbatim: that template is rendered with HTML autoescaping,
  which would otherwise turn quotes into ``&#34;``;
* ``request.model.parameters`` then ``request.options.extra`` give the sampling settings
  (``temperature``, ``top_p``, ``top_k``, ``min_p``, ``typical_p``, ``max_tokens`` or
  ``max_completion_tokens``, ``stop``, ``seed``, ``repeat_penalty``, ``presence_penalty``,
  ``frequency_penalty``, ``tool_choice``, ``response_format``); any other key fails the attempt with
  ``invalid_request``. ``options.tool_choice`` and ``options.max_tokens`` are the same settings
  (``max_tokens`` wins over the other two layers). ``options.structured_output`` becomes a JSON-Schema grammar
  (``response_format={"type": "json_object", "schema": ...}``, which llama-cpp-python turns into a
  ``LlamaGrammar`` that constrains decoding, so the output parses and has the schema's shape) on
  turns whose tool choice is ``"none"`` or that have no tools — in its automatic tool mode the
  chat format ignores the grammar. An OpenAI-style ``response_format`` (``{"type":
  "json_schema", "json_schema": {"schema": ...}}``) given in the parameters is mapped the same way.
  A grammar keeps the output well-formed but not from looping: a small model fills an array with
  the same item until ``max_tokens`` cuts the JSON. So a schema-constrained request gets
  ``repeat_penalty`` [`SCHEMA_REPEAT_PENALTY`][prism.providers.llama_cpp._wire.SCHEMA_REPEAT_PENALTY] unless its parameters set one (the library's
  default is 1.0, no penalty; with the bundled model and a name/age/hobbies schema 2 of 8 prompts
  gave complete JSON without it, 16 of 16 with it).
  A request that offers tools gets ``repeat_penalty`` [`TOOL_REPEAT_PENALTY`][prism.providers.llama_cpp._wire.TOOL_REPEAT_PENALTY] unless its
  parameters set one — the llama.cpp server's default, so a tool call's arguments come out as
  they do through the server (without a penalty the bundled model can repeat inside a string
  argument until ``max_tokens`` cuts it: a ``ticker`` argument looped to 512 tokens in-process
  and closed at once through the server).
* ``tool_choice``: ``"auto"`` (default with tools), ``"none"``, ``"required"`` (forces the only
  tool; with several, [`PRISM_CHAT_FORMAT`][prism.providers.llama_cpp._wire.PRISM_CHAT_FORMAT] makes the model pick one, other formats get
  ``"auto"``) or a named tool, ``{"name": ...}`` or ``{"type": "function", "function": {"name":
  ...}}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from prism.providers.wire import InvalidRequest, tool_result_payload_text
from prism.types import (
    ImageContent,
    Message,
    ProviderRequest,
    TextContent,
    ToolCallContent,
    ToolDefinition,
    ToolResultContent,
)

__all__ = [
    "FUNCTION_CALLING_FORMATS",
    "PRISM_CHAT_FORMAT",
    "SCHEMA_REPEAT_PENALTY",
    "completion_kwargs",
    "function_calling_messages",
]

PRISM_CHAT_FORMAT: Final = "prism-chatml-function-calling"
"""Name of prism's chat handler ([`prism.providers.llama_cpp._chat_handler`][prism.providers.llama_cpp._chat_handler]): the default
chat format of the in-process provider and of the server launcher."""

FUNCTION_CALLING_FORMATS: Final = frozenset({PRISM_CHAT_FORMAT, "chatml-function-calling"})
"""The chat formats whose prompt is ``chatml-function-calling``'s (tools listed in the system
message, calls as ``functions.NAME:`` text)."""

SCHEMA_REPEAT_PENALTY: Final = 1.15
"""``repeat_penalty`` of a request decoded under a JSON-Schema grammar, unless its parameters set
one (see the module docstring)."""

TOOL_REPEAT_PENALTY: Final = 1.1
"""``repeat_penalty`` of a request that offers tools, unless its parameters set one: the llama.cpp
server's default (see the module docstring)."""

_DEFAULT_SYSTEM: Final = "You are a helpful assistant."

_SAMPLING_KEYS: Final = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "typical_p",
        "stop",
        "seed",
        "repeat_penalty",
        "presence_penalty",
        "frequency_penalty",
        "response_format",
    }
)
_CONTROL_KEYS: Final = frozenset({"max_tokens", "max_completion_tokens", "tool_choice"})


def completion_kwargs(
    request: ProviderRequest, *, chat_format: str, default_max_tokens: int
) -> tuple[dict[str, Any], int]:
    """Keyword arguments of ``Llama.create_chat_completion`` for ``request``, and the output cap.

    Args:
        request: The provider request.
        chat_format: The model's chat format (decides how tool results are sent).
        default_max_tokens: Output cap when neither the parameters nor
            ``model.limits.max_output_tokens`` give one.

    Returns:
        ``(kwargs, max_tokens)``; ``kwargs`` has no ``stream`` key.

    Raises:
        InvalidRequest: an unsupported parameter, an image, a bad ``tool_choice`` or a
            ``max_tokens`` that is not an int >= 1.
    """
    settings: dict[str, Any] = dict(request.model.parameters or {})
    options = request.options
    if options is not None:
        if options.tool_choice is not None:
            settings["tool_choice"] = options.tool_choice
        if options.extra:
            settings.update(options.extra)
        if options.max_tokens is not None:
            settings.pop("max_completion_tokens", None)
            settings["max_tokens"] = options.max_tokens
    unknown = sorted(set(settings) - _SAMPLING_KEYS - _CONTROL_KEYS)
    if unknown:
        supported = ", ".join(sorted(_SAMPLING_KEYS | _CONTROL_KEYS))
        raise InvalidRequest(
            f"unsupported parameter(s) for the local provider: {', '.join(unknown)} "
            f"(supported: {supported})"
        )
    tools = _chat_tools(request.tools or ())
    kwargs: dict[str, Any] = {k: v for k, v in settings.items() if k in _SAMPLING_KEYS}
    function_calling = chat_format in FUNCTION_CALLING_FORMATS
    choice = _tool_choice(
        settings.get("tool_choice"), tools, required_ok=chat_format == PRISM_CHAT_FORMAT
    )
    has_tools = bool(tools)
    if function_calling and choice == "none":
        # no call may be made this turn (e.g. the answer after the tool rounds): this chat
        # format would still list the tools and show the earlier calls as "functions.NAME:"
        # text, which a small model copies as its answer, so the turn is sent without both
        tools = []
    kwargs["messages"] = _chat_messages(
        request.messages,
        has_tools=has_tools,
        function_calling=function_calling,
        show_calls=bool(tools),
    )
    if tools:
        kwargs["tools"] = tools
        kwargs["tool_choice"] = choice
    max_tokens = settings.get("max_tokens", settings.get("max_completion_tokens"))
    if max_tokens is None and request.model.limits is not None:
        max_tokens = request.model.limits.max_output_tokens
    cap = _positive_int(max_tokens, "max_tokens") if max_tokens is not None else None
    cap = cap if cap is not None else default_max_tokens
    kwargs["max_tokens"] = cap
    structured = request.options.structured_output if request.options else None
    if "response_format" in kwargs:
        kwargs["response_format"] = _response_format(kwargs["response_format"])
    elif structured is not None:
        kwargs["response_format"] = {"type": "json_object", "schema": dict(structured.schema)}
    response_format = kwargs.get("response_format")
    if isinstance(response_format, Mapping) and "schema" in response_format:
        kwargs.setdefault("repeat_penalty", SCHEMA_REPEAT_PENALTY)
    elif tools:
        kwargs.setdefault("repeat_penalty", TOOL_REPEAT_PENALTY)
    return kwargs, cap


def _response_format(value: Any) -> Any:
    """llama-cpp-python's form of a ``response_format``: an OpenAI ``json_schema`` one becomes
    ``{"type": "json_object", "schema": ...}``; anything else is passed as given."""
    if isinstance(value, Mapping) and value.get("type") == "json_schema":
        spec = value.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        if not isinstance(schema, Mapping):
            raise InvalidRequest("response_format json_schema without a schema object")
        return {"type": "json_object", "schema": dict(schema)}
    return value


def _text_of(message: Message) -> str:
    return "".join(part.text for part in message.content if isinstance(part, TextContent))


def _verbatim(text: str) -> str:
    """Mark ``text`` as safe for Jinja autoescaping.

    llama-cpp-python renders the ``chatml-function-calling`` prompt with HTML autoescaping on, so
    quotes in messages and tool arguments would reach the model as ``&#34;``. A ``markupsafe.Markup``
    (a ``str`` subclass; markupsafe ships with Jinja) is rendered unchanged.
    """
    try:
        from markupsafe import Markup
    except ImportError:  # pragma: no cover - Jinja (and so markupsafe) comes with llama-cpp-python
        return text
    return Markup(text)


def _chat_messages(
    messages: Sequence[Message], *, has_tools: bool, function_calling: bool, show_calls: bool
) -> list[dict[str, Any]]:
    """Map prism messages to llama-cpp-python chat messages (see the module docstring), with
    every text marked verbatim for the template. With ``function_calling`` the OpenAI form is
    then shown the way the bundled model reads it ([`function_calling_messages()`][prism.providers.llama_cpp._wire.function_calling_messages])."""
    out = _chat_messages_raw(messages, has_tools=has_tools)
    if function_calling:
        return function_calling_messages(out, has_tools=has_tools, show_calls=show_calls)
    for entry in out:
        if entry["role"] == "tool":
            del entry["name"]  # prism's own key, for the function-calling mapping
        _mark_verbatim(entry)
    return out


def _mark_verbatim(entry: dict[str, Any]) -> None:
    if isinstance(entry.get("content"), str):
        entry["content"] = _verbatim(entry["content"])
    for call in entry.get("tool_calls") or ():
        function = call.get("function")
        if isinstance(function, dict) and isinstance(function.get("arguments"), str):
            function["arguments"] = _verbatim(function["arguments"])


def _content_text(content: Any) -> str:
    """The text of an OpenAI message ``content``: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return ""


def function_calling_messages(
    messages: Sequence[Mapping[str, Any]], *, has_tools: bool, show_calls: bool
) -> list[dict[str, Any]]:
    """OpenAI-form chat messages as ``chatml-function-calling`` should show them to the model.

    The one mapping of the in-process provider and of the server's chat handler
    ([`prism.providers.llama_cpp._chat_handler`][prism.providers.llama_cpp._chat_handler]), so both prompt the model alike:

    * every ``system`` message joins one leading system message (``"\n\n"``); with tools and no
      system text it is ``"You are a helpful assistant."`` (the format lists the tools there);
    * a ``tool`` message becomes a user turn ``"Result of NAME: CONTENT"`` (the format renders
      no tool turns; NAME is the message's ``name``, else that of the assistant call with its
      ``tool_call_id``);
    * ``show_calls=False`` leaves out the assistant's tool calls (and assistant turns left
      empty), for a turn offered no tools;
    * every text is marked verbatim (the template escapes HTML otherwise).

    Idempotent: messages already mapped come back unchanged. The input is not modified.
    """
    names: dict[str, str] = {}
    system_parts: list[str] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            text = _content_text(message.get("content"))
            if text:
                system_parts.append(text)
        elif role in ("tool", "function"):
            call_id = message.get("tool_call_id")
            name = message.get("name") or (names.get(call_id) if isinstance(call_id, str) else "")
            payload = _content_text(message.get("content"))
            out.append({"role": "user", "content": f"Result of {name or 'tool'}: {payload}"})
        elif role == "assistant":
            entry = dict(message)
            calls = [dict(call) for call in entry.pop("tool_calls", None) or ()]
            for call in calls:
                function = call.get("function")
                if isinstance(function, Mapping):
                    call["function"] = dict(function)
                    if isinstance(call.get("id"), str):
                        names[call["id"]] = str(function.get("name", ""))
            entry.pop("function_call", None)
            if show_calls and calls:
                entry["tool_calls"] = calls
            elif not entry.get("content"):
                continue
            out.append(entry)
        else:
            out.append(dict(message))
    system = "\n\n".join(system_parts)
    if not system and has_tools:
        system = _DEFAULT_SYSTEM
    if system:
        out.insert(0, {"role": "system", "content": system})
    for entry in out:
        _mark_verbatim(entry)
    return out


def _chat_messages_raw(messages: Sequence[Message], *, has_tools: bool) -> list[dict[str, Any]]:
    system_parts: list[str] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.role
        if role == "system":
            text = _text_of(message)
            if text:
                system_parts.append(text)
        elif role == "user":
            if any(isinstance(part, ImageContent) for part in message.content):
                raise InvalidRequest("the local model takes text input only (image given)")
            out.append({"role": "user", "content": _text_of(message)})
        elif role == "assistant":
            calls = [
                part
                for part in message.content
                if isinstance(part, ToolCallContent) and part.authority != "provider-hosted"
            ]
            text = _text_of(message)
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                    }
                    for call in calls
                ]
            elif not text:
                continue
            out.append(entry)
        elif role == "tool":
            payload = tool_result_payload_text(message)
            name, call_id = _tool_result_ids(message)
            out.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": payload})
    system = "\n\n".join(system_parts)
    if not system and has_tools:
        system = _DEFAULT_SYSTEM
    if system:
        out.insert(0, {"role": "system", "content": system})
    return out


def _tool_result_ids(message: Message) -> tuple[str, str]:
    for part in message.content:
        if isinstance(part, ToolResultContent):
            return part.name, part.tool_call_id
    return "tool", ""


def _chat_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool.name}
        if tool.description:
            function["description"] = tool.description
        function["parameters"] = tool.parameters or {"type": "object"}
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(value: Any, tools: list[dict[str, Any]], *, required_ok: bool) -> Any:
    """The chat format's ``tool_choice`` for ``value``: ``None`` is ``"auto"`` with tools;
    ``"required"`` names the only tool, else stays ``"required"`` when the chat format takes it
    (``required_ok``) or becomes ``"auto"``; a named tool (``{"name": ...}`` or the OpenAI form)
    becomes the OpenAI form."""
    if value is None:
        return "auto" if tools else None
    names = [tool["function"]["name"] for tool in tools]
    if value == "required":
        if len(names) == 1:
            return {"type": "function", "function": {"name": names[0]}}
        return "required" if required_ok else "auto"
    if value in ("auto", "none"):
        return value
    if isinstance(value, Mapping):
        function = value.get("function")
        name = function.get("name") if isinstance(function, Mapping) else value.get("name")
        if isinstance(name, str) and name in names:
            return {"type": "function", "function": {"name": name}}
        raise InvalidRequest(f"tool_choice names a tool that is not in the request: {name!r}")
    raise InvalidRequest(f"unsupported tool_choice: {value!r}")


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRequest(f"{name} must be an int >= 1, got {value!r}")
    return value
