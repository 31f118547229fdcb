"""A producer that asks, not publishes, learns whether the bridge half took its event."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client as NATS

from bridge.node import BridgeCore
from bridge.node.intake import EXPIRED, REFUSED, IntakeRefused, publish_taken
from shared.event import Event
from tests.bridge.servers import Paired
from tests.bridge.test_link import turn

UP = "events.sensation.board.turn"


@pytest.fixture
async def half(paired: Paired, edge_nats: str) -> AsyncIterator[tuple[NATS, BridgeCore]]:
    """The board's bus and its bridge half, not started and with no link: an event taken
    waits in the outbox."""
    nc = await nats.connect(edge_nats)
    core = BridgeCore(paired.edge, nc)
    try:
        yield nc, core
    finally:
        await core.close()
        await nc.close()


async def test_an_asked_event_is_answered_once_it_is_in_the_outbox(
    half: tuple[NATS, BridgeCore],
) -> None:
    nc, core = half
    await core.start()
    await publish_taken(nc, UP, turn(1), timeout_s=5)
    assert len(core.outbox) == 1
    assert core.counters.accepted == 1


async def test_a_refused_or_expired_event_is_answered_with_why(
    half: tuple[NATS, BridgeCore],
) -> None:
    nc, core = half
    await core.start()
    with pytest.raises(IntakeRefused, match="refused the event") as refused:
        await publish_taken(nc, UP, b'{"not": "an envelope"}', timeout_s=5)
    assert refused.value.verdict == REFUSED
    stale = Event.new(
        "sensation.turn", {"text": "too late"}, source="edge.asr", sequence_number=2, ttl_ms=1
    ).to_json()
    await asyncio.sleep(0.05)
    with pytest.raises(IntakeRefused, match="past its expiry") as expired:
        await publish_taken(nc, UP, stale, timeout_s=5)
    assert expired.value.verdict == EXPIRED
    assert len(core.outbox) == 0
    # Refusals are counted, and the next good event is still taken.
    assert sum(core.counters.refused.values()) == 1
    assert core.counters.expired == 1
    await publish_taken(nc, UP, turn(3), timeout_s=5)
    assert len(core.outbox) == 1


async def test_the_producer_asks_again_until_the_half_is_back(
    half: tuple[NATS, BridgeCore],
) -> None:
    nc, core = half
    asked = asyncio.create_task(publish_taken(nc, UP, turn(1), timeout_s=10))
    await asyncio.sleep(0.3)  # nobody takes events on the board's bus yet
    assert not asked.done()
    await core.start()
    await asyncio.wait_for(asked, 10)
    assert len(core.outbox) == 1


async def test_with_no_half_the_producer_is_told_in_its_time(edge_nats: str) -> None:
    nc = await nats.connect(edge_nats)
    try:
        with pytest.raises(TimeoutError, match="no bridge half took the event"):
            await publish_taken(nc, UP, turn(1), timeout_s=0.5)
    finally:
        await nc.close()
