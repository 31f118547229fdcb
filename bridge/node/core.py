"""One side of one bridge: local NATS on one hand, a link to the peer on the other.

:class:`BridgeCore` is the I/O shell around a :class:`~bridge.node.session.BridgeSession`,
which holds what must outlive a connection (outbox, receive state, dedupe memory,
counters) and makes every delivery decision. The core feeds it local messages,
frames and clock ticks, and carries out the actions it answers with, over one link
at a time on any byte stream (an SSH channel, or stdin/stdout under OpenSSH).
Everything refused is counted under ``refused.<reason>`` and logged with the reason.
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

from bridge.errors import HelloRefused, LinkError
from bridge.node.counters import BridgeCounters
from bridge.node.session import (
    Action,
    BridgeSession,
    DropExpired,
    ExpireOutbox,
    PublishLocal,
    RefuseEvent,
    RefuseHello,
    SendFrame,
    Transmit,
)
from bridge.node.status import LINK_DOWN, LINK_REFUSED, LINK_UP, status_event, status_subject
from bridge.protocol import (
    Ack,
    Events,
    Frame,
    FrameDecoder,
    FrameEncoder,
    HelloFrame,
    Outbox,
    Ping,
    Refuse,
)
from bridge.transport.streams import ByteReader, ByteWriter
from shared.schema.bridge_half import BridgeHalf

log = logging.getLogger("tether.bridge")

READ_CHUNK = 256 * 1024
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
        self.session = BridgeSession(half, self.device)
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
        )
        event.payload["changed"] = changed
        try:
            await self._nc.publish(status_subject(self.half.bridge), event.to_json())
        except NatsError as exc:
            log.warning("%s: cannot publish status: %s", self.label, exc)

    # --- carrying out the session's actions -------------------------------------

    async def carry_out(self, actions: list[Action], link: _Link | None = None) -> None:
        """Carry out ``actions`` in order, and whatever the session answers to a publish.

        ``link`` is the link the actions came from (None for local events and the sweep).
        """
        todo = deque(actions)
        while todo:
            match todo.popleft():
                case PublishLocal() as publish:
                    try:
                        await self._nc.publish(publish.subject, publish.data)
                    except NatsError as exc:
                        # Not reported as published, so not handled: the peer resends it.
                        raise LinkError(f"local NATS refused a publish: {exc}") from exc
                    todo.extend(self.session.published(publish))
                case SendFrame(frame):
                    if link is not None:
                        link.send(frame)
                case Transmit():
                    if self._link is not None:
                        self._link.wake.set()
                case RefuseEvent(_, where, message):
                    log.warning("%s refused %s: %s", self.label, where, message)
                case DropExpired(event_id, where):
                    log.info("%s dropped expired %s %s", self.label, event_id, where)
                case ExpireOutbox(count, what):
                    log.info("%s: %d %s", self.label, count, what)
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

    # --- local side -------------------------------------------------------------

    async def _on_local(self, msg: Msg) -> None:
        await self.carry_out(self.session.send(msg.subject, msg.data, time.time()))

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_interval_s)
            await self.carry_out(self.session.tick(time.time()))

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
        """Wait until local NATS has everything published so far (before acknowledging it)."""
        try:
            # Never cancel a nats-py flush: its PONG would later land on a cancelled
            # future and kill the client's read loop (InvalidStateError in _process_pong).
            await asyncio.shield(self._nc.flush(timeout=10))
        except (NatsError, TimeoutError) as exc:
            raise LinkError(f"local NATS did not confirm the publishes: {exc}") from exc


class _Link:
    """One connection's worth of I/O: codec contexts, frames to write, heartbeats, acks."""

    def __init__(self, core: BridgeCore, reader: ByteReader, writer: ByteWriter) -> None:
        self.core = core
        self.session = core.session
        self.reader = reader
        self.writer = writer
        self.encoder = FrameEncoder()
        self.decoder = FrameDecoder()
        self.wake = asyncio.Event()
        self.ack_due = False
        self.ack_seq = 0
        self.flush_wanted = asyncio.Event()
        self.control: list[Frame] = []
        self.early: list[Frame] = []
        self.last_rx = time.monotonic()

    def send(self, frame: Frame) -> None:
        """Queue one control frame for the writer."""
        self.control.append(frame)
        self.wake.set()

    async def write(self, frames: list[Frame]) -> None:
        """Encode and write ``frames`` at once; LinkError if the stream fails."""
        counters = self.session.counters
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
        counters = self.session.counters
        raw_before = self.decoder.raw_bytes
        frames = self.decoder.feed(data)
        counters.bytes_wire_received += len(data)
        counters.bytes_raw_received += self.decoder.raw_bytes - raw_before
        return frames

    async def handshake(self, authenticated_device: str | None) -> None:
        """Exchange hellos; the session attaches the link or refuses the peer's half."""
        await self.write([HelloFrame(self.session.hello().to_body())])
        try:
            async with asyncio.timeout(self.core.hello_timeout_s):
                frames: list[Frame] = []
                while not frames:
                    frames = await self._read_frames()
        except TimeoutError:
            raise LinkError(
                f"no hello from the peer within {self.core.hello_timeout_s} s"
            ) from None
        first, self.early = frames[0], frames[1:]
        await self.core.carry_out(self.session.greet(first, authenticated_device), self)

    async def run(self) -> None:
        """Read, write, beat and ack until one of them fails; always raises."""
        label = self.core.label
        tasks = [
            asyncio.create_task(self._reader_loop(), name=f"bridge-read-{label}"),
            asyncio.create_task(self._writer_loop(), name=f"bridge-write-{label}"),
            asyncio.create_task(self._heartbeat_loop(), name=f"bridge-beat-{label}"),
            asyncio.create_task(self._ack_loop(), name=f"bridge-ack-{label}"),
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
        actions = self.session.receive(frame, time.time(), time.monotonic_ns())
        if isinstance(frame, Events):
            # Shielded: a batch is handled whole even if the link dies meanwhile, so every
            # record local NATS took is reported published (and never delivered twice).
            await asyncio.shield(self.core.carry_out(actions, self))
            self.flush_wanted.set()
        else:
            await self.core.carry_out(actions, self)

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
            batch = self.session.next_batch(time.time())
            if batch is not None:
                frames.append(batch)
            if frames:
                await self.write(frames)
            if self.session.queued:
                self.wake.set()

    async def _ack_loop(self) -> None:
        # Acks trail a flush of local NATS, in their own task so the reader keeps
        # delivering meanwhile: an ack means the events reached the local server.
        while True:
            await self.flush_wanted.wait()
            # Coalesce: one flush and one ACK for whatever arrives within ACK_DELAY_S,
            # instead of a NATS round trip and an SSH packet back per batch.
            await asyncio.sleep(ACK_DELAY_S)
            self.flush_wanted.clear()
            seq = self.session.ack_point
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
            self.send(Ping(time.monotonic_ns()))
