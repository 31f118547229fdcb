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

An answer is spoken while the model still writes it: once the stream
(τ's ``message_update`` events) holds the first whole sentence, that sentence
is published as a speak event of its own, and the rest of the answer as a
second one when the message ends. The board plays the two in order; the turn
ends once both are acked (docs/architecture.md "One voice turn"). A message
that turns out to call a tool keeps its first sentence spoken and goes to the
reply rail as status, as before.

Whatever is spoken, by the tool or as prose, is first passed through
:func:`~home.tau_extensions.speakable.speakable_text`: only letters, digits and
spoken punctuation reach the board. An answer the token cap cut off is spoken
up to its last whole sentence. An answer with nothing speakable left is
refused (one re-prompt); in the re-prompted turn, what is left of an
unspeakable answer is spoken, or else a short apology.

Config (``--ext-config handset:KEY=VALUE``): ``agent``, ``nats_url``,
``binding_file`` (run context, given by the node), ``ack_timeout_s``,
``first_sentence`` (default true; false speaks each answer whole, once it ends),
``first_clause_words`` (default 0, whole sentences only; N: a first clause of N words
or more is spoken before its sentence ends).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tau_agent_core.tools.base import ToolError

from home.tau_extensions.binding import TurnBinding
from home.tau_extensions.bus_link import AckWaiter, BusLink
from home.tau_extensions.errors import ExtensionError
from home.tau_extensions.prose import (
    TRUNCATED,
    ProseKind,
    assistant_prose,
    first_sentence,
    message_text,
    unspeakable_reason,
    whole_sentences,
)
from home.tau_extensions.speakable import APOLOGY, speakable_text
from shared.event import Event
from shared.messages.voice import Reply, Speak
from shared.subjects import (
    SPEECH_COMPLETED_PATTERN,
    check_name,
    deviceless_speak_subject,
    rail_pattern,
    reply_subject,
    speak_subject,
    speech_completed_subject,
)

TOUCHES_BUS = True
SUBJECTS = (rail_pattern("speak"), rail_pattern("reply"), SPEECH_COMPLETED_PATTERN)
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

# With a count, a first clause that long goes out before its sentence ends: SmolLM2's
# first sentences run 20 tokens and more, 14-20 ms each on one core, and it cut the
# virtual board's model stage from 800 to 530 ms p50. Off: the spoken first clause skips
# the refusal and re-prompt a whole unspeakable answer gets, and the everyday prompts'
# parrot rate went from within 5 % to 4 of 64 (docs/architecture.md "One voice turn").
FIRST_CLAUSE_WORDS = 0


def config_flag(config: dict[str, Any], key: str, default: bool) -> bool:
    """A boolean of the extension's config, given as a bool or as the text of one."""
    value = config.get(key, default)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ExtensionError(f"handset config {key!r}: expected true or false, got {value!r}")


def config_count(config: dict[str, Any], key: str, default: int) -> int:
    """A whole number >= 0 of the extension's config, given as a number or its text."""
    value = config.get(key, default)
    try:
        count = int(str(value).strip())
    except ValueError:
        count = -1
    if isinstance(value, bool) or count < 0:
        raise ExtensionError(f"handset config {key!r}: expected a whole number >= 0, got {value!r}")
    return count


class EarlyPart:
    """The first sentence of an answer, spoken while the model wrote the rest.

    ``waiter`` was subscribed to the turn's speech acks before the first speak went
    out; the speaker plays and acks one device's speaks in order, so the n-th ack
    on it is the n-th part's.
    """

    def __init__(self, sentence: str, waiter: AckWaiter) -> None:
        self.sentence = sentence
        self.waiter = waiter
        self.parts = 0

    def rest_of(self, text: str) -> str:
        """What of the finished answer ``text`` follows the sentence already spoken."""
        if text.startswith(self.sentence):
            return text[len(self.sentence) :].strip()
        # The stream and the final message disagree: say the whole answer rather than half.
        log.warning("handset: the answer does not begin with its spoken first sentence")
        return text

    async def settle(self, timeout_s: float) -> None:
        """Wait for every part's ack in turn, then stop listening."""
        try:
            for _ in range(self.parts):
                await self.waiter.next(timeout_s=timeout_s)
        finally:
            await self.waiter.close()


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
        self.first_sentence = config_flag(config, "first_sentence", default=True)
        self.first_clause_words = config_count(config, "first_clause_words", FIRST_CLAUSE_WORDS)
        self._early: EarlyPart | None = None

    def speak_event(
        self, text: str, binding: TurnBinding, *, more: bool = False
    ) -> tuple[str, Event]:
        """The subject and the speak event of ``text`` (already speakable) for ``binding``."""
        subject = (
            speak_subject(self.agent, binding.device)
            if binding.device is not None
            else deviceless_speak_subject(self.agent)
        )
        event = self.link.event(Speak(text, self.agent, binding.device, more), binding)
        return subject, event

    async def speak_and_wait(self, text: str, signal: Any = None) -> None:
        """Publish a speak event of ``text`` (already speakable) and wait for its ack."""
        binding = self.link.binding()
        subject, event = self.speak_event(text, binding)
        await self.link.publish_and_await_ack(
            subject,
            event,
            speech_completed_subject(binding.binding_id),
            timeout_s=self.ack_timeout_s,
            signal=signal,
        )

    async def speak_part(self, early: EarlyPart, text: str, *, more: bool) -> None:
        """Publish one part of an answer spoken in parts; its ack is awaited in ``settle``.

        ``more``: parts follow (the first sentence), so a listener such as `edge say`
        waits for them.
        """
        subject, event = self.speak_event(text, self.link.binding(), more=more)
        await self.link.publish(subject, event)
        early.parts += 1

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
        event = self.link.event(reply, binding)
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

    async def finish_answer(self, early: EarlyPart, text: str) -> None:
        """Speak the rest of an answer whose first sentence is out; wait for every part."""
        try:
            try:
                rest = speakable_text(early.rest_of(text))
                if rest:
                    await self.speak_part(early, rest, more=False)
            finally:
                await early.settle(self.ack_timeout_s)
        except ExtensionError as exc:
            await self.publish_reply(text, "failed", str(exc))

    async def on_message_update(self, event: Any) -> None:
        """Speak the first whole sentence of an answer as soon as the stream holds it."""
        if not self.first_sentence or self._early is not None:
            return
        message = getattr(event, "message", None)
        if not isinstance(message, dict) or message.get("role") != "assistant":
            return
        if assistant_prose(message).kind is not ProseKind.ANSWER:
            return
        sentence = first_sentence(message_text(message), self.first_clause_words)
        spoken = speakable_text(sentence) if sentence is not None else ""
        if sentence is None or not spoken:
            return
        try:
            binding = self.link.binding()
            early = EarlyPart(
                sentence, await self.link.acks(speech_completed_subject(binding.binding_id))
            )
            self._early = early
            await self.speak_part(early, spoken, more=True)
        except ExtensionError as exc:
            # Nothing went out: the answer is spoken whole when it ends.
            log.warning("handset: the first sentence was not spoken early: %s", exc)
            await self.drop_early()

    async def drop_early(self) -> None:
        """Forget an early part nothing was published for, or that no turn end claimed."""
        early, self._early = self._early, None
        if early is not None and early.parts == 0:
            await early.waiter.close()
        elif early is not None:
            await early.settle(self.ack_timeout_s)

    async def on_message_start(self, event: Any) -> None:
        """A new assistant message: an earlier one's spoken part, never claimed, is settled."""
        if self._early is not None:
            log.warning("handset: a spoken first sentence outlived its message")
            try:
                await self.drop_early()
            except ExtensionError as exc:
                log.warning("handset: %s", exc)

    async def on_turn_end(self, event: dict[str, Any], ctx: Any) -> None:
        """Route the turn's assistant prose: status to the reply rail, answers to speech."""
        early, self._early = self._early, None
        try:
            for message in event.get("messages") or []:
                if not isinstance(message, dict) or message.get("role") != "assistant":
                    continue
                prose = assistant_prose(message)
                if prose.kind is ProseKind.STATUS:
                    await self.publish_reply(prose.text, "status")
                elif prose.kind is ProseKind.ANSWER:
                    cut = message.get("stop_reason") == TRUNCATED
                    text = whole_sentences(prose.text) if cut else prose.text
                    if early is None:
                        await self.route_answer(text)
                    else:
                        await self.finish_answer(early, text)
                        early = None
        finally:
            if early is not None:
                # Spoken, then the message called a tool: its sentence still has an ack due.
                try:
                    await early.settle(self.ack_timeout_s)
                except ExtensionError as exc:
                    log.warning("handset: the first sentence of a status line: %s", exc)

    async def on_session_start(self, event: dict[str, Any], ctx: Any) -> None:
        """Connect the bus link."""
        await self.link.connect()

    async def on_session_shutdown(self, event: dict[str, Any], ctx: Any) -> None:
        """Close the bus link."""
        self._early = None
        await self.link.close()


def register(api: Any) -> None:
    """Register ``speak``, the prose-routing ``turn_end`` hook and the stream's listeners."""
    handset = Handset(api.config)
    api.on("session_start", handset.on_session_start)
    api.on("session_shutdown", handset.on_session_shutdown)
    api.on("turn_end", handset.on_turn_end)
    api.on("message_start", handset.on_message_start)
    api.on("message_update", handset.on_message_update)
    api.register_tool(
        {
            "name": "speak",
            "description": SPEAK_DESCRIPTION,
            "parameters": SPEAK_SCHEMA,
            "execute": handset.execute_speak,
        }
    )
