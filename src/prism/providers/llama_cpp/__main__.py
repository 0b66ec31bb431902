"""``python -m prism.providers.llama_cpp``: llama-cpp-python's server with the embedded defaults."""

from prism.providers.llama_cpp._server import main

main()
