"""prism's chat handler for llama-cpp-python: ``chatml-function-calling`` with working tool calls.

Registered with llama-cpp-python as [`PRISM_CHAT_FORMAT`][prism.providers.llama_cpp._wire.PRISM_CHAT_FORMAT]
([`register_chat_handler()`][prism.providers.llama_cpp._chat_handler.register_chat_handler]), it is the default chat format of the in-process provider and of
the server launcher (``python -m prism.providers.llama_cpp``), so the embedded model is prompted
the same way in both: the server behaves as the in-process provider does.

It renders the prompt of llama-cpp-python's ``chatml-function-calling`` (0.3.36) and delegates to
it where that works; what it changes, for a client that speaks plain OpenAI Chat Completions:

* messages are shown as [`function_calling_messages()`][prism.providers.llama_cpp._wire.function_calling_messages] shows
  them (tool results as user turns, no HTML escaping of the history; on a turn without tools
  the earlier calls are left out);
* tools without a ``tool_choice`` mean ``"auto"`` (the library then drops the tools);
* ``"auto"``: the model first picks ``message:`` or one function, greedily, as the library does.
  A message is then generated without the library's follow-up grammar (which allows only
  ``functions.NAME:`` or the end, so the answer came out as literal ``functions.NAME:`` text or
  empty), honouring ``max_tokens`` and streaming; a function is generated as a forced call, which
  streams (the library raises "Automatic streaming tool choice is not supported");
* ``"required"``: the same pick without ``message:`` (the library fails an assertion);
* one tool call per turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from prism.providers.llama_cpp._wire import PRISM_CHAT_FORMAT, function_calling_messages

__all__ = ["prism_chat_handler", "register_chat_handler"]

# The template of llama-cpp-python's ``chatml_function_calling`` (0.3.36), which renders the
# prompts this handler delegates; the pick between a message and a function is made on it.
_TEMPLATE: Final = (
    "{% for message in messages %}"
    "<|im_start|>{{ message.role }}\n"
    "{% if message.role == 'system' %}"
    "{{ message.content }}"
    "{% if tool_calls %}"
    "\n\nYou have access to the following functions:\n"
    "{% for tool in tools %}"
    "\nfunctions.{{ tool.function.name }}:\n"
    "{{ tool.function.parameters | tojson }}"
    "\n{% endfor %}"
    "\n\nYou can respond to users messages with either a single message or one or more function"
    " calls."
    "\n\nTo respond with a message begin the message with 'message:', use the following format:"
    "\n\nmessage:"
    "\n<message>"
    "\n\nTo respond with one or more function calls begin the message with"
    " 'functions.<function_name>:', use the following format:"
    "\n\nfunctions.<function_name>:"
    '\n{ "arg1": "value1", "arg2": "value2" }'
    "\nfunctions.<function_name>:"
    '\n{ "arg1": "value1", "arg2": "value2" }'
    "{% endif %}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% if message.role == 'user' %}"
    "{{ message.content }}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% if message.role == 'assistant' %}"
    "{% if message.content and message.content | length > 0 %}"
    "{% if tool_calls %}"
    "message:\n"
    "{% endif %}"
    "{{ message.content }}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% if 'tool_calls' in message %}"
    "{% for tool_call in message.tool_calls %}"
    "functions.{{ tool_call.function.name }}:\n"
    "{{ tool_call.function.arguments }}"
    "{% endfor %}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_SAMPLING: Final = (
    "top_p",
    "top_k",
    "min_p",
    "typical_p",
    "presence_penalty",
    "frequency_penalty",
    "repeat_penalty",
    "tfs_z",
    "mirostat_mode",
    "mirostat_tau",
    "mirostat_eta",
    "model",
    "logits_processor",
)
"""``create_completion`` arguments passed on as given (the library's pick passes the same)."""

_registered = False


def register_chat_handler() -> None:
    """Register ``prism_chat_handler()`` with llama-cpp-python as ``PRISM_CHAT_FORMAT``
    (once per process; a ``Llama(chat_format=PRISM_CHAT_FORMAT)`` then uses it).

    Raises:
        ImportError: llama-cpp-python is not installed.
    """
    global _registered
    if _registered:
        return
    from llama_cpp.llama_chat_format import LlamaChatCompletionHandlerRegistry

    registry = LlamaChatCompletionHandlerRegistry()  # type: ignore[no-untyped-call]
    registry.register_chat_completion_handler(PRISM_CHAT_FORMAT, prism_chat_handler, overwrite=True)
    _registered = True


def _tools(tools: Any, functions: Any) -> list[dict[str, Any]]:
    if not tools and functions:  # the legacy form
        return [{"type": "function", "function": function} for function in functions]
    return [dict(tool) for tool in tools or ()]


def _choice(tool_choice: Any, function_call: Any, names: Sequence[str]) -> str | None:
    """``"none"``, ``"auto"``, ``"required"`` or ``None`` (a named tool: see the caller)."""
    if tool_choice is None and function_call is not None:  # the legacy form
        tool_choice = function_call
        if isinstance(function_call, Mapping):
            tool_choice = {"function": function_call}
    if tool_choice is None:
        return "auto" if names else "none"
    if isinstance(tool_choice, str):
        if tool_choice not in ("none", "auto", "required"):
            raise ValueError(f"unsupported tool_choice: {tool_choice!r}")
        if tool_choice == "required" and len(names) == 1:
            return None
        return tool_choice
    return None


def _named(tool_choice: Any, function_call: Any, names: Sequence[str]) -> str:
    """The tool a named choice (or ``"required"`` with one tool) names."""
    if tool_choice == "required" or (tool_choice is None and function_call is None):
        return names[0]
    value = tool_choice if tool_choice is not None else {"function": function_call}
    function = value.get("function") if isinstance(value, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(name, str) or name not in names:
        raise ValueError(f"tool_choice names a tool that is not in the request: {name!r}")
    return name


def _prompt(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    # the Jinja environment llama-cpp-python renders its own templates with (prism does not
    # depend on Jinja itself)
    from llama_cpp import llama_chat_format

    environment: Any = vars(llama_chat_format)["ImmutableSandboxedEnvironment"]
    template = environment(autoescape=True).from_string(_TEMPLATE)
    return str(
        template.render(messages=messages, tools=tools, tool_calls=True, add_generation_prompt=True)
    )


def _pick(
    llama: Any, prompt: str, names: Sequence[str], *, allow_message: bool, **sampling: Any
) -> str | None:
    """The function the model picks (greedily), or ``None`` for a message."""
    from llama_cpp.llama_grammar import LlamaGrammar

    functions = " | ".join(json.dumps(f"functions.{name}:") for name in names)
    root = 'functions | "message:"' if allow_message else "functions"
    grammar = LlamaGrammar.from_string(
        f"root ::= {root}\nfunctions ::= {functions}\n", verbose=llama.verbose
    )
    completion = llama.create_completion(
        prompt=prompt,
        temperature=0,
        stream=False,
        stop=[":"],
        max_tokens=None,
        grammar=grammar,
        **sampling,
    )
    text = str(completion["choices"][0]["text"])
    if text.startswith("functions."):
        name = text[len("functions.") :].rstrip(":")
        if name in names:
            return name
    return None


def _as_chat_response(completion: Mapping[str, Any]) -> dict[str, Any]:
    """A text ``completion`` as a ``chat.completion``."""
    choice = completion["choices"][0]
    return {
        "id": "chat" + str(completion["id"]),
        "object": "chat.completion",
        "created": completion["created"],
        "model": completion["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": choice["text"]},
                "logprobs": None,
                "finish_reason": choice["finish_reason"],
            }
        ],
        "usage": completion.get("usage"),
    }


def _as_chat(chunks: Iterator[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    """Streamed text ``completion`` chunks as ``chat.completion.chunk`` dicts: the role first,
    then the text, then the finish reason. Closing it closes ``chunks`` (ends generation)."""
    try:
        started = False
        for chunk in chunks:
            head = {
                "id": "chat" + str(chunk["id"]),
                "object": "chat.completion.chunk",
                "created": chunk["created"],
                "model": chunk["model"],
            }
            deltas: list[tuple[dict[str, Any], Any]] = []
            if not started:
                deltas.append(({"role": "assistant"}, None))
                started = True
            choice = chunk["choices"][0]
            if choice.get("text"):
                deltas.append(({"content": choice["text"]}, None))
            if choice.get("finish_reason") is not None:
                deltas.append(({}, choice["finish_reason"]))
            for delta, finish in deltas:
                yield {
                    **head,
                    "choices": [
                        {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                    ],
                }
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


def prism_chat_handler(
    *,
    llama: Any,
    messages: Sequence[Mapping[str, Any]],
    functions: Any = None,
    function_call: Any = None,
    tools: Any = None,
    tool_choice: Any = None,
    stream: bool = False,
    stop: str | list[str] | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
    temperature: float = 0.2,
    logprobs: bool | None = None,
    top_logprobs: int | None = None,
    **kwargs: Any,
) -> Any:
    """A llama-cpp-python chat completion handler (the module docstring says what it does).

    Takes the arguments ``Llama.create_chat_completion`` passes to a handler and returns what
    it returns: a ``chat.completion`` dict, or an iterator of ``chat.completion.chunk`` dicts
    when ``stream`` is true.

    Raises:
        ValueError: an unknown ``tool_choice`` string, or one naming a tool not in ``tools``.
    """
    from llama_cpp import llama_chat_format

    tool_list = _tools(tools, functions)
    names = [str(tool["function"]["name"]) for tool in tool_list]
    choice = _choice(tool_choice, function_call, names)
    if choice == "none" or not names:
        tool_list, names, choice = [], [], "none"
    shown = function_calling_messages(messages, has_tools=bool(names), show_calls=bool(names))
    if seed is not None:
        llama.set_seed(seed)
    common: dict[str, Any] = {
        "stream": stream,
        "stop": stop if stop is not None else [],
        "max_tokens": max_tokens,
        "temperature": temperature,
        "logprobs": logprobs,
        "top_logprobs": top_logprobs,
        **kwargs,
    }
    delegate = llama_chat_format.chatml_function_calling
    if choice == "none":
        return delegate(llama=llama, messages=shown, **common)
    sampling = {key: kwargs[key] for key in _SAMPLING if key in kwargs}
    if choice in ("auto", "required"):
        prompt = _prompt(shown, tool_list)
        picked = _pick(llama, prompt, names, allow_message=choice == "auto", **sampling)
        if picked is None:
            stops = [stop] if isinstance(stop, str) else list(stop or ())
            completion = llama.create_completion(
                prompt=prompt + "message:\n",
                temperature=temperature,
                stream=stream,
                stop=[*stops, "<|im_end|>"],
                max_tokens=max_tokens,
                logprobs=top_logprobs if logprobs else None,
                **sampling,
            )
            return _as_chat(completion) if stream else _as_chat_response(completion)
        name = picked
    else:
        name = _named(tool_choice, function_call, names)
    named = {"type": "function", "function": {"name": name}}
    return delegate(llama=llama, messages=shown, tools=tool_list, tool_choice=named, **common)
