"""A board paired on one member of a clustered home reaches it through another once the
first is gone, with no file copied: the pairing travels in the replicated bucket.

Three members on loopback, each its own ``home up`` process tree (see
tests/support/home_cluster.py). The board is paired through m1's ``bridge.pair`` verb,
as ``edge run --data-dir`` pairs; its edge half lists m2 under ``connect.fallbacks``
(the board's own configuration, not a pairing file). m1 is SIGKILLed; the board's
bridge links to m2 over real SSH, pinned to the host key it was paired with, and its
next turn arrives on m2's bus. Unpairing on m2 then unpairs it on m3 too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from pathlib import Path
from urllib.parse import urlsplit

import nats
import pytest

from bridge.node import EdgeBridgeNode
from bridge.transport import Backoff
from home.bridge.replica import BUCKET
from home.substrate.client import HomeClient
from shared import control
from shared.event import Event
from shared.schema import load_bridge_half
from tests.bridge.servers import Collector, nats_server, wait_until
from tests.support.home_cluster import home_cluster
from tests.support.scripted_model import ScriptedModel

pytestmark = pytest.mark.slow

DEVICE = "porch"
REPLICATED_WITHIN_S = 30.0


async def ask(data_dir: Path, verb: str, **args: str) -> dict[str, object]:
    async with HomeClient(data_dir, timeout_s=30) as home:
        result: dict[str, object] = await home.request(verb, **args)
        return result


async def paired_devices(data_dir: Path) -> set[str]:
    view = await ask(data_dir, control.BRIDGE_DEVICES)
    rows = view["paired"]
    assert isinstance(rows, list)
    return {row["device"] for row in rows}


async def until_devices(data_dir: Path, wanted: set[str]) -> None:
    async with asyncio.timeout(REPLICATED_WITHIN_S):
        while await paired_devices(data_dir) != wanted:
            await asyncio.sleep(0.5)


async def replicas(url: str) -> int:
    nc = await nats.connect(url)
    try:
        info = await nc.jetstream().stream_info(f"KV_{BUCKET}")
        return info.config.num_replicas or 1
    finally:
        await nc.close()


def port_of(endpoint: object) -> int:
    port = urlsplit(str(endpoint)).port
    assert port is not None, endpoint
    return port


async def test_a_board_paired_on_one_member_reaches_the_home_through_another(
    tmp_path: Path,
) -> None:
    async with (
        ScriptedModel() as model,
        home_cluster(tmp_path, model.url, {}) as members,
    ):
        m1, m2, m3 = members
        first = await ask(m1.data_dir, control.BRIDGE_PAIR, device=DEVICE)
        for member in (m2, m3):
            await until_devices(member.data_dir, {DEVICE})
        # The bucket is replicated like the event log, so losing a member loses no pairing.
        async with asyncio.timeout(REPLICATED_WITHIN_S):
            while await replicas(m2.admin_url()) < len(members):
                await asyncio.sleep(0.5)
        # Pairing on m2 finds the pairing m1 made: the same key, m2's own endpoint.
        again = await ask(m2.data_dir, control.BRIDGE_PAIR, device=DEVICE)
        key = Path(str(first["secrets"])) / f"{DEVICE}.edge.key"
        assert (Path(str(again["secrets"])) / f"{DEVICE}.edge.key").read_text() == key.read_text()
        assert port_of(again["endpoint"]) != port_of(first["endpoint"])

        edge_half = load_bridge_half(Path(str(first["edge_half"])))
        endpoint = dataclasses.replace(
            edge_half.endpoint, fallbacks=(("127.0.0.1", port_of(again["endpoint"])),)
        )
        with nats_server() as edge_url:
            edge = EdgeBridgeNode(
                dataclasses.replace(edge_half, endpoint=endpoint),
                client_key=key,
                nats_url=edge_url,
                heartbeat_s=0.5,
                backoff=Backoff(base_s=0.05, cap_s=0.5, rng=random.Random(7)),
                status_interval_s=0.5,
            )
            edge_nc = await nats.connect(edge_url)
            m2_nc = await nats.connect(m2.admin_url())
            try:
                at_m2 = Collector()
                await m2_nc.subscribe("events.sensation.>", cb=at_m2.cb)
                await m2_nc.flush()
                await edge.start()
                await wait_until(lambda: edge.health()["ok"], 30, "the link to m1")
                assert edge.health()["peer"] == f"127.0.0.1:{port_of(first['endpoint'])}"

                m1.kill()
                await wait_until(lambda: not edge.health()["ok"], 30, "the link to m1 to drop")
                await wait_until(lambda: edge.health()["ok"], 60, "the link to m2")
                assert edge.health()["peer"] == f"127.0.0.1:{port_of(again['endpoint'])}"
                turn = Event.new(
                    "sensation.turn", {"text": "anyone home?", "device": DEVICE},
                    source="edge.asr", sequence_number=1,
                )  # fmt: skip
                await edge_nc.publish(f"events.sensation.{DEVICE}.turn", turn.to_json())
                await wait_until(lambda: at_m2.msgs, 30, "the turn on m2's bus")
                assert at_m2.events()[0].event_id == turn.event_id

                # Unpaired on m2, the device is unpaired on m3 too, and m2 closes its link.
                await ask(m2.data_dir, control.BRIDGE_UNPAIR, device=DEVICE)
                await until_devices(m3.data_dir, set())
                await wait_until(lambda: not edge.health()["ok"], 30, "m2 to close the link")
            finally:
                await edge.close()
                await edge_nc.close()
                await m2_nc.close()
