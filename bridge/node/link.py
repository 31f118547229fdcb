"""One link of a bridge: a byte stream to the peer, framed, for as long as it lasts.

:class:`Link` owns what lives and dies with one connection: the zstd contexts, the
frames waiting to be written, the heartbeat and the acks. What the frames mean is
the :class:`~bridge.node.session.BridgeSession`'s to decide; the :class:`LinkHost`
that runs the link (a :class:`~bridge.node.core.BridgeCore`) carries out its answers.
The link knows its host only through that narrow interface, so the core may import
the link and not the other way round.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Protocol

from bridge.errors import LinkError
from bridge.node.clock import WallClock
from bridge.node.session import Action, BridgeSession, RefuseEvent
from bridge.protocol import Ack, Events, Frame, FrameDecoder, FrameEncoder, HelloFrame, Ping
from bridge.transport.streams import ByteReader, ByteWriter
from shared.lifecycle import cancel_and_wait

READ_CHUNK = 256 * 1024
ACK_DELAY_S = 0.005


class LinkHost(Protocol):
    """What a link needs of the bridge half that runs it."""

    @property
    def session(self) -> BridgeSession:
        """The half's protocol state: it decides what each frame means."""

    @property
    def label(self) -> str:
        """``bridge@side``, to name the link's tasks."""

    @property
    def hello_timeout_s(self) -> float:
        """How long the peer has to say hello."""

    @property
    def heartbeat_s(self) -> float:
        """The interval between pings; three silent ones end the link."""

    @property
    def clock(self) -> WallClock:
        """This side's wall clock: what events expire by, what the hello says of it."""

    async def carry_out(self, actions: list[Action], link: Link | None = None) -> list[RefuseEvent]:
        """Do what the session answered, on this link; the events refused on the way."""

    async def flush_local(self) -> None:
        """Wait until local NATS has what was published (before an ack)."""


class Link:
    """One connection's worth of I/O: codec contexts, frames to write, heartbeats, acks."""

    def __init__(self, core: LinkHost, reader: ByteReader, writer: ByteWriter) -> None:
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
        await self.write([HelloFrame(self.session.hello(self.core.clock.read()).to_body())])
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
        # Read as the peer's hello is taken in: the offset between the clocks is measured by it.
        greeted = self.session.greet(first, authenticated_device, self.core.clock.read())
        await self.core.carry_out(greeted, self)

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
            await cancel_and_wait(*tasks, reraise=False)
            with contextlib.suppress(Exception):
                self.writer.close()

    async def _handle(self, frame: Frame) -> None:
        actions = self.session.receive(frame, self.core.clock.now(), time.monotonic_ns())
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
            batch = self.session.next_batch(self.core.clock.now())
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
