"""``home devices`` over a live home: a revoked or unpaired board is cut off at once.

One home in this process with bus authorization on (its own nats-server, the real
asyncssh endpoint), two devices paired through ``bridge.pair``, each linked by a
real edge bridge node over its own nats-server. ``home devices`` runs as the
command a person types. After a revocation the old key is refused by the live SSH
endpoint, the device's bus user is gone (its credentials no longer connect), the
other device's link stays up and carries a turn; pairing the name again makes a
new key, which works, while the old one stays refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NatsClient

from bridge.errors import TransportRefused
from bridge.node import EdgeBridgeNode
from bridge.transport import Backoff, open_bridge_channel
from home.substrate.bus_auth import bridge_user_name
from shared import control
from shared.bus_credentials import credentials_file
from shared.event import Event
from shared.schema import BridgeHalf, load_bridge_half
from shared.subjects import sensation_turn_subject
from tests.bridge.servers import nats_server
from tests.home.substrate.conftest import wait_for
from tests.home.substrate.test_bus_auth_live import (
    LiveHome,
    refused_connection,
    start_home,
    stop_home,
)

WAIT_S = 20.0


@dataclass
class Board:
    """A paired device as its board holds it: its edge half, its key, its bridge node."""

    device: str
    half: BridgeHalf
    key: Path
    node: EdgeBridgeNode
    edge_nc: NatsClient

    @property
    def up(self) -> bool:
        return bool(self.node.health()["state"] == "up")


async def pair(home: LiveHome, device: str) -> tuple[BridgeHalf, Path]:
    result = await home.request(control.BRIDGE_PAIR, device=device)
    assert isinstance(result, dict)
    return load_bridge_half(result["edge_half"]), Path(result["secrets"]) / f"{device}.edge.key"


@contextlib.asynccontextmanager
async def board(home: LiveHome, device: str, edge_url: str, keep: Path) -> AsyncIterator[Board]:
    """``device`` paired and linked; its private key copied to ``keep`` (revoking removes
    home's copy)."""
    half, key = await pair(home, device)
    await asyncio.to_thread(shutil.copy2, key, keep)  # its mode (0600) with it
    node = EdgeBridgeNode(
        half, client_key=keep, nats_url=edge_url, heartbeat_s=0.5,
        backoff=Backoff(base_s=0.05, cap_s=0.5), status_interval_s=0.5,
    )  # fmt: skip
    await node.start()
    edge_nc = await nats.connect(edge_url)
    try:
        linked = Board(device, half, keep, node, edge_nc)

        async def up() -> bool:
            return linked.up

        await wait_for(up, f"{device}'s link to come up", WAIT_S)
        yield linked
    finally:
        await edge_nc.close()
        await node.close()


@pytest.fixture
def edge_urls() -> Iterator[tuple[str, str]]:
    """Two boards' own nats-servers."""
    with nats_server() as first, nats_server() as second:
        yield first, second


@pytest.fixture
async def home(tmp_path: Path) -> AsyncIterator[LiveHome]:
    live = await start_home(tmp_path, bus_auth=True)
    try:
        yield live
    finally:
        await stop_home(live)


async def devices(home: LiveHome, *args: str) -> tuple[int, str]:
    """``home devices ARGS --data-dir DATA_DIR``: its exit code and what it printed."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "home.cli", "devices", *args,
        "--data-dir", str(home.config.data_dir),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode()


async def refused_key(half: BridgeHalf, key: Path) -> None:
    """The live endpoint refuses ``key`` at login."""
    with pytest.raises(TransportRefused, match="refused our key"):
        async with open_bridge_channel(half.endpoint, key):
            pass


async def a_turn_crosses(home: LiveHome, linked: Board) -> None:
    """A turn published on the board's bus arrives on home's."""
    admin = await nats.connect(home.url_as("admin"))
    try:
        subject = sensation_turn_subject(linked.device)
        arrived = await admin.subscribe(subject)
        await admin.flush()
        event = Event.new(
            "sensation.turn", {"text": "still here"}, source="edge.asr", sequence_number=1
        )
        await linked.edge_nc.publish(subject, event.to_json())
        msg = await arrived.next_msg(timeout=WAIT_S)
        assert Event.from_json(msg.data).event_id == event.event_id
    finally:
        await admin.close()


async def test_a_revoked_key_is_refused_at_once_and_after_pairing_again(
    home: LiveHome, edge_urls: tuple[str, str], tmp_path: Path
) -> None:
    async with (
        board(home, "kitchen", edge_urls[0], tmp_path / "kitchen.key") as kitchen,
        board(home, "hall", edge_urls[1], tmp_path / "hall.key") as hall,
    ):
        held = await nats.connect(home.url_as(bridge_user_name("kitchen")), allow_reconnect=False)
        try:
            fingerprint = await revoke_and_check(home, kitchen, hall, held)
        finally:
            await held.close()

        code, out = await devices(home, "list", "--json")
        assert code == 0, out
        listed = json.loads(out)
        assert [row["device"] for row in listed["paired"]] == ["hall"]
        assert [(r["device"], r["fingerprint"]) for r in listed["revoked"]] == [
            ("kitchen", fingerprint)
        ]
        code, out = await devices(home, "list")
        assert code == 0 and "hall" in out and "revoked keys" in out and "kitchen" in out, out

        # Paired again: a new key, which the endpoint takes; the old one stays refused.
        new_half, new_key = await pair(home, "kitchen")
        assert new_half.endpoint.client_key != kitchen.half.endpoint.client_key
        async with open_bridge_channel(new_half.endpoint, new_key):
            pass
        await refused_key(kitchen.half, kitchen.key)
        assert not kitchen.up


async def revoke_and_check(home: LiveHome, kitchen: Board, hall: Board, held: NatsClient) -> str:
    """Revoke ``kitchen`` as a person would; what must follow at once. Its key's fingerprint."""
    kitchen_bus = home.url_as(bridge_user_name("kitchen"))
    code, out = await devices(home, "revoke", "kitchen", "--json")
    assert code == 0, out
    revoked = json.loads(out)
    assert revoked["revoked"] is True and revoked["connections_closed"] >= 1

    # Its key is refused by the live endpoint, its link stays down.
    await refused_key(kitchen.half, kitchen.key)
    assert not kitchen.up
    # Its bus user is gone: the connection it had is dropped, its credentials refused.
    await wait_for(lambda: _closed(held), "nats-server to drop the revoked user", WAIT_S)
    await refused_connection(kitchen_bus)
    assert not credentials_file(home.config.data_dir, bridge_user_name("kitchen")).exists()
    # The other device keeps its link and its bus user.
    assert hall.up
    await a_turn_crosses(home, hall)
    await (await nats.connect(home.url_as(bridge_user_name("hall")))).close()
    return str(revoked["fingerprint"])


async def _closed(nc: NatsClient) -> bool:
    return not nc.is_connected


async def test_unpair_forgets_the_device_and_a_name_not_paired_is_bad_input(
    home: LiveHome, edge_urls: tuple[str, str], tmp_path: Path
) -> None:
    bridge_dir = home.config.data_dir / "bridge"
    async with board(home, "kitchen", edge_urls[0], tmp_path / "kitchen.key") as kitchen:
        kitchen_bus = home.url_as(bridge_user_name("kitchen"))
        code, out = await devices(home, "unpair", "kitchen", "--json")
        assert code == 0, out
        unpaired = json.loads(out)
        assert unpaired["revoked"] is False and unpaired["connections_closed"] >= 1
        await refused_key(kitchen.half, kitchen.key)
        await refused_connection(kitchen_bus)
        assert not list(bridge_dir.glob("kitchen.*")) and not list(bridge_dir.rglob("*kitchen*"))
        code, out = await devices(home, "list", "--json")
        assert json.loads(out) == {"paired": [], "revoked": []}

    code, out = await devices(home, "unpair", "kitchen")
    assert code == 2
    assert "no device 'kitchen' is paired here" in out
    code, out = await devices(home, "revoke", "Kitchen!")
    assert code == 2
