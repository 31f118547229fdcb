"""One side of one bridge: local NATS on one hand, a link to the peer on the other.

:class:`BridgeCore` holds what must outlive a connection (outbox, receive state,
dedupe memory, counters) and runs one link at a time over any byte stream
(an SSH channel, or stdin/stdout under OpenSSH). Everything it refuses is
counted under ``refused.<reason>`` and logged with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError

from bridge.errors import FrameError, HelloRefused, LinkError, Refused
from bridge.node.counters import BridgeCounters
from bridge.node.status import status_event, status_subject
from bridge.protocol import (
    Ack,
    Deduper,
    EventRecord,
    Events,
    Frame,
    FrameDecoder,
    FrameEncoder,
    HalfPolicy,
    Hello,
    HelloFrame,
    Outbox,
    OutboxEntry,
    Ping,
    Pong,
    ReceiveState,
    Refuse,
    Resume,
    bounded_findings,
    check_hello,
)
from bridge.transport.streams import ByteReader, ByteWriter
from shared.messages.bridge import LINK_DOWN, LINK_REFUSED, LINK_UP
from shared.schema.bridge_half import BridgeHalf

log = logging.getLogger("tether.bridge")

READ_CHUNK = 256 * 1024
BATCH_RECORDS = 1024
BATCH_BYTES = 512 * 1024
ACK_DELAY_S = 0.005


class BridgeCore:
    """Delivery state and the local NATS side of one bridge, across any number of links."""

    def __init__(
        self,
        half: BridgeHalf,
        nc: NATS,
        *,
        device: str | None = None,
        heartbeat_s: float = 2.0,
        hello_timeout_s: float = 10.0,
        sweep_interval_s: float = 1.0,
    ) -> None:
        self.half = half
        self.device = device or half.device
        self.policy = HalfPolicy(half, self.device)
        self.outbox = Outbox(half.limits.outbox_events)
        self.receive = ReceiveState()
        self.dedupe = Deduper()
        self.counters = BridgeCounters()
        self.state = LINK_DOWN
        self.detail = "not connected yet"
        self.peer: str | None = None
        self._nc = nc
        self.heartbeat_s = heartbeat_s
        self.hello_timeout_s = hello_timeout_s
        self._sweep_interval_s = sweep_interval_s
        self._subs: list[Subscription] = []
        self._sweeper: asyncio.Task[None] | None = None
        self._link: _Link | None = None
        self._link_task: asyncio.Task[Any] | None = None
        self._link_lock = asyncio.Lock()
        self._status_seq = 0
        self.label = f"{half.bridge}@{half.side}"

    # --- lifecycle ------------------------------------------------------------

    async def start(self) -> None:
        """Subscribe this half's exports on local NATS and start the expiry sweep."""
        for pattern in self.half.export_patterns:
            self._subs.append(await self._nc.subscribe(pattern, cb=self._on_local))
        self._sweeper = asyncio.create_task(self._sweep(), name=f"bridge-sweep-{self.label}")

    async def stop(self) -> None:
        """Stop the current link, the sweep and the subscriptions."""
        for task in (self._link_task, self._sweeper):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        for sub in self._subs:
            with contextlib.suppress(NatsError):
                await sub.unsubscribe()
        self._subs.clear()

    def health(self) -> dict[str, Any]:
        """State, peer, outbox depth and counters (JSON-ready)."""
        return {
            "bridge": self.half.bridge,
            "side": self.half.side,
            "device": self.device,
            "state": self.state,
            "detail": self.detail,
            "peer": self.peer,
            "outbox": len(self.outbox),
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

    # --- local side -------------------------------------------------------------

    def _refuse(self, refusal: Refused, where: str) -> None:
        self.counters.refused[refusal.reason] += 1
        log.warning("%s refused %s: %s", self.label, where, refusal)

    async def _on_local(self, msg: Msg) -> None:
        try:
            event = self.policy.outgoing(msg.subject, msg.data)
        except Refused as refusal:
            self._refuse(refusal, "an outgoing event")
            return
        expires_at = event.expires_at.timestamp()
        if expires_at < time.time():
            self.counters.expired += 1
            log.info("%s dropped expired %s on %s", self.label, event.event_id, msg.subject)
            return
        try:
            entry = self.outbox.add(msg.subject, event.to_json(), event.event_id, expires_at)
        except Refused as refusal:
            self._refuse(refusal, f"{event.event_id} on {msg.subject}")
            return
        self.counters.accepted += 1
        if self._link is not None:
            self._link.offer(entry)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_interval_s)
            gone = self.outbox.drop_expired(time.time())
            if gone:
                self.counters.expired += len(gone)
                log.info("%s: %d unacked event(s) expired in the outbox", self.label, len(gone))

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
            link = _Link(self, reader, writer)
            try:
                await link.handshake(authenticated_device)
            except HelloRefused as exc:
                await self.publish_status(LINK_REFUSED, str(exc))
                raise
            self._link = link
            self.peer = peer
            self.counters.link_ups += 1
            log.info("%s: link up with %s", self.label, peer)
            await self.publish_status(LINK_UP, peer)
            try:
                await link.run()
            finally:
                self._link = None
                self.counters.link_downs += 1
                self._link_task = None
                log.info(
                    "%s: link with %s down; counters %s",
                    self.label,
                    peer,
                    json.dumps(self.counters.snapshot(), separators=(",", ":")),
                )
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.publish_status(LINK_DOWN, "link lost"))

    async def deliver(self, records: tuple[EventRecord, ...]) -> None:
        """Handle records from the peer: enforce the half, dedupe, publish locally."""
        now = time.time()
        for rec in records:
            self.counters.received += 1
            before = self.receive.seq
            if not self.receive.accept(rec.seq):
                self.counters.duplicates += 1
                continue
            try:
                event = self.policy.incoming(rec.subject, rec.data)
            except Refused as refusal:
                self._refuse(refusal, f"an incoming event (seq {rec.seq})")
                continue
            expires_at = event.expires_at.timestamp()
            if expires_at < now:
                self.counters.expired += 1
                log.info("%s dropped expired %s on arrival", self.label, event.event_id)
                continue
            if not self.dedupe.first_time(event.event_id, expires_at, now):
                self.counters.duplicates += 1
                continue
            try:
                await self._nc.publish(rec.subject, event.to_json())
            except NatsError as exc:
                # Not handled after all: the peer must resend it, and it must not count as seen.
                self.receive.seq = before
                self.dedupe.forget(event.event_id)
                raise LinkError(f"local NATS refused a publish: {exc}") from exc
            self.counters.delivered += 1

    async def flush_local(self) -> None:
        """Wait until local NATS has everything published so far (before acknowledging it)."""
        try:
            # Never cancel a nats-py flush: its PONG would later land on a cancelled
            # future and kill the client's read loop (InvalidStateError in _process_pong).
            await asyncio.shield(self._nc.flush(timeout=10))
        except (NatsError, TimeoutError) as exc:
            raise LinkError(f"local NATS did not confirm the publishes: {exc}") from exc

    def note_sent(self, entry: OutboxEntry) -> None:
        """Count one transmitted record (a resend if it had been sent before)."""
        self.counters.sent += 1
        if self.outbox.mark_sent(entry):
            self.counters.resent += 1


class _Link:
    """One connection's worth of state: codec contexts, send queue, heartbeats."""

    def __init__(self, core: BridgeCore, reader: ByteReader, writer: ByteWriter) -> None:
        self.core = core
        self.reader = reader
        self.writer = writer
        self.encoder = FrameEncoder()
        self.decoder = FrameDecoder()
        self.queue: deque[OutboxEntry] = deque()
        self.wake = asyncio.Event()
        self.ack_due = False
        self.ack_seq = 0
        self.flush_wanted = asyncio.Event()
        self.control: list[Frame] = []
        self.early: list[Frame] = []
        self.last_rx = time.monotonic()

    def offer(self, entry: OutboxEntry) -> None:
        self.queue.append(entry)
        self.wake.set()

    async def _write(self, frames: list[Frame]) -> None:
        counters = self.core.counters
        raw_before = self.encoder.raw_bytes
        data = b"".join(self.encoder.encode(f) for f in frames)
        counters.bytes_raw_sent += self.encoder.raw_bytes - raw_before
        counters.bytes_wire_sent += len(data)
        try:
            self.writer.write(data)
            await self.writer.drain()
        except (OSError, ConnectionError, RuntimeError) as exc:
            raise LinkError(f"write failed: {exc}") from exc
        except Exception as exc:  # asyncssh raises its own errors on a closed channel
            raise LinkError(f"write failed: {exc}") from exc

    async def _read_frames(self) -> list[Frame]:
        try:
            data = await self.reader.read(READ_CHUNK)
        except Exception as exc:  # translate whatever the stream raises at the boundary
            raise LinkError(f"read failed: {exc}") from exc
        if not data:
            raise LinkError("the peer closed the link")
        self.last_rx = time.monotonic()
        counters = self.core.counters
        raw_before = self.decoder.raw_bytes
        frames = self.decoder.feed(data)
        counters.bytes_wire_received += len(data)
        counters.bytes_raw_received += self.decoder.raw_bytes - raw_before
        return frames

    async def handshake(self, authenticated_device: str | None) -> None:
        core = self.core
        mine = Hello.for_half(
            core.half, core.outbox.stream, Resume(core.receive.stream, core.receive.seq)
        )
        await self._write([HelloFrame(mine.to_body())])
        try:
            async with asyncio.timeout(core.hello_timeout_s):
                frames: list[Frame] = []
                while not frames:
                    frames = await self._read_frames()
        except TimeoutError:
            raise LinkError(f"no hello from the peer within {core.hello_timeout_s} s") from None
        first, self.early = frames[0], frames[1:]
        if isinstance(first, Refuse):
            raise HelloRefused(
                f"the peer refused this half: {first.reason}", bounded_findings(first.findings)
            )
        if not isinstance(first, HelloFrame):
            raise FrameError(f"expected HELLO first, got {type(first).__name__}")
        try:
            hello = Hello.from_body(first.body)
            check_hello(core.half, hello, authenticated_device)
        except (HelloRefused, FrameError) as exc:
            reason = exc.message if isinstance(exc, HelloRefused) else str(exc)
            findings = exc.findings if isinstance(exc, HelloRefused) else ()
            # One line, however many findings: the peer decides how many there are.
            log.error(
                "%s refused the peer's hello: %s%s",
                core.label,
                reason,
                f"; first: {findings[0]}" if findings else "",
            )
            with contextlib.suppress(LinkError):
                await self._write([Refuse(reason, findings)])
            if isinstance(exc, HelloRefused):
                raise
            raise HelloRefused(reason) from exc
        known = hello.received.stream == core.outbox.stream
        unseen = core.outbox.restart(hello.received.seq if known else None)
        if unseen:
            core.counters.expired += len(unseen)
            log.info("%s: %d sent event(s) expired unacked", core.label, len(unseen))
        core.receive.attach(hello.stream)
        self.queue.extend(core.outbox.pending())

    async def run(self) -> None:
        tasks = [
            asyncio.create_task(self._reader_loop(), name=f"bridge-read-{self.core.label}"),
            asyncio.create_task(self._writer_loop(), name=f"bridge-write-{self.core.label}"),
            asyncio.create_task(self._heartbeat_loop(), name=f"bridge-beat-{self.core.label}"),
            asyncio.create_task(self._ack_loop(), name=f"bridge-ack-{self.core.label}"),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()
            raise LinkError("the link ended")
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            with contextlib.suppress(Exception):
                self.writer.close()

    async def _handle(self, frame: Frame) -> None:
        core = self.core
        match frame:
            case Events(records):
                # Shielded: a batch is handled whole even if the link dies meanwhile, so no
                # record is marked received without having been published.
                await asyncio.shield(core.deliver(records))
                self.flush_wanted.set()
            case Ack(seq):
                core.outbox.ack(seq)
            case Ping(nonce):
                self.control.append(Pong(nonce))
                self.wake.set()
            case Pong(nonce):
                core.counters.note_rtt((time.monotonic_ns() - nonce) / 1e6)
            case Refuse(reason, findings):
                raise HelloRefused(
                    f"the peer closed the link: {reason}", bounded_findings(findings)
                )
            case HelloFrame():
                raise FrameError("a second HELLO on an established link")

    async def _reader_loop(self) -> None:
        for frame in self.early:
            await self._handle(frame)
        while True:
            for frame in await self._read_frames():
                await self._handle(frame)

    async def _writer_loop(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            frames: list[Frame] = list(self.control)
            self.control.clear()
            if self.ack_due:
                frames.append(Ack(self.ack_seq))
                self.ack_due = False
            batch = self._next_batch()
            if batch:
                frames.append(Events(tuple(batch)))
            if frames:
                await self._write(frames)
            if self.queue:
                self.wake.set()

    def _next_batch(self) -> list[EventRecord]:
        core = self.core
        now = time.time()
        batch: list[EventRecord] = []
        size = 0
        while self.queue and len(batch) < BATCH_RECORDS and size < BATCH_BYTES:
            entry = self.queue.popleft()
            if not core.outbox.contains(entry.seq):
                continue  # acked (resend raced an ack) or expired by the sweep
            if entry.expires_at < now:  # never reached the peer: this link resends only that
                core.outbox.remove(entry.seq)
                core.counters.expired += 1
                continue
            batch.append(EventRecord(entry.seq, entry.subject, entry.data))
            size += len(entry.data)
            core.note_sent(entry)
        return batch

    async def _ack_loop(self) -> None:
        # Acks trail a flush of local NATS, in their own task so the reader keeps
        # delivering meanwhile: an ack means the events reached the local server.
        while True:
            await self.flush_wanted.wait()
            # Coalesce: one flush and one ACK for whatever arrives within ACK_DELAY_S,
            # instead of a NATS round trip and an SSH packet back per batch.
            await asyncio.sleep(ACK_DELAY_S)
            self.flush_wanted.clear()
            seq = self.core.receive.seq
            await self.core.flush_local()
            self.ack_seq = seq
            self.ack_due = True
            self.wake.set()

    async def _heartbeat_loop(self) -> None:
        interval = self.core.heartbeat_s
        while True:
            await asyncio.sleep(interval)
            silent = time.monotonic() - self.last_rx
            if silent > 3 * interval:
                raise LinkError(f"no frame from the peer in {silent:.1f} s (heartbeat timeout)")
            self.control.append(Ping(time.monotonic_ns()))
            self.wake.set()
