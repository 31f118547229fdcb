"""Each side of a link in its own process, for the benchmark (a board and a home are two machines).

    python -m tests.bridge.sides home    HALF HOST_KEY NATS_URL PORT [OUTBOX_DIR [SYNCHRONOUS]]
    python -m tests.bridge.sides edge    HALF CLIENT_KEY NATS_URL PORT [OUTBOX_DIR [SYNCHRONOUS]]
    python -m tests.bridge.sides sshd    HOST_KEY CLIENT_PUB PORT TARGET_PORT
    python -m tests.bridge.sides sshfwd  HOST_PUB CLIENT_KEY SSH_PORT LOCAL_PORT TARGET_PORT

``OUTBOX_DIR`` makes the side durable (``SYNCHRONOUS``: ``NORMAL``, the default, or ``FULL``).
``sshd``/``sshfwd`` are the peer transport: a plain SSH local port forward (what a NATS
leaf node connection would be carried over), allowed to one target port only.
Each runs until SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path

import asyncssh

from bridge.node import EdgeBridgeNode, HomeBridgeEndpoint
from bridge.node.outbox import Synchronous
from bridge.transport import Backoff
from shared.schema import load_bridge_half
from tests.bridge.servers import with_port


async def _until_terminated() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def _synchronous(value: str) -> Synchronous:
    if value == "FULL":
        return "FULL"
    if value == "NORMAL":
        return "NORMAL"
    raise SystemExit(f"SYNCHRONOUS must be NORMAL or FULL, got {value!r}")


async def home(
    half: str, host_key: str, nats_url: str, port: str, outbox: str = "", sync: str = "NORMAL"
) -> None:
    endpoint = HomeBridgeEndpoint(
        [load_bridge_half(half)],
        host_key=Path(host_key),
        nats_url=nats_url,
        port=int(port),
        heartbeat_s=30.0,
        outbox_dir=Path(outbox) if outbox else None,
        synchronous=_synchronous(sync),
    )
    await endpoint.start()
    try:
        await _until_terminated()
    finally:
        await endpoint.close()


async def edge(
    half: str, client_key: str, nats_url: str, port: str, outbox: str = "", sync: str = "NORMAL"
) -> None:
    node = EdgeBridgeNode(
        with_port(load_bridge_half(half), int(port)),
        client_key=Path(client_key),
        nats_url=nats_url,
        heartbeat_s=30.0,
        backoff=Backoff(base_s=0.1, cap_s=1.0),
        outbox_dir=Path(outbox) if outbox else None,
        synchronous=_synchronous(sync),
    )
    await node.start()
    try:
        await _until_terminated()
    finally:
        await node.close()


class _ForwardOnly(asyncssh.SSHServer):
    def __init__(self, client_pub: asyncssh.SSHKey, target_port: int) -> None:
        self._key = client_pub
        self._target = target_port

    def begin_auth(self, username: str) -> bool:
        return True

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        return key == self._key

    def connection_requested(
        self, dest_host: str, dest_port: int, orig_host: str, orig_port: int
    ) -> bool:
        return dest_port == self._target


async def sshd(host_key: str, client_pub: str, port: str, target_port: str) -> None:
    pub = asyncssh.read_public_key(client_pub)
    acceptor = await asyncssh.listen(
        "127.0.0.1",
        int(port),
        server_host_keys=[host_key],
        config=None,
        gss_host=None,
        server_factory=lambda: _ForwardOnly(pub, int(target_port)),
    )
    try:
        await _until_terminated()
    finally:
        acceptor.close()


async def sshfwd(
    host_pub: str, client_key: str, ssh_port: str, local_port: str, target_port: str
) -> None:
    trusted = [asyncssh.read_public_key(host_pub)]

    async def forward_forever() -> None:
        backoff = Backoff(base_s=0.1, cap_s=1.0)
        while True:
            try:
                async with asyncssh.connect(
                    "127.0.0.1",
                    int(ssh_port),
                    username="tether",
                    client_keys=[client_key],
                    known_hosts=(trusted, [], []),
                    agent_path=None,
                    config=None,
                ) as conn:
                    listener = await conn.forward_local_port(
                        "127.0.0.1", int(local_port), "127.0.0.1", int(target_port)
                    )
                    backoff.reset()
                    await conn.wait_closed()
                    listener.close()
            except (OSError, asyncssh.Error):
                pass
            await asyncio.sleep(backoff.next_delay())

    task = asyncio.create_task(forward_forever())
    try:
        await _until_terminated()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


COMMANDS = {"home": home, "edge": edge, "sshd": sshd, "sshfwd": sshfwd}

if __name__ == "__main__":
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format=f"{sys.argv[1]}: %(name)s %(message)s"
    )
    logging.getLogger("asyncssh").setLevel(logging.WARNING)
    asyncio.run(COMMANDS[sys.argv[1]](*sys.argv[2:]))  # type: ignore[operator]
