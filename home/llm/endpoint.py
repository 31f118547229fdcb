"""How an agent talks to the embedded model: answers in prose, or tool calls under a grammar.

An agent that answers aloud (one with a handset) gets its answer from the
embedded model in one of two modes (:class:`AnswerMode`), measured on 64
everyday prompts (``make bench NAME=answers``; docs/architecture.md "Prose rules"):

- ``prose`` (the default): the model writes its answer as a plain chat reply and
  the handset speaks it. llama-cpp-python renders a request without
  ``tool_choice`` as a plain ChatML chat (no tool schemas in the prompt), which
  is what SmolLM2 was tuned on.
- ``forced-tool``: a request whose ``tool_choice`` names one function is answered
  by a call to that function, its arguments generated under a grammar compiled
  from the function's JSON schema (``chat_format=chatml-function-calling``).
  A model of 135M parameters calls tools reliably only under such a constraint
  (free-form tool calls 0/5, JSON-schema constrained 5/5), but writing its
  answer as a JSON string after the schema-laden system prompt it copied the
  user's words (most prompts, before the prompt fixes of :mod:`home.llm.serve`)
  or its own previous answer (45 % of turns, after them). τ's OpenAI provider
  refuses a ``grammar`` or ``json_schema`` beside tools, so ``tool_choice`` rides
  in the model's ``extra_body``, which τ merges into every request.

Requests are streamed, so the handset can speak an answer's first sentence
while the model writes the rest, except in ``forced-tool`` mode:
llama-cpp-python repeats the function name in every streamed tool-call delta,
and τ, reading the OpenAI wire, concatenates the fragments into a tool name
that does not exist (``speakspeakspeak``). A request without ``tool_choice`` is
a plain completion to llama-cpp-python, which streams it as text.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from home.llm.model_file import EMBEDDED_MODEL_ID

# Short answers: a spoken sentence or two, and a small context on a small machine.
# Room for the speak call's longest text (300 characters) at 2.5 characters a token,
# so the constrained JSON always closes (seen at 96: a 340-character run cut off).
EMBEDDED_MAX_TOKENS = 160
EMBEDDED_CONTEXT = 4096
# A tighter cap for a spoken prose answer, measured but not shipped: the whole answer is
# generated before the handset speaks it, so its length is the model's share of the wait
# (answers ran p50 44 and p95 151 tokens), yet over the everyday prompts 64 tokens left
# 4 answers of 64 made of the user's words against 2 (`make bench NAME=answers`).
# An answer any cap cuts is spoken up to its last whole sentence (the handset).
PROSE_MAX_TOKENS = 64


@dataclass(frozen=True)
class ModelEndpoint:
    """One OpenAI-compatible endpoint and how τ should talk to it."""

    base_url: str
    model: str = "default"
    api_key: str = "none"
    max_tokens: int = 256
    context_window: int = 8192
    temperature: float | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    stream: bool = True
    # The decode-constraint dialect the server accepts ("gbnf" for llama.cpp), or None.
    grammar: str | None = None

    def tau_entry(self) -> dict[str, Any]:
        """This endpoint as an entry of τ's ``config.json`` ``models`` map."""
        entry: dict[str, Any] = {
            "backend": "openai",
            "model": self.model,
            "base_url": self.base_url,
            "api_key": self.api_key,
            "max_tokens": self.max_tokens,
            "context_window": self.context_window,
            "stream": self.stream,
            # Prompt caching asks nothing of an OpenAI-compatible local server.
            "prompt_cache": False,
        }
        if self.temperature is not None:
            entry["temperature"] = self.temperature
        if self.extra_body:
            entry["extra_body"] = dict(self.extra_body)
        if self.grammar is not None:
            entry["grammar"] = self.grammar
        entry["compaction"] = self.compaction()
        return entry

    def compaction(self) -> dict[str, Any]:
        """τ's auto-compaction sized to this window.

        τ's defaults (a 16384-token reserve, 20000 kept) assume a large window: on a
        4096- or 8192-token one its limits come out negative and auto-compaction
        silently never runs, so a long-lived agent grows past its window and then
        fails every turn (seen: 13k tokens sent to the 4k embedded model). A quarter
        of the window is reserved for the summarizing call and a quarter kept verbatim.
        """
        quarter = self.context_window // 4
        return {
            "auto": True,
            "reserve_tokens": max(quarter, 2 * self.max_tokens),
            "keep_recent_tokens": quarter,
        }


def forced_tool_choice(tool: str) -> dict[str, Any]:
    """The OpenAI ``tool_choice`` that names exactly one function."""
    return {"type": "function", "function": {"name": tool}}


class AnswerMode(enum.Enum):
    """How an agent that answers aloud gets its answer from the embedded model."""

    PROSE = "prose"
    FORCED_TOOL = "forced-tool"


@dataclass(frozen=True)
class Sampling:
    """The sampling settings of an agent's turns on the embedded model (llama.cpp's names)."""

    temperature: float = 0.2
    repeat_penalty: float = 1.1
    # The sampler's seed for every request, or None for the server's own. llama-cpp-python
    # draws each unseeded request's seed from the previous one, so without a seed an answer
    # depends on every request the server took before it (a memory completion, a
    # compaction); a test that must repeat gives one.
    seed: int | None = None


EMBEDDED_ANSWER_MODE = AnswerMode.PROSE
# Over the everyday prompt set a penalty of 1.3 left fewer answers made of the user's
# words than llama.cpp's 1.1 (2 of 64 against 5; `make bench NAME=answers`).
EMBEDDED_SAMPLING = Sampling(temperature=0.2, repeat_penalty=1.3)


def embedded_endpoint(
    url: str,
    answer_tool: str | None,
    mode: AnswerMode = EMBEDDED_ANSWER_MODE,
    sampling: Sampling = EMBEDDED_SAMPLING,
    prose_max_tokens: int = EMBEDDED_MAX_TOKENS,
) -> ModelEndpoint:
    """The endpoint of the embedded server for an agent whose answers go through ``answer_tool``.

    In ``forced-tool`` mode every request names ``answer_tool``; in ``prose`` mode, and
    for an agent without one (no handset), the model answers in prose, unconstrained.
    An agent that answers aloud in prose is capped at ``prose_max_tokens`` a request.
    """
    extra: dict[str, Any] = {"repeat_penalty": sampling.repeat_penalty}
    if sampling.seed is not None:
        extra["seed"] = sampling.seed
    max_tokens = EMBEDDED_MAX_TOKENS
    forced = answer_tool is not None and mode is AnswerMode.FORCED_TOOL
    if forced and answer_tool is not None:
        extra["tool_choice"] = forced_tool_choice(answer_tool)
    elif answer_tool is not None:
        max_tokens = prose_max_tokens
    return ModelEndpoint(
        base_url=url,
        model=EMBEDDED_MODEL_ID,
        max_tokens=max_tokens,
        context_window=EMBEDDED_CONTEXT,
        temperature=sampling.temperature,
        extra_body=extra,
        stream=not forced,
        # llama-cpp-python's server takes a GBNF ``grammar`` on a request without tools.
        # The memory reflex reads a declared dialect as a small model's mark: the keep gate
        # decides and memories are the user's own words (home/memory/extract.py).
        grammar="gbnf",
    )
