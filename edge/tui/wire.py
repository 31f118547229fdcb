"""The TUI's messages as types, each with its to-event or from-event half.

Pure: no I/O. Outgoing, the typed line (:class:`TypedTurn`) and the speaker's ack
(:func:`speech_ack`) are the board's own :class:`edge.wire.Turn` and
:class:`edge.wire.SpeechCompleted`, so home's schema cannot tell the keyboard from
the microphone. Incoming, every
agent rail for the device is parsed into one of :data:`Incoming`'s types by
:func:`parse_incoming`, which raises ``EnvelopeError`` naming the bad key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from edge.wire import SpeechCompleted, Turn
from shared.errors import EnvelopeError
from shared.event import Event
from shared.subjects import (
    DEVICE_RAILS,
    check_name,
    parse_subject,
    sensation_turn_subject,
)

# What closed the "utterance": the board says vad or push_to_talk; the keyboard says so.
KEYBOARD_ENDPOINT = "keyboard"
# A memory report's summary is a one-line annotation, never a wall of JSON.
_SUMMARY_CHARS = 160


def device_rail_patterns(device: str) -> tuple[str, ...]:
    """The agent rails addressed to ``device`` (speak, reply, recall, memorize), any agent."""
    check_name(device, "device")
    return tuple(f"events.workspace.*.out.{rail}.{device}" for rail in DEVICE_RAILS)


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
class AgentSpeech:
    """Text an agent wants said on this device (``out.speak.<device>``)."""

    agent: str
    device: str
    binding_id: str | None
    text: str
    event_id: str


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


Incoming = AgentSpeech | AgentReply | MemoryReport


def parse_incoming(subject: str, event: Event) -> Incoming:
    """Parse one event from an agent rail for a device; ``EnvelopeError`` names what is wrong."""
    info = parse_subject(subject)
    if info.agent is None or info.device is None:
        raise EnvelopeError("<subject>", f"{subject!r} is not an agent rail for a device")
    payload = event.payload
    if info.kind == "speak":
        return AgentSpeech(
            info.agent, info.device, event.binding_id, _text(payload), event.event_id
        )
    if info.kind == "reply":
        spoken = payload.get("spoken", True)
        reason = payload.get("reason")
        if not isinstance(spoken, bool):
            raise EnvelopeError("payload.spoken", f"must be true or false, got {spoken!r:.60}")
        if reason is not None and not isinstance(reason, str):
            raise EnvelopeError("payload.reason", f"must be a string or null, got {reason!r:.60}")
        return AgentReply(
            info.agent,
            info.device,
            event.binding_id,
            _text(payload),
            spoken,
            reason,
            event.event_id,
        )
    if info.kind in ("recall", "memorize"):
        kind: Literal["recall", "memorize"] = "recall" if info.kind == "recall" else "memorize"
        return MemoryReport(
            kind,
            info.agent,
            info.device,
            event.binding_id,
            memory_summary(kind, payload),
            payload,
            event.event_id,
        )
    raise EnvelopeError("<subject>", f"{subject!r} is a {info.kind} subject, not a device rail")


def memory_summary(kind: str, payload: dict[str, Any]) -> str:
    """One short line saying what a recall or memorize report says."""
    text = payload.get("text")
    if isinstance(text, str) and text.strip():
        return _clip(text.strip())
    parts: list[str] = []
    query = payload.get("query")
    if isinstance(query, str) and query:
        parts.append(f"query {query!r}")
    hits = payload.get("hits", payload.get("scores", payload.get("items")))
    passed = payload.get("passed")
    if isinstance(passed, int) and isinstance(hits, list):
        parts.append(f"{passed} of {len(hits)} passed")
    elif isinstance(passed, int):
        parts.append(f"{passed} passed")
    elif isinstance(hits, list):
        parts.append(f"{len(hits)} item(s)")
    if parts:
        return _clip(f"{kind}: " + ", ".join(parts))
    return _clip(f"{kind}: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")))


def _text(payload: dict[str, Any]) -> str:
    text = payload.get("text")
    if not isinstance(text, str) or not text.strip():
        raise EnvelopeError("payload.text", f"must be non-empty text, got {text!r:.60}")
    return text


def _clip(text: str) -> str:
    one_line = " ".join(text.split())
    if len(one_line) <= _SUMMARY_CHARS:
        return one_line
    return one_line[: _SUMMARY_CHARS - 1] + "…"
