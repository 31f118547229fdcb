"""The extensions' one NATS connection: publish an envelope, await its ack.

Every publish re-reads the node's binding file, so the event carries the
binding id of the turn in flight. A verb with an ack subscribes the ack subject
*before* publishing (a fast effector cannot ack into a subscription that does
not exist yet), then waits, polling the tool's abort signal, bounded by the
verb's timeout. Publish-and-hope is not in the vocabulary: no ack in time, or
an ack that reports failure, raises :class:`AckError`.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import nats
import nats.errors
from nats.aio.client import Client as NatsClient
from nats.aio.subscription import Subscription

from home.tau_extensions.binding import TurnBinding, read_binding
from home.tau_extensions.errors import AckError, ExtensionError
from shared.errors import EnvelopeError
from shared.event import EnvelopeLimits, Event
from shared.messages.message import PayloadMessage, Stamp
from shared.messages.verbs import ack_failure
from shared.publisher import Publisher

_ACK_POLL_S = 0.1
NOT_CONNECTED = "not connected to NATS (session_start has not run)"


class BusLink:
    """One extension's connection to the bus, scoped to one agent."""

    def __init__(self, *, agent: str, nats_url: str, binding_file: Path, source: str) -> None:
        self.agent = agent
        self.nats_url = nats_url
        self.binding_file = binding_file
        self.source = source
        self.limits = EnvelopeLimits()
        self.publisher = Publisher(source, limits=self.limits)
        self._nc: NatsClient | None = None

    async def connect(self) -> None:
        """Connect (called from τ's ``session_start``)."""
        self._nc = await nats.connect(self.nats_url, name=self.source, max_reconnect_attempts=-1)
        self.publisher.attach(self._nc)

    async def close(self) -> None:
        """Drain and close (called from τ's ``session_shutdown``)."""
        self.publisher.detach()
        nc, self._nc = self._nc, None
        if nc is not None:
            await nc.drain()

    @property
    def nc(self) -> NatsClient:
        """The live connection; raises if the session has not started."""
        if self._nc is None:
            raise ExtensionError(NOT_CONNECTED)
        return self._nc

    def binding(self) -> TurnBinding:
        """The turn in flight, re-read from the node's file on every call."""
        return read_binding(self.binding_file)

    def stamp(self, binding: TurnBinding) -> Stamp:
        """The envelope of this agent's next event: the turn's binding id and schema."""
        return self.publisher.stamp(
            binding_id=binding.binding_id, hops=(self.source,), produced_by_schema=binding.schema
        )

    def event(self, message: PayloadMessage, binding: TurnBinding) -> Event:
        """The message's own event from this agent, for the turn of ``binding``."""
        return message.to_event(**self.stamp(binding))

    async def publish(self, subject: str, event: Event) -> None:
        """Publish one event (refused here if it is not text-only or too large)."""
        if not self.publisher.attached:
            raise ExtensionError(NOT_CONNECTED)
        await self.publisher.send(subject, event)

    async def acks(self, ack_subject: str) -> AckWaiter:
        """A subscription to ``ack_subject``, open before anything that is acked there is sent."""
        return AckWaiter(await self.nc.subscribe(ack_subject), ack_subject, self.limits)

    async def publish_and_await_ack(
        self,
        subject: str,
        event: Event,
        ack_subject: str,
        *,
        timeout_s: float,
        signal: Any = None,
    ) -> Event:
        """Publish ``event`` and return the ack that arrives on ``ack_subject``."""
        waiter = await self.acks(ack_subject)
        try:
            await self.publish(subject, event)
            return await waiter.next(timeout_s=timeout_s, signal=signal)
        finally:
            await waiter.close()


class AckWaiter:
    """The acks arriving on one subject, taken one at a time in arrival order."""

    def __init__(self, sub: Subscription, subject: str, limits: EnvelopeLimits) -> None:
        self.subject = subject
        self._sub = sub
        self._limits = limits

    async def next(self, *, timeout_s: float, signal: Any = None) -> Event:
        """The next ack; :class:`AckError` if none comes in ``timeout_s`` or it reports failure."""
        deadline = time.monotonic() + timeout_s
        while True:
            if signal is not None and signal.is_aborted():
                raise asyncio.CancelledError(f"aborted while waiting for {self.subject}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AckError(
                    f"no ack on {self.subject} within {timeout_s:g}s; the action is unconfirmed"
                )
            try:
                msg = await self._sub.next_msg(timeout=min(_ACK_POLL_S, remaining))
            except nats.errors.TimeoutError:
                continue
            try:
                ack = Event.from_json(msg.data, self._limits)
            except EnvelopeError as exc:
                raise AckError(f"the ack on {self.subject} is not a valid event: {exc}") from exc
            failure = ack_failure(ack.payload)
            if failure is not None:
                raise AckError(f"refused or failed ({self.subject}): {failure}")
            return ack

    async def close(self) -> None:
        """Stop listening."""
        await self._sub.unsubscribe()
