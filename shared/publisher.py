"""One sender's events on a NATS connection: its source, its sequence numbers, its limits.

The edge's nodes share :class:`edge.bus.Bus`, which numbers each source's events and
enforces the envelope limits. Home's senders (an effector, an agent's extensions, the
agent node) each hold a :class:`Publisher` that does the same for one source: a
message builds its own event (:mod:`shared.messages.message`), the publisher stamps
it and sends it. What a receiver gets back is a :class:`Received`: the message,
what its subject names, the turn's binding id and the event id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from nats.aio.client import Client

from shared.event import EnvelopeLimits, Event
from shared.messages.message import PayloadMessage, Stamp
from shared.subjects import SubjectInfo, parse_subject

MessageT = TypeVar("MessageT")  # the type of message a reader makes


class Publisher:
    """One source's sender: the source, its sequence numbers (from 1), the envelope limits.

    ``limits`` None sends without checking them (a sender whose events are its own
    small acks). Attached to a NATS connection while its owner runs; detached, it
    sends nothing, as a sender that is not started has no bus.
    """

    def __init__(self, source: str, *, limits: EnvelopeLimits | None = None) -> None:
        self.source = source
        self.limits = limits
        self._nc: Client | None = None
        self._seq = 0

    def attach(self, nc: Client) -> None:
        """Send on ``nc`` from now on."""
        self._nc = nc

    def detach(self) -> Client | None:
        """Stop sending; return the connection for its owner to drain."""
        nc, self._nc = self._nc, None
        return nc

    @property
    def attached(self) -> bool:
        """Whether there is a connection to send on."""
        return self._nc is not None

    def next_sequence(self) -> int:
        """The sequence number of this source's next event."""
        self._seq += 1
        return self._seq

    def stamp(
        self,
        *,
        binding_id: str | None = None,
        hops: tuple[str, ...] = (),
        produced_by_schema: str | None = None,
    ) -> Stamp:
        """The envelope of this source's next event, for the turn of ``binding_id``."""
        return Stamp(
            source=self.source,
            sequence_number=self.next_sequence(),
            binding_id=binding_id,
            hops=hops,
            produced_by_schema=produced_by_schema,
        )

    async def send(self, subject: str, event: Event) -> None:
        """Publish ``event`` on ``subject`` (limits enforced when set); nothing when detached."""
        if self._nc is not None:
            await self._nc.publish(subject, event.to_json(self.limits))

    async def publish(
        self,
        subject: str,
        message: PayloadMessage,
        *,
        binding_id: str | None = None,
        hops: tuple[str, ...] = (),
        produced_by_schema: str | None = None,
    ) -> Event | None:
        """Build ``message``'s own event, stamped by this source, and send it; the event.

        Detached, nothing is built or sent (and no sequence number is taken): None.
        """
        if self._nc is None:
            return None
        event = message.to_event(
            **self.stamp(binding_id=binding_id, hops=hops, produced_by_schema=produced_by_schema)
        )
        await self.send(subject, event)
        return event


@dataclass(frozen=True)
class Received(Generic[MessageT]):
    """One message as its receiver gets it: typed, with what its subject names, the turn's
    binding id and the event's id."""

    message: MessageT
    subject: SubjectInfo
    binding_id: str | None
    event_id: str


def receive(read: Callable[[Event], MessageT], subject: str, event: Event) -> Received[MessageT]:
    """Read one event that arrived on ``subject`` with ``read`` (a message's ``from_event``).

    Raises ``EnvelopeError`` naming the bad field, or ``SubjectError`` for a subject
    that names no rail.
    """
    return Received(read(event), parse_subject(subject), event.binding_id, event.event_id)
