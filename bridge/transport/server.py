"""The home SSH endpoint: asyncssh server that only ever opens the bridge channel.

Public-key authentication only; each authorized key maps to exactly one device.
No password, keyboard-interactive or host-based auth; no shell, no exec, no pty,
no TCP/unix forwarding in either direction, no agent or X11 forwarding. The one
thing a client may do is request the ``tether-bridge`` subsystem, whose stdin and
stdout then carry the frames of ``bridge/PROTOCOL.md``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh
from asyncssh.stream import SSHServerStreamSession

from bridge.errors import TransportRefused
from bridge.transport.streams import ByteReader, ByteWriter

BRIDGE_SUBSYSTEM = "tether-bridge"

log = logging.getLogger("tether.bridge.ssh")

# Called for each accepted bridge channel with the device its key proved.
LinkHandler = Callable[[str, ByteReader, ByteWriter], Awaitable[None]]

# A connection costs a key exchange before it can be refused, and a peer can hold many
# open without ever authenticating. Beyond these many unauthenticated connections (from
# one address, in all) new ones are closed at once; each must log in within the timeout.
MAX_UNAUTHENTICATED_PER_PEER = 8
MAX_UNAUTHENTICATED = 64
LOGIN_TIMEOUT_S = 15.0


@dataclass
class LoginGate:
    """The connections that have not authenticated yet, by peer address, and refusals."""

    per_peer: int = MAX_UNAUTHENTICATED_PER_PEER
    total: int = MAX_UNAUTHENTICATED
    pending: Counter[str] = field(default_factory=Counter)
    refused: int = 0

    def admit(self, address: str) -> bool:
        """Count one more unauthenticated connection from ``address``, if there is room."""
        if self.pending[address] >= self.per_peer or sum(self.pending.values()) >= self.total:
            self.refused += 1
            return False
        self.pending[address] += 1
        return True

    def release(self, address: str) -> None:
        """The connection from ``address`` authenticated or went away."""
        self.pending[address] -= 1
        if self.pending[address] <= 0:
            del self.pending[address]


@dataclass
class AuthenticatedConnections:
    """The connections that logged in, by the device their key proved.

    A device that stops being served (unpaired, its key revoked, paired anew) loses
    them all at once: an authenticated connection could otherwise open another
    bridge channel with a key that is no longer accepted.
    """

    by_device: dict[str, set[asyncssh.SSHServerConnection]] = field(default_factory=dict)

    def add(self, device: str, conn: asyncssh.SSHServerConnection) -> None:
        """``conn`` logged in as ``device``."""
        self.by_device.setdefault(device, set()).add(conn)

    def discard(self, device: str, conn: asyncssh.SSHServerConnection) -> None:
        """``conn`` went away."""
        conns = self.by_device.get(device)
        if conns is not None:
            conns.discard(conn)
            if not conns:
                del self.by_device[device]

    def close_device(self, device: str) -> int:
        """Close every connection logged in as ``device``; how many there were."""
        conns = self.by_device.pop(device, set())
        for conn in conns:
            conn.close()
        return len(conns)


@dataclass(frozen=True)
class AuthorizedClient:
    """One authorized key: the device it speaks for and the user it must log in as."""

    fingerprint: str
    device: str
    user: str | None = None


class _BridgeSession(SSHServerStreamSession[bytes]):
    """A session channel that accepts the bridge subsystem and refuses everything else."""

    def __init__(self, peer: str, handler: Callable[..., Awaitable[None]]) -> None:
        super().__init__(handler)
        self._peer = peer

    def shell_requested(self) -> bool:
        log.warning("refused a shell from %s: the endpoint only carries the bridge", self._peer)
        return False

    def exec_requested(self, command: str) -> bool:
        log.warning(
            "refused exec %r from %s: the endpoint only carries the bridge",
            command[:80],
            self._peer,
        )
        return False

    def subsystem_requested(self, subsystem: str) -> bool:
        if subsystem == BRIDGE_SUBSYSTEM:
            return True
        log.warning("refused subsystem %r from %s", subsystem, self._peer)
        return False

    def pty_requested(self, *args: Any) -> bool:
        return False


class _BridgeSSHServer(asyncssh.SSHServer):
    """One per connection: authenticates the key, remembers its device, refuses the rest."""

    def __init__(
        self,
        clients: Mapping[str, AuthorizedClient],
        handler: LinkHandler,
        gate: LoginGate,
        connections: AuthenticatedConnections,
    ) -> None:
        self._clients = clients
        self._handler = handler
        self._gate = gate
        self._connections = connections
        self._gated: str | None = None  # the address this connection is counted under
        self._peer = "?"
        self._conn: asyncssh.SSHServerConnection | None = None
        self._fingerprint: str | None = None
        self.device: str | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        addr = conn.get_extra_info("peername")
        self._peer = f"{addr[0]}:{addr[1]}" if addr else "?"
        address = str(addr[0]) if addr else "?"
        if not self._gate.admit(address):
            log.warning(
                "refused a connection from %s: too many unauthenticated connections "
                "(%d refused so far)",
                self._peer,
                self._gate.refused,
            )
            conn.close()
            return
        self._gated = address

    def auth_completed(self) -> None:
        self._release()
        if self.device is not None and self._conn is not None:
            self._connections.add(self.device, self._conn)

    def connection_lost(self, exc: Exception | None) -> None:
        self._release()
        if self.device is not None and self._conn is not None:
            self._connections.discard(self.device, self._conn)

    def _release(self) -> None:
        if self._gated is not None:
            self._gate.release(self._gated)
            self._gated = None

    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return False

    def kbdint_auth_supported(self) -> bool:
        return False

    def host_based_auth_supported(self) -> bool:
        return False

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        fingerprint = key.get_fingerprint("sha256")
        client = self._clients.get(fingerprint)
        if client is None:
            log.warning(
                "refused key %s from %s: not authorized for any device", fingerprint, self._peer
            )
            return False
        if client.user is not None and username != client.user:
            log.warning(
                "refused key %s from %s: logs in as %r, expected %r",
                fingerprint,
                self._peer,
                username,
                client.user,
            )
            return False
        self.device = client.device
        self._fingerprint = fingerprint
        return True

    def session_requested(self) -> _BridgeSession:
        device = self.device
        if device is None:  # asyncssh only opens sessions after auth; guard all the same
            raise asyncssh.ChannelOpenError(
                asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, "not authenticated"
            )
        client = self._clients.get(self._fingerprint or "")
        if client is None or client.device != device:
            # Its key was revoked or replaced after it logged in.
            log.warning(
                "refused a session from %s: key %s no longer accepted",
                self._peer,
                self._fingerprint,
            )
            raise asyncssh.ChannelOpenError(
                asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, "key no longer accepted"
            )
        handler = self._handler
        peer = self._peer

        async def run(stdin: ByteReader, stdout: asyncssh.SSHWriter[bytes], _err: Any) -> None:
            try:
                await handler(device, stdin, stdout)
            finally:
                channel = stdout.channel
                if isinstance(channel, asyncssh.SSHServerChannel):
                    channel.exit(0)

        log.info("bridge session requested by device %r from %s", device, peer)
        return _BridgeSession(peer, run)

    def connection_requested(
        self, dest_host: str, dest_port: int, orig_host: str, orig_port: int
    ) -> bool:
        log.warning(
            "refused a forward to %s:%d from %s: port forwarding is off",
            dest_host,
            dest_port,
            self._peer,
        )
        return False

    def server_requested(self, listen_host: str, listen_port: int) -> bool:
        log.warning(
            "refused a remote forward of %s:%d from %s: port forwarding is off",
            listen_host,
            listen_port,
            self._peer,
        )
        return False

    def unix_connection_requested(self, dest_path: str) -> bool:
        log.warning("refused a unix forward to %s from %s", dest_path, self._peer)
        return False

    def unix_server_requested(self, listen_path: str) -> bool:
        log.warning("refused a unix listener %s from %s", listen_path, self._peer)
        return False


async def listen_bridge(
    host: str,
    port: int,
    host_key: Path,
    clients: Mapping[str, AuthorizedClient],
    handler: LinkHandler,
    *,
    gate: LoginGate | None = None,
    connections: AuthenticatedConnections | None = None,
) -> asyncssh.SSHAcceptor:
    """Start the SSH endpoint; ``port`` 0 picks a free one (read it off the acceptor).

    ``gate`` bounds unauthenticated connections; ``connections`` keeps the
    authenticated ones by device; listeners may share both.
    """
    gate = gate if gate is not None else LoginGate()
    book = connections if connections is not None else AuthenticatedConnections()
    try:
        key = asyncssh.read_private_key(str(host_key))
    except (OSError, asyncssh.KeyImportError) as exc:
        raise TransportRefused(f"cannot read the home host key {host_key}: {exc}") from exc
    try:
        return await asyncssh.listen(
            host,
            port,
            server_host_keys=[key],
            server_factory=lambda: _BridgeSSHServer(clients, handler, gate, book),
            login_timeout=LOGIN_TIMEOUT_S,
            encoding=None,
            allow_pty=False,
            agent_forwarding=False,
            x11_forwarding=False,
            allow_scp=False,
            line_editor=False,
            config=None,
            gss_host=None,
        )
    except OSError as exc:
        raise TransportRefused(f"cannot listen on {host}:{port}: {exc}") from exc
