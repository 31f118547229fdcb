"""Chaos: 10,000 events each way through a fault-injecting proxy, across 20 forced faults.

Every event is either delivered exactly once or counted as expired; none is
delivered twice; every long-lived event arrives.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest
from nats.aio.msg import Msg

from shared.event import Event
from tests.bridge.servers import Paired, Rig, running_bridge, wait_until

EVENTS_EACH_WAY = 10_000
FAULTS = 20
SHORT_TTL_MS = 150  # outages last longer than this: events parked during one must expire
UP = "events.sensation.board.turn"
DOWN = "events.workspace.main.out.speak.board"


class Tally:
    """Per-direction bookkeeping: what was published, what arrived and how often."""

    def __init__(self) -> None:
        self.published: set[str] = set()
        self.short_lived: set[str] = set()
        self.arrivals: Counter[str] = Counter()

    async def cb(self, msg: Msg) -> None:
        self.arrivals[Event.from_json(msg.data).event_id] += 1


def _event(kind: str, i: int, ttl_ms: int) -> Event:
    return Event.new(
        kind,
        {"text": f"{kind} number {i}: the quick brown fox"},
        source="chaos",
        sequence_number=i,
        ttl_ms=ttl_ms,
    )


async def _publish(rig: Rig, up: Tally, down: Tally, rng: random.Random) -> None:
    """Both directions at once, in small bursts, ~1 in 40 events short-lived."""
    for i in range(EVENTS_EACH_WAY):
        for tally, nc, subject, kind in (
            (up, rig.edge_nc, UP, "sensation.turn"),
            (down, rig.home_nc, DOWN, "speak"),
        ):
            short = rng.random() < 1 / 40
            event = _event(kind, i, SHORT_TTL_MS if short else 60_000)
            tally.published.add(event.event_id)
            if short:
                tally.short_lived.add(event.event_id)
            await nc.publish(subject, event.to_json())
        if i % 50 == 49:
            await asyncio.sleep(0.06)


async def _inject_faults(rig: Rig, rng: random.Random) -> None:
    """Twenty faults, each at a random moment after the link has come back up."""
    proxy = rig.proxy
    assert proxy is not None
    counters = rig.edge.core.counters
    for n in range(FAULTS):
        # a fresh link: one more link-up than at the previous fault, and still up
        need = counters.link_ups + (1 if n else 0)
        await wait_until(
            lambda need=need: counters.link_ups >= need and rig.edge.health()["ok"],
            what=f"the link back up before fault {n}",
        )
        await asyncio.sleep(rng.uniform(0.05, 0.35))
        if n % 7 == 3:
            await proxy.silent_outage(rng.uniform(0.3, 0.6))  # only heartbeats notice
        elif n % 2:
            await proxy.outage(rng.uniform(0.3, 0.6))
        else:
            proxy.cut()  # reconnects at once


@pytest.mark.slow
async def test_exactly_once_within_ttl_across_twenty_faults(
    paired: Paired, home_nats: str, edge_nats: str
) -> None:
    rng = random.Random(20261130)
    async with running_bridge(paired, home_nats, edge_nats, proxy=True, heartbeat_s=0.2) as rig:
        up, down = Tally(), Tally()
        await rig.home_nc.subscribe(UP, cb=up.cb)
        await rig.edge_nc.subscribe(DOWN, cb=down.cb)
        await rig.home_nc.flush()
        await rig.edge_nc.flush()
        await wait_until(lambda: rig.edge.health()["ok"], what="link up")
        await asyncio.wait_for(
            asyncio.gather(_publish(rig, up, down, rng), _inject_faults(rig, rng)), 90
        )
        edge_core, home_core = rig.edge.core, rig.home.cores["board"]

        def settled() -> bool:
            sent_up = len(up.arrivals) + edge_core.counters.expired + home_core.counters.expired
            return (
                len(edge_core.outbox) == 0
                and len(home_core.outbox) == 0
                and len(up.arrivals)
                + len(down.arrivals)
                + edge_core.counters.expired
                + home_core.counters.expired
                == len(up.published) + len(down.published)
                and sent_up >= 0
            )

        try:
            await wait_until(settled, timeout_s=60, what="every event delivered or expired")
        except TimeoutError:
            raise AssertionError(
                f"not settled: up {len(up.arrivals)}/{len(up.published)}, down "
                f"{len(down.arrivals)}/{len(down.published)}; edge {rig.edge.health()}; "
                f"home {rig.home.health()}"
            ) from None
        await asyncio.sleep(0.3)  # anything delivered twice would show up by now

        assert rig.proxy is not None and rig.proxy.cuts >= FAULTS
        for tally in (up, down):
            assert set(tally.arrivals) <= tally.published
            twice = [e for e, n in tally.arrivals.items() if n > 1]
            assert twice == [], f"{len(twice)} events delivered more than once"
            lost = tally.published - set(tally.arrivals) - tally.short_lived
            assert lost == set(), f"{len(lost)} long-lived events lost"
        expired = edge_core.counters.expired + home_core.counters.expired
        missing = sum(len(t.published - set(t.arrivals)) for t in (up, down))
        assert expired == missing
        assert expired > 0, "outages outlast the short TTL, so some events must have expired"
        assert edge_core.counters.link_ups >= FAULTS + 1
        assert edge_core.counters.resent + home_core.counters.resent > 0
