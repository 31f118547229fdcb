"""The embedded model server's entry point: ``python -m home.llm.serve <llama_cpp.server args>``.

It runs llama-cpp-python's own server after correcting one library bug. The
``chatml-function-calling`` handler builds its Jinja environment with
``autoescape=jinja2.select_autoescape(["html", "xml"])``, which is on for a
template given as a string, so every message reached the model HTML-escaped
(``'`` as ``&#39;``, ``&`` as ``&amp;``): the model copied the escapes into its
answers, and the next turn escaped them again. A chat prompt is not HTML, so
:func:`render_chat_prompts_verbatim` has every chat template in
``llama_cpp.llama_chat_format`` rendered without autoescaping (the others never
asked for it), then renders a probe conversation through the handler and
raises :class:`~home.llm.errors.LlmServerError` unless the probe comes out
verbatim: a llama-cpp-python upgrade that changes the handler's shape stops the
server at start instead of bringing the escaping back.

The same handler's template also writes ``{{ message.content }}`` as it comes:
τ sends content as a list of parts, which reached the model as the Python repr
``[{'type': 'text', 'text': 'hello'}]`` (and the model answered in that shape),
and it has no branch for ``role: tool``, so a tool result became an
unterminated ``<|im_start|>tool`` header with its content dropped.
:func:`plain_messages` hands the handler text content and leaves tool results
out (the only tool an answering agent calls under it is the terminal ``speak``,
whose result tells the model nothing); the probe checks that too.

It also keeps the model's view of a conversation short: the system prompt, the
current turn and the ``--history_turns`` turns before it (:data:`DEFAULT_HISTORY_TURNS`),
or up to :data:`HISTORY_STEP` - 1 more: the window's start moves only every
``HISTORY_STEP`` turns, so most prompts begin with the whole previous prompt and its
answer, which llama.cpp still holds in its KV cache, and only the new turn is read.
Sliding one turn at a time, every prompt differed from the last right after the
system prompt and the model re-read about 90 tokens per turn (550 ms on one core).
Given a whole session, SmolLM2-135M answered most turns with a copy of its
previous answer ("The answer is ... in Spanish." to every question after the
twentieth; ``make bench NAME=answers``). The session itself stays whole in τ, and
what the user told earlier is the memory reflex's to recall.

And it honours a request's ``seed``, which the same handler accepts and never passes
on to the completion: the wrapper seeds the model before the handler runs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn, cast

from jinja2.sandbox import ImmutableSandboxedEnvironment
from llama_cpp import Llama, llama_chat_format
from llama_cpp.llama_types import (
    ChatCompletionRequestMessage,
    ChatCompletionTool,
    ChatCompletionToolChoiceOption,
)
from llama_cpp.server.__main__ import main as llama_server_main

from home.llm.errors import LlmServerError
from home.llm.server import CHAT_FORMAT, HISTORY_TURNS_FLAG

# The name llama_chat_format builds every chat template's Jinja environment with.
_ENVIRONMENT_NAME = "ImmutableSandboxedEnvironment"
_PROBE_TEXT = "it's Tom & Jerry"
_PROBE_TOOL_RESULT = "the tool result"

# Earlier turns the model sees besides the current one (docs/architecture.md "Prose rules").
DEFAULT_HISTORY_TURNS = 1
# The window's start moves in steps of this many turns, so the model sees between
# history_turns and history_turns + HISTORY_STEP - 1 earlier turns, and on all but
# one turn of each step the prompt begins with the previous one (its KV cache kept).
HISTORY_STEP = 3


def _text_of(content: object) -> object:
    """Content parts (``[{"type": "text", "text": ...}, ...]``) as one string; else as is."""
    if not isinstance(content, list):
        return content
    return "".join(
        str(part.get("text", ""))
        for part in content
        if isinstance(part, dict) and part.get("type") == "text"
    )


def plain_messages(
    messages: Iterable[ChatCompletionRequestMessage], history_turns: int | None = None
) -> list[ChatCompletionRequestMessage]:
    """Messages as the chatml-function-calling template can render them.

    Content parts joined into their text; ``role: tool`` messages left out (the
    template has no place for them). With ``history_turns``, the leading system
    messages and the conversation from a user message ``history_turns`` to
    ``history_turns + HISTORY_STEP - 1`` turns before the last one, the same one for
    ``HISTORY_STEP`` turns in a row (0: the last turn alone).
    """
    plain = [
        cast(ChatCompletionRequestMessage, {**message, "content": _text_of(message.get("content"))})
        for message in messages
        if message.get("role") != "tool"
    ]
    if history_turns is None:
        return plain
    system = next((i for i, m in enumerate(plain) if m.get("role") != "system"), len(plain))
    users = [i for i, m in enumerate(plain) if i >= system and m.get("role") == "user"]
    earlier = len(users) - 1
    if earlier <= history_turns:
        return plain
    step = HISTORY_STEP if history_turns else 1
    first = (earlier - history_turns) // step * step
    return plain[:system] + plain[users[first] :]


def _plain_message_handler(library_handler: Any, history_turns: int | None) -> Any:
    """``library_handler`` given :func:`plain_messages` of every request's messages."""

    def handler(*, messages: list[ChatCompletionRequestMessage], **options: Any) -> Any:
        llama, seed = options.get("llama"), options.get("seed")
        if isinstance(llama, Llama) and isinstance(seed, int):
            # The library handler drops the request's seed; its completion draws its own
            # from the model's, so seeding the model makes the answer repeat.
            llama.set_seed(seed)
        return library_handler(messages=plain_messages(messages, history_turns), **options)

    handler.library_handler = library_handler  # type: ignore[attr-defined]  # to wrap it afresh
    return handler


class _PlainTextSandboxedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox llama_chat_format renders chat templates in, never HTML-escaping."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **{**options, "autoescape": False})


class _PromptRendered(Exception):
    """Raised by :class:`_PromptRecorder` to end the handler once it has built its prompt."""

    def __init__(self, prompt: str) -> None:
        super().__init__(prompt)
        self.prompt = prompt


class _PromptRecorder:
    """Stands in for ``llama_cpp.Llama``: the handler's first completion request ends it."""

    verbose = False

    def create_completion(self, *, prompt: str, **options: object) -> NoReturn:
        raise _PromptRendered(prompt)


def render_chat_prompt(
    messages: Sequence[ChatCompletionRequestMessage],
    *,
    tools: Sequence[ChatCompletionTool] | None = None,
    tool_choice: ChatCompletionToolChoiceOption | None = None,
) -> str:
    """The prompt the server's chat handler builds for a request, without a model."""
    handler = llama_chat_format.get_chat_completion_handler(CHAT_FORMAT)
    try:
        handler(
            # The handler reads only ``verbose`` and ``create_completion`` before its first
            # completion request, which is where the recorder stops it.
            llama=cast(Llama, _PromptRecorder()),
            messages=list(messages),
            tools=None if tools is None else list(tools),
            tool_choice=tool_choice,
        )
    except _PromptRendered as rendered:
        return rendered.prompt
    raise LlmServerError(f"the {CHAT_FORMAT} handler answered without asking for a completion")


def render_chat_prompts_verbatim(history_turns: int | None = None) -> None:
    """Render chat prompts verbatim: no HTML autoescaping, text content, no tool headers.

    ``history_turns``: how many turns before the current one the model sees (None: all).
    Raises LlmServerError unless a probe conversation comes out as it should.
    """
    current = getattr(llama_chat_format, _ENVIRONMENT_NAME, None)
    if current not in (ImmutableSandboxedEnvironment, _PlainTextSandboxedEnvironment):
        raise LlmServerError(
            f"llama_cpp.llama_chat_format.{_ENVIRONMENT_NAME} is {current!r}, "
            f"expected jinja2's; the autoescape fix in {__name__} needs a look"
        )
    setattr(llama_chat_format, _ENVIRONMENT_NAME, _PlainTextSandboxedEnvironment)
    handler = llama_chat_format.get_chat_completion_handler(CHAT_FORMAT)
    library_handler = getattr(handler, "library_handler", handler)
    registry = llama_chat_format.LlamaChatCompletionHandlerRegistry()  # type: ignore[no-untyped-call]  # the library leaves it unannotated
    registry.register_chat_completion_handler(
        CHAT_FORMAT, _plain_message_handler(library_handler, history_turns), overwrite=True
    )
    prompt = _render_probe()
    if prompt.count(_PROBE_TEXT) != 3 or "<|im_start|>tool" in prompt or "'type'" in prompt:
        raise LlmServerError(
            f"the {CHAT_FORMAT} prompt should hold {_PROBE_TEXT!r} verbatim 3 times "
            f"(user, assistant, tool-call arguments) as text and no tool message, "
            f"got {prompt!r}"
        )


def _render_probe() -> str:
    arguments = json.dumps({"text": _PROBE_TEXT})
    return render_chat_prompt(
        [
            {"role": "user", "content": [{"type": "text", "text": _PROBE_TEXT}]},
            {
                "role": "assistant",
                "content": _PROBE_TEXT,
                "tool_calls": [
                    {
                        "id": "call_0",
                        "type": "function",
                        "function": {"name": "speak", "arguments": arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_0", "content": _PROBE_TOOL_RESULT},
        ],
        tools=[{"type": "function", "function": {"name": "speak", "parameters": {}}}],
        tool_choice={"type": "function", "function": {"name": "speak"}},
    )


def history_turns_option(argv: list[str]) -> tuple[int, list[str]]:
    """This module's ``--history_turns N`` out of ``argv``; the rest is llama_cpp.server's."""
    if HISTORY_TURNS_FLAG not in argv:
        return DEFAULT_HISTORY_TURNS, argv
    at = argv.index(HISTORY_TURNS_FLAG)
    value = argv[at + 1] if at + 1 < len(argv) else ""
    if not value.isdigit():
        raise LlmServerError(f"{HISTORY_TURNS_FLAG} takes a whole number >= 0, got {value!r}")
    return int(value), argv[:at] + argv[at + 2 :]


def main() -> None:
    """Run ``llama_cpp.server`` on this process's arguments, chat prompts rendered verbatim."""
    history_turns, sys.argv[1:] = history_turns_option(sys.argv[1:])
    render_chat_prompts_verbatim(history_turns)
    llama_server_main()  # type: ignore[no-untyped-call]  # the library leaves it unannotated


if __name__ == "__main__":
    main()
