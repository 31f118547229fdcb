"""The verbs extension: ``journal_append``, ``jmfts_write`` and ``delegate`` as real tools.

Loaded by τ by path. Each verb publishes ``events.workspace.<agent>.out.<verb>``
with the turn's binding id and waits for its ack; a missing or failed ack is a
tool error. ``journal_append`` and ``jmfts_write`` are acked by their effectors
(``events.journal.append.<binding_id>``, ``events.journal.jmfts_write.<binding_id>``);
``delegate`` by the operator agent when it takes the task, or refuses it with the
reason (``events.journal.delegate.<binding_id>``). The operator's answer comes back
later as a new turn of this agent with the same binding id; one that does not come
within ``delegate_timeout_s`` is told to the agent instead by its node
(docs/architecture.md "Delegation"). The tool's result says exactly that.

The effectors write under the agent's own JMFTS principal; no credential passes
through this file, the model's context or a tool result.

Config (``--ext-config verbs:KEY=VALUE``): ``agent``, ``nats_url``,
``binding_file`` (run context), ``verbs`` (which to register), ``ack_timeout_s``,
``delegate_timeout_s`` (read by the node too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tau_agent_core.tools.base import ToolError

from home.tau_extensions.bus_link import BusLink
from home.tau_extensions.errors import ExtensionError
from shared.messages.verbs import VerbRequest
from shared.subjects import (
    JOURNAL_ACKS_PATTERN,
    check_name,
    delegate_ack_subject,
    jmfts_write_ack_subject,
    journal_append_ack_subject,
    verb_pattern,
    verb_subject,
)
from shared.subjects import VERBS as VERB_NAMES

TOUCHES_BUS = True
SUBJECTS = (*(verb_pattern(verb) for verb in VERB_NAMES), JOURNAL_ACKS_PATTERN)
RUN_CONTEXT = ("agent", "nats_url", "binding_file")

DEFAULT_ACK_TIMEOUT_S = 10.0
# How long an agent waits for a delegated task's answer before it is told there is none.
DEFAULT_DELEGATE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Verb:
    """One verb's contract: its schema, its ack, what the model is told on success.

    ``result`` may name ``{delegate_timeout_s}``, filled from the config."""

    description: str
    parameters: dict[str, Any]
    ack_subject: Callable[[str], str]
    result: str


def _schema(properties: dict[str, str], required: tuple[str, ...]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {k: {"type": "string", "description": v} for k, v in properties.items()},
        "required": list(required),
    }


VERBS: dict[str, Verb] = {
    "journal_append": Verb(
        description=(
            "Append a brief note to your private journal (durable memory): "
            "what you noticed and what you decided. Use it when the user asks you to "
            "note, write down or log something, with their words as the text."
        ),
        parameters=_schema({"text": "the note to append"}, ("text",)),
        ack_subject=journal_append_ack_subject,
        result="Noted in your journal.",
    ),
    "jmfts_write": Verb(
        description=(
            "Write a durable record into your workspace in the memory store. Use it when "
            "the user asks you to keep a record, a list or a document for later."
        ),
        parameters=_schema(
            {"text": "the record to write", "title": "a short title for the record"}, ("text",)
        ),
        ack_subject=jmfts_write_ack_subject,
        result="Written to your workspace.",
    ),
    "delegate": Verb(
        description=(
            "Hand a question about what is remembered to the operator agent, which can "
            "search memory. Use it when the user asks you to ask the operator, or asks "
            "what they told you before and your memories above do not say. It confirms it "
            "took the question or says why not; its answer comes to you later as a new "
            "message, for you to tell the user."
        ),
        parameters=_schema({"text": "the question or task to hand off"}, ("text",)),
        ack_subject=delegate_ack_subject,
        result=(
            "The operator took the question. Its answer will come to you as a new message; "
            "if it has none within {delegate_timeout_s:g} seconds, you will be told so instead. "
            "Tell the user you are finding out, or say nothing now."
        ),
    ),
}


def register(api: Any) -> None:
    """Register one tool per configured verb on τ's extension API."""
    config = api.config
    agent = check_name(str(config.get("agent", "")), "verbs config 'agent'")
    names = list(config.get("verbs", list(VERBS)))
    unknown = [n for n in names if n not in VERBS]
    if unknown:
        raise ValueError(f"verbs: unknown verb(s) {unknown}; known: {sorted(VERBS)}")
    link = BusLink(
        agent=agent,
        nats_url=str(config.get("nats_url", "")),
        binding_file=Path(str(config.get("binding_file", ""))),
        source=f"agent.{agent}",
    )
    ack_timeout_s = float(config.get("ack_timeout_s", DEFAULT_ACK_TIMEOUT_S))
    delegate_timeout_s = float(config.get("delegate_timeout_s", DEFAULT_DELEGATE_TIMEOUT_S))

    def make_tool(name: str) -> Any:
        verb = VERBS[name]
        subject = verb_subject(agent, name)

        async def execute(
            tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any, ctx: Any
        ) -> dict[str, Any]:
            text = params.get("text")
            if not isinstance(text, str) or not text.strip():
                raise ToolError(f"{name}: 'text' must be a non-empty string, got {text!r}")
            title = params.get("title")
            try:
                binding = link.binding()
                # The device travels with the verb, so a delegated answer can find its way back.
                request = VerbRequest(
                    text.strip(),
                    agent=agent,
                    title=title.strip() if isinstance(title, str) and title.strip() else None,
                    device=binding.device,
                )
                event = request.to_event(name, **link.stamp(binding))
                await link.publish_and_await_ack(
                    subject,
                    event,
                    verb.ack_subject(binding.binding_id),
                    timeout_s=ack_timeout_s,
                    signal=signal,
                )
            except ExtensionError as exc:
                raise ToolError(f"{name}: {exc}") from exc
            result = verb.result.format(delegate_timeout_s=delegate_timeout_s)
            return {"content": [{"type": "text", "text": result}]}

        return execute

    async def on_session_start(event: dict[str, Any], ctx: Any) -> None:
        await link.connect()

    async def on_session_shutdown(event: dict[str, Any], ctx: Any) -> None:
        await link.close()

    api.on("session_start", on_session_start)
    api.on("session_shutdown", on_session_shutdown)
    for name in names:
        api.register_tool(
            {
                "name": name,
                "description": VERBS[name].description,
                "parameters": VERBS[name].parameters,
                "execute": make_tool(name),
            }
        )
