"""An edge half listing fallbacks: when the home member it talks to is gone, the board's
bridge links to the next member serving the same home half (real asyncssh, real NATS)."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import nats
import pytest

from bridge.node import EdgeBridgeNode, HomeBridgeEndpoint
from bridge.transport import Backoff
from shared.errors import SchemaError
from shared.event import Event
from shared.schema import load_bridge_half
from tests.bridge.servers import Collector, Paired, wait_until


def test_fallbacks_parse_in_order_and_a_bad_one_is_named(paired: Paired, tmp_path: Path) -> None:
    text = Path(paired.result.edge_half).read_text()
    good = tmp_path / "edge.yaml"
    good.write_text(
        text.replace("connect:\n", "connect:\n  fallbacks: [10.0.0.3:2222, 'm3.local:2223']\n")
    )
    endpoint = load_bridge_half(good).endpoint
    assert [(e.host, e.port) for e in endpoint.addresses()] == [
        (endpoint.host, endpoint.port), ("10.0.0.3", 2222), ("m3.local", 2223),
    ]  # fmt: skip
    assert {e.host_key for e in endpoint.addresses()} == {endpoint.host_key}
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("connect:\n", "connect:\n  fallbacks: [10.0.0.3]\n"))
    with pytest.raises(SchemaError, match=r"connect\.fallbacks.*HOST:PORT"):
        load_bridge_half(bad)


async def test_the_link_moves_to_a_fallback_when_its_member_is_gone(
    paired: Paired, home_nats: str, edge_nats: str
) -> None:
    members = [
        HomeBridgeEndpoint(
            [paired.home],
            host_key=paired.result.host_key,
            nats_url=home_nats,
            port=0,
            heartbeat_s=0.5,
        )
        for _ in range(2)
    ]
    for member in members:
        await member.start()
    endpoint = dataclasses.replace(
        paired.edge.endpoint,
        port=members[0].port,
        fallbacks=(("127.0.0.1", members[1].port),),
    )
    edge = EdgeBridgeNode(
        dataclasses.replace(paired.edge, endpoint=endpoint),
        client_key=paired.result.client_key,
        nats_url=edge_nats,
        heartbeat_s=0.5,
        backoff=Backoff(base_s=0.05, cap_s=0.5, rng=random.Random(7)),
        status_interval_s=0.5,
    )
    home_nc = await nats.connect(home_nats)
    edge_nc = await nats.connect(edge_nats)
    try:
        at_home = Collector()
        await home_nc.subscribe("events.sensation.>", cb=at_home.cb)
        await home_nc.flush()
        await edge.start()
        await wait_until(lambda: edge.health()["ok"], what="link up")
        assert edge.health()["peer"] == f"127.0.0.1:{members[0].port}"
        await members[0].close()
        await wait_until(lambda: not edge.health()["ok"], what="link down")
        await wait_until(lambda: edge.health()["ok"], what="link up on the fallback")
        assert edge.health()["peer"] == f"127.0.0.1:{members[1].port}"
        turn = Event.new(
            "sensation.turn", {"text": "still there?"}, source="edge.asr", sequence_number=1
        )
        await edge_nc.publish("events.sensation.board.turn", turn.to_json())
        await wait_until(lambda: at_home.msgs, what="a turn over the fallback")
        assert at_home.events()[0].event_id == turn.event_id
    finally:
        await edge.close()
        for member in members:
            await member.close()
        await home_nc.close()
        await edge_nc.close()
