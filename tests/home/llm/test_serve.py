"""The prompt llama-cpp-python's chatml-function-calling handler builds, with and without our fix.

The handler runs for real, with a stand-in for the model that records the
prompt (:func:`home.llm.serve.render_chat_prompt`); no model is loaded.
"""

from __future__ import annotations

import html
import json
from typing import Any

import pytest
from llama_cpp import llama_chat_format

from home.llm.errors import LlmServerError
from home.llm.serve import (
    DEFAULT_HISTORY_TURNS,
    HISTORY_STEP,
    history_turns_option,
    plain_messages,
    render_chat_prompt,
    render_chat_prompts_verbatim,
)
from home.llm.server import CHAT_FORMAT, LlamaServer, LlamaServerConfig

USER_TEXT = "it's Tom & Jerry"
ASSISTANT_TEXT = "Biscuit's bowl & lead"
ARGUMENTS = json.dumps({"text": "Rock & roll, isn't it?"})
CONVERSATION: list[Any] = [
    {"role": "system", "content": "Answer by calling speak."},
    {"role": "user", "content": USER_TEXT},
    {
        "role": "assistant",
        "content": ASSISTANT_TEXT,
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "speak", "arguments": ARGUMENTS},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": "spoken"},
    {"role": "user", "content": USER_TEXT},
]
SPEAK = {
    "type": "function",
    "function": {
        "name": "speak",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
}
TOOL_CHOICES: dict[str, Any] = {
    "no tools": {},
    "forced tool": {
        "tools": [SPEAK],
        "tool_choice": {"type": "function", "function": {"name": "speak"}},
    },
    "auto tool": {"tools": [SPEAK], "tool_choice": "auto"},
}


@pytest.mark.usefixtures("verbatim_prompts")
@pytest.mark.parametrize("request_tools", TOOL_CHOICES.values(), ids=TOOL_CHOICES.keys())
def test_user_text_earlier_answers_and_tool_arguments_reach_the_model_verbatim(
    request_tools: dict[str, Any],
) -> None:
    prompt = render_chat_prompt(CONVERSATION, **request_tools)

    assert prompt.count(f"\n{USER_TEXT}<|im_end|>") == 2
    assert f"\n{ASSISTANT_TEXT}<|im_end|>" in prompt
    assert f"functions.speak:\n{ARGUMENTS}<|im_end|>" in prompt
    for entity in ("&#39;", "&amp;", "&#34;"):
        assert entity not in prompt


@pytest.mark.usefixtures("verbatim_prompts")
@pytest.mark.parametrize("request_tools", TOOL_CHOICES.values(), ids=TOOL_CHOICES.keys())
def test_content_parts_reach_the_model_as_text_and_tool_results_leave_no_header(
    request_tools: dict[str, Any],
) -> None:
    parts = [{"type": "text", "text": "it's "}, {"type": "image"}, {"type": "text", "text": "on"}]
    conversation = [*CONVERSATION, {"role": "user", "content": parts}]

    prompt = render_chat_prompt(conversation, **request_tools)

    assert "<|im_start|>user\nit's on<|im_end|>" in prompt
    assert "'type'" not in prompt
    assert "<|im_start|>tool" not in prompt
    assert "spoken" not in prompt
    assert f"<|im_end|>\n<|im_start|>user\n{USER_TEXT}<|im_end|>" in prompt


@pytest.mark.usefixtures("library_as_shipped")
def test_the_library_alone_renders_content_parts_as_python_and_a_bare_tool_header() -> None:
    """What plain_messages corrects; once this fails after an upgrade, it can go."""
    parts = [{"type": "text", "text": "hello"}]
    prompt = render_chat_prompt([*CONVERSATION, {"role": "user", "content": parts}])

    assert "[{&#39;type&#39;: &#39;text&#39;, &#39;text&#39;: &#39;hello&#39;}]" in prompt
    assert "<|im_start|>tool\n<|im_start|>user" in prompt


@pytest.mark.usefixtures("library_as_shipped")
def test_the_library_alone_html_escapes_the_prompt() -> None:
    """The bug home.llm.serve corrects; once this fails after an upgrade, the correction can go."""
    prompt = render_chat_prompt(CONVERSATION)

    assert "\nit&#39;s Tom &amp; Jerry<|im_end|>" in prompt
    assert "{&#34;text&#34;: &#34;Rock &amp; roll, isn&#39;t it?&#34;}" in prompt
    assert USER_TEXT not in prompt


@pytest.mark.usefixtures("library_as_shipped")
def test_the_correction_refuses_a_library_without_the_environment_it_replaces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(llama_chat_format, "ImmutableSandboxedEnvironment")

    with pytest.raises(LlmServerError, match=r"ImmutableSandboxedEnvironment is None, expected"):
        render_chat_prompts_verbatim()


@pytest.mark.usefixtures("library_as_shipped")
def test_the_correction_refuses_a_handler_that_still_escapes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As after an upgrade that builds the handler's environment some other way."""

    def escaping_handler(*, llama: Any, messages: list[Any], **_: Any) -> Any:
        return llama.create_completion(prompt=html.escape(str(messages)))

    original = llama_chat_format.get_chat_completion_handler
    monkeypatch.setattr(
        llama_chat_format,
        "get_chat_completion_handler",
        lambda name: escaping_handler if name == CHAT_FORMAT else original(name),
    )

    with pytest.raises(LlmServerError, match=r"verbatim 3 times .* got .*&#x27;"):
        render_chat_prompts_verbatim()


def test_the_embedded_server_runs_through_the_correcting_entry_module() -> None:
    argv = LlamaServer().argv()

    assert argv[1:3] == ["-m", "home.llm.serve"]
    assert argv[argv.index("--chat_format") + 1] == CHAT_FORMAT


def _conversation(turns: int) -> list[Any]:
    """A system prompt and ``turns`` questions, each but the last answered."""
    conversation: list[Any] = [{"role": "system", "content": "Be brief."}]
    for n in range(1, turns):
        conversation += [
            {"role": "user", "content": [{"type": "text", "text": f"question {n}"}]},
            {"role": "assistant", "content": f"answer {n}"},
        ]
    return [*conversation, {"role": "user", "content": f"question {turns}"}]


def _seen(turns: int, history_turns: int | None) -> list[str]:
    return [str(m.get("content")) for m in plain_messages(_conversation(turns), history_turns)]


def test_the_model_sees_the_system_prompt_and_the_last_turns_only() -> None:
    assert _seen(5, 0) == ["Be brief.", "question 5"]
    assert _seen(2, 1) == ["Be brief.", "question 1", "answer 1", "question 2"]
    assert _seen(5, None) == _seen(5, 100)
    assert len(_seen(5, 100)) == 10
    for turns in range(2, 20):
        earlier = (len(_seen(turns, 1)) - 2) // 2  # the system prompt and the question aside
        assert 1 <= earlier <= HISTORY_STEP, turns


def test_most_prompts_begin_with_the_last_prompt_and_its_answer() -> None:
    moved = []
    for turns in range(2, 20):
        before, now = _seen(turns - 1, 1), _seen(turns, 1)
        if now[: len(before) + 1] != [*before, f"answer {turns - 1}"]:
            moved.append(turns)
    # The window's start moves once every HISTORY_STEP turns; between, the model's KV
    # cache already holds all but the new question.
    assert moved == list(range(2 + HISTORY_STEP, 20, HISTORY_STEP))
    assert _seen(10, 1)[1] == "question 7"


def test_the_history_option_is_taken_out_of_the_servers_arguments() -> None:
    llama_args = ["--model", "m.gguf", "--port", "1"]
    assert history_turns_option(llama_args) == (DEFAULT_HISTORY_TURNS, llama_args)
    assert history_turns_option(["--history_turns", "0", *llama_args]) == (0, llama_args)
    with pytest.raises(LlmServerError, match="--history_turns takes a whole number >= 0, got '-1'"):
        history_turns_option(["--history_turns", "-1"])
    with pytest.raises(LlmServerError, match="got ''"):
        history_turns_option(["--history_turns"])
    argv = LlamaServer(LlamaServerConfig(history_turns=3)).argv()
    assert argv[argv.index("--history_turns") + 1] == "3"
    assert "--history_turns" not in LlamaServer().argv()
