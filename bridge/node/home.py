"""The home bridge endpoint: the SSH server and one bridge core per paired device.

A self-contained component for `home up` to supervise: :meth:`start`,
:meth:`health`, :meth:`close`. Each home half names one device and authorizes one
key; a connection authenticated with that key can only ever be that device.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import asyncssh
import nats
from nats.aio.client import Client as NATS
from nats.errors import Error as NatsError

from bridge.errors import BridgeError, HelloRefused, LinkError, ProtocolError
from bridge.node.clock import WallClock
from bridge.node.core import BridgeCore
from bridge.node.outbox import OutboxStore, Synchronous, store_path
from bridge.transport.server import (
    AuthenticatedConnections,
    AuthorizedClient,
    LoginGate,
    listen_bridge,
)
from bridge.transport.streams import ByteReader, ByteWriter
from shared.lifecycle import Service
from shared.schema.bridge_half import BridgeHalf, ssh_fingerprint

log = logging.getLogger("tether.bridge.home")


def link_end_reason(exc: Exception) -> str:
    """The counter a link's end is counted under; ``internal_error`` for a bug of ours."""
    match exc:
        case HelloRefused():
            return "hello_refused"
        case ProtocolError():
            return "protocol_error"
        case LinkError():
            return "link_lost"
        case BridgeError():
            return "bridge_error"
    return "internal_error"


class HomeBridgeEndpoint(Service):
    """The home side of every paired device's bridge.

    ``halves`` are home halves (one per device); ``host_key`` the endpoint's private
    host key; ``host``/``port`` override the halves' ``listen`` (``port=0``: any free port).
    It listens on every distinct address the halves declare: a device paired with
    another ``--listen`` host must not be cut off because another half came first.

    ``device_url``, when given, names the local NATS URL (with that device's own
    credentials) each device's core connects with, one connection per device, so
    the bus can hold each device to its own half; without it every core shares one
    connection to ``nats_url``.

    ``outbox_dir``, when given, holds each device's durable outbox (:mod:`bridge.node.outbox`);
    after a crash the endpoint's own connection (``nats_url``'s user) reads the local
    JetStream for the events left in doubt (:mod:`bridge.node.recover`).

    ``clock`` is home's wall clock (default: the system's, :mod:`bridge.node.clock`).
    """

    def __init__(
        self,
        halves: Sequence[BridgeHalf],
        *,
        host_key: Path,
        nats_url: str,
        host: str | None = None,
        port: int | None = None,
        heartbeat_s: float = 2.0,
        device_url: Callable[[str], Awaitable[str]] | None = None,
        outbox_dir: Path | None = None,
        synchronous: Synchronous = "NORMAL",
        clock: WallClock | None = None,
    ) -> None:
        if not halves:
            raise BridgeError("the home bridge endpoint needs at least one home half")
        self.halves: dict[str, BridgeHalf] = {}
        # Looked up per connection by the SSH server, so a device added later is served at once.
        self.clients: dict[str, AuthorizedClient] = {}
        for half in halves:
            self._authorize(half)
        self._host_override, self._port_override = host, port
        # Requested (host, port) of each listener, and where it actually listens (port 0).
        self._requested = list(dict.fromkeys(self._address_of(half) for half in halves))
        self.addresses = list(self._requested)
        self.host, self.port = self.addresses[0]
        self._host_key = host_key
        self._nats_url = nats_url
        self._heartbeat_s = heartbeat_s
        self._nc: NATS | None = None
        self._device_url = device_url
        self._outbox_dir = outbox_dir
        self._synchronous: Synchronous = synchronous
        self._clock = clock
        self._device_nc: dict[str, NATS] = {}
        self._started = False
        self.cores: dict[str, BridgeCore] = {}
        self._acceptors: list[asyncssh.SSHAcceptor] = []
        self.logins = LoginGate()
        self.connections = AuthenticatedConnections()

    def _authorize(self, half: BridgeHalf) -> None:
        if half.side != "home":
            raise BridgeError(f"{half.file} is a {half.side} half, not a home half")
        if not half.endpoint.client_key:
            raise BridgeError(
                f"{half.file} authorizes no key (listen.authorized_key); run `bridge pair`"
            )
        fingerprint = ssh_fingerprint(half.endpoint.client_key)
        if fingerprint in self.clients:
            raise BridgeError(
                f"{half.file}: key {fingerprint} is already device "
                f"{self.clients[fingerprint].device!r}; one key maps to one device"
            )
        if half.device in self.halves:
            raise BridgeError(f"{half.file}: device {half.device!r} is already served")
        self.halves[half.device] = half
        self.clients[fingerprint] = AuthorizedClient(fingerprint, half.device, half.endpoint.user)

    async def _home_connection(self) -> NATS:
        """The endpoint's own connection, as ``nats_url``'s user."""
        if self._nc is None:
            self._nc = await self._connect(self._nats_url, "bridge-home")
        return self._nc

    async def _connection(self, device: str) -> NATS:
        if self._device_url is None:
            return await self._home_connection()
        url = await self._device_url(device)
        self._device_nc[device] = await self._connect(url, f"bridge-home-{device}")
        return self._device_nc[device]

    @staticmethod
    async def _connect(url: str, name: str) -> NATS:
        try:
            return await nats.connect(url, name=name)
        except (NatsError, OSError) as exc:
            where = url.rpartition("@")[2]  # never the credentials in a message
            raise LinkError(f"cannot connect to local NATS at {where} as {name}: {exc}") from exc

    async def _start_core(self, half: BridgeHalf) -> None:
        nc = await self._connection(half.device)
        store = lookup = None
        if self._outbox_dir is not None:
            store = OutboxStore(store_path(self._outbox_dir, half), self._synchronous)
            # A device's own bus user may not read home's event log; the endpoint's may.
            lookup = await self._home_connection()
        core = BridgeCore(
            half,
            nc,
            device=half.device,
            heartbeat_s=self._heartbeat_s,
            store=store,
            lookup=lookup,
            clock=self._clock,
        )
        await core.start()
        self.cores[half.device] = core

    async def start(self) -> None:
        """Connect to local NATS, subscribe every half's exports, listen for boards."""
        self._started = True
        for half in self.halves.values():
            await self._start_core(half)
        for i, (host, port) in enumerate(self._requested):
            self.addresses[i] = await self._listen(host, port)
        self.host, self.port = self.addresses[0]
        log.info(
            "home bridge endpoint listening on %s for %s",
            self.listening,
            ", ".join(sorted(self.halves)),
        )

    @property
    def listening(self) -> str:
        """Every address the endpoint listens on, ``host:port, ...``."""
        return ", ".join(f"{host}:{port}" for host, port in self.addresses)

    def _address_of(self, half: BridgeHalf) -> tuple[str, int]:
        """Where ``half`` says to listen, unless the endpoint was told otherwise."""
        host = self._host_override if self._host_override is not None else half.endpoint.host
        port = self._port_override if self._port_override is not None else half.endpoint.port
        return host, port

    async def _listen(self, host: str, port: int) -> tuple[str, int]:
        acceptor = await listen_bridge(
            host,
            port,
            self._host_key,
            self.clients,
            self._on_link,
            gate=self.logins,
            connections=self.connections,
        )
        self._acceptors.append(acceptor)
        return host, acceptor.get_port()

    async def add(self, half: BridgeHalf) -> None:
        """Serve one more paired device, on the running endpoint; links already up stay up."""
        if not self._started:
            raise BridgeError("the home bridge endpoint is not started")
        self._authorize(half)
        try:
            await self._start_core(half)
            requested = self._address_of(half)
            if requested not in self._requested:
                self.addresses.append(await self._listen(*requested))
                self._requested.append(requested)
        except BaseException:
            self._forget(half.device)
            await self._drain(self._device_nc.pop(half.device, None))
            raise
        log.info("home bridge endpoint now serves %s (on %s)", half.device, self.listening)

    async def remove(self, device: str) -> int:
        """Stop serving ``device``: its key is no longer accepted, every connection that
        logged in with it is closed, its link ends. How many connections were closed."""
        self._forget(device)
        dropped = self.connections.close_device(device)
        if dropped:
            log.info("closed %d SSH connection(s) of device %r", dropped, device)
        core = self.cores.pop(device, None)
        if core is not None:
            await core.close()
        await self._drain(self._device_nc.pop(device, None))
        return dropped

    @staticmethod
    async def _drain(nc: NATS | None) -> None:
        if nc is not None:
            with contextlib.suppress(NatsError, OSError):
                await nc.drain()

    def _forget(self, device: str) -> None:
        self.halves.pop(device, None)
        for fingerprint, client in list(self.clients.items()):
            if client.device == device:
                del self.clients[fingerprint]

    async def _on_link(self, device: str, reader: ByteReader, writer: ByteWriter) -> None:
        core = self.cores.get(device)
        if core is None:  # removed while its connection was being set up
            log.warning("link for device %r refused: the device is no longer served", device)
            return
        try:
            await core.run_link(reader, writer, authenticated_device=device, peer=device)
        # The boundary of a board's input: nothing ends a link uncounted.
        except Exception as exc:  # noqa: BLE001
            reason = link_end_reason(exc)
            core.counters.link_ends[reason] += 1
            # One line: a refusal's findings come from the peer, however many it sends.
            log.warning(
                "link for device %r ended (%s): %s", device, reason, str(exc).partition("\n")[0]
            )

    def health(self) -> dict[str, Any]:
        """``ok`` while listening on every address and every device's outbox commits; each
        device's link state and counters (``store_fault`` names a file that would not)."""
        devices = {device: core.health() for device, core in self.cores.items()}
        return {
            "ok": len(self._acceptors) == len(self.addresses)
            and all(report["store_fault"] is None for report in devices.values()),
            "listen": self.listening,
            "unauthenticated": sum(self.logins.pending.values()),
            "refused_connections": self.logins.refused,
            "devices": devices,
        }

    async def close(self) -> None:
        """Stop listening, end every link, close NATS; idempotent."""
        for acceptor in self._acceptors:
            acceptor.close()
            with contextlib.suppress(Exception):
                await acceptor.wait_closed()
        self._acceptors.clear()
        for core in self.cores.values():
            await core.close()
        for device in list(self._device_nc):
            await self._drain(self._device_nc.pop(device))
        await self._drain(self._nc)
        self._nc = None
        self._started = False
