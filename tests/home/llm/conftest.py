"""Chat prompts as the library ships them, or verbatim as ``home.llm.serve`` renders them."""

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment
from llama_cpp import llama_chat_format

from home.llm.serve import render_chat_prompts_verbatim


@pytest.fixture
def library_as_shipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """llama_chat_format as the library ships it, restored after the test whatever it changed."""
    monkeypatch.setattr(
        llama_chat_format, "ImmutableSandboxedEnvironment", ImmutableSandboxedEnvironment
    )


@pytest.fixture
def verbatim_prompts(library_as_shipped: None) -> None:
    """llama_chat_format with the correction ``python -m home.llm.serve`` makes at start."""
    render_chat_prompts_verbatim()
