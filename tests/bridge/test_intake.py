"""A producer that asks, not publishes, learns whether the bridge half took its event.

The edge's shipped producers (the TUI and `edge say`, the board's ASR and speaker) all
ask through edge/handover.py; the last tests here drive that path.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace

import nats
import pytest
from nats.aio.client import Client as NATS

from bridge.node import BridgeCore
from bridge.node.intake import EXPIRED, REFUSED, IntakeRefused, publish_taken
from edge.errors import NotTaken
from edge.handover import UNANSWERED, hand_to_bridge
from edge.tui.session import EdgeSession
from shared.event import Event
from shared.schema import BridgeHalf
from shared.subjects import sensation_turn_subject
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


# --- the shipped producers: edge/handover.py, as the TUI, `edge say` and `edge run` use it


def refusing(half: BridgeHalf) -> BridgeHalf:
    """``half`` with limits no envelope fits in: every event it is asked to take is refused."""
    return replace(half, limits=replace(half.limits, max_event_bytes=64))


async def test_the_tui_session_hands_its_turn_to_the_half(
    half: tuple[NATS, BridgeCore], edge_nats: str
) -> None:
    _, core = half
    await core.start()
    async with EdgeSession(edge_nats, "board", asks_bridge=True) as session:
        turn = await session.send_turn("is the kettle on")
        # Taken means in the outbox by the time send_turn returns, not on its way.
        assert len(core.outbox) == 1 and core.counters.accepted == 1
    assert turn.device == "board"


async def test_a_turn_the_half_refuses_is_not_taken_and_says_why(
    paired: Paired, edge_nats: str
) -> None:
    nc = await nats.connect(edge_nats)
    core = BridgeCore(refusing(paired.edge), nc)
    await core.start()
    try:
        async with EdgeSession(edge_nats, "board", asks_bridge=True) as session:
            with pytest.raises(NotTaken, match="home will not get event") as refused:
                await session.send_turn("is the kettle on")
        assert refused.value.verdict == REFUSED
        assert refused.value.subject == sensation_turn_subject("board")
        assert "refused the event" in refused.value.reason
        assert refused.value.binding_id is not None
        assert len(core.outbox) == 0 and sum(core.counters.refused.values()) == 1
    finally:
        await core.close()
        await nc.close()


async def test_with_no_half_a_handover_gives_up_at_the_events_ttl(edge_nats: str) -> None:
    nc = await nats.connect(edge_nats)
    try:
        event = Event.new(
            "sensation.turn", {"text": "hello?"}, source="edge.asr", sequence_number=1, ttl_ms=400
        )
        began = time.monotonic()
        with pytest.raises(NotTaken, match="no bridge half took the event") as unanswered:
            await hand_to_bridge(nc, UP, event)
        assert unanswered.value.verdict == UNANSWERED
        assert 0.4 <= time.monotonic() - began < 2.0  # asked for as long as the event lives
    finally:
        await nc.close()
