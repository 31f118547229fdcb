"""A device the endpoint stops serving loses its key and every connection made with it.

Real asyncssh on both ends, a real nats-server behind the endpoint: a connection that
logged in with the key before it was removed must not stay open, since it could open
another bridge channel as the device long after its key was revoked.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import pytest

from bridge.errors import TransportRefused
from bridge.node import HomeBridgeEndpoint
from bridge.transport import open_bridge_channel
from tests.bridge.servers import Paired, make_pair, with_port

CLOSED_WITHIN_S = 10.0


@pytest.fixture
async def endpoint(
    paired: Paired, home_nats: str, tmp_path: Path
) -> AsyncIterator[tuple[HomeBridgeEndpoint, Paired]]:
    """The endpoint serving ``board`` and ``kitchen`` on a free port."""
    kitchen = make_pair(tmp_path / "kitchen", "kitchen")
    home = HomeBridgeEndpoint(
        [paired.home, kitchen.home], host_key=paired.result.host_key, nats_url=home_nats, port=0
    )
    await home.start()
    try:
        yield home, kitchen
    finally:
        await home.close()


async def _login(paired: Paired, port: int) -> asyncssh.SSHClientConnection:
    return await asyncio.wait_for(
        asyncssh.connect(
            "127.0.0.1",
            port,
            username="tether",
            client_keys=[str(paired.result.client_key)],
            known_hosts=None,
            agent_path=None,
            config=None,
        ),
        10,
    )


async def test_removing_a_device_closes_its_connections_and_refuses_its_key(
    paired: Paired, endpoint: tuple[HomeBridgeEndpoint, Paired]
) -> None:
    home, kitchen = endpoint
    board_conn = await _login(paired, home.port)
    kitchen_conn = await _login(kitchen, home.port)
    try:
        await home.remove("board")
        # Before: the connection stayed up, able to open a channel with a removed key.
        await asyncio.wait_for(board_conn.wait_closed(), CLOSED_WITHIN_S)
        with pytest.raises(TransportRefused, match="refused our key"):
            async with open_bridge_channel(
                with_port(paired.edge, home.port).endpoint, paired.result.client_key
            ):
                pass
        # The other device's connection is untouched and still opens its channel.
        _writer, _reader, _ = await kitchen_conn.open_session(
            subsystem="tether-bridge", encoding=None
        )
        assert kitchen_conn.get_extra_info("peername") is not None
        assert set(home.connections.by_device) == {"kitchen"}
    finally:
        board_conn.close()
        kitchen_conn.close()
