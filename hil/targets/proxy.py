"""A TCP relay the HIL run can cut: the link between a virtual board and home.

Cutting closes every relayed connection and refuses new ones until restored,
as a board out of Wi-Fi range would see it.
"""

from __future__ import annotations

import asyncio
import contextlib

from shared.lifecycle import Service, cancel_and_wait


class CuttableRelay(Service):
    """Relays ``listen_port`` on loopback to ``target_port``; :meth:`cut` and :meth:`restore`."""

    def __init__(
        self,
        listen_port: int,
        target_port: int,
        host: str = "127.0.0.1",
        target_host: str | None = None,
    ) -> None:
        self.host = host
        self.target_host = target_host or host
        self.listen_port = listen_port
        self.target_port = target_port
        self.cut_now = False
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        """Listen on the relay's port."""
        self._server = await asyncio.start_server(self._accept, self.host, self.listen_port)

    async def close(self) -> None:
        """Stop listening and drop every relayed connection."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        self._drop_all()
        await cancel_and_wait(*self._pipes, reraise=False)

    def cut(self) -> None:
        """Drop every relayed connection and refuse new ones."""
        self.cut_now = True
        self._drop_all()

    def restore(self) -> None:
        """Accept and relay connections again."""
        self.cut_now = False

    def _drop_all(self) -> None:
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut_now:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self.connections += 1
        self._writers.update((writer, up_writer))
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(src, dst))
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self._writers.discard(dst)
            with contextlib.suppress(Exception):
                dst.transport.abort()
