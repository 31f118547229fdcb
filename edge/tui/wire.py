"""The TUI's messages as types, each with its to-event or from-event half.

Pure: no I/O. Outgoing, the typed line (:class:`TypedTurn`) and the speaker's ack
(:func:`speech_ack`) are the board's own :class:`shared.messages.voice.Turn` and
:class:`shared.messages.voice.SpeechCompleted`, so home's schema cannot tell the keyboard
from the microphone. Incoming, every
agent rail for the device is parsed into one of :data:`Incoming`'s types by
:func:`parse_incoming`, which raises ``EnvelopeError`` naming the bad key.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from edge.wire import SpeakRequest
from shared.errors import EnvelopeError
from shared.event import Event
from shared.messages.memory import memory_summary
from shared.messages.voice import Reply, SpeechCompleted, Turn
from shared.subjects import parse_subject, sensation_turn_subject

# What closed the "utterance": the board says vad or push_to_talk; the keyboard says so.
KEYBOARD_ENDPOINT = "keyboard"


@dataclass(frozen=True)
class TypedTurn:
    """A typed line: ``events.sensation.<device>.turn`` with a freshly minted binding_id."""

    device: str
    binding_id: str
    text: str
    typed_at: datetime

    @property
    def subject(self) -> str:
        """Where the turn is published."""
        return sensation_turn_subject(self.device)

    def to_event(self, *, source: str, sequence_number: int) -> Event:
        """The board's turn event for this line (confidence 1, no words, endpoint keyboard)."""
        turn = Turn(
            device=self.device,
            binding_id=self.binding_id,
            text=self.text,
            confidence=1.0,
            words=(),
            started_at=self.typed_at,
            ended_at=self.typed_at,
            endpoint=KEYBOARD_ENDPOINT,
        )
        return turn.to_event(source=source, sequence_number=sequence_number, now=self.typed_at)


def speech_ack(binding_id: str, device: str) -> SpeechCompleted:
    """The speaker's ack for a shown speak: the screen cannot fail to "play", so ``ok``."""
    return SpeechCompleted(binding_id, device, ok=True)


@dataclass(frozen=True)
class AgentReply:
    """Text on the reply rail (``out.reply.<device>``): not spoken, shown differently.

    ``spoken`` is false for an answer the agent judged unspeakable, with ``reason``;
    a status line may omit both.
    """

    agent: str
    device: str
    binding_id: str | None
    text: str
    spoken: bool
    reason: str | None
    event_id: str


@dataclass(frozen=True)
class MemoryReport:
    """A memory reflex's past-tense report (``out.recall.<device>`` / ``out.memorize.<device>``).

    Read on home's own NATS only (``--direct``): the reports carry memory text, and no
    home half exports them (``bridge check`` B023).

    The payload's shape belongs to the memory reflex; :attr:`summary` is ``text``
    when the report carries one, else a line built from ``query``, ``passed`` and
    the hits or scores, else the compact payload.
    """

    kind: Literal["recall", "memorize"]
    agent: str
    device: str
    binding_id: str | None
    summary: str
    payload: dict[str, Any]
    event_id: str


Incoming = SpeakRequest | AgentReply | MemoryReport


def parse_incoming(subject: str, event: Event) -> Incoming:
    """Parse one event from an agent rail for a device; ``EnvelopeError`` names what is wrong."""
    info = parse_subject(subject)
    if info.agent is None or info.device is None:
        raise EnvelopeError("<subject>", f"{subject!r} is not an agent rail for a device")
    if info.kind == "speak":
        return SpeakRequest.from_event(subject, event)
    if info.kind == "reply":
        reply = Reply.from_event(event)
        if not reply.text.strip():
            raise EnvelopeError("payload.text", f"must be non-empty text, got {reply.text!r:.60}")
        return AgentReply(
            info.agent,
            info.device,
            event.binding_id,
            reply.text,
            reply.spoken,
            reply.reason,
            event.event_id,
        )
    if info.kind in ("recall", "memorize"):
        kind: Literal["recall", "memorize"] = "recall" if info.kind == "recall" else "memorize"
        return MemoryReport(
            kind,
            info.agent,
            info.device,
            event.binding_id,
            memory_summary(kind, event.payload),
            event.payload,
            event.event_id,
        )
    raise EnvelopeError("<subject>", f"{subject!r} is a {info.kind} subject, not a device rail")
