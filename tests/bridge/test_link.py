"""The bridge end to end: real asyncssh on loopback, one real nats-server per side."""

from __future__ import annotations

import asyncio
from pathlib import Path

from shared.event import Event
from tests.bridge.servers import Collector, Paired, running_bridge, wait_until


def turn(i: int, text: str = "what's the weather") -> bytes:
    """A sensation turn envelope."""
    return Event.new(
        "sensation.turn", {"text": text}, source="edge.asr", sequence_number=i
    ).to_json()


async def test_events_cross_both_ways(paired: Paired, home_nats: str, edge_nats: str) -> None:
    async with running_bridge(paired, home_nats, edge_nats) as rig:
        at_home, at_edge = Collector(), Collector()
        await rig.home_nc.subscribe("events.sensation.>", cb=at_home.cb)
        await rig.edge_nc.subscribe("events.workspace.>", cb=at_edge.cb)
        await rig.home_nc.flush()
        await rig.edge_nc.flush()
        await wait_until(lambda: rig.edge.health()["ok"], what="link up")
        await rig.edge_nc.publish("events.sensation.board.turn", turn(1))
        speak = Event.new("speak", {"text": "Sunny."}, source="agent.main", sequence_number=1)
        await rig.home_nc.publish("events.workspace.main.out.speak.board", speak.to_json())
        await wait_until(lambda: at_home.msgs and at_edge.msgs, what="one event each way")
        arrived = at_home.events()[0]
        assert arrived.payload == {"text": "what's the weather"}
        assert arrived.hops == ("bridge:board@edge", "bridge:board@home")
        back = at_edge.events()[0]
        assert back.event_id == speak.event_id
        assert at_edge.subjects() == ["events.workspace.main.out.speak.board"]
        edge_counts = rig.edge.health()["counters"]
        assert edge_counts["sent"] == 1
        assert edge_counts["delivered"] == 1
        assert edge_counts["bytes_wire_sent"] > 0


async def test_not_exported_subject_never_crosses(
    paired: Paired, home_nats: str, edge_nats: str
) -> None:
    async with running_bridge(paired, home_nats, edge_nats) as rig:
        seen = Collector()
        await rig.home_nc.subscribe("events.>", cb=seen.cb)
        await rig.home_nc.flush()
        await wait_until(lambda: rig.edge.health()["ok"], what="link up")
        await rig.edge_nc.publish("events.sensation.board.partial", turn(1))
        await rig.edge_nc.publish("events.sensation.board.turn", turn(2))
        await wait_until(lambda: "events.sensation.board.turn" in seen.subjects(), what="turn")
        await asyncio.sleep(0.1)
        assert "events.sensation.board.partial" not in seen.subjects()


async def test_settle_lets_home_acknowledge_what_the_edge_just_published(
    paired: Paired, home_nats: str, edge_nats: str, tmp_path: Path
) -> None:
    """A short-lived edge (`edge say`) publishes its last event and settles before it
    closes: home has it and has acknowledged it, so nothing is left to send again; a
    settle with the link down returns at once, saying so."""
    async with running_bridge(paired, home_nats, edge_nats, edge_outbox=tmp_path) as rig:
        at_home = Collector()
        await rig.home_nc.subscribe("events.sensation.>", cb=at_home.cb)
        await rig.home_nc.flush()
        await wait_until(lambda: rig.edge.health()["ok"], what="link up")
        for i in range(20):
            await rig.edge_nc.publish("events.sensation.board.turn", turn(i))
        await rig.edge_nc.flush()
        assert await rig.edge.settle()
        assert rig.edge.health()["outbox"] == 0
        await wait_until(lambda: len(at_home.msgs) == 20, what="all 20 at home")
        await rig.home.close()
        await wait_until(lambda: rig.edge.health()["state"] != "up", what="link down")
        await rig.edge_nc.publish("events.sensation.board.turn", turn(21))
        assert not await rig.edge.settle(timeout_s=1.0)
