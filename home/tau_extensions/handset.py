"""The handset extension: the ``speak`` tool and the prose rules, for one device at a time.

Loaded by τ by path. ``speak`` publishes ``events.workspace.<agent>.out.speak.<device>``
and waits for ``events.action.speech.completed.<binding_id>``; no ack within
``ack_timeout_s`` is a tool error the model reads. A successful speak is
terminal: its result ends the turn mechanically and says so in words.

The prose of the model's own messages is routed by the shape of the turn
(:mod:`home.tau_extensions.prose`): status lines and unspeakable answers go to the
reply rail (the latter with ``spoken: false`` and the reason, which the node
reads off its own ``out.>`` and answers with one re-prompt), speakable answers
are spoken, silence is allowed.

Whatever is spoken, by the tool or as prose, is first passed through
:func:`~home.tau_extensions.speakable.speakable_text`: only letters, digits and
spoken punctuation reach the board. An answer the token cap cut off is spoken
up to its last whole sentence. An answer with nothing speakable left is
refused (one re-prompt); in the re-prompted turn, what is left of an
unspeakable answer is spoken, or else a short apology.

Config (``--ext-config handset:KEY=VALUE``): ``agent``, ``nats_url``,
``binding_file`` (run context, given by the node), ``ack_timeout_s``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tau_agent_core.tools.base import ToolError

from home.tau_extensions.bus_link import BusLink
from home.tau_extensions.errors import ExtensionError
from home.tau_extensions.prose import (
    TRUNCATED,
    ProseKind,
    assistant_prose,
    unspeakable_reason,
    whole_sentences,
)
from home.tau_extensions.speakable import APOLOGY, speakable_text
from shared.messages.voice import REPLY_EVENT_TYPE, SPEAK_EVENT_TYPE, Reply, Speak
from shared.subjects import (
    check_name,
    deviceless_speak_subject,
    reply_subject,
    speak_subject,
    speech_completed_subject,
)

TOUCHES_BUS = True
SUBJECTS = (
    "events.workspace.*.out.speak.*",
    "events.workspace.*.out.reply.*",
    "events.action.speech.completed.*",
)
RUN_CONTEXT = ("agent", "nats_url", "binding_file")

DEFAULT_ACK_TIMEOUT_S = 30.0

SPEAK_MAX_CHARS = 300
SPEAK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {
            "type": "string",
            "description": "your answer, in your own words",
            # Spoken answers are a few sentences. The bound is also what lets a small
            # model's constrained call always close its string: llama.cpp compiles it
            # into the grammar, and SPEAK_MAX_CHARS fits in the embedded max_tokens.
            "maxLength": SPEAK_MAX_CHARS,
        }
    },
    "required": ["text"],
}
SPEAK_DESCRIPTION = (
    "Say text aloud to the user through their device. This is how you answer. "
    "Your turn is over once it returns."
)
SPOKEN_RESULT = "Spoken. Your turn is over: make no further tool calls and write nothing."
NOTHING_SPEAKABLE = "nothing in it can be read aloud"

log = logging.getLogger(__name__)


class Handset:
    """The handset's state for one τ session: its bus link, the agent, the ack timeout."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.agent = check_name(str(config.get("agent", "")), "handset config 'agent'")
        self.link = BusLink(
            agent=self.agent,
            nats_url=str(config.get("nats_url", "")),
            binding_file=Path(str(config.get("binding_file", ""))),
            source=f"agent.{self.agent}",
        )
        self.ack_timeout_s = float(config.get("ack_timeout_s", DEFAULT_ACK_TIMEOUT_S))

    async def speak_and_wait(self, text: str, signal: Any = None) -> None:
        """Publish a speak event of ``text`` (already speakable) and wait for its ack."""
        binding = self.link.binding()
        subject = (
            speak_subject(self.agent, binding.device)
            if binding.device is not None
            else deviceless_speak_subject(self.agent)
        )
        event = self.link.envelope(
            SPEAK_EVENT_TYPE, Speak(text, self.agent, binding.device).to_payload(), binding
        )
        await self.link.publish_and_await_ack(
            subject,
            event,
            speech_completed_subject(binding.binding_id),
            timeout_s=self.ack_timeout_s,
            signal=signal,
        )

    async def say(self, text: str, reason: str | None = None, signal: Any = None) -> bool:
        """Speak what of ``text`` is speakable; False when it was refused instead.

        ``reason`` (why the text as a whole cannot be read aloud) or nothing speakable
        left: a refusal on the reply rail, which earns one re-prompt. In the
        re-prompted turn the speakable part is spoken anyway, or else the apology.
        """
        spoken = speakable_text(text)
        if reason is None and not spoken:
            reason = NOTHING_SPEAKABLE
        if reason is not None:
            if not self.link.binding().reprompt:
                await self.publish_reply(text, "refusal", reason)
                return False
            spoken = spoken or APOLOGY
        await self.speak_and_wait(spoken, signal)
        return True

    async def publish_reply(self, text: str, kind: str, reason: str | None = None) -> None:
        """Publish prose that was not spoken (status, refusal, failure) on the reply rail."""
        binding = self.link.binding()
        if binding.device is None:
            log.warning("handset: no device for binding %s; reply not published", binding)
            return
        reply = Reply(text, spoken=False, kind=kind, reason=reason, agent=self.agent)
        event = self.link.envelope(REPLY_EVENT_TYPE, reply.to_payload(), binding)
        await self.link.publish(reply_subject(self.agent, binding.device), event)

    async def execute_speak(
        self, tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any, ctx: Any
    ) -> dict[str, Any]:
        """The ``speak`` tool: say the text, wait for the ack, end the turn."""
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ToolError(f"speak: 'text' must be a non-empty string, got {text!r}")
        try:
            spoken = await self.say(text, signal=signal)
        except ExtensionError as exc:
            raise ToolError(f"speak: {exc}") from exc
        result = SPOKEN_RESULT if spoken else f"Not spoken: {NOTHING_SPEAKABLE}."
        return {"content": [{"type": "text", "text": result}], "terminate": True}

    async def route_answer(self, text: str) -> None:
        """Speak prose the model answered with, or report why it cannot be spoken."""
        try:
            await self.say(text, unspeakable_reason(text))
        except ExtensionError as exc:
            # No tool result to carry it: the failure goes on the bus instead.
            await self.publish_reply(text, "failed", str(exc))

    async def on_turn_end(self, event: dict[str, Any], ctx: Any) -> None:
        """Route the turn's assistant prose: status to the reply rail, answers to speech."""
        for message in event.get("messages") or []:
            if not isinstance(message, dict) or message.get("role") != "assistant":
                continue
            prose = assistant_prose(message)
            if prose.kind is ProseKind.STATUS:
                await self.publish_reply(prose.text, "status")
            elif prose.kind is ProseKind.ANSWER:
                cut = message.get("stop_reason") == TRUNCATED
                await self.route_answer(whole_sentences(prose.text) if cut else prose.text)

    async def on_session_start(self, event: dict[str, Any], ctx: Any) -> None:
        """Connect the bus link."""
        await self.link.connect()

    async def on_session_shutdown(self, event: dict[str, Any], ctx: Any) -> None:
        """Close the bus link."""
        await self.link.close()


def register(api: Any) -> None:
    """Register ``speak`` and the prose-routing ``turn_end`` hook on τ's extension API."""
    handset = Handset(api.config)
    api.on("session_start", handset.on_session_start)
    api.on("session_shutdown", handset.on_session_shutdown)
    api.on("turn_end", handset.on_turn_end)
    api.register_tool(
        {
            "name": "speak",
            "description": SPEAK_DESCRIPTION,
            "parameters": SPEAK_SCHEMA,
            "execute": handset.execute_speak,
        }
    )
