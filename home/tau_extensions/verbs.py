"""The verbs extension: ``journal_append``, ``jmfts_write`` and ``delegate`` as real tools.

Loaded by τ by path. Each verb publishes ``events.workspace.<agent>.out.<verb>``
with the turn's binding id; ``journal_append`` and ``jmfts_write`` then wait for
their effector's ack (``events.journal.append.<binding_id>``,
``events.journal.jmfts_write.<binding_id>``) and a missing or failed ack is a
tool error. ``delegate`` is acked by nobody: the operator agent's answer comes
back later as an ordinary event.

The effectors write under the agent's own JMFTS principal; no credential passes
through this file, the model's context or a tool result.

Config (``--ext-config verbs:KEY=VALUE``): ``agent``, ``nats_url``,
``binding_file`` (run context), ``verbs`` (which to register), ``ack_timeout_s``.
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
    check_name,
    jmfts_write_ack_subject,
    journal_append_ack_subject,
    verb_subject,
)

TOUCHES_BUS = True
SUBJECTS = (
    "events.workspace.*.out.journal_append",
    "events.workspace.*.out.jmfts_write",
    "events.workspace.*.out.delegate",
    "events.journal.>",
)
RUN_CONTEXT = ("agent", "nats_url", "binding_file")

DEFAULT_ACK_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Verb:
    """One verb's contract: its schema, its ack (if any), what the model is told on success."""

    description: str
    parameters: dict[str, Any]
    ack_subject: Callable[[str], str] | None
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
            "what you noticed and what you decided."
        ),
        parameters=_schema({"text": "the note to append"}, ("text",)),
        ack_subject=journal_append_ack_subject,
        result="Noted in your journal.",
    ),
    "jmfts_write": Verb(
        description="Write a durable record into your workspace in the memory store.",
        parameters=_schema(
            {"text": "the record to write", "title": "a short title for the record"}, ("text",)
        ),
        ack_subject=jmfts_write_ack_subject,
        result="Written to your workspace.",
    ),
    "delegate": Verb(
        description=(
            "Hand a question or task about memory to the operator agent. It works in "
            "the background and its answer reaches you later as a new message."
        ),
        parameters=_schema({"text": "the question or task to hand off"}, ("text",)),
        ack_subject=None,
        result="Handed off. The answer will reach you later as a new message.",
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
                event = link.envelope(name, request.to_payload(), binding)
                if verb.ack_subject is None:
                    await link.publish(subject, event)
                else:
                    await link.publish_and_await_ack(
                        subject,
                        event,
                        verb.ack_subject(binding.binding_id),
                        timeout_s=ack_timeout_s,
                        signal=signal,
                    )
            except ExtensionError as exc:
                raise ToolError(f"{name}: {exc}") from exc
            return {"content": [{"type": "text", "text": verb.result}]}

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
