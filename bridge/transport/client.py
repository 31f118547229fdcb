"""The edge side of the SSH transport: connect with a pinned host key, open the bridge channel."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from bridge.errors import LinkError, TransportRefused
from bridge.transport.server import BRIDGE_SUBSYSTEM
from bridge.transport.streams import ByteReader, ByteWriter
from shared.lifecycle import cancel_and_wait
from shared.schema.bridge_half import Endpoint, ssh_fingerprint

log = logging.getLogger("tether.bridge.ssh")


class _PinnedHostClient(asyncssh.SSHClient):
    """Accepts exactly one host key: the fingerprint pinned in the edge half."""

    def __init__(self, pinned: str) -> None:
        self._pinned = pinned
        self.presented: str | None = None

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        self.presented = key.get_fingerprint("sha256")
        return self.presented == self._pinned


@dataclass
class BridgeChannel:
    """An open bridge channel: the frames go to ``writer`` and come from ``reader``."""

    reader: ByteReader
    writer: ByteWriter


@contextlib.asynccontextmanager
async def open_bridge_channel(
    endpoint: Endpoint, client_key: Path, *, connect_timeout_s: float = 10.0
) -> AsyncIterator[BridgeChannel]:
    """Connect to the home endpoint and open the bridge subsystem; closes both on exit.

    Raises :class:`TransportRefused` when the host key does not match the pin or the
    endpoint refuses our key or the channel, :class:`LinkError` when it cannot be reached.
    """
    if not endpoint.host_key:
        raise TransportRefused(
            "the edge half pins no host key; run `bridge pair` (an unpinned link is never opened)"
        )
    pinned = ssh_fingerprint(endpoint.host_key)
    try:
        key = asyncssh.read_private_key(str(client_key))
    except (OSError, asyncssh.KeyImportError) as exc:
        raise TransportRefused(f"cannot read the client key {client_key}: {exc}") from exc
    where = f"{endpoint.host}:{endpoint.port}"
    client = _PinnedHostClient(pinned)
    try:
        conn = await asyncssh.connect(
            endpoint.host,
            endpoint.port,
            username=endpoint.user or "tether",
            client_factory=lambda: client,
            client_keys=[key],
            known_hosts=([], [], []),  # empty trust list: every key goes to the pin check
            agent_path=None,
            password=None,
            kbdint_auth=False,
            gss_host=None,
            config=None,
            connect_timeout=connect_timeout_s,
            login_timeout=connect_timeout_s,
        )
    except asyncssh.HostKeyNotVerifiable as exc:
        raise TransportRefused(
            f"{where} presented host key {client.presented}, not the pinned {pinned}; "
            "refusing to talk to an unknown host"
        ) from exc
    except asyncssh.PermissionDenied as exc:
        raise TransportRefused(
            f"{where} refused our key {key.get_fingerprint('sha256')} ({exc.reason})"
        ) from exc
    except (OSError, asyncssh.Error, TimeoutError) as exc:
        raise LinkError(f"cannot reach the home endpoint {where}: {exc}") from exc
    try:
        try:
            writer, reader, _stderr = await conn.open_session(
                subsystem=BRIDGE_SUBSYSTEM, encoding=None
            )
        except asyncssh.ChannelOpenError as exc:
            raise TransportRefused(f"{where} refused the bridge channel: {exc.reason}") from exc
        except (OSError, asyncssh.Error) as exc:
            raise LinkError(f"lost {where} while opening the bridge channel: {exc}") from exc
        # Under OpenSSH, `bridge serve` logs to stderr, which arrives here: read it, or an
        # unread backlog would eventually stall the channel's flow control for the frames.
        drain = asyncio.create_task(_log_remote_stderr(_stderr, where))
        try:
            yield BridgeChannel(reader=reader, writer=writer)
        finally:
            await cancel_and_wait(drain)
    finally:
        conn.close()
        with contextlib.suppress(Exception):
            await conn.wait_closed()


async def _log_remote_stderr(stderr: asyncssh.SSHReader[bytes], where: str) -> None:
    try:
        while line := await stderr.readline():
            log.info("%s: %s", where, line.decode("utf-8", "replace").rstrip())
    except (asyncssh.Error, OSError):
        return
