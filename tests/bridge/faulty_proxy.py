"""A fault-injecting TCP proxy on loopback: cuts, outages and black holes on demand."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class FaultyProxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``target_port`` until told to misbehave.

    :meth:`cut` aborts every open connection (both sides see a reset);
    ``refusing`` makes new connections fail at once (an outage);
    ``blackhole`` silently drops bytes in both directions (a dead Wi-Fi link:
    only heartbeats notice).
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.refusing = False
        self.blackhole = False
        self.cuts = 0
        self.bytes_up = 0  # client -> target, as TCP payload
        self.bytes_down = 0
        self._server: asyncio.Server | None = None
        self._conns: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Listen on a free port."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening and drop everything."""
        if self._server is not None:
            self._server.close()
        self.cut()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    def cut(self) -> None:
        """Abort every connection in flight."""
        for down, up in list(self._conns):
            down.transport.abort()
            up.transport.abort()
        self._conns.clear()
        self.cuts += 1

    async def outage(self, seconds: float) -> None:
        """Cut, refuse new connections for ``seconds``, then recover."""
        self.refusing = True
        self.cut()
        try:
            await asyncio.sleep(seconds)
        finally:
            self.refusing = False

    async def silent_outage(self, seconds: float) -> None:
        """Drop all bytes for ``seconds`` without closing anything, then cut."""
        self.blackhole = True
        try:
            await asyncio.sleep(seconds)
        finally:
            self.cut()
            self.blackhole = False

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        pair = (writer, up_writer)
        self._conns.add(pair)
        for src, dst, up in ((reader, up_writer, True), (up_reader, writer, False)):
            task = asyncio.create_task(self._pipe(src, dst, pair, up))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(
        self,
        src: asyncio.StreamReader,
        dst: asyncio.StreamWriter,
        pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter],
        up: bool,
    ) -> None:
        try:
            while True:
                data = await src.read(65536)
                if not data:
                    break
                if self.blackhole:
                    continue
                if up:
                    self.bytes_up += len(data)
                else:
                    self.bytes_down += len(data)
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self._conns.discard(pair)
            for w in pair:
                w.transport.abort()


@contextlib.asynccontextmanager
async def faulty_proxy(target_port: int) -> AsyncIterator[FaultyProxy]:
    """A started :class:`FaultyProxy`, stopped on exit."""
    proxy = FaultyProxy(target_port)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()
