"""What every message on the bus has: its event type, its own event, a check of the type.

A message class names its event type once (``EVENT_TYPE``), builds its own envelope
(``to_event``) and says whether an event is of its kind (:meth:`Message.is_type`),
so no producer pairs a type with a payload by hand. ``from_event`` reads the payload
whatever the type (a rail's subject already says what arrived, and τ's builtin
``nats_bus`` names its events after their subject); :meth:`Message.recognise` is the
strict reader that refuses another type, naming ``event_type``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Required, Self, TypedDict, Unpack

from shared.errors import EnvelopeError
from shared.event import Event


class Stamp(TypedDict):
    """What a sender stamps on every event it publishes: who it is, its count, and the
    turn the event belongs to (``to_event(**stamp)``)."""

    source: str
    sequence_number: int
    binding_id: str | None
    hops: tuple[str, ...]
    produced_by_schema: str | None


class StampArgs(TypedDict, total=False):
    """What ``to_event`` takes: a :class:`Stamp`, of which only the sender and its count
    are required, and the event's TTL (``shared.event.DEFAULT_TTL_MS`` unless given)."""

    source: Required[str]
    sequence_number: Required[int]
    binding_id: str | None
    hops: tuple[str, ...]
    produced_by_schema: str | None
    ttl_ms: int


class Message:
    """Base of a message that travels as one event: its type constant and the type check."""

    EVENT_TYPE: ClassVar[str]

    @property
    def event_type(self) -> str:
        """The type of the event this message travels in."""
        return self.EVENT_TYPE

    @classmethod
    def is_type(cls, event_type: str) -> bool:
        """True if an event of ``event_type`` carries this message."""
        return event_type == cls.EVENT_TYPE

    @classmethod
    def from_event(cls, event: Event) -> Self:
        """Read the message from an event's payload; ``EnvelopeError`` names the bad key."""
        raise NotImplementedError

    @classmethod
    def recognise(cls, event: Event) -> Self:
        """Read the message from an event that must be of its type (else ``event_type``)."""
        if not cls.is_type(event.event_type):
            raise EnvelopeError(
                "event_type",
                f"expected a {cls.__name__} event ({cls.EVENT_TYPE!r}), got {event.event_type!r}",
            )
        return cls.from_event(event)


class PayloadMessage(Message):
    """A message whose envelope the sender stamps: the binding id, hops and schema come
    from the turn it belongs to, not from the message."""

    def to_payload(self) -> dict[str, Any]:
        """The message as an event payload."""
        raise NotImplementedError

    def to_event(self, **stamp: Unpack[StampArgs]) -> Event:
        """The message's own event, stamped with who sends it and the turn it belongs to."""
        return Event.new(self.event_type, self.to_payload(), **stamp)
