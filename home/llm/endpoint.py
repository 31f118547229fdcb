"""How an agent talks to the embedded model: tool calls under a JSON-schema grammar.

A model of 135M parameters calls tools reliably only under a constraint
(measured here: free-form tool calls 0/5, JSON-schema constrained 5/5). τ's
OpenAI provider refuses a ``grammar`` or ``json_schema`` beside tools, because
llama.cpp 400s on the first and silently drops tool calling on the second. The
constraint that works with τ is the one llama-cpp-python applies itself: a
request whose ``tool_choice`` names one function is answered by a call to that
function, its arguments generated under a grammar compiled from the function's
JSON schema (``chat_format=chatml-function-calling``). ``tool_choice`` rides in
the model's ``extra_body``, which τ merges into every request.

For an agent that answers aloud the named tool is ``speak``, which is terminal:
every turn ends in one well-formed speak call.

Requests are not streamed: llama-cpp-python repeats the function name in every
streamed tool-call delta, and τ, reading the OpenAI wire, concatenates the
fragments into a tool name that does not exist (``speakspeakspeak``).
"""

from __future__ import annotations

from typing import Any

from home.agents.launch import ModelEndpoint
from home.llm.model_file import EMBEDDED_MODEL_ID

# Short answers: a spoken sentence or two, and a small context on a small machine.
# Room for the speak call's longest text (300 characters) at 2.5 characters a token,
# so the constrained JSON always closes (seen at 96: a 340-character run cut off).
EMBEDDED_MAX_TOKENS = 160
EMBEDDED_CONTEXT = 4096


def forced_tool_choice(tool: str) -> dict[str, Any]:
    """The OpenAI ``tool_choice`` that names exactly one function."""
    return {"type": "function", "function": {"name": tool}}


def embedded_endpoint(url: str, answer_tool: str | None) -> ModelEndpoint:
    """The endpoint of the embedded server for an agent whose answers go through ``answer_tool``.

    With ``answer_tool`` None (an agent without a handset) the model answers in
    prose, unconstrained.
    """
    extra: dict[str, Any] = {}
    if answer_tool is not None:
        extra["tool_choice"] = forced_tool_choice(answer_tool)
    return ModelEndpoint(
        base_url=url,
        model=EMBEDDED_MODEL_ID,
        max_tokens=EMBEDDED_MAX_TOKENS,
        context_window=EMBEDDED_CONTEXT,
        temperature=0.2,
        extra_body=extra,
        stream=False,
        # llama-cpp-python's server takes a GBNF ``grammar`` on a request without tools
        # (the memory evaluator's fact lines).
        grammar="gbnf",
    )
