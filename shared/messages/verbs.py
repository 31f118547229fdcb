"""The verb rails: what an agent's verb asks (``events.workspace.<agent>.out.<verb>``),
the ack (``events.journal.<verb>.<binding_id>``) and a delegation's answer.

``journal_append`` and ``jmfts_write`` are acked by their effectors; ``delegate`` by the
operator agent when it takes the task (or refuses it, with the reason), and its answer
comes back later as a :class:`DelegateAnswer` on ``events.workspace.<operator>.out.answer.<asker>``.
What makes any ack a failure is :func:`ack_failure`; docs/architecture.md, "Acks".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Unpack

from shared.event import Event
from shared.messages import fields
from shared.messages.message import Message, PayloadMessage, StampArgs
from shared.subjects import VERBS

# A verb request's event is named after its verb (the verbs extension's dialect).
DELEGATE_EVENT_TYPE = "delegate"
DELEGATE_ANSWER_EVENT_TYPE = "delegate.answer"
# An ack's event type is ``<verb>.ack``.
ACK_SUFFIX = ".ack"


@dataclass(frozen=True)
class VerbRequest(Message):
    """One verb call: the text, an optional title, and the device of the turn (for answers).

    Its event is named after the verb it calls (:data:`~shared.subjects.VERBS`), so the
    verb is given to :meth:`to_event`; ``EVENT_TYPE`` is ``delegate``'s, the one verb a
    node reads off an inbox.
    """

    EVENT_TYPE: ClassVar[str] = DELEGATE_EVENT_TYPE

    text: str
    agent: str | None = None
    title: str | None = None
    device: str | None = None

    def to_payload(self) -> dict[str, Any]:
        """The verb's payload (``title`` only when set; ``device`` always, maybe null)."""
        payload: dict[str, Any] = {} if self.agent is None else {"agent": self.agent}
        payload["text"] = self.text
        if self.title is not None:
            payload["title"] = self.title
        payload["device"] = self.device
        return payload

    def to_event(self, verb: str, **stamp: Unpack[StampArgs]) -> Event:
        """The verb's event (of type ``verb``), stamped with the turn it belongs to."""
        return Event.new(verb, self.to_payload(), **stamp)

    @classmethod
    def is_verb(cls, event_type: str) -> bool:
        """True if an event of ``event_type`` calls one of the verbs."""
        return event_type in VERBS

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> VerbRequest:
        """Parse a verb payload: non-empty ``text``; a title that is not text reads as none."""
        title = payload.get("title")
        return cls(
            text=fields.text(payload),
            agent=fields.opt_string(payload, "agent"),
            title=title if isinstance(title, str) and title.strip() else None,
            device=fields.opt_string(payload, "device"),
        )

    @classmethod
    def from_event(cls, event: Event) -> VerbRequest:
        """Parse a verb event; ``EnvelopeError`` names the malformed key."""
        return cls.from_payload(event.payload)


@dataclass(frozen=True)
class VerbAck(PayloadMessage):
    """An effector's answer to one verb: ``ok`` with the document written, or the error.

    Its event type names the verb (``<verb>.ack``): :attr:`event_type`, :meth:`is_type`.
    """

    EVENT_TYPE: ClassVar[str] = DELEGATE_EVENT_TYPE + ACK_SUFFIX

    agent: str
    verb: str
    ok: bool
    doc_id: int | None = None
    error: str | None = None

    @property
    def event_type(self) -> str:
        """``<verb>.ack``."""
        return f"{self.verb}{ACK_SUFFIX}"

    @classmethod
    def is_type(cls, event_type: str) -> bool:
        """True for ``<verb>.ack`` of any verb."""
        return event_type.endswith(ACK_SUFFIX) and event_type[: -len(ACK_SUFFIX)] in VERBS

    def to_payload(self) -> dict[str, Any]:
        """The ack's payload (``doc_id`` only on success)."""
        payload: dict[str, Any] = {"agent": self.agent, "verb": self.verb, "ok": self.ok}
        if self.doc_id is not None:
            payload["doc_id"] = self.doc_id
        payload["error"] = self.error
        return payload

    @classmethod
    def from_event(cls, event: Event) -> VerbAck:
        """Parse an ack; ``EnvelopeError`` names the malformed key."""
        p = event.payload
        return cls(
            agent=fields.string(p, "agent"),
            verb=fields.string(p, "verb"),
            ok=fields.flag(p, "ok"),
            doc_id=fields.opt_int(p, "doc_id"),
            error=fields.opt_string(p, "error"),
        )


@dataclass(frozen=True)
class DelegateAnswer(PayloadMessage):
    """What became of a delegated task: the operator's answer, or why there is none.

    ``ok`` with ``text`` (the answer); or not ``ok`` with ``error`` (the operator's turn
    failed or was aborted, or the asker's wait ran out). ``question`` is the task as
    delegated; ``asker`` the agent and ``device`` the device the answer is for.
    """

    EVENT_TYPE: ClassVar[str] = DELEGATE_ANSWER_EVENT_TYPE

    question: str
    asker: str
    device: str | None
    ok: bool
    text: str = ""
    error: str | None = None
    operator: str | None = None

    def to_payload(self) -> dict[str, Any]:
        """The answer's payload (``error`` always, maybe null)."""
        payload: dict[str, Any] = {} if self.operator is None else {"operator": self.operator}
        payload.update(
            question=self.question,
            asker=self.asker,
            device=self.device,
            ok=self.ok,
            text=self.text,
            error=self.error,
        )
        return payload

    @classmethod
    def from_event(cls, event: Event) -> DelegateAnswer:
        """Parse an answer; ``EnvelopeError`` names the malformed key. An ``ok`` answer
        must carry non-empty ``text``."""
        p = event.payload
        ok = fields.flag(p, "ok")
        return cls(
            question=fields.string(p, "question"),
            asker=fields.string(p, "asker"),
            device=fields.opt_string(p, "device"),
            ok=ok,
            text=fields.text(p) if ok else fields.string(p, "text", ""),
            error=fields.opt_string(p, "error"),
            operator=fields.opt_string(p, "operator"),
        )


def ack_failure(payload: dict[str, Any]) -> str | None:
    """Why an ack reports failure, or None for success; any ack's dialect is read.

    ``ok: false`` (verb acks, ``speech.completed``), a non-null ``error``, or a
    ``status`` other than ``ok`` each mean failure.
    """
    if payload.get("ok") is False:
        return f"ok=false: {payload.get('error') or 'no reason given'}"
    if payload.get("error") is not None:
        return f"error: {payload['error']}"
    status = payload.get("status")
    if status is not None and status != "ok":
        return f"status={status!r}"
    return None
