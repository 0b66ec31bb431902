"""prism's llama-cpp-python chat handler (issue 21, item 16), the one the in-process provider and
the server launcher (``python -m prism.providers.llama_cpp``) use.

The handler is driven with a stand-in model whose ``create_completion`` records the prompt and
answers from a script, so the prompt the model would see is read directly; it still runs
llama-cpp-python's own code around it (grammars, the delegated ``chatml-function-calling``), so
these tests need llama-cpp-python (skipped without it, unless ``PRISM_REQUIRE_LOCAL_MODEL=1``).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from typing import Any

import pytest

ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}


@pytest.fixture(autouse=True)
def _require_llama_cpp() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        message = "llama-cpp-python is not installed: pip install 'prism-runtime[local]'"
        if os.environ.get("PRISM_REQUIRE_LOCAL_MODEL") == "1":
            pytest.fail(message + " — required because PRISM_REQUIRE_LOCAL_MODEL=1")
        pytest.skip(message)


class ScriptedModel:
    """Stands in for ``llama_cpp.Llama`` below the chat layer: each ``create_completion``
    records its arguments and answers with the next scripted text."""

    verbose = False

    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.calls: list[dict[str, Any]] = []

    def set_seed(self, seed: int) -> None:
        self.seed = seed

    def create_completion(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        text = self.texts.pop(0)
        if kwargs.get("stream"):
            return self._chunks(text)
        return {
            "id": "cmpl-1",
            "object": "text_completion",
            "created": 1,
            "model": "m",
            "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }

    @staticmethod
    def _chunks(text: str) -> Iterator[dict[str, Any]]:
        for piece, finish in ((text[:3], None), (text[3:], None), ("", "stop")):
            yield {
                "id": "cmpl-1",
                "object": "text_completion",
                "created": 1,
                "model": "m",
                "choices": [{"text": piece, "index": 0, "logprobs": None, "finish_reason": finish}],
            }


def _handle(model: ScriptedModel, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    from prism.providers.llama_cpp._chat_handler import prism_chat_handler

    return prism_chat_handler(llama=model, messages=messages, **kwargs)


HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You add numbers with the add tool."},
    {"role": "user", "content": "What's 2 plus 3? Say \"five\" & <stop>."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{
            "id": "call_1",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
        }],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "5"},
    {"role": "assistant", "content": "Here's the answer: 5."},
    {"role": "user", "content": "And 4 plus 5?"},
]


def test_the_history_reaches_the_prompt_unescaped_i21_16() -> None:
    """The library's template escapes HTML (``Here&#39;s``); prism's handler shows the text
    as written, and the tool result as the user turn ``Result of add: 5``."""
    model = ScriptedModel("functions.add", '{"a": 4, "b": 5}')
    _handle(model, HISTORY, tools=[ADD])
    prompt = model.calls[0]["prompt"]
    assert "Here's the answer: 5." in prompt
    assert 'Say "five" & <stop>.' in prompt
    assert '{"a": 2, "b": 3}' in prompt
    assert "&#" not in prompt and "&amp;" not in prompt and "&lt;" not in prompt
    assert "<|im_start|>user\nResult of add: 5<|im_end|>" in prompt


def test_tools_without_a_tool_choice_are_offered_and_the_call_streams_i21_16() -> None:
    """No ``tool_choice`` with tools is ``"auto"`` (the library drops the tools), and a picked
    tool is generated as a streamed call (the library raises for a streamed automatic call)."""
    model = ScriptedModel("functions.add", '{"a": 4, "b": 5}')
    chunks = list(_handle(model, HISTORY, tools=[ADD], stream=True))
    assert "functions.add:" in model.calls[0]["prompt"]  # the tools are listed
    assert model.calls[1]["prompt"].endswith("functions.add:\n")
    calls = [c for chunk in chunks for c in chunk["choices"][0]["delta"].get("tool_calls") or ()]
    assert calls and calls[0]["function"]["name"] == "add"
    assert "".join(c["function"]["arguments"] for c in calls) == '{"a": 4, "b": 5}'
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_an_automatic_text_answer_is_generated_freely_i21_16() -> None:
    """When the model picks ``message:``, the answer is generated without the library's
    follow-up grammar (which allowed only ``functions.NAME:`` or the end), capped by
    ``max_tokens`` and streamed."""
    model = ScriptedModel("message", "Nine, I think.")
    chunks = list(_handle(model, HISTORY, tools=[ADD], stream=True, max_tokens=7))
    answer = model.calls[1]
    assert answer["prompt"].endswith("message:\n")
    assert answer.get("grammar") is None
    assert answer["max_tokens"] == 7
    text = "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in chunks)
    assert text == "Nine, I think."
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_required_makes_the_model_pick_a_tool_i21_16() -> None:
    """``"required"`` (an assertion failure in the library, a 500 from the server): with one
    tool that tool is forced; with several the model picks one of them, never a message."""
    sub = {"type": "function", "function": {**ADD["function"], "name": "sub"}}
    model = ScriptedModel('{"a": 4, "b": 5}')
    response = _handle(model, HISTORY, tools=[ADD], tool_choice="required")
    assert model.calls[0]["prompt"].endswith("functions.add:\n")
    assert response["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "add"
    model = ScriptedModel("functions.sub", '{"a": 4, "b": 5}')
    response = _handle(model, HISTORY, tools=[ADD, sub], tool_choice="required")
    pick = model.calls[0]
    assert pick["temperature"] == 0 and pick["stop"] == [":"]
    assert "message:" not in str(pick["grammar"]._grammar)
    assert response["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "sub"


def test_none_offers_no_tools_and_hides_the_earlier_calls_i21_16() -> None:
    model = ScriptedModel("Nine.")
    response = _handle(model, HISTORY, tools=[ADD], tool_choice="none")
    prompt = model.calls[0]["prompt"]
    assert "functions." not in prompt
    assert "Result of add: 5" in prompt
    assert response["choices"][0]["message"]["content"] == "Nine."


def test_a_named_tool_that_is_not_offered_is_refused() -> None:
    model = ScriptedModel()
    choice = {"type": "function", "function": {"name": "nope"}}
    with pytest.raises(ValueError, match="'nope'"):
        _handle(model, HISTORY, tools=[ADD], tool_choice=choice)
    assert model.calls == []


def test_the_launcher_registers_the_handler_as_its_default_chat_format() -> None:
    from llama_cpp.llama_chat_format import get_chat_completion_handler

    from prism.providers.llama_cpp._chat_handler import prism_chat_handler, register_chat_handler
    from prism.providers.llama_cpp._server import server_args

    register_chat_handler()
    assert get_chat_completion_handler("prism-chatml-function-calling") is prism_chat_handler
    args = server_args(["--model", "m.gguf"])
    assert args[args.index("--chat_format") + 1] == "prism-chatml-function-calling"
