"""The voice rails: turn, partial, speak, reply and the speech-completed ack.

One frozen dataclass per message, each with its to-event (or to-payload, where a
sender's own link builds the envelope) and from-event pair; a malformed field is an
``EnvelopeError`` naming it (``payload.text``). Subjects come from
:mod:`shared.subjects`; the rails are drawn in docs/architecture.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from shared.errors import EnvelopeError, SubjectError
from shared.event import Event
from shared.messages import fields
from shared.messages.message import Message, PayloadMessage
from shared.messages.trace import TRACE_KEY, Marks
from shared.subjects import (
    NAME_TOKEN,
    parse_subject,
    sensation_partial_subject,
    sensation_turn_subject,
    speech_completed_subject,
)

TURN_EVENT_TYPE = "sensation.turn"
PARTIAL_EVENT_TYPE = "sensation.partial"
SPEAK_EVENT_TYPE = "speak"
REPLY_EVENT_TYPE = "reply"
SPEECH_COMPLETED_EVENT_TYPE = "speech.completed"
NOTICE_EVENT_TYPE = "edge.notice"


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

    @classmethod
    def from_json(cls, where: str, data: dict[str, Any]) -> WordTiming:
        """One entry of ``payload.words`` (found at ``where``); errors name its key."""
        numbers = [
            fields.opt_number(data, key, path=fields.payload_key(f"{where}.{key}"))
            for key in ("start_s", "end_s", "confidence")
        ]
        start_s, end_s, confidence = (0.0 if n is None else n for n in numbers)
        word = fields.item_string(data, "word", where)
        return cls(word, start_s, end_s, confidence)


@dataclass(frozen=True)
class Heard:
    """How well the board heard a turn: its voiced level and, after a wake word, how sure
    the wake word model was. Home answers one utterance heard by several boards on the
    board that heard it best (docs/architecture.md "The right room")."""

    level_db: float
    wake_probability: float | None = None

    @property
    def score(self) -> tuple[float, float]:
        """Best first when sorted in reverse: the wake word's probability, then the level."""
        return (self.wake_probability or 0.0, self.level_db)

    def to_json(self) -> dict[str, Any]:
        """As the turn payload's ``heard`` object."""
        heard: dict[str, Any] = {"level_db": round(self.level_db, 2)}
        if self.wake_probability is not None:
            heard["wake_probability"] = round(self.wake_probability, 4)
        return heard

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> Heard | None:
        """``payload.heard``, if the board stamped one; errors name the key."""
        heard = fields.opt_object(payload, "heard")
        if heard is None:
            return None
        numbers = [
            fields.opt_number(heard, key, path=fields.payload_key(f"heard.{key}"))
            for key in ("level_db", "wake_probability")
        ]
        if numbers[0] is None:
            raise EnvelopeError("payload.heard.level_db", "must be a number, got null")
        return cls(numbers[0], numbers[1])


@dataclass(frozen=True)
class Turn(Message):
    """A finished utterance: ``events.sensation.<device>.turn``."""

    EVENT_TYPE: ClassVar[str] = TURN_EVENT_TYPE

    device: str
    binding_id: str
    text: str
    confidence: float
    words: tuple[WordTiming, ...]
    started_at: datetime
    ended_at: datetime
    endpoint: str  # what closed the utterance: vad, push_to_talk, end_of_input, ...
    trace: Marks | None = None  # the board's marks (voice_end, endpoint, asr_final)
    heard: Heard | None = None

    @property
    def subject(self) -> str:
        """Where the turn is published."""
        return sensation_turn_subject(self.device)

    def to_payload(self) -> dict[str, Any]:
        """The turn's payload (``trace`` only when marked)."""
        payload: dict[str, Any] = {
            "text": self.text,
            "device": self.device,
            "confidence": round(self.confidence, 4),
            "words": [w.to_json() for w in self.words],
            "started_at": self.started_at.isoformat(),
            "ended_at": self.ended_at.isoformat(),
            "endpoint": self.endpoint,
        }
        if self.trace is not None:
            payload[TRACE_KEY] = self.trace.to_json()
        if self.heard is not None:
            payload["heard"] = self.heard.to_json()
        return payload

    def to_event(self, *, source: str, sequence_number: int, now: datetime | None = None) -> Event:
        """The sensation event, carrying the freshly minted ``binding_id``.

        ``now`` stamps the envelope (default: the clock at this call).
        """
        return Event.new(
            self.EVENT_TYPE,
            self.to_payload(),
            source=source,
            sequence_number=sequence_number,
            binding_id=self.binding_id,
            now=now,
        )

    @classmethod
    def from_event(cls, event: Event) -> Turn:
        """Parse a turn event; ``EnvelopeError`` names what is wrong."""
        if event.binding_id is None:
            raise EnvelopeError("binding_id", "a turn must carry its binding id")
        p = event.payload
        confidence = fields.opt_number(p, "confidence")
        return cls(
            device=fields.text(p, "device"),
            binding_id=event.binding_id,
            text=fields.string(p, "text"),
            confidence=1.0 if confidence is None else confidence,
            words=tuple(WordTiming.from_json(where, w) for where, w in fields.objects(p, "words")),
            started_at=_instant(p, "started_at"),
            ended_at=_instant(p, "ended_at"),
            endpoint=fields.string(p, "endpoint"),
            trace=Marks.from_payload(p),
            heard=Heard.from_payload(p),
        )


@dataclass(frozen=True)
class Utterance:
    """Words routed to an agent: the text of a sensation and the device it names, if any.

    Lenient on purpose: any sensation that carries text is prompted with, and a missing or
    malformed ``device`` is left for the receiver to work out from the envelope.
    """

    text: str
    device: str | None

    @classmethod
    def from_event(cls, event: Event) -> Utterance:
        """The stripped text (non-empty, or ``EnvelopeError("payload.text")``) and device."""
        device = event.payload.get("device")
        return cls(
            text=fields.text(event.payload).strip(),
            device=device if isinstance(device, str) and NAME_TOKEN.fullmatch(device) else None,
        )


@dataclass(frozen=True)
class Partial(Message):
    """An in-flight transcript: ``events.sensation.<device>.partial`` (stays on the board)."""

    EVENT_TYPE: ClassVar[str] = PARTIAL_EVENT_TYPE

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
            self.EVENT_TYPE,
            {"text": self.text, "device": self.device},
            source=source,
            sequence_number=sequence_number,
            binding_id=self.binding_id,
            ttl_ms=5_000,
        )

    @classmethod
    def from_event(cls, event: Event) -> Partial:
        """Parse a partial event; ``EnvelopeError`` names what is wrong."""
        if event.binding_id is None:
            raise EnvelopeError("binding_id", "a partial must carry its binding id")
        p = event.payload
        return cls(fields.text(p, "device"), event.binding_id, fields.string(p, "text"))


@dataclass(frozen=True)
class Speak(PayloadMessage):
    """Text an agent wants said: ``events.workspace.<agent>.out.speak.<device>``.

    The envelope carries the turn's binding id; the subject names agent and device,
    which the payload repeats (``device`` is null on the deviceless speak subject).
    ``more`` is true on a part of an answer that more parts follow (the first
    sentence, spoken while the model writes the rest); the last part omits it.
    """

    EVENT_TYPE: ClassVar[str] = SPEAK_EVENT_TYPE

    text: str
    agent: str | None = None
    device: str | None = None
    more: bool = False

    def to_payload(self) -> dict[str, Any]:
        """The speak payload (``more`` only when true)."""
        payload: dict[str, Any] = {"text": self.text, "agent": self.agent, "device": self.device}
        if self.more:
            payload["more"] = True
        return payload

    @classmethod
    def is_type(cls, event_type: str) -> bool:
        """``speak``, or τ's builtin dialect: the event named after its speak subject."""
        if event_type == cls.EVENT_TYPE:
            return True
        try:
            return parse_subject(event_type).kind == "speak"
        except SubjectError:
            return False

    @classmethod
    def from_event(cls, event: Event) -> Speak:
        """Parse a speak event; the text must be non-empty (``payload.text``)."""
        p = event.payload
        return cls(
            text=fields.text(p),
            agent=fields.opt_string(p, "agent"),
            device=fields.opt_string(p, "device"),
            more=fields.flag(p, "more", default=False),
        )


@dataclass(frozen=True)
class Reply(PayloadMessage):
    """Text on the reply rail (``events.workspace.<agent>.out.reply.<device>``): not spoken.

    ``spoken`` is false for an answer the agent judged unspeakable, with ``reason``;
    ``kind`` says which (``status``, ``answer``, ``refusal``, ``failed``, ``aborted``);
    a status line from elsewhere may omit all three. A report of a turn that did not
    finish carries empty ``text`` and the ``reason``.
    """

    EVENT_TYPE: ClassVar[str] = REPLY_EVENT_TYPE

    text: str
    spoken: bool = True
    kind: str | None = None
    reason: str | None = None
    agent: str | None = None

    def to_payload(self) -> dict[str, Any]:
        """The reply payload (``kind`` and ``reason`` only when set)."""
        payload: dict[str, Any] = {} if self.agent is None else {"agent": self.agent}
        payload.update(text=self.text, spoken=self.spoken)
        if self.kind is not None:
            payload["kind"] = self.kind
        if self.reason is not None:
            payload["reason"] = self.reason
        return payload

    @classmethod
    def from_event(cls, event: Event) -> Reply:
        """Parse a reply event; ``EnvelopeError`` names the malformed key."""
        p = event.payload
        return cls(
            text=fields.string(p, "text"),
            spoken=fields.flag(p, "spoken", True),
            kind=fields.opt_string(p, "kind"),
            reason=fields.opt_string(p, "reason"),
            agent=fields.opt_string(p, "agent"),
        )


@dataclass(frozen=True)
class SpeechCompleted(Message):
    """The ack after playback: ``events.action.speech.completed.<binding_id>``."""

    EVENT_TYPE: ClassVar[str] = SPEECH_COMPLETED_EVENT_TYPE

    binding_id: str
    device: str
    ok: bool
    interrupted: bool = False
    error: str | None = None
    duration_s: float = 0.0
    trace: Marks | None = None  # the board's marks (speak_received, tts_first_chunk, first_audio)

    @property
    def subject(self) -> str:
        """Where the ack is published (the speak verb waits on it)."""
        return speech_completed_subject(self.binding_id)

    def to_event(self, *, source: str, sequence_number: int) -> Event:
        """The ``speech.completed`` event with the turn's binding id (``trace`` when marked)."""
        payload: dict[str, Any] = {
            "ok": self.ok,
            "interrupted": self.interrupted,
            "error": self.error,
            "device": self.device,
            "duration_s": round(self.duration_s, 3),
        }
        if self.trace is not None:
            payload[TRACE_KEY] = self.trace.to_json()
        return Event.new(
            self.EVENT_TYPE,
            payload,
            source=source,
            sequence_number=sequence_number,
            binding_id=self.binding_id,
        )

    @classmethod
    def from_event(cls, event: Event) -> SpeechCompleted:
        """Parse an ack; ``EnvelopeError`` names what is wrong."""
        p = event.payload
        if event.binding_id is None:
            raise EnvelopeError("binding_id", "a speech.completed ack must carry the binding id")
        duration_s = fields.opt_number(p, "duration_s")
        return cls(
            binding_id=event.binding_id,
            device=fields.string(p, "device", ""),
            ok=fields.flag(p, "ok"),
            interrupted=fields.flag(p, "interrupted", False),
            error=fields.opt_string(p, "error"),
            duration_s=0.0 if duration_s is None else duration_s,
            trace=Marks.from_payload(p),
        )


@dataclass(frozen=True)
class Notice(PayloadMessage):
    """The board said a local notice aloud: ``events.edge.<device>.notice``.

    The unreachable-home notice, or the one for a turn home reported failed or aborted.
    Published on the board's own NATS for monitors and HIL runs; ``turn_binding_id``
    is the turn it answered in home's place.
    """

    EVENT_TYPE: ClassVar[str] = NOTICE_EVENT_TYPE

    text: str
    turn_binding_id: str | None

    def to_payload(self) -> dict[str, Any]:
        """The notice's payload."""
        return {"text": self.text, "turn_binding_id": self.turn_binding_id}

    @classmethod
    def from_event(cls, event: Event) -> Notice:
        """Parse a notice event; ``EnvelopeError`` names the malformed key."""
        p = event.payload
        return cls(fields.string(p, "text"), fields.opt_string(p, "turn_binding_id"))


def _instant(payload: dict[str, Any], key: str) -> datetime:
    raw = fields.string(payload, key)
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError as exc:
        raise EnvelopeError(fields.payload_key(key), f"must be ISO-8601, got {raw!r:.60}") from exc
    if parsed.tzinfo is None:
        raise EnvelopeError(fields.payload_key(key), f"must carry a timezone, got {raw!r:.60}")
    return parsed
