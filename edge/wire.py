"""The edge's messages as types, each with its to-event and from-event pair.

Pure: no I/O. Builders from :mod:`shared.subjects` name every subject; every
message travels in the one envelope of :mod:`shared.event`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.errors import EnvelopeError
from shared.event import Event
from shared.subjects import (
    parse_subject,
    sensation_partial_subject,
    sensation_turn_subject,
    speech_completed_subject,
)

TURN_EVENT_TYPE = "sensation.turn"
PARTIAL_EVENT_TYPE = "sensation.partial"
SPEECH_COMPLETED_EVENT_TYPE = "speech.completed"


@dataclass(frozen=True)
class WordTiming:
    """One recognized word, its times in seconds from the utterance start, and confidence."""

    word: str
    start_s: float
    end_s: float
    confidence: float

    def to_json(self) -> dict[str, Any]:
        """As a JSON object for the turn payload."""
        return {
            "word": self.word,
            "start_s": round(self.start_s, 3),
            "end_s": round(self.end_s, 3),
            "confidence": round(self.confidence, 4),
        }


@dataclass(frozen=True)
class Turn:
    """A finished utterance: ``events.sensation.<device>.turn``."""

    device: str
    binding_id: str
    text: str
    confidence: float
    words: tuple[WordTiming, ...]
    started_at: datetime
    ended_at: datetime
    endpoint: str  # what closed the utterance: vad, push_to_talk, end_of_input, ...

    @property
    def subject(self) -> str:
        """Where the turn is published."""
        return sensation_turn_subject(self.device)

    def to_event(self, *, source: str, sequence_number: int, now: datetime | None = None) -> Event:
        """The sensation event, carrying the freshly minted ``binding_id``.

        ``now`` stamps the envelope (default: the clock at this call).
        """
        return Event.new(
            TURN_EVENT_TYPE,
            {
                "text": self.text,
                "device": self.device,
                "confidence": round(self.confidence, 4),
                "words": [w.to_json() for w in self.words],
                "started_at": self.started_at.isoformat(),
                "ended_at": self.ended_at.isoformat(),
                "endpoint": self.endpoint,
            },
            source=source,
            sequence_number=sequence_number,
            binding_id=self.binding_id,
            now=now,
        )


@dataclass(frozen=True)
class Partial:
    """An in-flight transcript: ``events.sensation.<device>.partial`` (stays on the board)."""

    device: str
    binding_id: str
    text: str

    @property
    def subject(self) -> str:
        """Where the partial is published."""
        return sensation_partial_subject(self.device)

    def to_event(self, *, source: str, sequence_number: int) -> Event:
        """The partial event; it shares the binding id the final turn will carry."""
        return Event.new(
            PARTIAL_EVENT_TYPE,
            {"text": self.text, "device": self.device},
            source=source,
            sequence_number=sequence_number,
            binding_id=self.binding_id,
            ttl_ms=5_000,
        )


@dataclass(frozen=True)
class SpeakRequest:
    """Text to say on this device, from ``events.workspace.<agent>.out.speak.<device>``."""

    agent: str
    device: str
    text: str
    binding_id: str | None
    event_id: str

    @classmethod
    def from_event(cls, subject: str, event: Event) -> SpeakRequest:
        """Parse a speak event; EnvelopeError names what is wrong."""
        info = parse_subject(subject)
        if info.kind != "speak" or info.device is None or info.agent is None:
            raise EnvelopeError("<subject>", f"{subject!r} is not a device speak subject")
        text = event.payload.get("text")
        if not isinstance(text, str) or not text.strip():
            raise EnvelopeError(
                "payload.text", f"must be non-empty text to speak, got {text!r:.60}"
            )
        return cls(info.agent, info.device, text, event.binding_id, event.event_id)


@dataclass(frozen=True)
class SpeechCompleted:
    """The ack after playback: ``events.action.speech.completed.<binding_id>``."""

    binding_id: str
    device: str
    ok: bool
    interrupted: bool = False
    error: str | None = None
    duration_s: float = 0.0

    @property
    def subject(self) -> str:
        """Where the ack is published (the speak verb waits on it)."""
        return speech_completed_subject(self.binding_id)

    def to_event(self, *, source: str, sequence_number: int) -> Event:
        """The ``speech.completed`` event with the turn's binding id."""
        return Event.new(
            SPEECH_COMPLETED_EVENT_TYPE,
            {
                "ok": self.ok,
                "interrupted": self.interrupted,
                "error": self.error,
                "device": self.device,
                "duration_s": round(self.duration_s, 3),
            },
            source=source,
            sequence_number=sequence_number,
            binding_id=self.binding_id,
        )

    @classmethod
    def from_event(cls, event: Event) -> SpeechCompleted:
        """Parse an ack (for tests and monitors)."""
        p = event.payload
        if event.binding_id is None:
            raise EnvelopeError("binding_id", "a speech.completed ack must carry the binding id")
        ok, interrupted, error = p.get("ok"), p.get("interrupted", False), p.get("error")
        if not isinstance(ok, bool) or not isinstance(interrupted, bool):
            raise EnvelopeError("payload.ok", "ok and interrupted must be true or false")
        if error is not None and not isinstance(error, str):
            raise EnvelopeError("payload.error", f"must be a string or null, got {error!r:.60}")
        return cls(
            binding_id=event.binding_id,
            device=str(p.get("device", "")),
            ok=ok,
            interrupted=interrupted,
            error=error,
            duration_s=float(p.get("duration_s", 0.0)),
        )
