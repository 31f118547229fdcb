"""The edge's connection to its loopback NATS: publish envelopes, subscribe with parsing.

Messages that fail to parse are counted and logged with their subject, never
passed on and never allowed to stop a node. Events for home (turns, speech acks) go
out through :meth:`Bus.hand_over`: with a bridge on the board each is asked of its
half until taken (:mod:`edge.handover`), and what is not taken is counted, logged
and told to whoever listens (the notice node speaks it).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg

from edge.errors import NotTaken
from edge.handover import hand_to_bridge
from shared.errors import ContractError
from shared.event import EnvelopeLimits, Event
from shared.lifecycle import Service
from shared.publisher import MessageT, Received, receive

log = logging.getLogger(__name__)

Handler = Callable[[str, Event], Awaitable[None]]
NotTakenHandler = Callable[[NotTaken], Awaitable[None]]


class Bus(Service):
    """One NATS client shared by the edge nodes, with per-source sequence numbers.

    ``asks_bridge``: an edge bridge half runs on this NATS, so :meth:`hand_over` asks
    it to take each event; without one, events for home stay local and are published.
    """

    def __init__(
        self, url: str, *, limits: EnvelopeLimits | None = None, asks_bridge: bool = False
    ) -> None:
        self.url = url
        self.limits = limits or EnvelopeLimits()
        self.asks_bridge = asks_bridge
        self.malformed = 0
        self.handler_errors = 0
        self.not_taken = 0
        # Told of each event for home the bridge did not take (set by the runtime).
        self.on_not_taken: NotTakenHandler | None = None
        self._nc: Client | None = None
        self._sequences: dict[str, itertools.count[int]] = {}
        self._subs: list[Any] = []

    async def start(self) -> None:
        """Connect to the edge's NATS."""
        self._nc = await nats.connect(
            self.url, name="edge", connect_timeout=5, max_reconnect_attempts=-1
        )

    async def close(self) -> None:
        """Drain and close the connection."""
        nc, self._nc = self._nc, None
        if nc is not None and not nc.is_closed:
            await nc.drain()

    @property
    def client(self) -> Client:
        """The raw NATS client (for the bridge plug-in); only inside ``async with``."""
        if self._nc is None:
            raise RuntimeError("Bus used outside its 'async with'")
        return self._nc

    def next_sequence(self, source: str) -> int:
        """The next sequence number for events published by ``source``."""
        return next(self._sequences.setdefault(source, itertools.count()))

    async def publish(self, subject: str, event: Event) -> None:
        """Publish one envelope (limits enforced: text only, size)."""
        await self.client.publish(subject, event.to_json(self.limits))

    async def hand_over(self, subject: str, event: Event) -> None:
        """Send an event for home: asked of the bridge half until taken, when there is one.

        What the half does not take is counted, logged and handed to
        :attr:`on_not_taken`; the producer carries on either way.
        """
        if not self.asks_bridge:
            await self.publish(subject, event)
            return
        try:
            await hand_to_bridge(self.client, subject, event, limits=self.limits)
        except NotTaken as exc:
            self.not_taken += 1
            log.warning("%s (%s)", exc, exc.verdict)
            if self.on_not_taken is not None:
                await self.on_not_taken(exc)

    async def subscribe(self, pattern: str, handler: Handler) -> None:
        """Call ``handler(subject, event)`` for every well-formed envelope on ``pattern``."""

        async def on_message(msg: Msg) -> None:
            try:
                event = Event.from_json(msg.data, self.limits)
            except ContractError as exc:
                self.malformed += 1
                log.warning("refused a malformed event on %s: %s", msg.subject, exc)
                return
            try:
                await handler(msg.subject, event)
            except Exception:
                self.handler_errors += 1
                log.exception("handler for %s failed on event %s", msg.subject, event.event_id)

        self._subs.append(await self.client.subscribe(pattern, cb=on_message))

    async def flush(self) -> None:
        """Wait until the server has everything published so far."""
        await self.client.flush(timeout=5)

    async def subscribe_to(
        self,
        pattern: str,
        read: Callable[[Event], MessageT],
        handler: Callable[[Received[MessageT]], Awaitable[None]],
    ) -> None:
        """Call ``handler`` with every message ``read`` makes of an event on ``pattern``,
        typed and with what its subject names; what does not read is counted as malformed."""

        async def on_event(subject: str, event: Event) -> None:
            try:
                received = receive(read, subject, event)
            except ContractError as exc:
                self.malformed += 1
                log.warning("refused a malformed event on %s: %s", subject, exc)
                return
            await handler(received)

        await self.subscribe(pattern, on_event)
