"""The embedded model server; chat prompts as the library ships them, or verbatim."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment
from llama_cpp import llama_chat_format

from home.llm.serve import render_chat_prompts_verbatim
from home.llm.server import CHAT_FORMAT, LlamaServer, LlamaServerConfig


@pytest.fixture
async def llm(tmp_path: Path) -> AsyncIterator[LlamaServer]:
    """The embedded model server as ``home up`` runs it, its log in the test's directory."""
    log = tmp_path / "llama.log"
    async with LlamaServer(LlamaServerConfig(log_path=log)) as server:
        yield server


@pytest.fixture
def library_as_shipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """llama_chat_format as the library ships it, restored after the test whatever it changed."""
    monkeypatch.setattr(
        llama_chat_format, "ImmutableSandboxedEnvironment", ImmutableSandboxedEnvironment
    )
    registry = llama_chat_format.LlamaChatCompletionHandlerRegistry()
    monkeypatch.setitem(
        registry._chat_handlers, CHAT_FORMAT, llama_chat_format.chatml_function_calling
    )


@pytest.fixture
def verbatim_prompts(library_as_shipped: None) -> None:
    """llama_chat_format with the correction ``python -m home.llm.serve`` makes at start."""
    render_chat_prompts_verbatim()
