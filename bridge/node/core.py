"""One side of one bridge: local NATS on one hand, a link to the peer on the other.

:class:`BridgeCore` is the I/O shell around a :class:`~bridge.node.session.BridgeSession`,
which holds what must outlive a connection (outbox, receive state, dedupe memory,
counters) and makes every delivery decision. The core feeds it local messages,
frames and clock ticks and carries out the actions it answers with, over one
:class:`~bridge.node.link.Link` at a time on any byte stream (an SSH channel, or
stdin/stdout under OpenSSH). Everything refused is counted under
``refused.<reason>`` and logged with the reason.

Given an :class:`~bridge.node.outbox.OutboxStore`, the core makes the side durable:
it restores what the last run left at :meth:`BridgeCore.start`, commits each
accepted event and each acknowledgement as the session asks, and commits the ids
it delivered (with the peer's sequence) before the link acknowledges them
(docs/architecture.md, "Bridge: the durable outbox").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError

from bridge.errors import HelloRefused, LinkError
from bridge.node.clock import WallClock
from bridge.node.counters import BridgeCounters
from bridge.node.intake import INTAKE_HEADER, verdict
from bridge.node.link import Link
from bridge.node.outbox import OutboxStore, StoreError
from bridge.node.recover import delivered_since
from bridge.node.session import (
    Action,
    BridgeSession,
    DropExpired,
    ExpireOutbox,
    ForgetAcked,
    PublishLocal,
    RefuseEvent,
    RefuseHello,
    SendFrame,
    StoreEvent,
    Transmit,
)
from bridge.node.status import status_event, status_subject
from bridge.protocol import Outbox, Refuse
from bridge.transport.streams import ByteReader, ByteWriter
from shared.lifecycle import Service, cancel_and_wait
from shared.messages.bridge import LINK_DOWN, LINK_REFUSED, LINK_UP
from shared.schema.bridge_half import BridgeHalf

log = logging.getLogger("tether.bridge")


class BridgeCore(Service):
    """The local NATS side of one bridge and the shell around its session, across links."""

    def __init__(
        self,
        half: BridgeHalf,
        nc: NATS,
        *,
        device: str | None = None,
        heartbeat_s: float = 2.0,
        hello_timeout_s: float = 10.0,
        sweep_interval_s: float = 1.0,
        store: OutboxStore | None = None,
        lookup: NATS | None = None,
        clock: WallClock | None = None,
    ) -> None:
        self.half = half
        # This side's wall clock: what events expire by, and what its hello says of it.
        self.clock = clock or WallClock()
        self.device = device or half.device
        self.session = BridgeSession(half, self.device, durable=store is not None)
        self.store = store
        # Why the durable outbox last failed to commit an event; None once one commits.
        self.store_fault: str | None = None
        # Delivered on local NATS since the last commit of the receive state.
        self._delivered: list[tuple[str, float]] = []
        self.state = LINK_DOWN
        self.detail = "not connected yet"
        self.peer: str | None = None
        self._nc = nc
        # Reads local JetStream for events in doubt after a crash (recover.py): ``nc``
        # unless this side's own bus user may not (a device's user on home).
        self._lookup = lookup or nc
        self.heartbeat_s = heartbeat_s
        self.hello_timeout_s = hello_timeout_s
        self._sweep_interval_s = sweep_interval_s
        self._subs: list[Subscription] = []
        self._sweeper: asyncio.Task[None] | None = None
        self._link: Link | None = None
        self._link_task: asyncio.Task[Any] | None = None
        self._link_lock = asyncio.Lock()
        self._status_seq = 0
        self.label = f"{half.bridge}@{half.side}"

    @property
    def counters(self) -> BridgeCounters:
        """What this side has done since it started (the session's counters)."""
        return self.session.counters

    @property
    def outbox(self) -> Outbox:
        """The events waiting for the peer's acknowledgement."""
        return self.session.outbox

    # --- lifecycle ------------------------------------------------------------

    async def start(self) -> None:
        """Restore the durable state, subscribe this half's exports, start the expiry sweep."""
        if self.store is not None:
            await self._restore(self.store)
        for pattern in self.half.export_patterns:
            self._subs.append(await self._nc.subscribe(pattern, cb=self._on_local))
        self._sweeper = asyncio.create_task(self._sweep(), name=f"bridge-sweep-{self.label}")

    async def close(self) -> None:
        """Stop the current link, the sweep and the subscriptions."""
        # A link or sweep that failed has ended either way: nothing of it to report here.
        with contextlib.suppress(Exception):
            await cancel_and_wait(self._link_task, self._sweeper)
        for sub in self._subs:
            with contextlib.suppress(NatsError):
                await sub.unsubscribe()
        self._subs.clear()
        if self.store is not None:
            self.store.close()

    async def _restore(self, store: OutboxStore) -> None:
        """Take back the last run's outbox and dedupe window, and what it left in doubt."""
        now = self.clock.now()
        restored = store.restore(now)
        seen = dict(restored.seen)
        inbound = restored.inbound
        if inbound is not None:
            seen.update(
                await delivered_since(self._lookup, self.half.import_patterns, inbound.committed_at)
            )
        entries = self.session.restore(
            restored.pending, seen, (inbound.stream, inbound.seq) if inbound else None
        )
        try:
            store.renumber(entries)
        except StoreError as exc:
            # The file keeps the last run's numbers: the next run resends what it holds,
            # and the peer's dedupe window delivers each event once. Until an event
            # commits, the half is unhealthy and refuses what it cannot keep.
            log.error("%s: %s", self.label, exc)
            self.store_fault = str(exc)
        log.info(
            "%s: restored %d unacked event(s) and %d delivered id(s) from %s",
            self.label,
            len(entries),
            len(seen),
            store.path,
        )

    def health(self) -> dict[str, Any]:
        """State, peer, outbox depth, the peer's clock as measured, counters (JSON-ready)."""
        peer_clock = self.session.peer_clock
        return {
            "bridge": self.half.bridge,
            "side": self.half.side,
            "device": self.device,
            "state": self.state,
            "detail": self.detail,
            "peer": self.peer,
            "outbox": len(self.outbox),
            "store_fault": self.store_fault,
            "peer_clock": None if peer_clock is None else peer_clock.describe(),
            "counters": self.counters.snapshot(),
        }

    async def publish_status(self, state: str, detail: str, *, changed: bool = True) -> None:
        """Publish a ``bridge.status`` event on the local NATS (never crosses the link)."""
        self.state, self.detail = state, detail
        self._status_seq += 1
        event = status_event(
            bridge=self.half.bridge,
            side=self.half.side,
            device=self.device,
            state=state,
            detail=detail,
            counters=self.counters.snapshot(),
            sequence_number=self._status_seq,
            changed=changed,
        )
        try:
            await self._nc.publish(status_subject(self.half.bridge), event.to_json())
        except NatsError as exc:
            log.warning("%s: cannot publish status: %s", self.label, exc)

    # --- carrying out the session's actions -------------------------------------

    async def carry_out(self, actions: list[Action], link: Link | None = None) -> list[RefuseEvent]:
        """Carry out ``actions`` in order, and whatever the session answers to a publish.

        ``link`` is the link the actions came from (None for local events and the sweep).
        Returns the events refused on the way: those the durable outbox could not commit.
        """
        refused: list[RefuseEvent] = []
        todo = deque(actions)
        while todo:
            match todo.popleft():
                case PublishLocal() as publish:
                    todo.extend(await self._publish(publish))
                case StoreEvent() | ForgetAcked() as stored:
                    if (refusal := self._persist(stored, self.clock.now())) is not None:
                        self._log_noted(refusal)
                        refused.append(refusal)
                case SendFrame(frame):
                    if link is not None:
                        link.send(frame)
                case Transmit():
                    if self._link is not None:
                        self._link.wake.set()
                case RefuseEvent() | DropExpired() | ExpireOutbox() as noted:
                    self._log_noted(noted)
                case RefuseHello(reason, findings):
                    # One line, however many findings: the peer decides how many there are.
                    log.error(
                        "%s refused the peer's hello: %s%s",
                        self.label,
                        reason,
                        f"; first: {findings[0]}" if findings else "",
                    )
                    if link is not None:
                        with contextlib.suppress(LinkError):
                            await link.write([Refuse(reason, findings)])
                    raise HelloRefused(reason, findings)
        return refused

    async def _publish(self, publish: PublishLocal) -> list[Action]:
        """Publish one event from the peer on local NATS; the session's answer to that."""
        try:
            await self._nc.publish(publish.subject, publish.data)
        except NatsError as exc:
            # Not reported as published, so not handled: the peer resends it.
            raise LinkError(f"local NATS refused a publish: {exc}") from exc
        if self.store is not None:
            self._delivered.append((publish.event_id, publish.expires_at))
        return self.session.published(publish)

    def _persist(self, action: StoreEvent | ForgetAcked | None, now: float) -> RefuseEvent | None:
        """One write to the durable outbox (None: the expiry sweep's).

        A failing file never ends the bridge; it is logged and held as :attr:`store_fault`
        (health names it) until an event commits again. An event that did not commit is
        taken back and refused (its producer is told); a failed ack or sweep leaves
        entries the next run resends or drops, which the dedupe window and expiry absorb.
        """
        if self.store is None:
            return None
        try:
            match action:
                case StoreEvent(entry):
                    self.store.add(entry)
                    self.store_fault = None
                case ForgetAcked(seq):
                    self.store.ack(seq)
                case None:
                    self.store.expire(now)
        except StoreError as exc:
            log.error("%s: %s", self.label, exc)
            self.store_fault = str(exc)
            if isinstance(action, StoreEvent):
                return self.session.unstored(action.entry, str(exc))
        return None

    def _log_noted(self, noted: RefuseEvent | DropExpired | ExpireOutbox) -> None:
        """Log what the session decided without anything to carry out."""
        match noted:
            case RefuseEvent(_, where, message):
                log.warning("%s refused %s: %s", self.label, where, message)
            case DropExpired(event_id, where):
                log.info("%s dropped expired %s %s", self.label, event_id, where)
            case ExpireOutbox(count, what):
                log.info("%s: %d %s", self.label, count, what)

    # --- local side -------------------------------------------------------------

    async def _on_local(self, msg: Msg) -> None:
        actions = self.session.send(msg.subject, msg.data, self.clock.now())
        if len(actions) == 1 and type(actions[0]) is Transmit:
            # What almost every local event answers, so taken without the general loop.
            if self._link is not None:
                self._link.wake.set()
        else:
            actions = [*actions, *await self.carry_out(actions)]
        if msg.reply:
            # Asked, not just published: say whether it is in the outbox (bridge/node/intake.py).
            said, message = verdict(actions)
            try:
                await self._nc.publish(msg.reply, message.encode(), headers={INTAKE_HEADER: said})
            except NatsError as exc:
                log.warning("%s: cannot answer a producer on %s: %s", self.label, msg.subject, exc)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_interval_s)
            now = self.clock.now()
            await self.carry_out(self.session.tick(now))
            self._persist(None, now)

    # --- the link ---------------------------------------------------------------

    async def run_link(
        self,
        reader: ByteReader,
        writer: ByteWriter,
        *,
        authenticated_device: str | None = None,
        peer: str = "peer",
    ) -> None:
        """Run one link until it fails or is replaced; always raises when it ends.

        A newer link for the same bridge replaces an older one (the old one is
        usually a half-open TCP connection the peer already gave up on).
        """
        old = self._link_task
        if old is not None and not old.done():
            old.cancel()
        async with self._link_lock:
            self._link_task = asyncio.current_task()
            link = Link(self, reader, writer)
            try:
                await link.handshake(authenticated_device)
            except HelloRefused as exc:
                await self.publish_status(LINK_REFUSED, str(exc))
                raise
            self._link = link
            self.peer = peer
            log.info("%s: link up with %s", self.label, peer)
            await self.publish_status(LINK_UP, peer)
            try:
                await link.run()
            finally:
                self._link = None
                self.session.detach()
                self._link_task = None
                log.info(
                    "%s: link with %s down; counters %s",
                    self.label,
                    peer,
                    json.dumps(self.counters.snapshot(), separators=(",", ":")),
                )
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.publish_status(LINK_DOWN, "link lost"))

    async def flush_local(self) -> None:
        """Wait until local NATS has everything published so far (before acknowledging it).

        A durable side then commits what it delivered up to here, so an ACK never gets
        ahead of the dedupe window on disk.
        """
        inbound = self.session.inbound
        stream, seq = inbound.stream, inbound.seq
        delivered = self._delivered[:]
        try:
            # Never cancel a nats-py flush: its PONG would later land on a cancelled
            # future and kill the client's read loop (InvalidStateError in _process_pong).
            await asyncio.shield(self._nc.flush(timeout=10))
        except (NatsError, TimeoutError) as exc:
            raise LinkError(f"local NATS did not confirm the publishes: {exc}") from exc
        if self.store is not None:
            try:
                self.store.commit_inbound(stream, seq, delivered, self.clock.now())
            except StoreError as exc:
                raise LinkError(str(exc)) from exc
            del self._delivered[: len(delivered)]
